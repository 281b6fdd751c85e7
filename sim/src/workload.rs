//! The simulated clients, all `sluice-client` code: sequential producers
//! that record every send and its outcome, long-polling pull consumers, and
//! the final drain that reads every queue from offset 0 to its end. All run
//! as turmoil clients and write to one `History`.

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use rand::Rng;
use scenarios::{substream, Deferral, Salt, Workload};
use sluice_client::consumer::api::PULL_BATCH_DEFAULT;
use sluice_client::{Message, Producer, ProducerConfig, PullConsumer, Subscription};
use sluice_core::message::keys;

use crate::client::{
    await_broker, client, client_of, drain_queue, pull_outcome, queue, send_outcome, DrainPolicy,
    PullOutcome, SendOutcome, REQUEST_TIMEOUT_MS,
};
use crate::history::{Event, History};

/// The topic every scenario writes.
pub const TOPIC: &str = "SimTopic";
/// The group the long-polling consumers and the drain pull as.
const READER_GROUP: &str = "sim-readers";
/// The producers' group.
pub(crate) const PRODUCER_GROUP: &str = "sim-producers";
/// Request timeout of the workload clients.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_millis(REQUEST_TIMEOUT_MS);
/// Pause after a failed send, so a down broker is not hammered.
/// Failed pulls of one queue before the drain gives up (a liveness failure).
const DRAIN_ATTEMPTS_MAX: u32 = 60;
/// Pause between failed pulls.
const DRAIN_BACKOFF: Duration = Duration::from_millis(250);
/// Longest a consumer's pull is held by the broker.
pub const LONG_POLL_HOLD: Duration = Duration::from_secs(3);
/// Pause after a failed long poll.
const POLL_BACKOFF: Duration = Duration::from_millis(100);

/// The broker's first delay levels (`1s 5s 10s`): what a delayed message
/// of the workload asks for.
const DELAY_LEVEL_MS: [u64; 3] = [1_000, 5_000, 10_000];
/// The delays a timer message of the workload asks for.
const TIMER_DELAY_MS: std::ops::RangeInclusive<u64> = 500..=10_000;

/// The workload's producer settings. The workload retries by itself, so
/// each send is one attempt and its error says exactly whether anything may
/// have been stored. Each of its retries is a new send (a new sequence
/// number), so sequence stamps would only lengthen records: off; the
/// scenarios judge the `UNIQ_KEY` window, which every client gets.
fn producer_config(queues: i32) -> ProducerConfig {
    ProducerConfig {
        send_timeout: REQUEST_TIMEOUT,
        retries: 0,
        default_topic_queues: queues,
        fault_avoidance: false,
        sequence_stamps: false,
        ..ProducerConfig::new(PRODUCER_GROUP)
    }
}

/// Producer `producer`: sends `messages_per_producer` fresh ids one at a
/// time, each to queue `(producer + k) % queues`, re-sending an id that was
/// not acknowledged up to `retries_max` times, pausing a seeded while.
pub async fn produce(
    seed: u64,
    producer: u32,
    workload: Workload,
    history: History,
    finished: Rc<Cell<u32>>,
) -> turmoil::Result {
    let host = format!("producer{producer}");
    let namesrvs = crate::harness::namesrv_addrs(workload.namesrvs);
    let client = client_of(&host, 100 + producer, &namesrvs, |_| {});
    let queues = workload.queues.max(1);
    let producer_client = Producer::new(client.clone(), producer_config(queues));
    await_broker(&client).await;
    let mut rng = substream(seed ^ u64::from(producer).rotate_left(32), Salt::Producer);
    for k in 0..workload.messages_per_producer {
        let id = format!("p{producer}-{k}");
        let queue = i32::try_from((producer + k) % queues.unsigned_abs()).unwrap_or(0);
        let mut message = Message::new(TOPIC, id.clone());
        // Like a Java producer, the message's UNIQ_KEY is set once and kept
        // by every retry of it, so the broker's dedupe window knows them.
        message.set_property(keys::UNIQ_KEY, client.next_uniq_key());
        if !workload.wait_for_flush {
            message.set_property(keys::WAIT, "false");
        }
        let message = maybe_defer(&mut rng, &workload, message, &history, &id);
        for _attempt in 0..=workload.retries_max {
            history.record(Event::SendInvoke {
                producer,
                id: id.clone(),
                queue,
            });
            let result = producer_client
                .send_with_selector(&message, |queues| {
                    queues.iter().find(|q| q.queue_id == queue).cloned()
                })
                .await;
            let outcome = send_outcome(result);
            let acked = matches!(outcome, SendOutcome::Ok { .. });
            let id = id.clone();
            history.record(match outcome {
                SendOutcome::Ok {
                    queue,
                    queue_offset,
                } => Event::SendOk {
                    id,
                    queue,
                    queue_offset,
                },
                SendOutcome::Fail(reason) => Event::SendFail { id, reason },
                SendOutcome::Info(reason) => Event::SendInfo { id, reason },
            });
            if acked {
                break;
            }
            tokio::time::sleep(Duration::from_millis(workload.fail_backoff_ms)).await;
        }
        let gap_ms = rng.random_range(0..=workload.send_gap_ms_max);
        tokio::time::sleep(Duration::from_millis(gap_ms)).await;
    }
    finished.set(finished.get() + 1);
    Ok(())
}

