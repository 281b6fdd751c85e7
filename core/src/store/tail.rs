//! Reading the recent end of the CommitLog in order: what a broker rebuilds
//! its in-memory windows from (the dedupe window of retried sends) after a
//! restart or a promotion, without an index of store times.

use crate::clock::Clock;
use crate::commit_log::scan::{step_sealed, Step};
use crate::disk::Disk;
use crate::message::RecordView;

use super::MessageStore;

impl<D: Disk, C: Clock> MessageStore<D, C> {
    /// Calls `visit`, in log order, with every intact record stored at or
    /// after `since_ms` (its store timestamp) below the written end. The
    /// walk starts at the newest segment whose first record is older than
    /// `since_ms` (the oldest retained one when none is), so it reads at
    /// most one segment of older records; it stops at the first unit that
    /// is not valid (recovery has already cut the log there). Each record's
    /// seal is checked, its body CRC not again (recovery did, and only
    /// headers and properties are used), and it is read in place: nothing
    /// is allocated per record (a rebuild reads minutes of log this way).
    pub fn visit_recent(&self, since_ms: i64, mut visit: impl FnMut(&RecordView<'_>)) {
        let chain = self.log.chain();
        let min = self.log.min_offset().0;
        let starts: Vec<u64> = chain.starts().into_iter().filter(|s| *s >= min).collect();
        let older = |s: &u64| match step_sealed(chain, *s) {
            Step::Record((), raw) => {
                RecordView::parse(&raw).is_ok_and(|rec| rec.store_timestamp_ms < since_ms)
            }
            _ => false,
        };
        let Some(pos) = starts
            .iter()
            .rev()
            .find(|s| older(s))
            .or(starts.first())
            .copied()
        else {
            return;
        };
        self.visit_from(pos, |rec| {
            if rec.store_timestamp_ms >= since_ms {
                visit(rec);
            }
        });
    }
}

impl<D: Disk, C: Clock> MessageStore<D, C> {
    /// Calls `visit`, in log order, with every record from `from` (where a
    /// record or a segment's padding starts, or the written end) to the
    /// written end, reading each in place as [`visit_recent`] does.
    /// Returns where the walk stopped: the written end when every unit
    /// from `from` on was valid, less when one was not (or `from` was not
    /// a unit's start). A `from` below the oldest retained record starts
    /// at that record.
    ///
    /// [`visit_recent`]: Self::visit_recent
    pub fn visit_from(&self, from: u64, mut visit: impl FnMut(&RecordView<'_>)) -> u64 {
        let chain = self.log.chain();
        let end = self.log.written().0;
        let mut pos = from.max(self.log.min_offset().0);
        while pos < end {
            match step_sealed(chain, pos) {
                Step::Record((), raw) => {
                    let Ok(rec) = RecordView::parse(&raw) else {
                        return pos;
                    };
                    visit(&rec);
                    pos += raw.len() as u64;
                }
                Step::Blank { next } | Step::Pad { next } => pos = next,
                Step::End(_) => return pos,
            }
        }
        pos
    }

    /// Reads the intact record that starts at `pos` (below the written
    /// end) in place; `None` when no valid record starts there.
    pub fn record_at<T>(&self, pos: u64, read: impl FnOnce(&RecordView<'_>) -> T) -> Option<T> {
        if pos >= self.log.written().0 || pos < self.log.min_offset().0 {
            return None;
        }
        match step_sealed(self.log.chain(), pos) {
            Step::Record((), raw) => RecordView::parse(&raw).ok().map(|rec| read(&rec)),
            _ => None,
        }
    }
}
