//! The Jepsen-style oracle: pure functions over a recorded history. It is
//! valid only after a full drain (every queue read from offset 0 to its
//! end), which the harness records as `Poll` events. Every read — drain,
//! long poll, group consumption — joins one version order per queue;
//! `oracle::group` adds the consumer-group checks.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use scenarios::Fault;

use crate::history::{Event, MessageId};

mod dedupe;
mod group;
pub mod pop;
pub mod replicas;
mod skips;
mod timing;
mod transactions;
pub use dedupe::stored_twice;
pub use group::{check_group, GroupBounds};
pub use skips::skipped_deliveries;
pub use timing::{acks_after_fence, early_deliveries, late_deliveries, WakeupBounds};

/// What the oracle may assume about the broker under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OracleConfig {
    /// `SYNC_FLUSH` with the flush wait: an acknowledged message survives any
    /// crash at the offset it was acknowledged with.
    pub acked_must_survive: bool,
}

/// One anomaly.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Violation {
    /// An acknowledged message was never read.
    LostAck {
        /// The message.
        id: MessageId,
        /// Where it was acknowledged.
        queue: i32,
        /// Its acknowledged offset.
        queue_offset: u64,
    },
    /// An acknowledged message was read, but not where it was acknowledged.
    MovedAck {
        /// The message.
        id: MessageId,
        /// Acknowledged at.
        acked: (i32, u64),
        /// Read at.
        seen: Vec<(i32, u64)>,
    },
    /// A message nobody sent was read.
    NeverSent {
        /// The message.
        id: MessageId,
        /// Where it was read.
        at: (i32, u64),
    },
    /// A message whose send definitely failed was read (G1a).
    FailedSendVisible {
        /// The message.
        id: MessageId,
        /// Where it was read.
        at: (i32, u64),
    },
    /// Two different messages at one `(queue, offset)`, across acks and reads.
    InconsistentOffset {
        /// The queue.
        queue: i32,
        /// The offset.
        queue_offset: u64,
        /// The two messages.
        ids: (MessageId, MessageId),
    },
    /// The drained offsets of a queue are not `0..n` without holes.
    Gap {
        /// The queue.
        queue: i32,
        /// The first missing offset.
        missing: u64,
    },
    /// One message at several positions, without an indeterminate send to
    /// explain it.
    Duplicate {
        /// The message.
        id: MessageId,
        /// Where it was read.
        at: Vec<(i32, u64)>,
    },
    /// One sequential producer's acknowledged sends landed out of order.
    NonFifo {
        /// The producer.
        producer: u32,
        /// The queue.
        queue: i32,
        /// Acknowledged first, but stored later.
        earlier: MessageId,
        /// Acknowledged later, but stored earlier (or at the same offset).
        later: MessageId,
    },
    /// The drain could not finish: a liveness failure.
    DrainIncomplete {
        /// The queue.
        queue: i32,
        /// Why.
        reason: String,
    },
    /// An acknowledged message never reached a handler of the consumer group.
    NotConsumed {
        /// The message.
        id: MessageId,
        /// Where it was acknowledged.
        acked: (i32, u64),
    },
    /// The group's committed offset moved backwards within one broker
    /// life, or across a crash below what the broker had persisted.
    CommitRegressed {
        /// The queue.
        queue: i32,
        /// The offset it should not have fallen below.
        from: u64,
        /// The offset reported.
        to: u64,
        /// When it was reported.
        at_ms: u64,
    },
    /// The group committed past a message it had not consumed (a skip: the
    /// message would never be consumed by the group).
    CommitSkipped {
        /// The queue.
        queue: i32,
        /// The committed offset.
        committed: u64,
        /// The first offset below it that no member had consumed by then.
        unconsumed: u64,
        /// When the commit was reported.
        at_ms: u64,
    },
    /// After the liveness phase the group's committed offset is not the
    /// queue's end (lag is not zero).
    GroupLag {
        /// The queue.
        queue: i32,
        /// The last committed offset reported, if any.
        committed: Option<u64>,
        /// The queue's end (one past its last offset).
        end: u64,
    },
    /// Replicas disagree, did not catch up, or a SYNC master acknowledged
    /// without its replica.
    Replica(replicas::ReplicaViolation),
    /// POP consumption broke its promises (see `oracle::pop`).
    Pop(pop::PopViolation),
    /// A transactional message whose local transaction rolled back (or a
    /// half never committed) was read.
    RolledBackVisible {
        /// The message.
        id: MessageId,
        /// Where it was read.
        at: (i32, u64),
    },
    /// A committed transaction stored in its real topic more than once: a
    /// duplicate, late or check-back END committed it again.
    CommittedTwice {
        /// The message.
        id: MessageId,
        /// Where it was read.
        at: Vec<(i32, u64)>,
    },
    /// A delayed message was read before its delay had passed (less the
    /// forward steps of the broker's clock).
    EarlyDelivery {
        /// The message.
        id: MessageId,
        /// Its first send plus its delay, in simulated ms.
        due_ms: u64,
        /// When it was read.
        read_ms: u64,
    },
    /// After the liveness phase a queue has no owner or several.
    AssignmentNotConverged {
        /// The queue.
        queue: i32,
        /// The members that own it.
        owners: Vec<u32>,
    },
    /// After the heal some name server did not route the live master
    /// within the bound.
    RoutesNotConverged {
        /// What each name server routed last.
        routes: Vec<Option<String>>,
        /// The live master, if known.
        master: Option<String>,
    },
    /// A name server dropped the route of a lone broker that could reach
    /// it (no cut between them explains the expiry).
    RouteDropped {
        /// The name server.
        namesrv: u32,
        /// When the watcher saw the route gone.
        at_ms: u64,
    },
    /// The consumer group consumed a message again with neither a crash of
    /// the member that consumed it first nor a rebalance that took its
    /// queue away in between.
    UnexplainedDuplicate {
        /// The message.
        id: MessageId,
        /// The first consumption: member and simulated ms.
        first: (u32, u64),
        /// The repeat: member and simulated ms.
        again: (u32, u64),
    },
    /// A plain message read at two positions with the broker's dedupe
    /// window on: a retried send (same `UNIQ_KEY`) stored again within
    /// the window (every run is shorter than the window).
    StoredTwice {
        /// The message.
        id: MessageId,
        /// Where it was read.
        at: Vec<(i32, u64)>,
    },
    /// The broker's stats disagree with the history: it counted fewer
    /// messages stored or returned than clients saw acknowledged or read.
    StatsUndercount {
        /// `messages_in_total` or `messages_out_total`.
        figure: &'static str,
        /// What the broker counted.
        counted: u64,
        /// What the history proves at least.
        seen: u64,
    },
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self:?}")
    }
}

