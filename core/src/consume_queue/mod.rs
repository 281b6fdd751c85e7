//! ConsumeQueue: one per topic and queue id, a dense array of 20-byte
//! entries `i64 commitLogOffset | i32 size | i64 tagsCode` indexed by queue
//! offset, stored in equal-sized segments. Built by dispatch from the
//! CommitLog and always rebuildable from it. Invariant: entries in
//! `[min, max)` point at valid records, with strictly increasing offsets.

mod table;

pub use table::ConsumeQueueTable;

use std::sync::atomic::{AtomicU64, Ordering};

use crate::disk::{Disk, Prepare};
use crate::error::{Error, Result};
use crate::offset::{CommitLogOffset, QueueOffset};
use crate::segment_chain::SegmentChain;

/// Size of one ConsumeQueue entry.
pub const CQ_ENTRY_BYTES: u64 = 20;

/// Entries [`ConsumeQueue::append_run`] stores at a time: 500 bytes, under
/// the size a segment writes with `pwrite` rather than through the mapping
/// (a store of a few hundred bytes into cached pages costs less than the
/// call).
const RUN_CHUNK_ENTRIES: usize = 25;

/// Entries per ConsumeQueue segment by default (RocketMQ: 300,000).
pub const CQ_ENTRIES_PER_SEGMENT_DEFAULT: u64 = 300_000;

/// One ConsumeQueue entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CqEntry {
    /// Where the record starts in the CommitLog.
    pub phys_offset: CommitLogOffset,
    /// Record size in bytes.
    pub size: u32,
    /// Hash of the TAGS property (Java `String.hashCode`), or 0.
    pub tags_code: i64,
}

impl CqEntry {
    fn encode(self) -> [u8; 20] {
        let mut out = [0u8; 20];
        out[..8].copy_from_slice(&self.phys_offset.0.to_be_bytes());
        out[8..12].copy_from_slice(&self.size.to_be_bytes());
        out[12..].copy_from_slice(&self.tags_code.to_be_bytes());
        out
    }

    /// `None` for an all-zero or nonsensical entry.
    fn decode(b: &[u8]) -> Option<Self> {
        let phys = i64::from_be_bytes(b.get(..8)?.try_into().ok()?);
        let size = i32::from_be_bytes(b.get(8..12)?.try_into().ok()?);
        let tags_code = i64::from_be_bytes(b.get(12..20)?.try_into().ok()?);
        if phys < 0 || size <= 0 {
            return None;
        }
        Some(Self {
            phys_offset: CommitLogOffset(phys.unsigned_abs()),
            size: size.unsigned_abs(),
            tags_code,
        })
    }
}

/// The entries of one topic/queue.
pub struct ConsumeQueue<D: Disk> {
    topic: String,
    queue_id: i32,
    chain: SegmentChain<D>,
    /// Logical min: entries below were removed by retention.
    min: AtomicU64,
    /// Next entry index to write.
    max: AtomicU64,
    /// Entries below this index are durable.
    synced: AtomicU64,
}

impl<D: Disk> ConsumeQueue<D> {
    pub(crate) fn open(
        disk: D,
        dir: &str,
        topic: &str,
        queue_id: i32,
        entries_per_segment: u64,
    ) -> Result<Self> {
        // Entries are stored through the mapping, a few bytes at a time, in
        // either flush mode: the next segment comes warmed, as it always has
        // (zero-filled by direct I/O it would be uncached, and each page's
        // first store would wait for a read from the disk).
        let chain = SegmentChain::open(
            disk,
            dir,
            entries_per_segment * CQ_ENTRY_BYTES,
            Prepare::WarmHead,
        )?;
        // Retention removes whole segments from the front: the first one
        // left bounds the logical min from below.
        let min = chain.first_start().unwrap_or(0) / CQ_ENTRY_BYTES;
        Ok(Self {
            topic: topic.to_owned(),
            queue_id,
            chain,
            min: AtomicU64::new(min),
            max: AtomicU64::new(min),
            synced: AtomicU64::new(min),
        })
    }

    /// Topic of this queue.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// Queue id of this queue.
    pub fn queue_id(&self) -> i32 {
        self.queue_id
    }

    /// First entry still present.
    pub fn min_offset(&self) -> QueueOffset {
        QueueOffset(self.min.load(Ordering::Acquire))
    }

