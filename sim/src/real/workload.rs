//! The clients of a real-process chaos run, all `sluice-client` on tokio
//! TCP in the test process: sequential producers (one `UNIQ_KEY` per
//! message, kept across its retries), one long-polling consumer per queue,
//! and the final drain. They record the same history events the
//! simulation's clients do, read through the same classification
//! (`client::send_outcome`, `client::pull_outcome`), stamped with real
//! milliseconds since the run started.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sluice_client::consumer::api::PULL_BATCH_DEFAULT;
use sluice_client::{
    ClientConfig, ClientInstance, Message, MessageQueue, Producer, ProducerConfig, PullConsumer,
    Subscription, TlsTransport,
};
use sluice_core::message::keys;
use sluice_core::SystemClock;

use crate::client::{
    drain_queue, pull_outcome, send_outcome, DrainPolicy, PullOutcome, SendOutcome,
};
use crate::history::{Event, History};

/// The topic the run writes.
pub const TOPIC: &str = "ChaosTopic";
/// The broker group's name.
pub const GROUP: &str = "chaos-g";
/// Queues of the topic.
pub const QUEUES: i32 = 4;
/// Each message carries this many bytes of padding in a property, so the
/// CommitLog rolls segments (and meets a full disk) often.
const PAD_BYTES: usize = 1_500;
/// Attempts per message: the first and its retries (same `UNIQ_KEY`).
const ATTEMPTS_MAX: u32 = 3;
/// Timeout of every request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(3);
/// Pause between a producer's messages, and after a failed attempt.
const SEND_GAP: Duration = Duration::from_millis(10);
const FAIL_BACKOFF: Duration = Duration::from_millis(300);
/// Longest a long poll is held.
const LONG_POLL_HOLD: Duration = Duration::from_secs(2);
/// Failed pulls of one queue before the drain gives up (liveness failure).
const DRAIN_ATTEMPTS_MAX: u32 = 120;
const DRAIN_BACKOFF: Duration = Duration::from_millis(250);

/// The production client over plain TCP and the system clock.
pub type RealClient = ClientInstance<TlsTransport, SystemClock>;

/// A client asking the name server at `namesrv`.
pub fn client(namesrv: &str, name: &str) -> RealClient {
    let mut config = ClientConfig::new(namesrv).with_instance_name(name);
    config.request_timeout = REQUEST_TIMEOUT;
    config.poll_name_server_interval = Duration::from_secs(1);
    ClientInstance::new(TlsTransport::plain(), SystemClock::new(), config)
}

/// A history stamped with milliseconds since the run's start.
#[derive(Clone, Debug)]
pub struct Recorder {
    /// The history.
    pub history: History,
    start: tokio::time::Instant,
}

impl Recorder {
    /// A fresh history starting now.
    pub fn new() -> Self {
        Self {
            history: History::default(),
            start: tokio::time::Instant::now(),
        }
    }

