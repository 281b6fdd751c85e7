//! The history of a run: every send invocation and its outcome, every poll,
//! what a consumer group consumed, committed and was assigned, and the
//! faults the harness injected, each stamped with simulated time. The
//! oracle judges it; its hash is the run's determinism fingerprint.

use std::fmt::Write as _;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use scenarios::Fault;

/// A message id: `p<producer>-<sequence>`, carried as the message body.
pub type MessageId = String;

/// One thing that happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A producer is about to send `id` to `queue`.
    SendInvoke {
        /// The producer (one sequential client).
        producer: u32,
        /// Message id.
        id: MessageId,
        /// Target queue.
        queue: i32,
    },
    /// The message `id` about to be sent asks for delivery `delay_ms` after
    /// it is stored: its acknowledgement names a position in the broker's
    /// schedule queue, and it reaches its own queue later, at an offset of
    /// its own. Recorded once, before its first send.
    Deferred {
        /// Message id.
        id: MessageId,
        /// The delay it asked for.
        delay_ms: u64,
    },
    /// The local transaction of `id` (sent as a half message, recorded
    /// with a `Deferred` of no delay) commits or rolls back. Decided before
    /// the half is sent; a check-back gets the same answer.
    TxnDecided {
        /// Message id.
        id: MessageId,
        /// Commit (else roll back).
        commit: bool,
    },
    /// The broker acknowledged `id` at `(queue, queue_offset)`.
    SendOk {
        /// Message id.
        id: MessageId,
        /// Queue it was stored in.
        queue: i32,
        /// Its offset in that queue.
        queue_offset: u64,
    },
    /// The send definitely did not store the message (the request never
    /// reached the broker, or the broker refused it before storing).
    SendFail {
        /// Message id.
        id: MessageId,
        /// Why.
        reason: String,
    },
    /// The outcome is unknown (timeout, closed connection, or a failure
    /// the broker may have hit after appending).
    SendInfo {
        /// Message id.
        id: MessageId,
        /// Why.
        reason: String,
    },
    /// A read of `queue` returned these `(queue_offset, id)` records.
    Poll {
        /// The queue read.
        queue: i32,
        /// What it returned, in order.
        records: Vec<(u64, MessageId)>,
    },
    /// A long-polling consumer received these `(queue_offset, id)` records.
    Delivered {
        /// The queue read.
        queue: i32,
        /// What it returned, in order.
        records: Vec<(u64, MessageId)>,
    },
    /// A handler of group member `member` was given these `(queue_offset,
    /// id)` records of `queue`.
    Consumed {
        /// The group member.
        member: u32,
        /// The queue read.
        queue: i32,
        /// What the handler received, in order.
        records: Vec<(u64, MessageId)>,
    },
    /// The broker reported the group's committed offset of `queue` (the
    /// next offset to consume) as `offset`; recorded when it changes.
    Committed {
        /// The queue.
        queue: i32,
        /// The committed offset.
        offset: u64,
    },
    /// Group member `member` now owns `queues` (after a rebalance).
    Rebalanced {
        /// The group member.
        member: u32,
        /// The queues it owns, sorted.
        queues: Vec<i32>,
    },
    /// The group monitor saw the group caught up with one owner per queue
    /// and told the members to stop; rebalances recorded after this are
    /// the shutdown racing a late membership change, not the group's
    /// settled state.
    GroupSettled,
    /// The final drain could not read `queue` to its end.
    DrainIncomplete {
        /// The queue.
        queue: i32,
        /// The last error seen.
        reason: String,
    },
    /// POP consumer `consumer` was handed these `(queue, queue_offset,
    /// id, delivery attempt)` records.
    PopDelivered {
        /// The consumer.
        consumer: u32,
        /// What it was handed.
        records: Vec<(i32, u64, MessageId, u32)>,
    },
    /// The broker confirmed POP consumer `consumer`'s ack of the delivery
    /// of `id` at `(queue, offset)`.
    PopAcked {
        /// The consumer.
        consumer: u32,
        /// The queue.
        queue: i32,
        /// The offset.
        offset: u64,
        /// The message.
        id: MessageId,
    },
    /// POP consumer `consumer`'s ack of `id` got no answer (a timeout or
    /// a closed connection): it may or may not have taken effect.
    PopAckUnknown {
        /// The consumer.
        consumer: u32,
        /// The message.
        id: MessageId,
    },
    /// The harness injected a fault.
    Fault {
        /// What it injected.
        fault: Injected,
    },
    /// Name server `namesrv` now routes the topic's broker group to
    /// `master` (`None`: no route, or no master in it).
    RouteSeen {
        /// The name server.
        namesrv: u32,
        /// The master's address it routes.
        master: Option<String>,
    },
    /// Every name server routed the live master, `after_ms` after the run
    /// settled (producers done, every fault applied and healed).
    RoutesConverged {
        /// How long convergence took.
        after_ms: u64,
    },
    /// The bound passed and some name server still did not route the live
    /// master.
    RoutesNotConverged {
        /// What each name server routed last (`None`: nothing, or it could
        /// not be asked).
        routes: Vec<Option<String>>,
        /// The live master, if known.
        master: Option<String>,
    },
}

