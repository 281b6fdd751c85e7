//! The transaction tracker: which halves are still open, derived only from
//! what the half queue and the op queue hold, so any broker of the group
//! (master or replica) derives the same state. Invariant: every origin in
//! `[scan_start, half_next)` that is not in `open` is resolved.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Resolutions remembered with their outcome (for precise answers to late
/// or contradicting `END_TRANSACTION`s). Older ones are still known to be
/// resolved — by the invariant above — just not how.
pub const RESOLVED_REMEMBERED_MAX: usize = 16_384;

/// How a transaction ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// Committed: the real message was stored.
    Commit,
    /// Rolled back.
    Rollback,
    /// Checked `transaction_check_max` times without an answer; moved to
    /// `TRANS_CHECK_MAX_TIME_TOPIC`.
    Parked,
    /// An op record without an outcome (written by another implementation).
    Unspecified,
}

impl Outcome {
    /// The value stored in op records.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Commit => "commit",
            Self::Rollback => "rollback",
            Self::Parked => "parked",
            Self::Unspecified => "unspecified",
        }
    }

    /// Parses an op record's outcome value.
    pub fn parse(s: &str) -> Self {
        match s {
            "commit" => Self::Commit,
            "rollback" => Self::Rollback,
            "parked" => Self::Parked,
            _ => Self::Unspecified,
        }
    }
}

/// One copy of a half as read from the half queue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HalfCopy {
    /// Half-queue offset of the transaction's first copy (its identity).
    pub origin: u64,
    /// Half-queue offset of this copy.
    pub queue_offset: u64,
    /// CommitLog offset of this copy.
    pub commit_log_offset: u64,
    /// Topic the message commits to.
    pub real_topic: String,
    /// Producer group asked on check-back.
    pub group: String,
    /// Checks already sent (`TRANSACTION_CHECK_TIMES`).
    pub check_times: u32,
    /// Store time of this copy.
    pub store_ms: u64,
    /// `CHECK_IMMUNITY_TIME_IN_SECONDS`, in ms (0 when absent).
    pub immunity_ms: u64,
}

/// An open transaction: its newest copy and when it is due for a check.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OpenHalf {
    /// Half-queue offset of the newest copy.
    pub queue_offset: u64,
    /// CommitLog offset of the newest copy.
    pub commit_log_offset: u64,
    /// Topic the message commits to.
    pub real_topic: String,
    /// Producer group asked on check-back.
    pub group: String,
    /// Checks already sent.
    pub check_times: u32,
    /// Broker wall-clock time from which the half is due for a check.
    pub due_ms: u64,
}

/// What the tracker knows about one transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TxState {
    /// Waiting for its outcome.
    Open(OpenHalf),
    /// Ended, and how.
    Resolved(Outcome),
    /// Ended long ago; the outcome is no longer remembered.
    ResolvedForgotten,
    /// Not seen by the tracker (not visible yet, or before its scan start).
    Unknown,
}

/// The tracker's whole state; also its snapshot (`config/transactions.json`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Tracker {
    /// First half-queue offset this tracker scanned (or inherited).
    scan_start: u64,
    /// Next half-queue offset to read.
    half_next: u64,
    /// CommitLog offset of the half-queue entry at `half_next − 1`, to
    /// detect a queue that was rewritten underneath (a truncated tail).
    half_last_clog: Option<u64>,
    /// Next op-queue offset to read.
    op_next: u64,
    /// CommitLog offset of the op-queue entry at `op_next − 1`.
    op_last_clog: Option<u64>,
    /// Open transactions by origin.
    open: BTreeMap<u64, OpenHalf>,
    /// Recent resolutions by origin (at most [`RESOLVED_REMEMBERED_MAX`]
    /// below `half_next`).
    resolved: BTreeMap<u64, Outcome>,
    /// Bumped on every change; not persisted.
    #[serde(skip)]
    version: u64,
}

impl Tracker {
    /// A tracker that starts reading both queues at their first entries.
    pub fn fresh(half_min: u64, op_min: u64) -> Self {
        Self {
            scan_start: half_min,
            half_next: half_min,
            op_next: op_min,
            version: 1,
            ..Self::default()
        }
    }

