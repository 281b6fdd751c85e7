//! Group consumption through `sluice-client`: the members of one clustering
//! `PushConsumer` group, each on its own host, record what their handlers
//! consume and which queues they own; a monitor records the group's
//! committed offsets as the broker reports them and ends the liveness phase
//! once the group has caught up — lag zero on every queue and every queue
//! owned by exactly one member — or a deadline passes (the oracle then
//! reports what is missing).

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::time::Duration;

use sluice_client::consumer::handler;
use sluice_client::{
    ConsumeFrom, ConsumeResult, MessageExt, MessageModel, MessageQueue, PullConsumer, PushConsumer,
    PushConsumerConfig, Subscription, TurmoilTransport,
};

use crate::client::{await_broker, client, queue};
use crate::history::{Event, History};
use crate::workload::{LONG_POLL_HOLD, TOPIC};
use sluice_node::testing::SimClock;

/// The consumer group.
pub const GROUP: &str = "sim-group";
/// Host name of the offset monitor.
pub const MONITOR: &str = "monitor";
/// How often members look at their assignment and the monitor at offsets.
const MEMBER_LOOK_INTERVAL: Duration = Duration::from_millis(20);
const MONITOR_INTERVAL: Duration = Duration::from_millis(100);
/// After the producers finished and every fault was applied (and healed),
/// the group must catch up within this long.
pub const CATCH_UP_MAX: Duration = Duration::from_secs(30);
/// The group has caught up only once no member's assignment changed for
/// this long: two rebalance periods, so a converged-looking moment in the
/// middle of a rebalance (one member has let a queue go, the next has not
/// taken it yet) does not end the run.
const ASSIGNMENT_QUIET_MS: u64 = 2_000;
/// How often members rebalance without a notification.
const REBALANCE_INTERVAL: Duration = Duration::from_secs(1);

/// Host name of group member `member`.
pub fn member_host(member: u32) -> String {
    format!("member{member}")
}

/// What the harness and the group's hosts share. Every host runs on the
/// simulation thread, so cells suffice.
#[derive(Debug, Default)]
pub struct GroupProgress {
    /// Producers that finished.
    pub producers_finished: Rc<Cell<u32>>,
    /// Producers in the run.
    pub producers: u32,
    /// Queues of the topic.
    pub queues: i32,
    /// The harness applied the last planned fault.
    pub faults_applied: Cell<bool>,
    /// The monitor ended the liveness phase: members shut down.
    pub stop: Cell<bool>,
    /// Each member's current queues, as last seen.
    pub owned: RefCell<BTreeMap<u32, Vec<i32>>>,
    /// Simulated ms of the last change to `owned`.
    pub owned_changed_ms: Cell<u64>,
    /// Members whose host is crashed now (a `RestartMember` starts them).
    pub crashed: RefCell<BTreeSet<u32>>,
}

impl GroupProgress {
    /// Whether the safety phase is over: producers done, faults applied.
    pub(crate) fn settled(&self) -> bool {
        self.faults_applied.get() && self.producers_finished.get() >= self.producers
    }

    /// Whether every queue has exactly one owner, and has had for
    /// [`ASSIGNMENT_QUIET_MS`].
    fn assignment_converged(&self) -> bool {
        let owned = self.owned.borrow();
        sim_ms().saturating_sub(self.owned_changed_ms.get()) >= ASSIGNMENT_QUIET_MS
            && (0..self.queues).all(|q| owned.values().filter(|qs| qs.contains(&q)).count() == 1)
    }
}