    /// Next entry index (one past the last entry).
    pub fn max_offset(&self) -> QueueOffset {
        QueueOffset(self.max.load(Ordering::Acquire))
    }

    /// Appends the entry for queue offset `q`. `q` must equal the current
    /// max, except that an empty queue may start at any offset (a rebuild
    /// after retention removed the queue's oldest records); any other `q`
    /// (a gap or a rewrite) is refused with [`Error::Corrupt`]. The store
    /// calls this from dispatch; it is public for benchmarks and tools.
    pub fn append(&self, q: QueueOffset, entry: CqEntry) -> Result<()> {
        self.check_next(q)?;
        self.chain.write(q.0 * CQ_ENTRY_BYTES, &entry.encode())?;
        self.max.store(q.0 + 1, Ordering::Release);
        Ok(())
    }

    /// Refuses `q` unless it is the current max, or the queue is empty
    /// (then it starts at `q`).
    fn check_next(&self, q: QueueOffset) -> Result<()> {
        let max = self.max.load(Ordering::Acquire);
        let min = self.min.load(Ordering::Acquire);
        if q.0 != max {
            if min == max && q.0 > max {
                self.min.store(q.0, Ordering::Release);
                self.synced.store(q.0, Ordering::Release);
            } else {
                return Err(Error::Corrupt {
                    path: self.describe(),
                    offset: q.0,
                    reason: "queue offset does not follow the last entry",
                });
            }
        }
        Ok(())
    }

    /// Appends the entries of queue offsets `q, q + 1, …` in order, as
    /// [`append`](Self::append) would one by one (the same check on `q`),
    /// with one store per [`RUN_CHUNK_ENTRIES`] entries and one segment
    /// lookup per chunk instead of per entry. On an error (a segment that
    /// cannot be created) the entries before the failing chunk are in and
    /// the max says so.
    pub(crate) fn append_run(&self, q: QueueOffset, entries: &[CqEntry]) -> Result<()> {
        if entries.is_empty() {
            return Ok(());
        }
        self.check_next(q)?;
        let per_seg = self.chain.segment_bytes() / CQ_ENTRY_BYTES;
        let mut next = q.0;
        let mut rest = entries;
        let mut buf = [0u8; RUN_CHUNK_ENTRIES * 20];
        while !rest.is_empty() {
            let seg_left = usize::try_from(per_seg - next % per_seg).unwrap_or(usize::MAX);
            let n = rest.len().min(RUN_CHUNK_ENTRIES).min(seg_left);
            let (chunk, after) = rest.split_at(n);
            for (slot, entry) in buf.chunks_exact_mut(20).zip(chunk) {
                slot.copy_from_slice(&entry.encode());
            }
            self.chain.write(next * CQ_ENTRY_BYTES, &buf[..n * 20])?;
            next += n as u64;
            self.max.store(next, Ordering::Release);
            rest = after;
        }
        Ok(())
    }

    /// The entry at `q`, if it is inside `[min, max)`.
    pub fn entry(&self, q: QueueOffset) -> Result<Option<CqEntry>> {
        Ok(self.entries(q, 1)?.into_iter().next())
    }

    /// Up to `count` consecutive entries starting at `from` (fewer at a
    /// segment boundary or the end). Reading stops at a damaged entry.
    pub fn entries(&self, from: QueueOffset, count: usize) -> Result<Vec<CqEntry>> {
        let max = self.max.load(Ordering::Acquire);
        if from.0 < self.min.load(Ordering::Acquire) || from.0 >= max || count == 0 {
            return Ok(Vec::new());
        }
        let per_seg = self.chain.segment_bytes() / CQ_ENTRY_BYTES;
        let seg_left = per_seg - from.0 % per_seg;
        let n = (max - from.0).min(seg_left).min(count as u64);
        let n_usize = usize::try_from(n).expect("invariant: n <= count");
        let raw = self.chain.read(from.0 * CQ_ENTRY_BYTES, n_usize * 20)?;
        let mut out = Vec::with_capacity(n_usize);
        for chunk in raw.chunks_exact(20) {
            match CqEntry::decode(chunk) {
                Some(e) => out.push(e),
                None => break,
            }
        }
        Ok(out)
    }