/// How each send ended, as the client saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    Pending,
    Ok(i32, u64),
    Fail,
    Info,
}

/// What the oracle expects of a message's reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// Stored for now, read where it was acknowledged.
    Plain,
    /// Delayed: acknowledged in the schedule queue, read later at a
    /// position of its own (only "read somewhere" is checked); a crash may
    /// repeat its delivery.
    Delayed,
    /// A committed transaction (its half was acknowledged): read later at
    /// a position of its own, and at most once even across crashes.
    Committed,
    /// A rolled-back transaction: never read.
    RolledBack,
}

impl Kind {
    fn deferred(self) -> bool {
        self != Self::Plain
    }
}

/// One message id: a producer may send it several times (retries).
struct Send {
    producer: u32,
    /// What kind of message it is.
    kind: Kind,
    /// The last attempt's outcome (a producer stops retrying once acked).
    outcome: Outcome,
    /// Some attempt's outcome was unknown: the id may be stored more than
    /// once, or be stored although a later attempt definitely failed.
    maybe_stored: bool,
}

/// Counts that describe a run (reported, never judged).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Sends invoked.
    pub invoked: usize,
    /// Sends acknowledged.
    pub acked: usize,
    /// Sends that definitely failed.
    pub failed: usize,
    /// Sends with an unknown outcome.
    pub indeterminate: usize,
    /// Indeterminate sends that were read anyway.
    pub recovered: usize,
    /// Distinct messages read.
    pub read: usize,
    /// Messages read at more than one position.
    pub duplicated: usize,
}

/// The oracle's verdict.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Every anomaly found; empty means the history is valid.
    pub violations: Vec<Violation>,
    /// Counts.
    pub summary: Summary,
}

