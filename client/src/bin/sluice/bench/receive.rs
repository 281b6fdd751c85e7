//! The consumer side of a run: `--consumers` push consumers (the client's
//! rebalance, long-poll loops and handlers) or pull consumers (one
//! `pull_blocking` loop per queue, queues dealt round-robin). Every receipt
//! is counted; a stamped body also yields its end-to-end latency.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use sluice_client::consumer::{handler, PullStatus};
use sluice_client::{
    ConsumeFrom, ConsumeResult, MessageExt, MessageQueue, PullConsumer, PushConsumer,
    PushConsumerConfig, Subscription, TlsTransport,
};
use sluice_core::SystemClock;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::args::{ConsumerArgs, ConsumerKind, StartFrom};
use super::cluster::{self, Client};
use super::grpc::GrpcClient;
use super::stamp::{self, Stamper};
use super::stats::{Meter, Recorder};
use crate::endpoint::Endpoint;

/// Longest a pull loop's long poll is held, so that a stop is seen promptly.
const PULL_HOLD_MAX: Duration = Duration::from_secs(1);
/// Pause after a failed pull.
const PULL_RETRY_DELAY: Duration = Duration::from_millis(100);
/// How long a gRPC consumer's messages stay invisible (acked well before).
const GRPC_INVISIBLE: Duration = Duration::from_secs(30);
/// How long to wait for rebalance to hand out every queue.
const ASSIGN_WAIT: Duration = Duration::from_secs(15);

/// Which receipts count as measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Measure {
    /// Receipts after the measure-from time (replay throughput).
    ByArrival,
    /// Stamped messages scheduled after the measure-from time; each gives
    /// an end-to-end latency.
    ByStamp,
}

/// What the consumers recorded.
pub struct ReceiveStats {
    pub meter: Meter,
    /// Receipt minus the scheduled send time.
    pub e2e: Recorder,
    /// Receipt minus the time the send call started.
    pub e2e_from_send: Recorder,
    measure: Measure,
    stamper: Stamper,
    measure_from_ns: AtomicU64,
    first_ns: AtomicU64,
    last_ns: AtomicU64,
}

fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl ReceiveStats {
    /// Empty stats; nothing is measured until [`ReceiveStats::measure_from`].
    pub fn new(measure: Measure, stamper: &Stamper) -> anyhow::Result<Self> {
        Ok(Self {
            meter: Meter::default(),
            e2e: Recorder::new()?,
            e2e_from_send: Recorder::new()?,
            measure,
            stamper: stamper.clone(),
            measure_from_ns: AtomicU64::new(u64::MAX),
            first_ns: AtomicU64::new(u64::MAX),
            last_ns: AtomicU64::new(0),
        })
    }

    /// Measures from `at` on.
    pub fn measure_from(&self, at: Duration) {
        self.measure_from_ns.store(ns(at), Ordering::SeqCst);
    }

    /// The first and last measured receipt.
    pub fn active(&self) -> Option<(Duration, Duration)> {
        let first = self.first_ns.load(Ordering::SeqCst);
        let last = self.last_ns.load(Ordering::SeqCst);
        (first <= last).then(|| (Duration::from_nanos(first), Duration::from_nanos(last)))
    }

    /// Counts `msgs`, received at `now`.
    fn on_messages(&self, msgs: &[MessageExt], now: Duration) {
        self.on_bodies(msgs.iter().map(|m| &m.body), now);
    }

    /// Counts messages with these bodies, received at `now`.
    fn on_bodies<'m>(&self, bodies: impl Iterator<Item = &'m bytes::Bytes>, now: Duration) {
        let from = self.measure_from_ns.load(Ordering::Relaxed);
        let mut measured_any = false;
        for body in bodies {
            let bytes = u64::try_from(body.len()).unwrap_or(u64::MAX);
            let measured = match self.measure {
                Measure::ByArrival => ns(now) >= from,
                Measure::ByStamp => {
                    let Some((scheduled, issued)) = stamp::read(body) else {
                        continue;
                    };
                    let scheduled = self.stamper.mono(scheduled);
                    let measured = ns(scheduled) >= from;
                    if measured {
                        self.e2e.record(now.saturating_sub(scheduled));
                        self.e2e_from_send
                            .record(now.saturating_sub(self.stamper.mono(issued)));
                    }
                    measured
                }
            };
            measured_any |= measured;
            self.meter.add(1, bytes, measured);
        }
        if measured_any {
            self.first_ns.fetch_min(ns(now), Ordering::SeqCst);
            self.last_ns.fetch_max(ns(now), Ordering::SeqCst);
        }
    }

    /// The last receipt of any message (warm-up included), for idle exit.
    pub fn last_receipt(&self) -> Option<Duration> {
        let last = self.last_ns.load(Ordering::SeqCst);
        (last > 0).then(|| Duration::from_nanos(last))
    }
}