    /// True when a segment exists for every entry in `[min, max)`.
    pub(crate) fn segments_cover(&self) -> bool {
        let (min, max) = (
            self.min.load(Ordering::Acquire),
            self.max.load(Ordering::Acquire),
        );
        if max == min {
            return true;
        }
        let seg = self.chain.segment_bytes();
        let first = self.chain.segment_start(min * CQ_ENTRY_BYTES);
        let last = self.chain.segment_start((max - 1) * CQ_ENTRY_BYTES);
        let starts = self.chain.starts();
        let mut want = first;
        while want <= last {
            if starts.binary_search(&want).is_err() {
                return false;
            }
            want += seg;
        }
        true
    }

    /// Drops every entry at or after `len` (zeroing them on disk).
    pub(crate) async fn truncate(&self, len: QueueOffset) -> Result<()> {
        self.chain.truncate(len.0 * CQ_ENTRY_BYTES).await?;
        self.max.store(len.0, Ordering::Release);
        if self.min.load(Ordering::Acquire) > len.0 {
            self.min.store(len.0, Ordering::Release);
        }
        let synced = self.synced.load(Ordering::Acquire).min(len.0);
        self.synced.store(synced, Ordering::Release);
        Ok(())
    }

    /// Empties the queue without syncing the zeroed entries: for a start
    /// with no checkpoint, which rebuilds every queue from the log (so a
    /// crash before the next checkpoint rebuilds it again), and whose first
    /// checkpoint syncs every rebuilt entry; entries past its length are
    /// cut by the start after any crash.
    pub(crate) fn clear_unsynced(&self) -> Result<()> {
        self.chain.truncate_unsynced(0)?;
        self.max.store(0, Ordering::Release);
        self.min.store(0, Ordering::Release);
        self.synced.store(0, Ordering::Release);
        Ok(())
    }

    /// Makes every entry below `upto` durable.
    pub(crate) async fn sync(&self, upto: QueueOffset) -> Result<()> {
        let from = self.synced.load(Ordering::Acquire);
        if upto.0 <= from {
            return Ok(());
        }
        self.chain
            .sync(from * CQ_ENTRY_BYTES, upto.0 * CQ_ENTRY_BYTES)
            .await?;
        self.synced.fetch_max(upto.0, Ordering::AcqRel);
        Ok(())
    }

    /// Binary search: the first entry whose phys offset is at least
    /// `log_min`, i.e. the new logical min after CommitLog retention.
    pub(crate) fn first_at_or_after(&self, log_min: CommitLogOffset) -> Result<QueueOffset> {
        let (mut lo, mut hi) = (
            self.min.load(Ordering::Acquire),
            self.max.load(Ordering::Acquire),
        );
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.entry(QueueOffset(mid))? {
                Some(e) if e.phys_offset < log_min => lo = mid + 1,
                _ => hi = mid,
            }
        }
        Ok(QueueOffset(lo))
    }

    /// Advances the logical min to `new_min` and removes segments wholly
    /// below it.
    pub(crate) fn advance_min(&self, new_min: QueueOffset) -> Result<()> {
        let old = self.min.fetch_max(new_min.0, Ordering::AcqRel);
        if new_min.0 <= old {
            return Ok(());
        }
        let seg = self.chain.segment_bytes();
        for start in self.chain.starts() {
            if start + seg <= new_min.0 * CQ_ENTRY_BYTES {
                self.chain.remove_segment(start)?;
            }
        }
        Ok(())
    }

    /// Binary search by store time: the first entry whose record was stored
    /// at or after `ts_ms`, using `store_time` to read a record's time. Past
    /// the last entry it returns `max`.
    pub fn search_by_time(
        &self,
        ts_ms: i64,
        store_time: impl Fn(CqEntry) -> Option<i64>,
    ) -> Result<QueueOffset> {
        let (mut lo, mut hi) = (
            self.min.load(Ordering::Acquire),
            self.max.load(Ordering::Acquire),
        );
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let t = self.entry(QueueOffset(mid))?.and_then(&store_time);
            match t {
                Some(t) if t < ts_ms => lo = mid + 1,
                _ => hi = mid,
            }
        }
        Ok(QueueOffset(lo))
    }

    fn describe(&self) -> String {
        format!("consumequeue/{}/{}", self.topic, self.queue_id)
    }
}
