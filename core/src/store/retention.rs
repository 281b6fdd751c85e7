//! Retention: deletes whole CommitLog segments, oldest first, once their
//! records are older than `file_reserved_ms`, or early while the disk is
//! fuller than `disk_used_ratio_max` as `disk_pressure_retention` allows
//! (by default only segments every consumer group has consumed); then
//! advances every ConsumeQueue's min and drops index files wholly below the
//! new log start. The active segment and anything not yet dispatched are
//! never deleted. Also keeps the disk-full flag that refuses puts, rechecked
//! by each pass and, rate-limited, by refused puts.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::clock::Clock;
use crate::commit_log::scan::{step, Step};
use crate::disk::Disk;
use crate::error::{Error, Result};
use crate::offset::{CommitLogOffset, QueueOffset};

use super::{DiskPressureRetention, MessageStore};

/// Told a queue's topic and id, answers the lowest offset any consumer
/// group has committed on it (`None`: no group has offsets there). Every
/// entry below it has been consumed by every group. Must be cheap.
pub type ConsumedFloor = Arc<dyn Fn(&str, i32) -> Option<QueueOffset> + Send + Sync>;

/// While puts are refused as full, a refused put re-queries disk space at
/// most this often, so service resumes soon after space returns instead of
/// at the next retention pass.
pub const SPACE_RECHECK_INTERVAL_MS: u64 = 200;

/// What one retention pass did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RetentionReport {
    /// CommitLog segments deleted.
    pub segments_deleted: usize,
    /// Index files deleted.
    pub index_files_deleted: usize,
    /// The CommitLog's min offset after the pass.
    pub log_min: CommitLogOffset,
    /// Used disk ratio seen at the start of the pass.
    pub used_ratio: f64,
    /// True when puts are being refused for lack of space.
    pub disk_full: bool,
}

impl<D: Disk, C: Clock> MessageStore<D, C> {
    /// Runs one retention pass (the broker calls it every ~10 s).
    pub fn clean_expired(&self) -> Result<RetentionReport> {
        let space = self
            .disk
            .space()
            .map_err(|e| Error::io("statvfs", &self.config.root, e))?;
        let used_ratio = space.used_ratio();
        let over_ratio = used_ratio > self.config.disk_used_ratio_max;
        let now_ms = i64::try_from(self.clock.wall_ms()).unwrap_or(i64::MAX);
        let cutoff_ms =
            now_ms.saturating_sub(i64::try_from(self.config.file_reserved_ms).unwrap_or(i64::MAX));
        let chain = self.log.chain();
        let seg = chain.segment_bytes();
        let visible = self.visible_offset().0;
        let starts = chain.starts();
        let mut doomed = Vec::new();
        // Never the last (active) segment, never one holding undispatched data.
        for pair in starts.windows(2) {
            let (start, next) = (pair[0], pair[1]);
            if doomed.len() >= self.config.retention_segments_per_pass_max || start + seg > visible
            {
                break;
            }
            // A segment's newest record is no newer than the next
            // segment's first record: store times never go backwards.
            let newest_ms = match step(chain, next) {
                Step::Record(rec, _) => rec.store_timestamp_ms,
                _ => i64::MAX,
            };
            if newest_ms < cutoff_ms || (over_ratio && self.may_delete_early(next)?) {
                doomed.push(start);
            } else {
                break;
            }
        }
        let mut report = RetentionReport {
            used_ratio,
            ..RetentionReport::default()
        };
        if let Some(last) = doomed.last() {
            let new_min = CommitLogOffset(last + seg);
            // Consumers stop being handed entries before the bytes go.
            for cq in self.queues.all() {
                cq.advance_min(cq.first_at_or_after(new_min)?)?;
            }
            for start in &doomed {
                chain.remove_segment(*start)?;
            }
            report.segments_deleted = doomed.len();
            report.index_files_deleted = self.index.remove_below(new_min)?;
            tracing::info!(
                deleted = doomed.len(),
                log_min = new_min.0,
                "retention removed CommitLog segments"
            );
        }
        report.disk_full = self.note_used_ratio(used_ratio);
        report.log_min = self.log.min_offset();
        Ok(report)
    }

    /// Registers the broker's committed-offset floor per queue.
    pub fn set_consumed_floor(&self, floor: ConsumedFloor) {
        *self
            .consumed_floor
            .write()
            .expect("invariant: lock not poisoned") = Some(floor);
    }

    /// Whether disk pressure may delete everything below `end` before its
    /// age is up: always in `Force` mode; in `Consumed` mode only when every
    /// queue's entries below `end` lie below that queue's consumed floor.
    fn may_delete_early(&self, end: u64) -> Result<bool> {
        if self.config.disk_pressure_retention == DiskPressureRetention::Force {
            return Ok(true);
        }
        let guard = self
            .consumed_floor
            .read()
            .expect("invariant: lock not poisoned");
        let Some(floor) = guard.as_ref() else {
            return Ok(false);
        };
        for cq in self.queues.all() {
            let kept_from = cq.first_at_or_after(CommitLogOffset(end))?;
            if kept_from <= cq.min_offset() {
                continue; // none of this queue's entries lie below `end`
            }
            match floor(cq.topic(), cq.queue_id()) {
                Some(consumed) if consumed >= kept_from => {}
                _ => return Ok(false),
            }
        }
        Ok(true)
    }

    /// Records the used ratio just seen; returns whether puts are refused.
    fn note_used_ratio(&self, used_ratio: f64) -> bool {
        let full = used_ratio > self.config.disk_used_ratio_reject;
        if full != self.disk_full.swap(full, Ordering::AcqRel) {
            tracing::warn!(used_ratio, full, "disk-full state changed");
        }
        full
    }

    /// For a put refused as full: re-queries disk space (at most once per
    /// [`SPACE_RECHECK_INTERVAL_MS`] of the store's clock) and returns true
    /// when space has returned, clearing the flag.
    pub(super) fn space_returned(&self) -> bool {
        // Stamps are monotonic ms + 1, so 0 means "never checked".
        let stamp = u64::try_from(self.clock.monotonic().as_millis())
            .unwrap_or(u64::MAX)
            .saturating_add(1);
        let last = self.space_checked_ms.load(Ordering::Acquire);
        let due = last == 0 || stamp.saturating_sub(last) >= SPACE_RECHECK_INTERVAL_MS;
        if !due
            || self
                .space_checked_ms
                .compare_exchange(last, stamp, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
        {
            return false;
        }
        match self.disk.space() {
            Ok(space) => !self.note_used_ratio(space.used_ratio()),
            Err(e) => {
                tracing::warn!(error = %e, "space query for a refused put failed");
                false
            }
        }
    }
}
