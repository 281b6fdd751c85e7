//! The producer side of a run: `--producers` clients, each with `--window`
//! sender tasks that loop until the run ends. Closed loop: a sender sends
//! again as soon as its last send is answered, latency from the call.
//! Open loop: a sender waits for a due slot of the shared schedule,
//! latency from the slot's time.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use bytes::Bytes;
use sluice_client::{Message, Producer, ProducerConfig, TlsTransport};
use sluice_core::SystemClock;
use tokio::task::JoinSet;

use super::args::{Load, SendMode};
use super::cluster::{self, Client};
use super::grpc::GrpcClient;
use super::pacer::Schedule;
use super::stamp::{self, Stamper};
use super::stats::{Meter, Recorder};
use crate::endpoint::Endpoint;

type BenchProducer = Producer<TlsTransport, SystemClock>;

/// The window of a run: measuring starts at `measure_from`, nothing is
/// sent at or after `end`.
#[derive(Clone, Copy, Debug)]
pub struct Window {
    pub start: Duration,
    pub measure_from: Duration,
    pub end: Duration,
}

/// What the senders recorded.
pub struct SendStats {
    pub meter: Meter,
    /// Per request: from the call (closed loop) or the slot (open loop) to
    /// the answer (or, oneway, to the hand-off).
    pub latency: Recorder,
    /// Open loop: how late the sender started a slot's send.
    pub lag: Recorder,
}

/// Connected producers, ready to run.
pub struct Senders {
    producers: Vec<BenchProducer>,
    /// With `--protocol grpc`: one 5.x client per producer, which sends.
    grpc: Vec<GrpcClient>,
    load: Load,
    topic: String,
    template: Bytes,
}

impl Senders {
    /// Starts `load.producers` producers and connects each to the brokers
    /// of `topic`, so no send of the run pays for a route lookup or a dial.
    pub async fn connect(
        endpoint: &Endpoint,
        clock: &SystemClock,
        topic: &str,
        load: &Load,
        grpc: Option<&str>,
    ) -> anyhow::Result<Self> {
        let mut producers = Vec::with_capacity(load.producers);
        let mut grpc_clients = Vec::new();
        for i in 0..load.producers {
            if let Some(at) = grpc {
                let id = format!("sluice-bench-p{i}@{}", std::process::id());
                grpc_clients.push(GrpcClient::connect(at, &id).await?);
            }
            let client = cluster::client(endpoint, &format!("bench-p{i}"), clock);
            let producer = Producer::new(client, ProducerConfig::new("sluice-bench"));
            producer
                .client()
                .publish_queues(topic)
                .await
                .with_context(|| format!("route of `{topic}`"))?;
            producer.client().send_heartbeat_to_all_brokers().await;
            producers.push(producer);
        }
        Ok(Self {
            producers,
            grpc: grpc_clients,
            load: load.clone(),
            topic: topic.to_owned(),
            template: stamp::template(load.size_bytes),
        })
    }

    /// A client to read offsets with.
    pub fn client(&self) -> Option<&Client> {
        self.producers.first().map(Producer::client)
    }

    /// Runs the senders over `window` and waits for the last answer.
    pub async fn run(
        &self,
        window: Window,
        stamper: &Stamper,
        stats: &Arc<SendStats>,
    ) -> anyhow::Result<Option<Arc<Schedule>>> {
        let schedule = self
            .load
            .requests_per_s
            .map(|per_s| Arc::new(Schedule::new(window.start, window.end, per_s)));
        if let Some(s) = &schedule {
            s.spawn(stamper.clone())?;
        }
        let mut tasks = JoinSet::new();
        for (i, producer) in self.producers.iter().enumerate() {
            for _ in 0..self.load.window {
                let sender = Sender {
                    producer: producer.clone(),
                    grpc: self.grpc.get(i).cloned(),
                    mode: self.load.mode,
                    batch: self.load.batch,
                    topic: self.topic.clone(),
                    template: self.template.clone(),
                    stamper: stamper.clone(),
                    stats: Arc::clone(stats),
                    window,
                };
                let schedule = schedule.clone();
                tasks.spawn(async move {
                    match schedule {
                        Some(s) => sender.open_loop(&s).await,
                        None => sender.closed_loop().await,
                    }
                });
            }
        }
        while let Some(done) = tasks.join_next().await {
            if let Err(e) = done {
                if let Some(s) = &schedule {
                    s.stop();
                }
                return Err(e).context("a sender task failed");
            }
        }
        Ok(schedule)
    }

