//! Recovery's checks of ConsumeQueues against the CommitLog: is a queue's
//! tail intact, and trimming entries that point past the log's end.

use crate::clock::Clock;
use crate::commit_log::scan::{step, Step};
use crate::commit_log::SECTOR_BYTES;
use crate::consume_queue::{ConsumeQueue, CQ_ENTRY_BYTES};
use crate::disk::Disk;
use crate::error::Result;
use crate::offset::QueueOffset;

use super::MessageStore;

impl<D: Disk, C: Clock> MessageStore<D, C> {
    /// True when the queue's segments cover `[min, max)` and its last entry
    /// points at a record of this queue with the matching offset, below the
    /// safe point `start`.
    pub(super) fn queue_intact(&self, cq: &ConsumeQueue<D>, start: u64) -> bool {
        let (min, max) = (cq.min_offset().0, cq.max_offset().0);
        if max == min {
            return true;
        }
        if !cq.segments_cover() {
            return false;
        }
        // Only the entries sharing a sector with the last one are checked
        // against the log: they are the only ones later appends rewrote
        // (and a device without power-safe overwrite may have garbled), and
        // a clean restart must not read much of the log below the
        // checkpoint.
        let sector_first =
            (max - 1) * CQ_ENTRY_BYTES / SECTOR_BYTES * SECTOR_BYTES / CQ_ENTRY_BYTES;
        (sector_first.max(min)..max).all(|q| self.entry_matches_log(cq, q, start))
    }

    /// True when entry `q` points below `start` at a record of this queue
    /// with that queue offset (or at data retention already removed).
    pub(super) fn entry_matches_log(&self, cq: &ConsumeQueue<D>, q: u64, start: u64) -> bool {
        let Ok(Some(e)) = cq.entry(QueueOffset(q)) else {
            return false;
        };
        if e.phys_offset < self.log.min_offset() {
            return true;
        }
        if e.phys_offset.0 + u64::from(e.size) > start {
            return false;
        }
        let Step::Record(rec, _) = step(self.log.chain(), e.phys_offset.0) else {
            return false;
        };
        let same_offset = u64::try_from(rec.queue_offset).ok() == Some(q);
        rec.topic == cq.topic()
            && rec.queue_id == cq.queue_id()
            && same_offset
            && rec.total_size == e.size
    }

    /// Drops ConsumeQueue entries that point at or past `end` (only after a
    /// repair truncated the log below the checkpoint).
    pub(super) async fn trim_beyond(&self, cq: &ConsumeQueue<D>, end: u64) -> Result<()> {
        let (min, mut len) = (cq.min_offset().0, cq.max_offset().0);
        while len > min {
            match cq.entry(QueueOffset(len - 1))? {
                Some(e) if e.phys_offset.0 + u64::from(e.size) <= end => break,
                _ => len -= 1,
            }
        }
        if len < cq.max_offset().0 {
            cq.truncate(QueueOffset(len)).await?;
        }
        Ok(())
    }
}
