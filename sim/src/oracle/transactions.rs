//! The transaction check: a committed transaction is stored in its real
//! topic exactly once, whatever happened to its ENDs — sent twice, sent
//! late after a restart or a failover, raced by a check-back, or lost with
//! the broker — and a rolled-back one never (`RolledBackVisible`, judged
//! with the reads). A half is sent once (no retries), so even a half whose
//! send was indeterminate opens at most one transaction, and a second copy
//! of its message can only be a second commit (apache/rocketmq #5574).

use super::{Kind, Reads, Send, Violation};
use crate::history::MessageId;
use std::collections::BTreeMap;

/// Every committed transaction read at more than one position.
pub(super) fn committed_twice(sends: &BTreeMap<MessageId, Send>, reads: &Reads) -> Vec<Violation> {
    reads
        .iter()
        .filter(|(id, at)| {
            at.len() > 1 && sends.get(*id).is_some_and(|s| s.kind == Kind::Committed)
        })
        .map(|(id, at)| Violation::CommittedTwice {
            id: id.clone(),
            at: at.iter().copied().collect(),
        })
        .collect()
}