    /// Milliseconds since the start.
    pub fn now_ms(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Records `event` now.
    pub fn record(&self, event: Event) {
        self.history.record_at(self.now_ms(), event);
    }
}

impl Default for Recorder {
    fn default() -> Self {
        Self::new()
    }
}

/// Queue `queue` of the topic.
pub fn queue(queue: i32) -> MessageQueue {
    MessageQueue {
        topic: TOPIC.to_owned(),
        broker_name: GROUP.to_owned(),
        queue_id: queue,
    }
}

/// A sequential producer numbered `producer`.
pub struct Sender {
    producer: u32,
    client: RealClient,
    inner: Producer<TlsTransport, SystemClock>,
    sent: u32,
    /// Acknowledged sends so far.
    pub acked: Arc<AtomicU64>,
}

impl Sender {
    /// Producer `producer` asking `namesrv`.
    pub fn new(namesrv: &str, producer: u32) -> Self {
        let client = client(namesrv, &format!("chaos-producer-{producer}"));
        let inner = Producer::new(
            client.clone(),
            ProducerConfig {
                send_timeout: REQUEST_TIMEOUT,
                retries: 0,
                default_topic_queues: QUEUES,
                fault_avoidance: false,
                ..ProducerConfig::new("chaos-producers")
            },
        );
        Self {
            producer,
            client,
            inner,
            sent: 0,
            acked: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Sends the next message (to queue `sequence % QUEUES`), retrying it
    /// up to [`ATTEMPTS_MAX`] attempts; whether it was acknowledged.
    pub async fn send_next(&mut self, rec: &Recorder) -> bool {
        let k = self.sent;
        self.sent += 1;
        let id = format!("p{}-{k}", self.producer);
        let queue = i32::try_from(k % QUEUES.unsigned_abs()).unwrap_or(0);
        let mut message = Message::new(TOPIC, id.clone());
        message.set_property(keys::UNIQ_KEY, self.client.next_uniq_key());
        message.set_property("pad", "x".repeat(PAD_BYTES));
        for _ in 0..ATTEMPTS_MAX {
            rec.record(Event::SendInvoke {
                producer: self.producer,
                id: id.clone(),
                queue,
            });
            let result = self
                .inner
                .send_with_selector(&message, |qs| {
                    qs.iter().find(|q| q.queue_id == queue).cloned()
                })
                .await;
            let id = id.clone();
            match send_outcome(result) {
                SendOutcome::Ok {
                    queue,
                    queue_offset,
                } => {
                    rec.record(Event::SendOk {
                        id,
                        queue,
                        queue_offset,
                    });
                    self.acked.fetch_add(1, Ordering::Relaxed);
                    return true;
                }
                SendOutcome::Fail(reason) => rec.record(Event::SendFail { id, reason }),
                SendOutcome::Info(reason) => rec.record(Event::SendInfo { id, reason }),
            }
            tokio::time::sleep(FAIL_BACKOFF).await;
        }
        false
    }

    /// Sends until `stop` is set.
    pub async fn run(mut self, rec: Recorder, stop: Arc<AtomicBool>) {
        while !stop.load(Ordering::Acquire) {
            self.send_next(&rec).await;
            tokio::time::sleep(SEND_GAP).await;
        }
    }
}

/// Long-polls queue `queue_id` from offset 0, recording each delivery,
/// until `stop` is set.
pub async fn long_poll(namesrv: String, queue_id: i32, rec: Recorder, stop: Arc<AtomicBool>) {
    let consumer = PullConsumer::new(
        client(&namesrv, &format!("chaos-consumer-{queue_id}")),
        "chaos-readers",
    );
    let mq = queue(queue_id);
    let all = Subscription::all(TOPIC);
    let mut offset = 0u64;
    while !stop.load(Ordering::Acquire) {
        let at = i64::try_from(offset).unwrap_or(i64::MAX);
        let result = consumer
            .pull_blocking(&mq, &all, at, PULL_BATCH_DEFAULT, LONG_POLL_HOLD)
            .await;
        match pull_outcome(offset, result) {
            PullOutcome::Found { records, next } => {
                rec.record(Event::Delivered {
                    queue: queue_id,
                    records,
                });
                offset = next;
            }
            PullOutcome::End => {}
            PullOutcome::BelowFloor { floor } => offset = floor,
            PullOutcome::Retry(_) => tokio::time::sleep(DRAIN_BACKOFF).await,
        }
    }
}

/// Reads every queue from offset 0 (or its retention floor, if the broker
/// reports one) to its end, recording `Poll`s (or a `DrainIncomplete`
/// when a queue cannot be read to its end); the floors met.
pub async fn drain(namesrv: &str, rec: &Recorder) -> BTreeMap<i32, u64> {
    let mut floors = BTreeMap::new();
    let consumer = PullConsumer::new(client(namesrv, "chaos-drain"), "chaos-drain");
    let all = Subscription::all(TOPIC);
    let policy = DrainPolicy {
        attempts_max: DRAIN_ATTEMPTS_MAX,
        backoff: DRAIN_BACKOFF,
    };
    for queue_id in 0..QUEUES {
        let mq = queue(queue_id);
        let met = drain_queue(&consumer, (&mq, queue_id), &all, policy, |e| rec.record(e)).await;
        if let Some(floor) = met {
            floors.insert(queue_id, floor);
        }
    }
    floors
}
