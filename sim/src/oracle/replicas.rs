//! Checks on a replicated broker group, pure functions over what the run
//! left behind: replica agreement (the `CommitLog`s of every pair of brokers
//! are byte-identical wherever both hold data — so no `(queue, offset)`
//! ever holds two messages across replicas), liveness after the heal
//! (every log reached the same end), and SYNC replication's promise that
//! nothing sent while the only replica was cut off was acknowledged.

use std::collections::BTreeSet;

use crate::history::{Entry, Event, MessageId};

/// One broker's CommitLog as recovered after the run.
#[derive(Clone, Debug)]
pub struct LogImage {
    /// The broker's host.
    pub host: String,
    /// Offset of `bytes[0]` (the oldest retained segment's start).
    pub start: u64,
    /// Every byte from `start` to the written end.
    pub bytes: Vec<u8>,
}

impl LogImage {
    /// One past the last byte.
    pub fn end(&self) -> u64 {
        self.start + self.bytes.len() as u64
    }
}

/// A replica-agreement or replication-liveness failure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReplicaViolation {
    /// Two brokers hold different bytes at `offset`, which both hold.
    Diverged {
        /// One broker.
        a: String,
        /// The other.
        b: String,
        /// The first differing CommitLog offset.
        offset: u64,
    },
    /// After the heal, `host` ends at `end` while another broker ends at
    /// `other_end`.
    Behind {
        /// The broker.
        host: String,
        /// Its end.
        end: u64,
        /// The longest log's end.
        other_end: u64,
    },
    /// A send invoked while the only replica was cut off was acknowledged
    /// by a SYNC-replicated master.
    AckedWithoutReplica {
        /// The message.
        id: MessageId,
    },
}

/// Byte-for-byte agreement of every pair of logs over the range both hold.
pub fn check_agreement(logs: &[LogImage]) -> Vec<ReplicaViolation> {
    let mut out = Vec::new();
    for (i, a) in logs.iter().enumerate() {
        for b in &logs[i + 1..] {
            let from = a.start.max(b.start);
            let to = a.end().min(b.end());
            if from >= to {
                continue;
            }
            if let Some(k) = window(a, from, to)
                .iter()
                .zip(window(b, from, to))
                .position(|(x, y)| x != y)
            {
                out.push(ReplicaViolation::Diverged {
                    a: a.host.clone(),
                    b: b.host.clone(),
                    offset: from + k as u64,
                });
            }
        }
    }
    out
}

/// The bytes of `l` over `[from, to)`, a range it holds.
fn window(l: &LogImage, from: u64, to: u64) -> &[u8] {
    let lo = usize::try_from(from - l.start).unwrap_or(usize::MAX);
    let hi = usize::try_from(to - l.start).unwrap_or(usize::MAX);
    l.bytes.get(lo..hi).unwrap_or_default()
}

/// After the heal and a quiet spell every log ends where the longest does.
pub fn check_caught_up(logs: &[LogImage]) -> Vec<ReplicaViolation> {
    let longest = logs.iter().map(LogImage::end).max().unwrap_or(0);
    logs.iter()
        .filter(|l| l.end() < longest)
        .map(|l| ReplicaViolation::Behind {
            host: l.host.clone(),
            end: l.end(),
            other_end: longest,
        })
        .collect()
}

/// Sends invoked within one of `cuts` (`[start, end)` windows during which
/// the master's only replica was partitioned away) that were nevertheless
/// acknowledged.
pub fn acks_without_replica(entries: &[Entry], cuts: &[(u64, u64)]) -> Vec<ReplicaViolation> {
    let in_cut = |t: u64| cuts.iter().any(|&(s, e)| t >= s && t < e);
    let invoked: BTreeSet<&MessageId> = entries
        .iter()
        .filter(|e| in_cut(e.at_ms))
        .filter_map(|e| match &e.event {
            Event::SendInvoke { id, .. } => Some(id),
            _ => None,
        })
        .collect();
    entries
        .iter()
        .filter_map(|e| match &e.event {
            Event::SendOk { id, .. } if invoked.contains(id) => {
                Some(ReplicaViolation::AckedWithoutReplica { id: id.clone() })
            }
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(host: &str, start: u64, bytes: &[u8]) -> LogImage {
        LogImage {
            host: host.to_owned(),
            start,
            bytes: bytes.to_vec(),
        }
    }

    #[test]
    fn identical_prefixes_agree_and_a_short_log_is_behind() {
        let logs = [log("m", 0, b"abcdef"), log("r", 0, b"abcd")];
        assert!(check_agreement(&logs).is_empty());
        assert_eq!(
            check_caught_up(&logs),
            vec![ReplicaViolation::Behind {
                host: "r".into(),
                end: 4,
                other_end: 6
            }]
        );
    }

    #[test]
    fn a_differing_byte_is_found_at_its_offset_even_with_other_starts() {
        let logs = [log("m", 0, b"abcdefgh"), log("r", 4, b"efXh")];
        assert_eq!(
            check_agreement(&logs),
            vec![ReplicaViolation::Diverged {
                a: "m".into(),
                b: "r".into(),
                offset: 6
            }]
        );
        assert!(check_caught_up(&logs).is_empty());
    }

    #[test]
    fn logs_without_common_bytes_are_not_compared() {
        let logs = [log("m", 0, b"ab"), log("r", 10, b"zz")];
        assert!(check_agreement(&logs).is_empty());
    }

    #[test]
    fn an_ack_for_a_send_made_during_the_cut_is_flagged() {
        let at = |at_ms, event| Entry { at_ms, event };
        let invoke = |id: &str| Event::SendInvoke {
            producer: 0,
            id: id.into(),
            queue: 0,
        };
        let ok = |id: &str| Event::SendOk {
            id: id.into(),
            queue: 0,
            queue_offset: 0,
        };
        let entries = vec![
            at(5, invoke("before")),
            at(12, ok("before")),
            at(15, invoke("during")),
            at(40, ok("during")),
            at(50, invoke("after")),
            at(51, ok("after")),
        ];
        assert_eq!(
            acks_without_replica(&entries, &[(10, 50)]),
            vec![ReplicaViolation::AckedWithoutReplica {
                id: "during".into()
            }]
        );
        assert!(acks_without_replica(&entries, &[]).is_empty());
    }
}