/// Checks a history. Pure; the order of `events` is the recorded order.
pub fn check(events: &[Event], config: OracleConfig) -> Verdict {
    let (sends, ack_order) = sends(events);
    let (positions, reads, mut violations) = reads(events);
    // A crash may repeat a delayed delivery made after the last persisted
    // schedule progress (at-least-once, documented).
    let crashed = events
        .iter()
        .filter_map(Event::planned_fault)
        .any(Fault::crashes_a_host);
    violations.extend(check_reads(&sends, &reads, crashed));
    violations.extend(transactions::committed_twice(&sends, &reads));
    if config.acked_must_survive {
        violations.extend(check_acks(&sends, &ack_order, &positions, &reads));
    }
    violations.extend(check_dense(&positions));
    violations.extend(check_fifo(&sends, &ack_order));
    let summary = Summary {
        invoked: sends.len(),
        acked: count(&sends, |o| matches!(o, Outcome::Ok(..))),
        failed: count(&sends, |o| o == Outcome::Fail),
        indeterminate: count(&sends, |o| o == Outcome::Info),
        recovered: sends
            .iter()
            .filter(|(id, s)| {
                s.maybe_stored && !matches!(s.outcome, Outcome::Ok(..)) && reads.contains_key(*id)
            })
            .count(),
        read: reads.len(),
        duplicated: reads.values().filter(|at| at.len() > 1).count(),
    };
    Verdict {
        violations,
        summary,
    }
}

fn count(sends: &BTreeMap<MessageId, Send>, pred: impl Fn(Outcome) -> bool) -> usize {
    sends.values().filter(|s| pred(s.outcome)).count()
}

/// Each send's outcome, and the acknowledged ids in acknowledgement order.
fn sends(events: &[Event]) -> (BTreeMap<MessageId, Send>, Vec<MessageId>) {
    let mut sends = BTreeMap::new();
    let mut ack_order = Vec::new();
    let deferred: BTreeSet<&MessageId> = events
        .iter()
        .filter_map(|e| match e {
            Event::Deferred { id, .. } => Some(id),
            _ => None,
        })
        .collect();
    let decided: BTreeMap<&MessageId, bool> = events
        .iter()
        .filter_map(|e| match e {
            Event::TxnDecided { id, commit } => Some((id, *commit)),
            _ => None,
        })
        .collect();
    for e in events {
        match e {
            Event::SendInvoke { producer, id, .. } => {
                let send = sends.entry(id.clone()).or_insert(Send {
                    producer: *producer,
                    kind: match decided.get(id) {
                        Some(true) => Kind::Committed,
                        Some(false) => Kind::RolledBack,
                        None if deferred.contains(id) => Kind::Delayed,
                        None => Kind::Plain,
                    },
                    outcome: Outcome::Pending,
                    maybe_stored: false,
                });
                send.outcome = Outcome::Pending;
            }
            Event::SendOk {
                id,
                queue,
                queue_offset,
            } => {
                if let Some(s) = sends.get_mut(id) {
                    s.outcome = Outcome::Ok(*queue, *queue_offset);
                    ack_order.push(id.clone());
                }
            }
            Event::SendFail { id, .. } => set(&mut sends, id, Outcome::Fail),
            Event::SendInfo { id, .. } => set(&mut sends, id, Outcome::Info),
            _ => {}
        }
    }
    (sends, ack_order)
}

fn set(sends: &mut BTreeMap<MessageId, Send>, id: &str, outcome: Outcome) {
    if let Some(s) = sends.get_mut(id) {
        s.outcome = outcome;
        s.maybe_stored |= outcome == Outcome::Info;
    }
}

type Positions = BTreeMap<(i32, u64), MessageId>;
type Reads = BTreeMap<MessageId, BTreeSet<(i32, u64)>>;

/// The version order `(queue, offset) → id` from every read, where each id
/// was read, and any position read with two values or a drain left unfinished.
fn reads(events: &[Event]) -> (Positions, Reads, Vec<Violation>) {
    let mut positions = Positions::new();
    let mut reads = Reads::new();
    let mut violations = Vec::new();
    for e in events {
        match e {
            Event::Poll { queue, records }
            | Event::Delivered { queue, records }
            | Event::Consumed { queue, records, .. } => {
                for (offset, id) in records {
                    let key = (*queue, *offset);
                    match positions.get(&key) {
                        Some(other) if other != id => {
                            violations.push(Violation::InconsistentOffset {
                                queue: *queue,
                                queue_offset: *offset,
                                ids: (other.clone(), id.clone()),
                            });
                        }
                        Some(_) => {}
                        None => {
                            positions.insert(key, id.clone());
                        }
                    }
                    reads.entry(id.clone()).or_default().insert(key);
                }
            }
            Event::DrainIncomplete { queue, reason } => {
                violations.push(Violation::DrainIncomplete {
                    queue: *queue,
                    reason: reason.clone(),
                });
            }
            _ => {}
        }
    }
    (positions, reads, violations)
}