/// `message` as sent: for about half the messages of a deferring
/// workload, with a delay level or a timer (recorded as `Deferred`).
fn maybe_defer(
    rng: &mut impl Rng,
    workload: &Workload,
    mut message: Message,
    history: &History,
    id: &str,
) -> Message {
    let delays = matches!(workload.deferral, Deferral::Delays | Deferral::EarlyDelays);
    if !delays || !rng.random_bool(0.5) {
        return message;
    }
    let early = workload.deferral == Deferral::EarlyDelays;
    let delay_ms = if rng.random_bool(0.5) {
        let level = rng.random_range(1..=DELAY_LEVEL_MS.len());
        let asked = if early { 1 } else { level };
        message = message.with_delay_level(u32::try_from(asked).unwrap_or(1));
        DELAY_LEVEL_MS[level - 1]
    } else {
        let delay_ms = rng.random_range(TIMER_DELAY_MS);
        message = message.with_delay_ms(if early { delay_ms / 10 } else { delay_ms });
        delay_ms
    };
    history.record(Event::Deferred {
        id: id.to_owned(),
        delay_ms,
    });
    message
}

/// A long-polling consumer of queue `queue_id` from offset 0: each pull may
/// be held [`LONG_POLL_HOLD`] by the broker. Stops once all `producers`
/// finished and a pull started after that found nothing new.
pub async fn long_poll(
    queue_id: i32,
    producers: u32,
    finished: Rc<Cell<u32>>,
    history: History,
) -> turmoil::Result {
    let host = format!("consumer{queue_id}");
    let pid = 200 + queue_id.unsigned_abs();
    let client = client(&host, pid, |_| {});
    await_broker(&client).await;
    let consumer = PullConsumer::new(client, READER_GROUP);
    let mq = queue(TOPIC, queue_id);
    let all = Subscription::all(TOPIC);
    let mut offset = 0;
    let mut failures_after_end = 0;
    loop {
        let producers_done = finished.get() >= producers;
        let result = consumer
            .pull_blocking(
                &mq,
                &all,
                pull_offset(offset),
                PULL_BATCH_DEFAULT,
                LONG_POLL_HOLD,
            )
            .await;
        match pull_outcome(offset, result) {
            PullOutcome::Found { records, next } => {
                history.record(Event::Delivered {
                    queue: queue_id,
                    records,
                });
                offset = next;
            }
            PullOutcome::End if producers_done => return Ok(()),
            PullOutcome::End => {}
            PullOutcome::BelowFloor { floor } => offset = floor,
            PullOutcome::Retry(_) => {
                if producers_done {
                    failures_after_end += 1;
                    if failures_after_end >= DRAIN_ATTEMPTS_MAX {
                        return Ok(());
                    }
                }
                tokio::time::sleep(POLL_BACKOFF).await;
            }
        }
    }
}

/// Waits `wait_ms` (so every delayed message is due), then reads every
/// queue from offset 0 (or the retention floor above it) until the broker
/// reports its end, retrying while
/// the broker is unreachable or recovering. It asks the first `namesrvs`
/// name servers for routes.
pub async fn drain(
    seed: u64,
    queues: i32,
    wait_ms: u64,
    transactions: bool,
    namesrvs: u32,
    history: History,
) -> turmoil::Result {
    let namesrvs = crate::harness::namesrv_addrs(namesrvs);
    let client = client_of("drain", 300, &namesrvs, |c| {
        c.heartbeat_interval = crate::transactions::HEARTBEAT_INTERVAL;
    });
    // With transactions the drain host is a member of the producers'
    // group, so check-backs of halves its producers left open (or died
    // with) are answered while it waits.
    let _checker = transactions.then(|| crate::transactions::checker(seed, &client));
    if transactions {
        // Heartbeats reach only brokers the client knows a route to.
        await_broker(&client).await;
    }
    tokio::time::sleep(Duration::from_millis(wait_ms)).await;
    if !await_broker(&client).await {
        for queue in 0..queues.max(1) {
            history.record(Event::DrainIncomplete {
                queue,
                reason: "the name server never routed the broker".to_owned(),
            });
        }
        return Ok(());
    }
    let consumer = PullConsumer::new(client, READER_GROUP);
    let all = Subscription::all(TOPIC);
    let policy = DrainPolicy {
        attempts_max: DRAIN_ATTEMPTS_MAX,
        backoff: DRAIN_BACKOFF,
    };
    for queue_id in 0..queues.max(1) {
        let mq = queue(TOPIC, queue_id);
        drain_queue(&consumer, (&mq, queue_id), &all, policy, |e| {
            history.record(e);
        })
        .await;
    }
    Ok(())
}

/// A queue offset as the client API spells it.
fn pull_offset(offset: u64) -> i64 {
    i64::try_from(offset).unwrap_or(i64::MAX)
}