    /// Parses a snapshot; `None` when it does not parse (a fresh scan is
    /// always a safe replacement).
    pub fn from_snapshot(json: &[u8]) -> Option<Self> {
        let mut t: Self = serde_json::from_slice(json).ok()?;
        if t.half_next < t.scan_start {
            return None;
        }
        t.version = 0;
        Some(t)
    }

    /// The snapshot's JSON.
    pub fn to_snapshot(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("invariant: maps of integers and strings serialize")
    }

    /// Changes so far (for "persist when dirty").
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Where the half-queue scan continues, and the CommitLog offset the
    /// entry just before it must have.
    pub fn half_cursor(&self) -> (u64, Option<u64>) {
        (self.half_next, self.half_last_clog)
    }

    /// Where the op-queue scan continues, and the CommitLog offset the
    /// entry just before it must have.
    pub fn op_cursor(&self) -> (u64, Option<u64>) {
        (self.op_next, self.op_last_clog)
    }

    /// Moves the half scan forward over entries that are gone (retention)
    /// or unreadable.
    pub fn skip_halves_to(&mut self, next: u64, last_clog: Option<u64>) {
        if next > self.half_next {
            self.half_next = next;
            self.half_last_clog = last_clog;
            self.version += 1;
        }
    }

    /// Moves the op scan forward over entries that are gone or unreadable.
    pub fn skip_ops_to(&mut self, next: u64, last_clog: Option<u64>) {
        if next > self.op_next {
            self.op_next = next;
            self.op_last_clog = last_clog;
            self.version += 1;
        }
    }

    /// What is known about the transaction that started at `origin`.
    pub fn state(&self, origin: u64) -> TxState {
        if let Some(open) = self.open.get(&origin) {
            return TxState::Open(open.clone());
        }
        if let Some(outcome) = self.resolved.get(&origin) {
            return TxState::Resolved(*outcome);
        }
        if (self.scan_start..self.half_next).contains(&origin) {
            return TxState::ResolvedForgotten;
        }
        TxState::Unknown
    }

    /// Applies the next entry of the half queue, in queue order.
    pub fn scan_half(&mut self, copy: &HalfCopy, timeout_ms: u64) {
        if copy.queue_offset < self.half_next {
            return;
        }
        let resolved = matches!(
            self.state(copy.origin),
            TxState::Resolved(_) | TxState::ResolvedForgotten
        );
        self.half_next = copy.queue_offset + 1;
        self.half_last_clog = Some(copy.commit_log_offset);
        self.version += 1;
        if !resolved {
            self.insert_open(copy, timeout_ms);
        }
    }

    /// Records a copy the broker itself just wrote (a re-put before a
    /// check) of a transaction still open, without moving the scan: the
    /// scan applies it again later, which changes nothing.
    pub fn note_copy(&mut self, copy: &HalfCopy, timeout_ms: u64) {
        if self.open.contains_key(&copy.origin) {
            self.insert_open(copy, timeout_ms);
        }
    }

    fn insert_open(&mut self, copy: &HalfCopy, timeout_ms: u64) {
        if let Some(open) = self.open.get(&copy.origin) {
            if open.queue_offset >= copy.queue_offset {
                return;
            }
        }
        let wait_ms = if copy.check_times == 0 {
            timeout_ms.max(copy.immunity_ms)
        } else {
            timeout_ms
        };
        self.open.insert(
            copy.origin,
            OpenHalf {
                queue_offset: copy.queue_offset,
                commit_log_offset: copy.commit_log_offset,
                real_topic: copy.real_topic.clone(),
                group: copy.group.clone(),
                check_times: copy.check_times,
                due_ms: copy.store_ms.saturating_add(wait_ms),
            },
        );
        self.version += 1;
    }

    /// Applies the next entry of the op queue, in queue order.
    pub fn scan_op(
        &mut self,
        queue_offset: u64,
        commit_log_offset: u64,
        origin: u64,
        outcome: Outcome,
    ) {
        if queue_offset < self.op_next {
            return;
        }
        self.op_next = queue_offset + 1;
        self.op_last_clog = Some(commit_log_offset);
        self.note_resolved(origin, outcome);
    }