type BenchPush = PushConsumer<TlsTransport, SystemClock>;

/// Running consumers.
pub struct Receivers {
    push: Vec<BenchPush>,
    clients: Vec<Client>,
    pull_tasks: Vec<JoinHandle<()>>,
    stop: watch::Sender<bool>,
}

/// Everything a consumer start needs.
pub struct Plan<'a> {
    pub endpoint: &'a Endpoint,
    pub clock: &'a SystemClock,
    pub topic: &'a str,
    pub queues: &'a [MessageQueue],
    pub group: &'a str,
    pub from: StartFrom,
    pub args: &'a ConsumerArgs,
    /// With `--protocol grpc`: the endpoint the consumers receive from.
    pub grpc: Option<&'a str>,
}

impl Receivers {
    /// Starts the consumers and returns once every queue of the topic is
    /// being read (push: rebalance has assigned them all).
    pub async fn start(plan: &Plan<'_>, stats: &Arc<ReceiveStats>) -> anyhow::Result<Self> {
        let (stop, _) = watch::channel(false);
        let mut me = Self {
            push: Vec::new(),
            clients: Vec::new(),
            pull_tasks: Vec::new(),
            stop,
        };
        let started = match (plan.grpc, plan.args.kind) {
            (Some(at), _) => me.start_grpc(plan, at, stats).await,
            (None, ConsumerKind::Push) => me.start_push(plan, stats).await,
            (None, ConsumerKind::Pull) => me.start_pull(plan, stats).await,
        };
        if let Err(e) = started {
            me.shutdown().await;
            return Err(e);
        }
        Ok(me)
    }

