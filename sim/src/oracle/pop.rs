//! The POP checks: once the broker confirmed an ack of a position, no
//! later receive hands that position out again (with acks that must
//! survive: across crashes too); and with the producers done and the
//! broker healed, every acknowledged send was acked by the group —
//! deliveries left unacked came back after their lease and were acked.

use std::collections::{BTreeMap, BTreeSet};

use crate::history::{Entry, Event, MessageId};

/// How long after a fault a delivery granted before it may be recorded
/// (the clients' request timeout).
const IN_FLIGHT_MS: u64 = 2_000;

/// A POP anomaly.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PopViolation {
    /// A position was handed out again after its ack was confirmed.
    DeliveredAfterAck {
        /// The message.
        id: MessageId,
        /// Its position.
        at: (i32, u64),
        /// When the ack was confirmed.
        acked_ms: u64,
        /// When it was handed out again.
        again_ms: u64,
    },
    /// An acknowledged send the group never acked (nor tried to, without
    /// an answer): a delivery left unacked never came back, or the message
    /// was never handed out.
    NeverAcked {
        /// The message.
        id: MessageId,
        /// Deliveries it had.
        deliveries: u32,
    },
    /// A position handed out with an attempt below 1, or with no more
    /// attempts than its previous delivery and no fault in between.
    AttemptNotCounted {
        /// The message.
        id: MessageId,
        /// The attempts in delivery order.
        attempts: Vec<u32>,
    },
}

/// The POP violations of a run. `acks_survive`: the broker was told to
/// make acks durable (`SYNC_FLUSH`), so no crash may bring an acked
/// position back; without it only the live broker's behaviour is judged.
pub fn check_pop(entries: &[Entry], acks_survive: bool) -> Vec<PopViolation> {
    let mut violations = Vec::new();
    let mut acked: BTreeMap<(i32, u64), u64> = BTreeMap::new();
    let mut attempts: BTreeMap<(i32, u64), (Vec<u32>, MessageId)> = BTreeMap::new();
    // Fault times: a lease lost in a crash may repeat an attempt.
    let mut fault_ms: Vec<u64> = Vec::new();
    let mut last: BTreeMap<(i32, u64), (u32, u64)> = BTreeMap::new();
    for e in entries {
        match &e.event {
            Event::PopAcked { queue, offset, .. } => {
                acked.entry((*queue, *offset)).or_insert(e.at_ms);
            }
            Event::PopDelivered { records, .. } => {
                for (queue, offset, id, attempt) in records {
                    let at = (*queue, *offset);
                    let faults_seen = !fault_ms.is_empty();
                    if let Some(acked_ms) = acked.get(&at).filter(|_| acks_survive || !faults_seen)
                    {
                        violations.push(PopViolation::DeliveredAfterAck {
                            id: id.clone(),
                            at,
                            acked_ms: *acked_ms,
                            again_ms: e.at_ms,
                        });
                    }
                    let (history, _) = attempts
                        .entry(at)
                        .or_insert_with(|| (Vec::new(), id.clone()));
                    history.push(*attempt);
                    // A fault since the previous delivery was granted (its
                    // answer may land up to a request timeout after it).
                    let fault_between =
                        |since: u64| fault_ms.iter().any(|f| *f + IN_FLIGHT_MS >= since);
                    let repeated = last
                        .insert(at, (*attempt, e.at_ms))
                        .is_some_and(|(before, since)| *attempt <= before && !fault_between(since));
                    if *attempt < 1 || repeated {
                        violations.push(PopViolation::AttemptNotCounted {
                            id: id.clone(),
                            attempts: history.clone(),
                        });
                    }
                }
            }
            Event::Fault { .. } => fault_ms.push(e.at_ms),
            _ => {}
        }
    }
    violations.extend(never_acked(entries));
    violations
}

/// Acknowledged sends the group never acked.
fn never_acked(entries: &[Entry]) -> Vec<PopViolation> {
    let mut sent: BTreeSet<&MessageId> = BTreeSet::new();
    let mut acked: BTreeSet<&MessageId> = BTreeSet::new();
    let mut deliveries: BTreeMap<&MessageId, u32> = BTreeMap::new();
    for e in entries {
        match &e.event {
            Event::SendOk { id, .. } => {
                sent.insert(id);
            }
            // An ack without an answer may have taken effect: the
            // message then never comes back, legitimately.
            Event::PopAcked { id, .. } | Event::PopAckUnknown { id, .. } => {
                acked.insert(id);
            }
            Event::PopDelivered { records, .. } => {
                for (_, _, id, _) in records {
                    *deliveries.entry(id).or_default() += 1;
                }
            }
            _ => {}
        }
    }
    sent.difference(&acked)
        .map(|id| PopViolation::NeverAcked {
            id: (*id).clone(),
            deliveries: deliveries.get(id).copied().unwrap_or(0),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(at_ms: u64, event: Event) -> Entry {
        Entry { at_ms, event }
    }

    fn sent(id: &str) -> Event {
        Event::SendOk {
            id: id.into(),
            queue: 0,
            queue_offset: 0,
        }
    }

    fn delivered(id: &str, attempt: u32) -> Event {
        Event::PopDelivered {
            consumer: 0,
            records: vec![(0, 0, id.into(), attempt)],
        }
    }

    fn acked(id: &str) -> Event {
        Event::PopAcked {
            consumer: 0,
            queue: 0,
            offset: 0,
            id: id.into(),
        }
    }

    #[test]
    fn a_redelivery_before_the_ack_is_fine_after_it_is_a_violation() {
        let fine = [
            at(1, sent("a")),
            at(2, delivered("a", 1)),
            at(3, delivered("a", 2)),
            at(4, acked("a")),
        ];
        assert_eq!(check_pop(&fine, true), vec![]);
        let bad = [
            at(1, sent("a")),
            at(2, delivered("a", 1)),
            at(3, acked("a")),
            at(4, delivered("a", 2)),
        ];
        assert!(matches!(
            check_pop(&bad, true).as_slice(),
            [PopViolation::DeliveredAfterAck {
                acked_ms: 3,
                again_ms: 4,
                ..
            }]
        ));
    }

    #[test]
    fn an_attempt_may_repeat_only_around_a_fault() {
        let crash = Event::Fault {
            fault: crate::history::Injected::Planned(scenarios::Fault::RestartBroker),
        };
        let quiet = [
            at(1, sent("a")),
            at(2, delivered("a", 1)),
            at(3_000, delivered("a", 1)),
        ];
        assert!(matches!(
            check_pop(&quiet, true).as_slice(),
            [
                PopViolation::AttemptNotCounted { .. },
                PopViolation::NeverAcked { .. }
            ]
        ));
        let crashed = [
            at(1, sent("a")),
            at(2, crash),
            at(3, delivered("a", 1)),
            at(3_000, delivered("a", 1)),
            at(3_001, acked("a")),
        ];
        assert_eq!(check_pop(&crashed, true), vec![]);
    }

    #[test]
    fn a_sent_message_the_group_never_acked_is_named() {
        let entries = [
            at(1, sent("a")),
            at(2, sent("b")),
            at(3, delivered("a", 1)),
            at(4, acked("a")),
        ];
        assert_eq!(
            check_pop(&entries, true),
            vec![PopViolation::NeverAcked {
                id: "b".into(),
                deliveries: 0
            }]
        );
    }
}