/// What the harness injected into a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Injected {
    /// A fault of the plan, applied at its time by the nemesis.
    Planned(Fault),
    /// The liveness phase started `host` again: it was down when the
    /// safety phase ended.
    RestartForDrain {
        /// The host.
        host: String,
    },
    /// Transaction producer `producer` died right after sending the half
    /// of `id`, as its workload decided.
    ProducerDied {
        /// The producer.
        producer: u32,
        /// The half it sent last.
        id: MessageId,
    },
    /// A real-process chaos run (`real`) injected a fault of `class`.
    Real {
        /// The fault class (`real::schedule::Class`), by name.
        class: String,
        /// What was done, to which process.
        what: String,
    },
    /// A real-process chaos run healed a fault of `class`.
    RealHealed {
        /// The fault class, by name.
        class: String,
        /// What was healed, on which process.
        what: String,
    },
}

impl std::fmt::Display for Injected {
    /// The readable form printed histories show.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Planned(fault) => write!(f, "{fault:?}"),
            Self::RestartForDrain { host } => write!(f, "restart {host} for the drain"),
            Self::ProducerDied { producer, id } => {
                write!(f, "producer {producer} dies right after the half of {id}")
            }
            Self::Real { class, what } => write!(f, "{class}: {what}"),
            Self::RealHealed { class, what } => write!(f, "{class} healed: {what}"),
        }
    }
}

impl Event {
    /// The planned fault this event records, if it records one.
    pub fn planned_fault(&self) -> Option<Fault> {
        match self {
            Self::Fault {
                fault: Injected::Planned(fault),
            } => Some(*fault),
            _ => None,
        }
    }
}

/// An event at a simulated time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Simulated milliseconds since the run started.
    pub at_ms: u64,
    /// What happened.
    pub event: Event,
}

/// A shared, append-only history. Every simulated host runs on the one
/// simulation thread; the lock is there because consumer handlers must be
/// `Send`, and it is never contended.
#[derive(Clone, Debug, Default)]
pub struct History {
    entries: Arc<Mutex<Vec<Entry>>>,
}

impl History {
    /// Records `event` at the current host's simulated time (0 outside a host).
    pub fn record(&self, event: Event) {
        let at_ms =
            turmoil::sim_elapsed().map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        self.record_at(at_ms, event);
    }

    /// Records `event` at an explicit simulated time (for the harness).
    pub fn record_at(&self, at_ms: u64, event: Event) {
        self.lock().push(Entry { at_ms, event });
    }

    /// A copy of everything recorded so far.
    pub fn entries(&self) -> Vec<Entry> {
        self.lock().clone()
    }

    /// The events alone, in order.
    pub fn events(&self) -> Vec<Event> {
        self.lock().iter().map(|e| e.event.clone()).collect()
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Entry>> {
        // A panicking recorder leaves whole entries; the history stays usable.
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// FNV-1a over the debug form of every entry plus the final simulated
/// time: equal for equal runs, and stable across processes.
pub fn trace_hash(entries: &[Entry], end_ms: u64) -> u64 {
    const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0100_0000_01b3;
    let mut text = String::new();
    for e in entries {
        let _ = writeln!(text, "{e:?}");
    }
    let _ = write!(text, "end {end_ms}");
    text.bytes()
        .fold(OFFSET_BASIS, |h, b| (h ^ u64::from(b)).wrapping_mul(PRIME))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fault(at_ms: u64) -> Entry {
        Entry {
            at_ms,
            event: Event::Fault {
                fault: Injected::Planned(Fault::RestartBroker),
            },
        }
    }

    #[test]
    fn trace_hash_depends_on_events_and_times() {
        let a = trace_hash(&[fault(1)], 10);
        assert_eq!(a, trace_hash(&[fault(1)], 10));
        assert_ne!(a, trace_hash(&[fault(2)], 10));
        assert_ne!(a, trace_hash(&[fault(1)], 11));
        assert_ne!(a, trace_hash(&[], 10));
    }

    #[test]
    fn record_outside_a_host_is_stamped_zero() {
        let h = History::default();
        h.record(Event::Fault {
            fault: Injected::Planned(Fault::RestartBroker),
        });
        assert_eq!(h.entries()[0].at_ms, 0);
        assert_eq!(h.events()[0].planned_fault(), Some(Fault::RestartBroker));
    }

    #[test]
    fn injected_faults_read_as_before_in_printed_histories() {
        let planned = Injected::Planned(Fault::CrashBroker { power_loss: true });
        assert_eq!(planned.to_string(), "CrashBroker { power_loss: true }");
        let drain = Injected::RestartForDrain {
            host: "broker".into(),
        };
        assert_eq!(drain.to_string(), "restart broker for the drain");
        let died = Event::Fault {
            fault: Injected::ProducerDied {
                producer: 1,
                id: "p1-7".into(),
            },
        };
        assert_eq!(died.planned_fault(), None);
    }
}
