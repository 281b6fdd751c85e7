//! Reading a queue: ConsumeQueue entries from an offset, filtered by tag
//! hash (and optionally by the record itself), returned as the stored
//! records' own bytes — zero-copy slices of the CommitLog.

use bytes::Bytes;

use crate::clock::Clock;
use crate::disk::Disk;
use crate::error::Result;
use crate::offset::QueueOffset;

use super::MessageStore;

/// Outcome of a get, mirroring RocketMQ's `GetMessageStatus`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GetStatus {
    /// At least one message returned.
    Found,
    /// Entries were read but none matched the filter.
    NoMatchedMessage,
    /// The messages at the offset were removed by retention meanwhile.
    MessageWasRemoving,
    /// The entry at the offset could not be read.
    OffsetFoundNull,
    /// The offset is beyond the max by more than one.
    OffsetOverflowBadly,
    /// The offset equals the max: nothing new yet.
    OffsetOverflowOne,
    /// The offset is below the min (removed by retention).
    OffsetTooSmall,
    /// The queue exists but holds no messages.
    NoMessageInQueue,
    /// No such queue.
    NoMatchedLogicQueue,
}

/// The messages of one get plus where to continue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GetResult {
    /// What happened.
    pub status: GetStatus,
    /// Queue offset to ask for next.
    pub next_begin_offset: QueueOffset,
    /// The queue's min offset at the time of the get.
    pub min_offset: QueueOffset,
    /// The queue's max offset at the time of the get.
    pub max_offset: QueueOffset,
    /// Stored records, byte-for-byte, in queue order.
    pub messages: Vec<Bytes>,
}

/// Decides which messages a consumer receives.
pub trait MessageFilter {
    /// Cheap check on the ConsumeQueue's tag hash.
    fn matches_tags_code(&self, tags_code: i64) -> bool;
    /// Full check on the stored record (e.g. SQL92 over properties).
    fn matches_record(&self, record: &Bytes) -> bool {
        let _ = record;
        true
    }
}

/// A filter by tag hashes; an empty set matches everything (`*`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TagsFilter {
    /// Accepted tag hashes.
    pub codes: Vec<i64>,
}

impl MessageFilter for TagsFilter {
    fn matches_tags_code(&self, tags_code: i64) -> bool {
        self.codes.is_empty() || self.codes.contains(&tags_code)
    }
}

/// Most ConsumeQueue entries one get examines (RocketMQ reads at most
/// 16,000 bytes of ConsumeQueue, 800 entries, per filtered pull): a filter
/// that matches nothing in a long queue answers `NoMatchedMessage` with a
/// next offset further on instead of scanning the whole queue at once.
pub const SCAN_ENTRIES_MAX: usize = 800;

impl<D: Disk, C: Clock> MessageStore<D, C> {
    /// Up to `max_count` messages (and about `max_bytes`, at least one) of
    /// `topic`/`queue_id` from `offset` that pass `filter`, examining at most
    /// `max(max_count, SCAN_ENTRIES_MAX)` entries.
    pub fn get(
        &self,
        topic: &str,
        queue_id: i32,
        offset: QueueOffset,
        max_count: usize,
        max_bytes: usize,
        filter: &dyn MessageFilter,
    ) -> Result<GetResult> {
        let Some(cq) = self.queues.get(topic, queue_id) else {
            return Ok(result(GetStatus::NoMatchedLogicQueue, QueueOffset(0), 0, 0));
        };
        let (min, max) = (cq.min_offset(), cq.max_offset());
        let early = |status, next| Ok(result(status, next, min.0, max.0));
        if max.0 == 0 {
            return early(GetStatus::NoMessageInQueue, QueueOffset(0));
        }
        if offset < min {
            return early(GetStatus::OffsetTooSmall, min);
        }
        if offset == max {
            return early(GetStatus::OffsetOverflowOne, offset);
        }
        if offset > max {
            return early(GetStatus::OffsetOverflowBadly, max);
        }
        let log_min = self.log.min_offset();
        let mut messages = Vec::new();
        let mut bytes = 0usize;
        let mut next = offset;
        let mut removing = false;
        let mut read_any = false;
        let scan_max = max_count.max(SCAN_ENTRIES_MAX);
        let mut scanned = 0usize;
        'outer: while next < max && messages.len() < max_count && scanned < scan_max {
            let entries = cq.entries(next, max_count.saturating_mul(4).max(16))?;
            if entries.is_empty() {
                break;
            }
            for e in entries {
                if messages.len() >= max_count
                    || scanned >= scan_max
                    || (!messages.is_empty() && bytes + e.size as usize > max_bytes)
                {
                    break 'outer;
                }
                scanned += 1;
                read_any = true;
                next = next.plus(1);
                if e.phys_offset < log_min {
                    removing = true;
                    continue;
                }
                if !filter.matches_tags_code(e.tags_code) {
                    continue;
                }
                let raw = match self.log.read(e.phys_offset, e.size) {
                    Ok(raw) => raw,
                    // Retention removed it meanwhile.
                    Err(_) if e.phys_offset < self.log.min_offset() => {
                        removing = true;
                        continue;
                    }
                    // Stored but unreadable now (say EIO): never skip it.
                    // Hand out what came before it, else fail the get, so
                    // the consumer asks for this offset again.
                    Err(err) if messages.is_empty() => return Err(err),
                    Err(_) => {
                        next = QueueOffset(next.0 - 1);
                        break 'outer;
                    }
                };
                if !filter.matches_record(&raw) {
                    continue;
                }
                bytes += raw.len();
                messages.push(raw);
            }
        }
        let status = if !messages.is_empty() {
            GetStatus::Found
        } else if !read_any {
            GetStatus::OffsetFoundNull
        } else if removing {
            GetStatus::MessageWasRemoving
        } else {
            GetStatus::NoMatchedMessage
        };
        Ok(GetResult {
            status,
            next_begin_offset: next,
            min_offset: min,
            max_offset: max,
            messages,
        })
    }
}

fn result(status: GetStatus, next: QueueOffset, min: u64, max: u64) -> GetResult {
    GetResult {
        status,
        next_begin_offset: next,
        min_offset: QueueOffset(min),
        max_offset: QueueOffset(max),
        messages: Vec::new(),
    }
}