    /// Records a resolution (from the op queue, or one this broker just
    /// stored). The first outcome wins.
    pub fn note_resolved(&mut self, origin: u64, outcome: Outcome) {
        self.open.remove(&origin);
        self.resolved.entry(origin).or_insert(outcome);
        self.version += 1;
        // Forget the oldest outcomes, but only those the invariant covers.
        while self.resolved.len() > RESOLVED_REMEMBERED_MAX {
            match self.resolved.first_key_value() {
                Some((&oldest, _)) if oldest >= self.scan_start && oldest < self.half_next => {
                    self.resolved.remove(&oldest);
                }
                _ => break,
            }
        }
    }

    /// Drops an open transaction whose half is gone (retention).
    pub fn forget(&mut self, origin: u64) {
        if self.open.remove(&origin).is_some() {
            self.resolved.remove(&origin);
            self.version += 1;
        }
    }

    /// Postpones the next check of `origin` to `due_ms`.
    pub fn defer(&mut self, origin: u64, due_ms: u64) {
        if let Some(open) = self.open.get_mut(&origin) {
            open.due_ms = due_ms;
            self.version += 1;
        }
    }

    /// Up to `max` open transactions due at `now_ms`, oldest first.
    pub fn due(&self, now_ms: u64, max: usize) -> Vec<(u64, OpenHalf)> {
        self.open
            .iter()
            .filter(|(_, o)| o.due_ms <= now_ms)
            .take(max)
            .map(|(k, o)| (*k, o.clone()))
            .collect()
    }

