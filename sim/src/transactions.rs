//! Transactional producers of the simulation, all `sluice-client` code:
//! each message is a half whose local transaction commits or rolls back
//! as decided up front from the seed and the id (so a check-back, asked of
//! any member of the group, gets the same answer). Some halves are ended
//! twice, some are left for the broker's check-back, some (with
//! `late_ends`) are ended or ended again seconds later — across a broker
//! restart or failover — and the first producer may die right after a half.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use rand::Rng;
use scenarios::{substream, Salt, Workload};
use sluice_client::{
    HalfMessage, LocalTransactionState, Message, MessageExt, ProducerConfig, TransactionListener,
    TransactionProducer, TurmoilTransport,
};

use crate::client::{await_broker, client, send_outcome, SendOutcome, SimClient};
use crate::history::{Event, History, Injected, MessageId};
use crate::workload::{PRODUCER_GROUP, REQUEST_TIMEOUT, TOPIC};
use sluice_node::testing::SimClock;

/// Members of the producers' group heartbeat this often, so a restarted
/// broker soon knows whom to ask about open halves.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(1);

/// Share of local transactions that commit, in percent.
const COMMIT_PERCENT: u64 = 70;

/// Whether the local transaction of `id` commits in run `seed`.
pub fn commits(seed: u64, id: &str) -> bool {
    // FNV-1a of the id, mixed with the seed: stable across processes.
    let h = id.bytes().fold(0xcbf2_9ce4_8422_2325_u64 ^ seed, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    h % 100 < COMMIT_PERCENT
}

/// The application's side: its "database" is [`commits`].
struct Listener {
    seed: u64,
}

impl TransactionListener for Listener {
    fn execute(&self, _msg: &Message, _half: &HalfMessage) -> LocalTransactionState {
        // The workload ends its transactions itself.
        LocalTransactionState::Unknown
    }

    fn check(&self, msg: &MessageExt) -> LocalTransactionState {
        let id = String::from_utf8_lossy(&msg.body);
        if commits(self.seed, &id) {
            LocalTransactionState::Commit
        } else {
            LocalTransactionState::Rollback
        }
    }
}

type SimTransactionProducer = TransactionProducer<TurmoilTransport, SimClock>;

/// A member of the producers' group; a topic it creates gets `queues`.
fn transaction_producer(seed: u64, client: &SimClient, queues: i32) -> SimTransactionProducer {
    // Heartbeats make the host a live member of the group for check-backs.
    client.start();
    TransactionProducer::new(
        client.clone(),
        ProducerConfig {
            send_timeout: REQUEST_TIMEOUT,
            retries: 0,
            default_topic_queues: queues,
            fault_avoidance: false,
            // Halves are never stamped; no producer id is drawn.
            sequence_stamps: false,
            ..ProducerConfig::new(PRODUCER_GROUP)
        },
        Arc::new(Listener { seed }),
    )
}

/// A member of the producers' group that only answers check-backs.
pub fn checker(seed: u64, client: &SimClient) -> SimTransactionProducer {
    transaction_producer(seed, client, 1)
}

/// What a producer does with an acknowledged half.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ending {
    Once,
    Twice,
    LeftToCheckBack,
    /// Only seconds later (a late END).
    Late,
    /// Now, and again seconds later (a late duplicate).
    OnceAndLate,
}

impl Ending {
    /// The ending for a draw of `0..100`; late ones only with `late_ends`
    /// (without, the draws keep the endings they always had).
    fn of(draw: u32, late_ends: bool) -> Self {
        match (draw, late_ends) {
            (0..10, _) => Self::Twice,
            (10..25, _) => Self::LeftToCheckBack,
            (25..40, true) => Self::Late,
            (40..55, true) => Self::OnceAndLate,
            _ => Self::Once,
        }
    }

    /// ENDs sent right away, and whether one more follows later.
    fn ends_now_and_later(self) -> (u32, bool) {
        match self {
            Self::Once => (1, false),
            Self::Twice => (2, false),
            Self::LeftToCheckBack => (0, false),
            Self::Late => (0, true),
            Self::OnceAndLate => (1, true),
        }
    }
}

/// How much later a late END is sent: long enough to cross a broker
/// restart or a failover now and then.
const LATE_END_MS: std::ops::RangeInclusive<u64> = 500..=5_000;

/// The history's record that transaction producer `producer` died right
/// after the half of `id`.
fn died(producer: u32, id: MessageId) -> Event {
    Event::Fault {
        fault: Injected::ProducerDied { producer, id },
    }
}

/// One transactional producer's process: its client, its producer and
/// the late ENDs it still has to send.
struct Process {
    client: SimClient,
    tx: Rc<SimTransactionProducer>,
    late: Vec<tokio::task::JoinHandle<()>>,
}

