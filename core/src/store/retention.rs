//! Retention: deletes whole CommitLog segments, oldest first, once their
//! records are older than `file_reserved_ms` or while the disk is fuller
//! than `disk_used_ratio_max`; then advances every ConsumeQueue's min and
//! drops index files wholly below the new log start. The active segment and
//! anything not yet dispatched are never deleted.

use std::sync::atomic::Ordering;

use crate::clock::Clock;
use crate::commit_log::scan::{step, Step};
use crate::disk::Disk;
use crate::error::{Error, Result};
use crate::offset::CommitLogOffset;

use super::MessageStore;

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
            if newest_ms < cutoff_ms || over_ratio {
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
        let full = used_ratio > self.config.disk_used_ratio_reject;
        if full != self.disk_full.swap(full, Ordering::AcqRel) {
            tracing::warn!(used_ratio, full, "disk-full state changed");
        }
        report.disk_full = full;
        report.log_min = self.log.min_offset();
        Ok(report)
    }
}