    /// Open transactions per real topic.
    pub fn pending_by_topic(&self) -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        for o in self.open.values() {
            *out.entry(o.real_topic.clone()).or_insert(0) += 1;
        }
        out
    }

    /// How many transactions are open.
    pub fn open_count(&self) -> usize {
        self.open.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn copy(origin: u64, at: u64, checks: u32) -> HalfCopy {
        HalfCopy {
            origin,
            queue_offset: at,
            commit_log_offset: 1_000 + at,
            real_topic: "Orders".to_owned(),
            group: "pg".to_owned(),
            check_times: checks,
            store_ms: 10_000 + at,
            immunity_ms: 0,
        }
    }

    #[test]
    fn a_reput_copy_replaces_its_origin_and_older_copies_change_nothing() {
        let mut t = Tracker::fresh(0, 0);
        t.scan_half(&copy(0, 0, 0), 6_000);
        t.scan_half(&copy(1, 1, 0), 6_000);
        t.scan_half(&copy(0, 2, 1), 6_000);
        let TxState::Open(o) = t.state(0) else {
            panic!("origin 0 must be open: {:?}", t.state(0));
        };
        assert_eq!((o.queue_offset, o.check_times), (2, 1));
        assert_eq!(o.due_ms, 10_002 + 6_000);
        // A note of the older copy (say a late re-scan) does not go back.
        t.note_copy(&copy(0, 0, 0), 6_000);
        assert!(matches!(t.state(0), TxState::Open(o) if o.queue_offset == 2));
        assert_eq!(t.open_count(), 2);
        assert_eq!(t.pending_by_topic().get("Orders"), Some(&2));
    }

    #[test]
    fn a_copy_scanned_after_its_resolution_does_not_reopen_it() {
        let mut t = Tracker::fresh(0, 0);
        t.scan_half(&copy(0, 0, 0), 6_000);
        // The op (written after the re-put) is read before the re-put copy.
        t.scan_op(0, 5_000, 0, Outcome::Commit);
        t.scan_half(&copy(0, 1, 1), 6_000);
        assert_eq!(t.state(0), TxState::Resolved(Outcome::Commit));
        assert_eq!(t.open_count(), 0);
    }

    #[test]
    fn an_op_read_before_its_half_resolves_the_half_when_it_arrives() {
        let mut t = Tracker::fresh(0, 0);
        t.scan_op(0, 5_000, 3, Outcome::Rollback);
        for at in 0..4 {
            t.scan_half(&copy(at, at, 0), 6_000);
        }
        assert_eq!(t.state(3), TxState::Resolved(Outcome::Rollback));
        assert_eq!(t.open_count(), 3);
    }

    #[test]
    fn the_first_outcome_wins_and_duplicates_change_nothing() {
        let mut t = Tracker::fresh(0, 0);
        t.scan_half(&copy(0, 0, 0), 6_000);
        t.note_resolved(0, Outcome::Commit);
        t.scan_op(0, 5_000, 0, Outcome::Commit);
        t.scan_op(1, 5_100, 0, Outcome::Rollback);
        assert_eq!(t.state(0), TxState::Resolved(Outcome::Commit));
        // Re-applying an op the scan already passed is ignored.
        t.scan_op(0, 5_000, 0, Outcome::Rollback);
        assert_eq!(t.op_cursor(), (2, Some(5_100)));
    }

    #[test]
    fn forgotten_outcomes_are_still_known_resolved() {
        let mut t = Tracker::fresh(0, 0);
        let n = u64::try_from(RESOLVED_REMEMBERED_MAX).expect("fits") + 10;
        for at in 0..n {
            t.scan_half(&copy(at, at, 0), 6_000);
            t.note_resolved(at, Outcome::Rollback);
        }
        assert_eq!(t.state(0), TxState::ResolvedForgotten);
        assert_eq!(t.state(n - 1), TxState::Resolved(Outcome::Rollback));
        assert_eq!(t.state(n), TxState::Unknown);
        // A late re-put copy of a forgotten transaction does not reopen it.
        t.scan_half(&copy(0, n, 1), 6_000);
        assert_eq!(t.state(0), TxState::ResolvedForgotten);
        assert_eq!(t.open_count(), 0);
    }

    #[test]
    fn immunity_delays_only_the_first_check() {
        let mut t = Tracker::fresh(0, 0);
        let mut c = copy(0, 0, 0);
        c.immunity_ms = 60_000;
        t.scan_half(&c, 6_000);
        assert!(t.due(10_000 + 59_999, 10).is_empty());
        assert_eq!(t.due(10_000 + 60_000, 10).len(), 1);
        let mut again = copy(0, 1, 1);
        again.immunity_ms = 60_000;
        t.scan_half(&again, 6_000);
        assert_eq!(t.due(10_001 + 6_000, 10).len(), 1);
    }

    #[test]
    fn a_snapshot_restores_the_same_state_and_rescanning_it_changes_nothing() {
        let mut t = Tracker::fresh(0, 0);
        for at in 0..5 {
            t.scan_half(&copy(at, at, 0), 6_000);
        }
        t.scan_op(0, 5_000, 1, Outcome::Commit);
        t.scan_half(&copy(2, 5, 1), 6_000);
        let back = Tracker::from_snapshot(&t.to_snapshot()).expect("parses");
        assert_eq!(back.state(1), TxState::Resolved(Outcome::Commit));
        assert_eq!(back.half_cursor(), t.half_cursor());
        assert_eq!(back.op_cursor(), t.op_cursor());
        // A stale snapshot (taken earlier) replays the same entries to the
        // same state.
        let mut stale = Tracker::fresh(0, 0);
        for at in 0..3 {
            stale.scan_half(&copy(at, at, 0), 6_000);
        }
        let mut stale = Tracker::from_snapshot(&stale.to_snapshot()).expect("parses");
        for at in 3..5 {
            stale.scan_half(&copy(at, at, 0), 6_000);
        }
        stale.scan_op(0, 5_000, 1, Outcome::Commit);
        stale.scan_half(&copy(2, 5, 1), 6_000);
        for origin in 0..5 {
            assert_eq!(stale.state(origin), t.state(origin), "origin {origin}");
        }
    }

    #[test]
    fn a_damaged_snapshot_is_refused() {
        assert!(Tracker::from_snapshot(b"{not json").is_none());
        assert!(Tracker::from_snapshot(br#"{"scanStart":5,"halfNext":2}"#).is_none());
    }
}
