//! The CommitLog: one sequential log of stored-message records for all
//! topics, in fixed-size segments. A single writer under the put lock
//! assigns each record its physical offset, queue offset and store time.
//! Invariants: records never straddle segments (an 8-byte blank record ends
//! a segment that cannot fit the next record); bytes below `written()` are
//! complete records; nothing is reported durable after a failed sync.

mod append;
mod deferred;
pub(crate) mod fresh;
mod group_commit;
pub(crate) mod scan;
pub(crate) mod verify_ahead;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;

use crate::clock::Clock;
use crate::disk::{Disk, Prepare};
use crate::error::{Error, Result};
use crate::message::record_seal::sealed_len;
use crate::message::{
    body_crc, encode_blank, encode_pad_head, peek_head, sys_flag, MessageInput, RecordHead,
};
use crate::offset::{CommitLogOffset, QueueOffset};
use crate::segment_chain::SegmentChain;
use crate::stats::StoreStats;
use group_commit::GroupCommit;
use scan::{step_in, Step};

/// Bytes of CommitLog warmed ahead of the write position (see
/// `disk::alloc`): at 1 KiB per sync, 64 Ki records of runway.
const WARM_AHEAD_BYTES: u64 = 64 << 20;

/// Size of the end-of-segment blank record.
pub const BLANK_RECORD_BYTES: u64 = 8;

/// Group commits end on a boundary of this many bytes (a device sector),
/// so no later write ever touches a sector holding synced records: on a
/// device without power-safe overwrite, a sector being rewritten at power
/// loss may come back as garbage, and with it the synced bytes it shares.
pub const SECTOR_BYTES: u64 = 512;

/// Longest pad record: up to a sector of filler after a head that did not
/// fit before the boundary.
pub const PAD_BYTES_MAX: u64 = SECTOR_BYTES + BLANK_RECORD_BYTES;

/// Where one appended record landed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Appended {
    /// Physical offset of the record.
    pub phys_offset: CommitLogOffset,
    /// Size of the record in bytes.
    pub size: u32,
    /// Queue offset assigned (0 for prepared/rolled-back transaction halves).
    pub queue_offset: QueueOffset,
    /// Store timestamp written into the record.
    pub store_timestamp_ms: i64,
}

impl Appended {
    /// Offset just past the record.
    pub fn end(&self) -> CommitLogOffset {
        self.phys_offset.plus(u64::from(self.size))
    }
}

/// State owned by the put lock.
struct Writer {
    pos: u64,
    /// Next queue offset per topic and queue id (RocketMQ's topicQueueTable).
    queue_next: BTreeMap<String, BTreeMap<i32, u64>>,
    last_store_ms: i64,
    /// End of the range already handed to the disk to warm.
    warmed_to: u64,
    /// Records appended with [`CommitLog::append_deferred`], encoded for
    /// `[pos - pending.len(), pos)` and not yet handed to the disk:
    /// `written` stays below them until [`CommitLog::write_pending`].
    pending: Vec<u8>,
    /// Where a single record landed ([`CommitLog::append_one`]), reused so
    /// a send allocates nothing for it.
    one: Vec<Appended>,
}

/// The sequential log.
pub struct CommitLog<D: Disk, C: Clock> {
    chain: SegmentChain<D>,
    clock: C,
    writer: Mutex<Writer>,
    written: AtomicU64,
    durability: GroupCommit,
    stats: Arc<StoreStats>,
    /// A follower's log is a byte-for-byte copy of its master's: it never
    /// writes pads of its own.
    follower: AtomicBool,
    /// Whether the window ahead of the writer is warmed (`SYNC_FLUSH`; see
    /// [`CommitLog::warm_ahead`]).
    warms_ahead: bool,
    /// What dispatch needs of the records just appended (see `fresh`).
    fresh: fresh::FreshNotes,
    /// True while deferred records wait in the writer's `pending` (read
    /// without the put lock by [`CommitLog::write_deferred`]).
    deferring: AtomicBool,
    /// Set for good once a write of deferred records failed.
    deferred_lost: AtomicBool,
}

/// True for records that get a ConsumeQueue entry: everything except
/// prepared and rolled-back transaction halves.
pub fn is_dispatchable(sys_flag_bits: i32) -> bool {
    let tx = sys_flag_bits & sys_flag::TRANSACTION_MASK;
    tx == sys_flag::TRANSACTION_NOT || tx == sys_flag::TRANSACTION_COMMIT
}