impl Process {
    /// Ends `half` as `ending` says. Without `late_ends` the producer waits
    /// for each END (a failed one is left to the check-back). With it, the
    /// ENDs go out in a task of their own (as a Java client's oneway END
    /// does, so many are in flight at once), and a late one — or one more
    /// after a failed END (say, lost with a crashing broker) — follows
    /// seconds later.
    async fn end(
        &mut self,
        rng: &mut impl Rng,
        half: &HalfMessage,
        state: LocalTransactionState,
        ending: Ending,
        late_ends: bool,
    ) {
        let (now, later) = ending.ends_now_and_later();
        if !late_ends {
            for _ in 0..now {
                let _ = self.tx.end_transaction(half, state).await;
            }
            return;
        }
        let delay = Duration::from_millis(rng.random_range(LATE_END_MS));
        let (tx, client) = (Rc::clone(&self.tx), self.client.clone());
        let half = half.clone();
        self.late.push(tokio::task::spawn_local(async move {
            let mut failed = false;
            for _ in 0..now {
                failed |= tx.end_transaction(&half, state).await.is_err();
            }
            if later || failed {
                tokio::time::sleep(delay).await;
                end_late(&tx, &client, half, state).await;
            }
        }));
    }
}

/// A late END goes, like a Java client's, to the current master of the
/// half's broker (the logs of a group agree on the half's offsets).
async fn end_late(
    tx: &SimTransactionProducer,
    client: &SimClient,
    mut half: HalfMessage,
    state: LocalTransactionState,
) {
    let broker = half.queue.broker_name.clone();
    if client.refresh_route(TOPIC).await.is_ok() {
        if let Some(addr) = client.master_addr(&broker) {
            half.broker_addr = addr;
        }
    }
    // Failed again: left to the check-back.
    let _ = tx.end_transaction(&half, state).await;
}

/// Sends the half of `id`, recording the attempt and its outcome.
async fn send_half(
    tx: &SimTransactionProducer,
    producer: u32,
    id: &str,
    commit: bool,
    history: &History,
) -> Option<HalfMessage> {
    history.record(Event::Deferred {
        id: id.to_owned(),
        delay_ms: 0,
    });
    history.record(Event::TxnDecided {
        id: id.to_owned(),
        commit,
    });
    history.record(Event::SendInvoke {
        producer,
        id: id.to_owned(),
        queue: -1,
    });
    match tx.send_half(&Message::new(TOPIC, id.to_owned())).await {
        Ok(half) => {
            history.record(Event::SendOk {
                id: id.to_owned(),
                queue: half.queue.queue_id,
                queue_offset: u64::try_from(half.queue_offset).unwrap_or(u64::MAX),
            });
            Some(half)
        }
        Err(e) => {
            let id = id.to_owned();
            history.record(match send_outcome(Err(e)) {
                SendOutcome::Fail(reason) => Event::SendFail { id, reason },
                SendOutcome::Info(reason) => Event::SendInfo { id, reason },
                ok @ SendOutcome::Ok { .. } => Event::SendInfo {
                    id,
                    reason: format!("{ok:?}"),
                },
            });
            None
        }
    }
}

/// Producer `producer` of a transactional workload: sends each id as a
/// half (one attempt; no retries), then ends it as decided — or twice, or
/// not at all, or (with `late_ends`) seconds later. Producer 0 may die
/// right after one of its halves, with its late ENDs unsent.
pub async fn produce_transactions(
    seed: u64,
    producer: u32,
    workload: Workload,
    history: History,
    finished: Rc<Cell<u32>>,
) -> turmoil::Result {
    let host = format!("producer{producer}");
    let client = client(&host, 100 + producer, |c| {
        c.heartbeat_interval = HEARTBEAT_INTERVAL;
    });
    let tx = Rc::new(transaction_producer(seed, &client, workload.queues.max(1)));
    await_broker(&client).await;
    let mut rng = substream(seed ^ u64::from(producer).rotate_left(32), Salt::Producer);
    let dies_after = (producer == 0 && rng.random_bool(0.5))
        .then(|| rng.random_range(0..workload.messages_per_producer));
    let mut process = Process {
        client,
        tx,
        late: Vec::new(),
    };
    for k in 0..workload.messages_per_producer {
        let id = format!("p{producer}-{k}");
        let commit = commits(seed, &id);
        let half = send_half(&process.tx, producer, &id, commit, &history).await;
        if let Some(half) = half {
            if dies_after == Some(k) {
                history.record(died(producer, id));
                // Its late ENDs die with the process.
                process.late.drain(..).for_each(|late| late.abort());
                process.client.shutdown().await;
                break;
            }
            let state = if commit {
                LocalTransactionState::Commit
            } else {
                LocalTransactionState::Rollback
            };
            let ending = Ending::of(rng.random_range(0..100), workload.late_ends);
            process
                .end(&mut rng, &half, state, ending, workload.late_ends)
                .await;
        } else {
            tokio::time::sleep(Duration::from_millis(workload.fail_backoff_ms)).await;
        }
        let gap_ms = rng.random_range(0..=workload.send_gap_ms_max);
        tokio::time::sleep(Duration::from_millis(gap_ms)).await;
    }
    for late in process.late {
        let _ = late.await;
    }
    // A process that exits closes its connections (a finished turmoil
    // client would otherwise leave them open, unanswering).
    process.client.shutdown().await;
    finished.set(finished.get() + 1);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decisions_are_stable_and_mixed() {
        let ids: Vec<String> = (0..200).map(|k| format!("p0-{k}")).collect();
        let committed = ids.iter().filter(|id| commits(7, id)).count();
        assert!((100..180).contains(&committed), "{committed} of 200");
        assert!(ids.iter().all(|id| commits(7, id) == commits(7, id)));
        assert!(ids.iter().any(|id| commits(7, id) != commits(8, id)));
    }
}