    async fn start_push(
        &mut self,
        plan: &Plan<'_>,
        stats: &Arc<ReceiveStats>,
    ) -> anyhow::Result<()> {
        for i in 0..plan.args.consumers {
            let client = cluster::client(plan.endpoint, &format!("bench-c{i}"), plan.clock);
            self.clients.push(client.clone());
            let mut config = PushConsumerConfig::new(plan.group);
            config.consume_from = match plan.from {
                StartFrom::First => ConsumeFrom::FirstOffset,
                StartFrom::Last => ConsumeFrom::LastOffset,
            };
            config.pull_batch = plan.args.pull_batch;
            config.consume_batch_max = plan.args.consume_batch;
            let consumer = PushConsumer::new(client, config).context("push consumer")?;
            consumer.subscribe(Subscription::all(plan.topic));
            let stats = Arc::clone(stats);
            consumer
                .start(handler(move |msgs: Vec<MessageExt>| {
                    // Read the clock when the handler is called, not when
                    // its future is first polled.
                    stats.on_messages(&msgs, stats.stamper.now());
                    async { ConsumeResult::Success }
                }))
                .await
                .context("start push consumer")?;
            self.push.push(consumer);
        }
        let deadline = tokio::time::Instant::now() + ASSIGN_WAIT;
        loop {
            let assigned: usize = self
                .push
                .iter()
                .map(|c| {
                    c.assigned()
                        .iter()
                        .filter(|q| q.topic == plan.topic)
                        .count()
                })
                .sum();
            if assigned >= plan.queues.len() {
                return Ok(());
            }
            anyhow::ensure!(
                tokio::time::Instant::now() < deadline,
                "rebalance assigned {assigned} of {} queues within {ASSIGN_WAIT:?}",
                plan.queues.len()
            );
            // Members see each other after a heartbeat; ask every member to
            // rebalance again rather than wait for the periodic one.
            for c in &self.push {
                c.rebalance().await;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn start_pull(
        &mut self,
        plan: &Plan<'_>,
        stats: &Arc<ReceiveStats>,
    ) -> anyhow::Result<()> {
        let mut consumers = Vec::new();
        for i in 0..plan.args.consumers {
            let client = cluster::client(plan.endpoint, &format!("bench-c{i}"), plan.clock);
            self.clients.push(client.clone());
            consumers.push(Arc::new(PullConsumer::new(client, plan.group)));
        }
        for (i, mq) in plan.queues.iter().enumerate() {
            let consumer = Arc::clone(&consumers[i % consumers.len()]);
            let offset = start_offset(&consumer, mq, plan.from).await?;
            let queue = PullQueue {
                consumer,
                mq: mq.clone(),
                sub: Subscription::all(plan.topic),
                batch: plan.args.pull_batch,
                stats: Arc::clone(stats),
                stop: self.stop.subscribe(),
            };
            self.pull_tasks
                .push(tokio::spawn(async move { queue.run(offset).await }));
        }
        Ok(())
    }

    /// `--consumers` 5.x-style consumers: each loops `ReceiveMessage`
    /// (`--pull-batch` messages, 30 s invisible, 1 s hold) and acks what
    /// it got in one `AckMessage`.
    async fn start_grpc(
        &mut self,
        plan: &Plan<'_>,
        at: &str,
        stats: &Arc<ReceiveStats>,
    ) -> anyhow::Result<()> {
        for i in 0..plan.args.consumers {
            let id = format!("sluice-bench-c{i}@{}", std::process::id());
            let client = GrpcClient::connect(at, &id).await?;
            let (group, topic) = (plan.group.to_owned(), plan.topic.to_owned());
            let (batch, stats, mut stop) = (
                plan.args.pull_batch,
                Arc::clone(stats),
                self.stop.subscribe(),
            );
            self.pull_tasks.push(tokio::spawn(async move {
                loop {
                    let got = tokio::select! {
                        r = client.receive(&group, &topic, batch, GRPC_INVISIBLE, PULL_HOLD_MAX) => r,
                        _ = stop.wait_for(|s| *s) => break,
                    };
                    let acked = match got {
                        Ok(got) if got.is_empty() => continue,
                        Ok(got) => {
                            stats.on_bodies(got.iter().map(|r| &r.body), stats.stamper.now());
                            client.ack(&group, &topic, &got).await
                        }
                        Err(e) => Err(e),
                    };
                    if let Err(e) = acked {
                        stats.meter.fail(&e);
                        tokio::time::sleep(PULL_RETRY_DELAY).await;
                    }
                }
            }));
        }
        Ok(())
    }

    /// Stops every consumer (push consumers persist their offsets, pull
    /// loops commit theirs) and closes their clients.
    pub async fn shutdown(&mut self) {
        let _ = self.stop.send(true);
        for task in self.pull_tasks.drain(..) {
            let _ = task.await;
        }
        for c in self.push.drain(..) {
            c.shutdown().await;
        }
        for c in self.clients.drain(..) {
            c.shutdown().await;
        }
    }
}

async fn start_offset(
    consumer: &PullConsumer<TlsTransport, SystemClock>,
    mq: &MessageQueue,
    from: StartFrom,
) -> anyhow::Result<i64> {
    if let Some(o) = consumer.committed_offset(mq).await? {
        if o >= 0 {
            return Ok(o);
        }
    }
    Ok(match from {
        StartFrom::First => consumer.min_offset(mq).await?,
        StartFrom::Last => consumer.max_offset(mq).await?,
    })
}

/// One queue's pull loop.
struct PullQueue {
    consumer: Arc<PullConsumer<TlsTransport, SystemClock>>,
    mq: MessageQueue,
    sub: Subscription,
    batch: i32,
    stats: Arc<ReceiveStats>,
    stop: watch::Receiver<bool>,
}

impl PullQueue {
    async fn run(mut self, mut offset: i64) {
        loop {
            let pulled = tokio::select! {
                r = self.consumer.pull_blocking(&self.mq, &self.sub, offset, self.batch, PULL_HOLD_MAX) => r,
                _ = self.stop.wait_for(|s| *s) => break,
            };
            match pulled {
                Ok(r) => {
                    if r.status == PullStatus::Found {
                        self.stats
                            .on_messages(&r.messages, self.stats.stamper.now());
                    }
                    offset = r.next_begin_offset;
                }
                Err(e) => {
                    self.stats.meter.fail(&e);
                    tokio::select! {
                        () = tokio::time::sleep(PULL_RETRY_DELAY) => {}
                        _ = self.stop.wait_for(|s| *s) => break,
                    }
                }
            }
        }
        // Best effort: the next run of the group resumes from here.
        let _ = self.consumer.commit_offset(&self.mq, offset).await;
    }
}