impl<D: Disk, C: Clock> CommitLog<D, C> {
    /// Opens the log's segments under `dir` without deciding where the log
    /// ends; recovery calls [`CommitLog::resume`] once it knows.
    pub(crate) fn open(
        disk: D,
        clock: C,
        dir: &str,
        segment_bytes: u64,
        warms_ahead: bool,
    ) -> Result<Self> {
        Ok(Self {
            chain: SegmentChain::open(
                disk,
                dir,
                segment_bytes,
                // A synced log's next segments come zero-filled on disk.
                if warms_ahead {
                    Prepare::ZeroFilled
                } else {
                    Prepare::Cold
                },
            )?,
            clock,
            writer: Mutex::new(Writer {
                pos: 0,
                queue_next: BTreeMap::new(),
                last_store_ms: 0,
                warmed_to: 0,
                pending: Vec::new(),
                one: Vec::with_capacity(1),
            }),
            written: AtomicU64::new(0),
            durability: GroupCommit::new(0),
            stats: Arc::default(),
            follower: AtomicBool::new(false),
            warms_ahead,
            fresh: fresh::FreshNotes::default(),
            deferring: AtomicBool::new(false),
            deferred_lost: AtomicBool::new(false),
        })
    }

    /// Sets the write position after recovery: `end` is the recovered end,
    /// durable; `queue_next` the next queue offset of every queue.
    pub(crate) fn resume(
        &mut self,
        end: u64,
        queue_next: BTreeMap<String, BTreeMap<i32, u64>>,
        last_store_ms: i64,
    ) {
        let w = self
            .writer
            .get_mut()
            .expect("invariant: put lock not poisoned");
        w.pos = end;
        w.queue_next = queue_next;
        w.last_store_ms = last_store_ms;
        self.written.store(end, Ordering::Release);
        self.durability = GroupCommit::new(end);
    }

    pub(crate) fn chain(&self) -> &SegmentChain<D> {
        &self.chain
    }

    /// Offset just past the last complete record.
    pub fn written(&self) -> CommitLogOffset {
        CommitLogOffset(self.written.load(Ordering::Acquire))
    }

    /// Offset below which every record is durable.
    pub fn durable(&self) -> CommitLogOffset {
        CommitLogOffset(self.durability.durable())
    }

    /// Start of the oldest segment still present (0 for an empty log).
    pub fn min_offset(&self) -> CommitLogOffset {
        CommitLogOffset(self.chain.first_start().unwrap_or(0))
    }

    /// Number of segments the log currently spans.
    pub fn chain_segments(&self) -> usize {
        self.chain.starts().len()
    }

    /// Number of syncs issued by group commit so far.
    pub fn sync_count(&self) -> u64 {
        self.durability.syncs()
    }

    /// The log's fsync figures (shared, so a process's stats can hold them).
    pub fn stats(&self) -> &Arc<StoreStats> {
        &self.stats
    }

    /// Fails once a sync has failed: the log is fenced.
    pub fn check_writable(&self) -> Result<()> {
        self.durability.check()
    }

    /// Next queue offset of a queue (its max offset), as assigned by appends.
    pub fn queue_next(&self, topic: &str, queue_id: i32) -> QueueOffset {
        let w = self.lock_writer();
        QueueOffset(
            w.queue_next
                .get(topic)
                .and_then(|q| q.get(&queue_id))
                .copied()
                .unwrap_or(0),
        )
    }

    /// Appends one record; it is readable at once and durable only after
    /// [`CommitLog::wait_durable`] for its end returns `Ok`. The record is
    /// sealed with a whole-record checksum property.
    pub fn append(&self, msg: &MessageInput) -> Result<Appended> {
        let len = self.checked_len(msg)?;
        let crc = body_crc(&msg.body);
        let mut w = self.lock_writer();
        self.durability.check()?;
        let appended = self.append_one(&mut w, (msg, len, crc), false);
        self.publish(&w);
        appended
    }

    /// Appends several records under one hold of the put lock, so their
    /// queue offsets are consecutive per queue; the records that fit a
    /// segment are written together (see `append`). All or nothing on
    /// errors raised before writing; a disk error midway leaves earlier
    /// runs written but unacknowledged.
    pub fn append_batch(&self, msgs: &[MessageInput]) -> Result<Vec<Appended>> {
        let sized = msgs
            .iter()
            .map(|m| Ok((m, self.checked_len(m)?, body_crc(&m.body))))
            .collect::<Result<Vec<_>>>()?;
        let mut w = self.lock_writer();
        self.durability.check()?;
        let mut out = Vec::with_capacity(msgs.len());
        let appended = self.append_runs(&mut w, &sized, &mut out, false);
        self.publish(&w);
        appended.map(|()| out)
    }