    /// Stops every producer's client.
    pub async fn shutdown(&self) {
        for p in &self.producers {
            p.client().shutdown().await;
        }
    }
}

impl SendStats {
    /// Empty counters and histograms.
    pub fn new() -> anyhow::Result<Self> {
        Ok(Self {
            meter: Meter::default(),
            latency: Recorder::new()?,
            lag: Recorder::new()?,
        })
    }
}

/// A closed-loop sender's pause after a failed send, so that a broker that
/// refuses everything is not hammered in a tight loop.
const ERROR_BACKOFF: Duration = Duration::from_millis(10);

/// One sender task.
struct Sender {
    producer: BenchProducer,
    grpc: Option<GrpcClient>,
    mode: SendMode,
    batch: usize,
    topic: String,
    template: Bytes,
    stamper: Stamper,
    stats: Arc<SendStats>,
    window: Window,
}

impl Sender {
    async fn closed_loop(&self) {
        loop {
            let at = self.stamper.now();
            if at >= self.window.end {
                return;
            }
            if !self.send(at, at).await {
                tokio::time::sleep(ERROR_BACKOFF).await;
            }
        }
    }

    async fn open_loop(&self, schedule: &Schedule) {
        while let Some((_, due)) = schedule.next().await {
            let at = self.stamper.now();
            if due >= self.window.measure_from {
                self.stats.lag.record(at.saturating_sub(due));
            }
            self.send(due, at).await;
        }
    }

    /// Sends one request scheduled at `due`, started at `at`, and records
    /// its latency from `due`; `false` when it failed.
    async fn send(&self, due: Duration, at: Duration) -> bool {
        let body = stamp::body(
            &self.template,
            self.stamper.wall_ns(due),
            self.stamper.wall_ns(at),
        );
        if let Some(grpc) = &self.grpc {
            let bodies = vec![body; self.batch];
            let outcome = grpc.send(&self.topic, &bodies).await;
            return self.count(due, outcome);
        }
        let msg = Message::new(self.topic.clone(), body);
        let outcome = match self.mode {
            SendMode::Sync => self.producer.send(&msg).await.and_then(acked),
            SendMode::Async => match self.producer.send_async(msg.clone()).await {
                Ok(r) => r.and_then(acked),
                Err(e) => {
                    self.stats.meter.fail(&e);
                    return false;
                }
            },
            SendMode::Batch => {
                let msgs = vec![msg.clone(); self.batch];
                self.producer.send_batch(&msgs).await.and_then(acked)
            }
            SendMode::Oneway => self.producer.send_oneway(&msg).await,
        };
        self.count(due, outcome)
    }

    /// Records one send scheduled at `due` that ended now with `outcome`.
    fn count<E: std::fmt::Display>(&self, due: Duration, outcome: Result<(), E>) -> bool {
        let done = self.stamper.now();
        match outcome {
            Ok(()) => {
                let measured = due >= self.window.measure_from;
                let msgs = u64::try_from(self.batch).unwrap_or(u64::MAX);
                let bytes = u64::try_from(self.template.len() * self.batch).unwrap_or(u64::MAX);
                if measured {
                    self.stats.latency.record(done.saturating_sub(due));
                }
                self.stats.meter.add(msgs, bytes, measured);
                true
            }
            Err(e) => {
                self.stats.meter.fail(&e);
                false
            }
        }
    }
}

/// A send counts only when acknowledged as promised: `SLAVE_NOT_AVAILABLE`,
/// `FLUSH_SLAVE_TIMEOUT` and `FLUSH_DISK_TIMEOUT` (stored, but not as
/// durably as the broker is configured to promise) count as errors.
fn acked(r: sluice_client::SendResult) -> Result<(), sluice_client::Error> {
    use sluice_client::SendStatus;
    use sluice_net::remoting::response_code;
    let code = match r.status {
        SendStatus::Ok => return Ok(()),
        SendStatus::FlushDiskTimeout => response_code::FLUSH_DISK_TIMEOUT,
        SendStatus::FlushSlaveTimeout => response_code::FLUSH_SLAVE_TIMEOUT,
        SendStatus::SlaveNotAvailable => response_code::SLAVE_NOT_AVAILABLE,
    };
    Err(sluice_client::Error::Broker {
        server: r.queue.broker_name,
        code,
        remark: format!("stored but not acknowledged as promised: {:?}", r.status),
    })
}