/// No message read that was never sent or that definitely failed; no
/// duplicate without an indeterminate send (or, for a delayed message, a
/// broker crash). A committed transaction read twice is judged by
/// `oracle::transactions`, indeterminate half or not.
fn check_reads(sends: &BTreeMap<MessageId, Send>, reads: &Reads, crashed: bool) -> Vec<Violation> {
    let mut out = Vec::new();
    for (id, at) in reads {
        let first = *at
            .iter()
            .next()
            .expect("invariant: every read id has a position");
        let Some(send) = sends.get(id) else {
            out.push(Violation::NeverSent {
                id: id.clone(),
                at: first,
            });
            continue;
        };
        if send.kind == Kind::RolledBack {
            out.push(Violation::RolledBackVisible {
                id: id.clone(),
                at: first,
            });
            continue;
        }
        if send.maybe_stored {
            continue;
        }
        if send.outcome == Outcome::Fail {
            out.push(Violation::FailedSendVisible {
                id: id.clone(),
                at: first,
            });
        } else if at.len() > 1
            && send.kind != Kind::Committed
            && !(send.kind == Kind::Delayed && crashed)
        {
            out.push(Violation::Duplicate {
                id: id.clone(),
                at: at.iter().copied().collect(),
            });
        }
    }
    out
}

/// Every acknowledged message was read, exactly where it was acknowledged.
fn check_acks(
    sends: &BTreeMap<MessageId, Send>,
    ack_order: &[MessageId],
    positions: &Positions,
    reads: &Reads,
) -> Vec<Violation> {
    let mut out = Vec::new();
    for id in ack_order {
        let Some(send) = sends.get(id) else { continue };
        let Outcome::Ok(queue, queue_offset) = send.outcome else {
            continue;
        };
        if send.kind.deferred() {
            if send.kind != Kind::RolledBack && !reads.contains_key(id) {
                out.push(Violation::LostAck {
                    id: id.clone(),
                    queue,
                    queue_offset,
                });
            }
            continue;
        }
        match (positions.get(&(queue, queue_offset)), reads.get(id)) {
            (Some(other), _) if other != id => out.push(Violation::InconsistentOffset {
                queue,
                queue_offset,
                ids: (id.clone(), other.clone()),
            }),
            (Some(_), _) => {}
            (None, None) => out.push(Violation::LostAck {
                id: id.clone(),
                queue,
                queue_offset,
            }),
            (None, Some(seen)) => out.push(Violation::MovedAck {
                id: id.clone(),
                acked: (queue, queue_offset),
                seen: seen.iter().copied().collect(),
            }),
        }
    }
    out
}

/// Each queue's read offsets are `0..n`.
fn check_dense(positions: &Positions) -> Vec<Violation> {
    let mut next: BTreeMap<i32, u64> = BTreeMap::new();
    let mut out = Vec::new();
    let mut reported = BTreeSet::new();
    for &(queue, offset) in positions.keys() {
        let expected = next.entry(queue).or_insert(0);
        if offset != *expected && reported.insert(queue) {
            out.push(Violation::Gap {
                queue,
                missing: *expected,
            });
        }
        *expected = offset + 1;
    }
    out
}

/// A sequential producer's acknowledged sends to one queue have increasing
/// offsets in acknowledgement order.
fn check_fifo(sends: &BTreeMap<MessageId, Send>, ack_order: &[MessageId]) -> Vec<Violation> {
    let mut last: BTreeMap<(u32, i32), (u64, &MessageId)> = BTreeMap::new();
    let mut out = Vec::new();
    for id in ack_order {
        let Some(s) = sends.get(id) else { continue };
        let Outcome::Ok(queue, offset) = s.outcome else {
            continue;
        };
        if s.kind.deferred() {
            continue;
        }
        if let Some((prev_offset, prev_id)) = last.get(&(s.producer, queue)) {
            if offset <= *prev_offset {
                out.push(Violation::NonFifo {
                    producer: s.producer,
                    queue,
                    earlier: (*prev_id).clone(),
                    later: id.clone(),
                });
            }
        }
        last.insert((s.producer, queue), (offset, id));
    }
    out
}

#[cfg(test)]
mod tests;