    fn checked_len(&self, msg: &MessageInput) -> Result<usize> {
        let len = sealed_len(msg).map_err(|e| Error::MessageRejected {
            reason: e.to_string(),
        })?;
        if len as u64 + BLANK_RECORD_BYTES > self.chain.segment_bytes() {
            return Err(Error::MessageRejected {
                reason: format!(
                    "record of {len} bytes does not fit a {} byte segment",
                    self.chain.segment_bytes()
                ),
            });
        }
        Ok(len)
    }

    /// Moves the write position to `end` and publishes it.
    fn advance_to(&self, w: &mut Writer, end: u64) {
        w.pos = end;
        self.warm_ahead(w);
        self.written.store(end, Ordering::Release);
    }

    /// Keeps at least half of [`WARM_AHEAD_BYTES`] warmed ahead of the
    /// write position ([`crate::disk::Segment::warm`]), so group commits
    /// sync blocks that are already allocated on disk. A range in the next
    /// segment is asked for once that segment exists. A segment prepared
    /// [`Prepare::ZeroFilled`] needs none of it (the disk ignores the hint
    /// there): this window serves the segments that were not, a fresh
    /// store's first, those opened on a restart, and any whose zero fill
    /// the filesystem refused.
    ///
    /// Only a `SYNC_FLUSH` log warms. An `ASYNC_FLUSH` log has no sync on
    /// its hot path to protect, and on a machine its producers share,
    /// preparing pages ahead is CPU taken from them: reading the window
    /// into the page cache ahead of the writer (zeroed pages) cost the
    /// allocator thread ≈ 0.35 µs per 1 KiB message at batch 64 × 4, and
    /// the writer saved little of it — batched `pwrite`s fill whole fresh
    /// pages, which need no zeroing (docs/benchmarks.md, issue 20, "An
    /// async log warms nothing").
    fn warm_ahead(&self, w: &mut Writer) {
        if !self.warms_ahead || w.warmed_to >= w.pos + WARM_AHEAD_BYTES / 2 {
            return;
        }
        let from = w.warmed_to.max(w.pos);
        w.warmed_to = self.chain.warm(from, w.pos + WARM_AHEAD_BYTES);
    }

    /// Waits until every byte below `end` is durable (group commit).
    pub async fn wait_durable(&self, end: CommitLogOffset) -> Result<()> {
        self.wait_durable_among(end, false).await
    }

    /// [`Self::wait_durable`], told whether more writers are known to be
    /// right behind this one (`company`, [`crate::store::Wait`]).
    pub async fn wait_durable_among(&self, end: CommitLogOffset, company: bool) -> Result<()> {
        self.durability
            .wait(
                end.0,
                company,
                || self.pad_to_sector(),
                |from, to| self.timed_sync(from, to),
            )
            .await
    }

    /// Syncs `[from, to)`, recording the fsync in the log's stats.
    async fn timed_sync(&self, from: u64, to: u64) -> Result<()> {
        let start = self.clock.monotonic();
        let result = self.chain.sync(from, to).await;
        let elapsed = self.clock.monotonic().saturating_sub(start);
        self.stats.record_sync(to - from, elapsed);
        result
    }

    /// After recovery: pads the log to a sector boundary and syncs the pad,
    /// so the first append never rewrites a sector holding durable
    /// records. Returns the new end.
    pub(crate) async fn pad_after_recovery(&self) -> Result<u64> {
        let from = self.written.load(Ordering::Acquire);
        let to = self.pad_to_sector();
        self.chain.sync(from, to).await?;
        self.durability.advance(to);
        Ok(to)
    }

