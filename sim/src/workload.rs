//! The simulated clients: sequential producers that record every send and
//! its outcome, long-polling consumers, and the final drain that reads
//! every queue from offset 0 to its end. All run as turmoil clients and
//! write to one `History`.

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use rand::Rng;
use scenarios::{substream, Salt, Workload};

use crate::harness::BROKER_ADDR;
use crate::history::{Event, History};
use crate::protocol::{Protocol, PullOutcome, SendOutcome};

/// The topic every scenario writes.
pub const TOPIC: &str = "SimTopic";
/// Request timeout of the workload clients.
const REQUEST_TIMEOUT: Duration = Duration::from_millis(REQUEST_TIMEOUT_MS);
/// Pause after a failed send, so a down broker is not hammered.
const FAIL_BACKOFF: Duration = Duration::from_millis(50);
/// Failed pulls of one queue before the drain gives up (a liveness failure).
const DRAIN_ATTEMPTS_MAX: u32 = 60;
/// Pause between failed pulls.
const DRAIN_BACKOFF: Duration = Duration::from_millis(250);
/// Longest a consumer's pull is held by the broker.
pub const LONG_POLL_HOLD: Duration = Duration::from_secs(3);
/// Pause after a failed long poll.
const POLL_BACKOFF: Duration = Duration::from_millis(100);
/// Request timeout of every workload client (a long poll adds its hold).
pub const REQUEST_TIMEOUT_MS: u64 = 2_000;

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
    let client = Protocol::new(BROKER_ADDR, TOPIC, REQUEST_TIMEOUT);
    let mut rng = substream(seed ^ u64::from(producer).rotate_left(32), Salt::Producer);
    let queues = workload.queues.max(1);
    for k in 0..workload.messages_per_producer {
        let id = format!("p{producer}-{k}");
        let queue = i32::try_from((producer + k) % queues.unsigned_abs()).unwrap_or(0);
        for _attempt in 0..=workload.retries_max {
            history.record(Event::SendInvoke {
                producer,
                id: id.clone(),
                queue,
            });
            let outcome = client
                .send(&id, queue, queues, workload.wait_for_flush)
                .await;
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
            tokio::time::sleep(FAIL_BACKOFF).await;
        }
        let gap_ms = rng.random_range(0..=workload.send_gap_ms_max);
        tokio::time::sleep(Duration::from_millis(gap_ms)).await;
    }
    finished.set(finished.get() + 1);
    Ok(())
}

/// A long-polling consumer of `queue` from offset 0: each pull may be held
/// [`LONG_POLL_HOLD`] by the broker. Stops once all `producers` finished
/// and a pull started after that found nothing new.
pub async fn long_poll(
    queue: i32,
    producers: u32,
    finished: Rc<Cell<u32>>,
    history: History,
) -> turmoil::Result {
    let client = Protocol::new(BROKER_ADDR, TOPIC, REQUEST_TIMEOUT);
    let mut offset = 0;
    let mut failures_after_end = 0;
    loop {
        let producers_done = finished.get() >= producers;
        match client.pull(queue, offset, Some(LONG_POLL_HOLD)).await {
            PullOutcome::Found { records, next } => {
                history.record(Event::Delivered { queue, records });
                offset = next;
            }
            PullOutcome::End if producers_done => return Ok(()),
            PullOutcome::End => {}
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

/// Reads every queue from offset 0 until the broker reports its end,
/// retrying while the broker is unreachable or recovering.
pub async fn drain(queues: i32, history: History) -> turmoil::Result {
    let client = Protocol::new(BROKER_ADDR, TOPIC, REQUEST_TIMEOUT);
    for queue in 0..queues.max(1) {
        let mut offset = 0;
        let mut failures = 0;
        loop {
            match client.pull(queue, offset, None).await {
                PullOutcome::Found { records, next } => {
                    history.record(Event::Poll { queue, records });
                    offset = next;
                }
                PullOutcome::End => break,
                PullOutcome::Retry(reason) => {
                    failures += 1;
                    if failures >= DRAIN_ATTEMPTS_MAX {
                        history.record(Event::DrainIncomplete { queue, reason });
                        break;
                    }
                    tokio::time::sleep(DRAIN_BACKOFF).await;
                }
            }
        }
    }
    Ok(())
}