/// Group member `member`: a clustering push consumer of [`TOPIC`] from the
/// first offset, whose handler records every message it is given and
/// succeeds; its assignment is recorded whenever it changes. Shuts down
/// (committing its offsets) when the monitor says stop.
pub async fn member(
    member: u32,
    progress: Rc<GroupProgress>,
    history: History,
    lossy: bool,
) -> turmoil::Result {
    let client = client(&member_host(member), 400 + member, |c| {
        // Fast enough that the group reacts within a short run.
        c.heartbeat_interval = Duration::from_secs(1);
        c.rebalance_interval = REBALANCE_INTERVAL;
        c.persist_offset_interval = Duration::from_millis(500);
    });
    await_broker(&client).await;
    let consumer = PushConsumer::new(
        client,
        PushConsumerConfig {
            model: MessageModel::Clustering,
            consume_from: ConsumeFrom::FirstOffset,
            consume_concurrency: 4,
            consume_batch_max: 4,
            hold: LONG_POLL_HOLD,
            pull_retry_delay: Duration::from_millis(100),
            ..PushConsumerConfig::new(GROUP)
        },
    )?;
    consumer.subscribe(Subscription::all(TOPIC));
    // Every assignment a rebalance makes, however briefly it holds (a
    // member may own a queue for less than a look interval, and consume
    // from it): looking at `assigned()` alone could miss it.
    let (tell, mut told) = tokio::sync::mpsc::unbounded_channel();
    consumer.on_queues_changed(move |queues| {
        let _ = tell.send(topic_queues(queues));
    });
    let recorder = history.clone();
    consumer
        .start(handler(move |mut msgs: Vec<MessageExt>| {
            if lossy {
                // The mutant: success is reported for all, but every fifth
                // message never reaches the application.
                msgs.retain(|m| m.queue_offset % 5 != 2);
            }
            record_consumed(&recorder, member, &msgs);
            std::future::ready(ConsumeResult::Success)
        }))
        .await?;
    let mut owned: Option<Vec<i32>> = None;
    while !progress.stop.get() {
        let mut seen = Vec::new();
        while let Ok(queues) = told.try_recv() {
            seen.push(queues);
        }
        seen.push(topic_queues(&consumer.assigned()));
        for now in seen {
            if owned.as_ref() != Some(&now) {
                history.record(Event::Rebalanced {
                    member,
                    queues: now.clone(),
                });
                progress.owned.borrow_mut().insert(member, now.clone());
                progress.owned_changed_ms.set(sim_ms());
                owned = Some(now);
            }
        }
        tokio::time::sleep(MEMBER_LOOK_INTERVAL).await;
    }
    consumer.shutdown().await;
    Ok(())
}

/// The ids of `queues` that belong to [`TOPIC`] (not the retry topic).
fn topic_queues(queues: &[MessageQueue]) -> Vec<i32> {
    queues
        .iter()
        .filter(|mq| mq.topic == TOPIC)
        .map(|mq| mq.queue_id)
        .collect()
}

/// One `Consumed` event per queue among `msgs`, in the order given. The
/// handler always succeeds, so nothing comes back through the retry topic.
fn record_consumed(history: &History, member: u32, msgs: &[MessageExt]) {
    let mut by_queue: BTreeMap<i32, Vec<(u64, String)>> = BTreeMap::new();
    for m in msgs {
        by_queue.entry(m.queue_id).or_default().push((
            u64::try_from(m.queue_offset).unwrap_or(u64::MAX),
            String::from_utf8_lossy(&m.body).into_owned(),
        ));
    }
    for (queue, records) in by_queue {
        history.record(Event::Consumed {
            member,
            queue,
            records,
        });
    }
}

/// The offset monitor: records the group's committed offset of every queue
/// whenever the broker reports a new value. Once the run has settled it
/// stops the group as soon as every committed offset equals its queue's end
/// and the assignment has converged, or after [`CATCH_UP_MAX`].
pub async fn monitor(progress: Rc<GroupProgress>, history: History) -> turmoil::Result {
    let client = client(MONITOR, 500, |_| {});
    await_broker(&client).await;
    let reader = PullConsumer::new(client, GROUP);
    let mut committed: BTreeMap<i32, u64> = BTreeMap::new();
    let mut deadline = None;
    loop {
        for q in 0..progress.queues {
            let Ok(Some(offset)) = reader.committed_offset(&queue(TOPIC, q)).await else {
                continue;
            };
            let Ok(offset) = u64::try_from(offset) else {
                continue;
            };
            if committed.insert(q, offset) != Some(offset) {
                history.record(Event::Committed { queue: q, offset });
            }
        }
        if progress.settled() {
            let deadline =
                *deadline.get_or_insert_with(|| tokio::time::Instant::now() + CATCH_UP_MAX);
            // Converged before and after the lag queries: a rebalance
            // while they were in flight is not a settled group.
            let caught_up = progress.assignment_converged()
                && lag_is_zero(&reader, &committed, progress.queues).await
                && progress.assignment_converged();
            if caught_up || tokio::time::Instant::now() >= deadline {
                if caught_up {
                    history.record(Event::GroupSettled);
                }
                progress.stop.set(true);
                return Ok(());
            }
        }
        tokio::time::sleep(MONITOR_INTERVAL).await;
    }
}

/// Simulated ms since the run started.
fn sim_ms() -> u64 {
    turmoil::sim_elapsed().map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Whether every queue's committed offset equals its end.
async fn lag_is_zero(
    reader: &PullConsumer<TurmoilTransport, SimClock>,
    committed: &BTreeMap<i32, u64>,
    queues: i32,
) -> bool {
    for q in 0..queues {
        let Ok(end) = reader.max_offset(&queue(TOPIC, q)).await else {
            return false;
        };
        let end = u64::try_from(end).unwrap_or(u64::MAX);
        if committed.get(&q).copied().unwrap_or(0) != end {
            return false;
        }
    }
    true
}