    /// Ends the written log on a sector boundary with a pad record (or the
    /// segment's blank) and returns the new written offset. Best effort: if
    /// the next segment cannot be created the log stays unpadded.
    fn pad_to_sector(&self) -> u64 {
        let mut w = self.lock_writer();
        if let Err(e) = self.write_pending(&mut w) {
            tracing::warn!(error = %e, "deferred CommitLog records could not be written");
        }
        let pos = w.pos;
        let in_sector = pos % SECTOR_BYTES;
        if in_sector == 0 || self.follower.load(Ordering::Acquire) {
            return pos;
        }
        let seg = self.chain.segment_bytes();
        let rel = pos % seg;
        let mut gap = SECTOR_BYTES - in_sector;
        if gap < BLANK_RECORD_BYTES {
            gap += SECTOR_BYTES;
        }
        let wrote = if rel + gap + BLANK_RECORD_BYTES <= seg {
            let mut pad = vec![0u8; usize::try_from(gap).expect("invariant: gap <= PAD_BYTES_MAX")];
            let size = u32::try_from(gap).expect("invariant: gap <= PAD_BYTES_MAX");
            pad[..8].copy_from_slice(&encode_pad_head(size));
            self.chain.write(pos, &pad).map(|()| pos + gap)
        } else {
            // Too close to the segment's end: close the segment instead.
            let next = pos - rel + seg;
            let remaining = u32::try_from(seg - rel).unwrap_or(u32::MAX);
            self.chain
                .get_or_create(next)
                .and_then(|_| self.chain.write(pos, &encode_blank(remaining)))
                .map(|()| next)
        };
        match wrote {
            Ok(new_pos) => {
                self.fresh.push([fresh::Fresh::skip(pos, new_pos - pos)]);
                w.pos = new_pos;
                self.written.store(new_pos, Ordering::Release);
                new_pos
            }
            Err(e) => {
                tracing::warn!(error = %e, "could not pad the CommitLog to a sector boundary");
                pos
            }
        }
    }

    /// Makes everything written so far durable.
    pub async fn flush(&self) -> Result<()> {
        self.write_deferred()?;
        self.wait_durable(CommitLogOffset(self.written.load(Ordering::Acquire)))
            .await
    }

    /// The bytes `[offset, offset + len)`, which must lie below `written()`
    /// and inside one segment.
    pub fn read(&self, offset: CommitLogOffset, len: u32) -> Result<Bytes> {
        if offset.0 + u64::from(len) > self.written().0 {
            return Err(Error::Corrupt {
                path: "commitlog".to_owned(),
                offset: offset.0,
                reason: "read past the written end",
            });
        }
        self.chain.read(offset.0, len as usize)
    }

    /// Switches follower mode: a follower (a replica) writes only bytes
    /// copied from its master and never pads on its own.
    pub(crate) fn set_follower(&self, on: bool) {
        // Under the put lock: a deferred append (which refuses a follower's
        // log under it) leaves nothing pending in a follower's log.
        let mut w = self.lock_writer();
        if let Err(e) = self.write_pending(&mut w) {
            tracing::warn!(error = %e, "deferred CommitLog records could not be written");
        }
        self.fresh.clear();
        self.follower.store(on, Ordering::Release);
    }

    /// The notes of the run of units this process appended from `pos` on,
    /// below `limit` (see `FreshNotes::take_run`); false when none.
    pub(crate) fn take_fresh_run(&self, pos: u64, limit: u64, out: &mut Vec<fresh::Fresh>) -> bool {
        self.fresh.take_run(pos, limit, out)
    }

    /// True while the log is a follower's copy.
    pub fn is_follower(&self) -> bool {
        self.follower.load(Ordering::Acquire)
    }

    /// Whole log units (records, pads, the segment's blank) from `from`, a
    /// unit boundary, up to `max` bytes (at least one unit), never past the
    /// written end or the segment's end. Empty when nothing is written
    /// after `from`. What a master streams to its replicas.
    pub fn read_units(&self, from: CommitLogOffset, max: usize) -> Result<Bytes> {
        let written = self.written().0;
        if from.0 >= written {
            return Ok(Bytes::new());
        }
        if from < self.min_offset() {
            return Err(Error::Corrupt {
                path: "commitlog".to_owned(),
                offset: from.0,
                reason: "offset below the oldest retained segment",
            });
        }
        let limit = written.min(self.chain.segment_start(from.0) + self.chain.segment_bytes());
        let mut pos = from.0;
        while pos < limit {
            let size = match peek_head(&self.chain.read(pos, 8)?) {
                Ok(RecordHead::Message { total_size }) => u64::from(total_size),
                Ok(RecordHead::Blank { remaining }) => u64::from(remaining),
                Ok(RecordHead::Pad { size }) => u64::from(size),
                Err(_) => 0,
            };
            if size == 0 || pos + size > limit {
                return Err(Error::Corrupt {
                    path: "commitlog".to_owned(),
                    offset: pos,
                    reason: "no whole log unit at a unit boundary below the written end",
                });
            }
            if pos > from.0 && pos + size - from.0 > max as u64 {
                break;
            }
            pos += size;
        }
        self.chain.read(
            from.0,
            usize::try_from(pos - from.0).expect("invariant: inside one segment"),
        )
    }

    /// Appends bytes copied verbatim from the master at `at`, which must be
    /// this log's written end: whole units inside one segment, each checked
    /// (seal, stored offset, and a queue offset that continues this log's
    /// queue) before anything is written. Returns the new written end.
    pub(crate) fn append_units(&self, at: CommitLogOffset, bytes: &Bytes) -> Result<u64> {
        let seg = self.chain.segment_bytes();
        let reject = |offset: u64, reason: &'static str| Error::Corrupt {
            path: "replicated bytes".to_owned(),
            offset,
            reason,
        };
        let end = at.0 + bytes.len() as u64;
        if bytes.is_empty() {
            return Ok(at.0);
        }
        if at.0 % seg + bytes.len() as u64 > seg {
            return Err(reject(at.0, "replicated bytes cross a segment boundary"));
        }
        let mut w = self.lock_writer();
        self.durability.check()?;
        if w.pos != at.0 {
            return Err(reject(
                at.0,
                "replicated bytes do not start at this log's end",
            ));
        }
        let read = |pos: u64, len: usize| {
            let lo = usize::try_from(pos.checked_sub(at.0)?).ok()?;
            let hi = lo.checked_add(len)?;
            (hi <= bytes.len()).then(|| bytes.slice(lo..hi))
        };
        // Check every unit first: a bad chunk changes nothing.
        let mut queue_next: BTreeMap<(String, i32), u64> = BTreeMap::new();
        let mut last_ms = w.last_store_ms;
        let mut pos = at.0;
        while pos < end {
            match step_in(read, seg, pos, false) {
                Step::Record(rec, _) => {
                    if is_dispatchable(rec.sys_flag) {
                        let key = (rec.topic.clone(), rec.queue_id);
                        let expected = queue_next.get(&key).copied().unwrap_or_else(|| {
                            w.queue_next
                                .get(rec.topic.as_str())
                                .and_then(|m| m.get(&rec.queue_id))
                                .copied()
                                .unwrap_or(0)
                        });
                        if u64::try_from(rec.queue_offset).ok() != Some(expected) {
                            return Err(reject(
                                pos,
                                "queue offset does not continue this log's queue",
                            ));
                        }
                        queue_next.insert(key, expected + 1);
                    }
                    last_ms = last_ms.max(rec.store_timestamp_ms);
                    pos += u64::from(rec.total_size);
                }
                Step::Blank { next } | Step::Pad { next } => pos = next,
                Step::End(reason) => return Err(reject(pos, reason)),
            }
        }
        if pos != end {
            return Err(reject(end, "replicated bytes end inside a unit"));
        }
        self.chain.write(at.0, bytes)?;
        for ((topic, queue_id), next) in queue_next {
            w.queue_next
                .entry(topic)
                .or_default()
                .insert(queue_id, next);
        }
        w.last_store_ms = last_ms;
        self.advance_to(&mut w, end);
        Ok(end)
    }

    /// Moves the write position back to `to` (a unit boundary): the bytes
    /// after it are no longer part of the log. The caller zeroes them and
    /// sets the queues' next offsets.
    pub(crate) fn rewind(&self, to: u64, queue_next: BTreeMap<String, BTreeMap<i32, u64>>) {
        let mut w = self.lock_writer();
        if let Err(e) = self.write_pending(&mut w) {
            tracing::warn!(error = %e, "deferred CommitLog records could not be written");
        }
        self.fresh.clear();
        w.pos = to;
        w.queue_next = queue_next;
        w.warmed_to = w.warmed_to.min(to);
        self.written.store(to, Ordering::Release);
        self.durability.rewind(to);
    }

    /// Fences the log after a failure that leaves its durable state unknown.
    pub(crate) fn poison(&self, reason: String) {
        self.durability.poison(reason);
    }

    fn lock_writer(&self) -> std::sync::MutexGuard<'_, Writer> {
        self.writer
            .lock()
            .expect("invariant: put lock not poisoned")
    }
}
