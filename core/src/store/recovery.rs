//! Opening a store: trust the checkpoint's safe point, verify and rebuild
//! what it does not cover, find the true end of the CommitLog, truncate and
//! zero a torn tail, and make the recovered state the new safe point.
//! Corruption (a damaged record where data must be intact) is reported and
//! stops the start unless `repair_truncate_corrupt` is set.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Mutex, RwLock};

use crate::checkpoint::{Checkpoint, CHECKPOINT_FILE};
use crate::clock::Clock;
use crate::commit_log::scan::{find_valid_record_after, Step};
use crate::commit_log::verify_ahead::AheadWalk;
use crate::commit_log::{is_dispatchable, CommitLog};
use crate::consume_queue::ConsumeQueueTable;
use crate::disk::Disk;
use crate::error::{Error, Result};
use crate::index::{IndexMark, IndexService};
use crate::offset::{CommitLogOffset, QueueOffset};
use crate::segment_chain::join;

use super::dispatch::{Dispatched, Dispatcher, Scope};
use super::{FlushMode, MessageStore, StoreConfig, ABORT_FILE};

/// Where a walk over the log stopped.
enum WalkEnd {
    /// Reached the target offset exactly.
    Reached,
    /// Found no valid record at this offset before the target.
    Damaged { at: u64, reason: &'static str },
}

/// How far after the end of the log recovery looks for valid-looking
/// records, to tell an operator that unsynced writes were torn.
const TAIL_PROBE_BYTES: u64 = 64 * 1024 * 1024;

pub(super) async fn open<D: Disk, C: Clock>(
    disk: D,
    clock: C,
    config: StoreConfig,
) -> Result<MessageStore<D, C>> {
    let abort_path = join(&config.root, ABORT_FILE);
    let abnormal = disk
        .read_small(&abort_path)
        .map_err(|e| Error::io("read", &abort_path, e))?
        .is_some();
    let checkpoint = read_checkpoint(&disk, &config)?;
    let (log, checkpoint) = open_log(&disk, &clock, &config, checkpoint)?;
    let (index, rebuild_index) = open_index(&disk, &config, checkpoint.as_ref())?;
    let log_min = log.min_offset().0;
    let index_synced = index_safe_point(checkpoint.as_ref(), rebuild_index, log_min, &clock);
    let index_from = index_synced.at;
    let queues = ConsumeQueueTable::new(
        disk.clone(),
        &join(&config.root, "consumequeue"),
        config.cq_entries_per_segment,
    );
    let mut store = MessageStore {
        config,
        disk,
        clock,
        log,
        queues,
        index,
        dispatcher: Mutex::new(Dispatcher::default()),
        listener: RwLock::new(None),
        disk_full: AtomicBool::new(false),
        space_checked_ms: AtomicU64::new(0),
        consumed_floor: RwLock::new(None),
        shut_down: AtomicBool::new(false),
        checkpointing: AtomicBool::new(false),
        index_synced: Mutex::new(index_synced),
        confirmed: AtomicU64::new(u64::MAX),
        appended: RwLock::new(None),
    };
    let start = checkpoint.as_ref().map_or(log_min, |cp| cp.dispatched);
    let damaged = store.restore_queues(checkpoint.as_ref(), start).await?;
    let verify = abnormal && checkpoint.is_some();
    let scan_from = store.verify_and_rebuild(verify, start, &damaged, index_from)?;
    let last_ms = checkpoint.as_ref().map_or(0, |cp| cp.last_store_ms);
    let tail = if scan_from == start {
        store.scan_after_safe_point(start, last_ms)?
    } else {
        Tail::reached(scan_from, last_ms)
    };
    let end = tail.end;
    store.resume_at(start, tail, abnormal).await?;
    store
        .mark_opened(&abort_path, abnormal, checkpoint.is_some())
        .await?;
    tracing::info!(end, abnormal, "store opened");
    Ok(store)
}

/// What the scan after the safe point found.
struct Tail {
    /// The end of the valid log.
    end: u64,
    /// Store time of the last record before `end`.
    last_ms: i64,
    /// Where dispatch stopped for a full device (ENOSPC creating a
    /// ConsumeQueue segment or an index file), with the store time of the
    /// record before it: records from there to `end` are valid and kept,
    /// and the broker's maintenance dispatches them once space returns.
    undispatched: Option<(u64, i64)>,
    /// For each queue with records in the undispatched part, the offset
    /// after its last one there: the queue's next offset, which its
    /// ConsumeQueue does not show yet.
    undispatched_next: BTreeMap<(String, i32), u64>,
}

impl Tail {
    /// A tail dispatched up to `end`.
    fn reached(end: u64, last_ms: i64) -> Self {
        Self {
            end,
            last_ms,
            undispatched: None,
            undispatched_next: BTreeMap::new(),
        }
    }
}

/// `result` of writing `what`, with a full device (ENOSPC) only logged, so
/// a store opens on a full device: reads are served (consumers can drain
/// the backlog) and retention can run, while puts needing a new file are
/// refused as "disk full" until space returns.
fn tolerate_full(result: Result<()>, what: &str) -> Result<()> {
    match result {
        Err(e) if e.is_storage_full() => {
            tracing::warn!(error = %e, "disk full at start-up: cannot write {what} yet");
            Ok(())
        }
        other => other,
    }
}

/// Opens the CommitLog and checks it covers the checkpoint; under repair a
/// checkpoint the log cannot honour is dropped.
fn open_log<D: Disk, C: Clock>(
    disk: &D,
    clock: &C,
    config: &StoreConfig,
    checkpoint: Option<Checkpoint>,
) -> Result<(CommitLog<D, C>, Option<Checkpoint>)> {
    let dir = join(&config.root, "commitlog");
    // A log synced at every write wants the blocks ahead of it real on
    // disk; one flushed in the background has no sync to protect.
    let warms_ahead = config.flush_mode == FlushMode::Sync;
    let log = CommitLog::open(
        disk.clone(),
        clock.clone(),
        &dir,
        config.commit_log_segment_bytes,
        warms_ahead,
    )?;
    let log_min = log.min_offset().0;
    let Some(cp) = checkpoint else {
        return Ok((log, None));
    };
    let missing = cp.dispatched > log_min && log.chain().first_start().is_none();
    if !missing && cp.dispatched >= log_min {
        return Ok((log, Some(cp)));
    }
    if !config.repair_truncate_corrupt {
        return Err(Error::Corrupt {
            path: dir,
            offset: cp.dispatched,
            reason: "CommitLog segments named by the checkpoint are missing",
        });
    }
    tracing::warn!("repair: CommitLog does not cover the checkpoint; rebuilding from the log");
    Ok((log, None))
}

/// Opens the index at the checkpoint's mark; the flag is true when the
/// index must be rebuilt from the start of the log.
fn open_index<D: Disk>(
    disk: &D,
    config: &StoreConfig,
    checkpoint: Option<&Checkpoint>,
) -> Result<(IndexService<D>, bool)> {
    let dir = join(&config.root, "index");
    let (slots, entries) = (config.index_slots, config.index_entries);
    let mark = checkpoint.map_or(IndexMark::default(), |cp| cp.index);
    match IndexService::open(disk.clone(), &dir, slots, entries, mark) {
        Ok(index) if mark.newest_file.is_none_or(|f| index.has_file(f)) => {
            return Ok((index, checkpoint.is_none()));
        }
        Ok(_) => {
            tracing::warn!("index file named by the checkpoint is missing; rebuilding the index");
        }
        // The index is derived data: a damaged header (say a garbled sector
        // on a device without power-safe overwrite) means a rebuild, not a
        // refusal to start.
        Err(e @ Error::Corrupt { .. }) => {
            tracing::warn!(error = %e, "index damaged; rebuilding the index");
        }
        Err(e) => return Err(e),
    }
    for name in disk.list(&dir).map_err(|e| Error::io("list", &dir, e))? {
        let path = join(&dir, &name);
        disk.remove(&path)
            .map_err(|e| Error::io("remove", &path, e))?;
    }
    let index = IndexService::open(disk.clone(), &dir, slots, entries, IndexMark::default())?;
    Ok((index, true))
}

/// Where the index's durable state ends: the records from there on have
/// their index entries re-derived (all of them when the index is rebuilt),
/// and the index as it stood there.
fn index_safe_point(
    checkpoint: Option<&Checkpoint>,
    rebuild_index: bool,
    log_min: u64,
    clock: &impl Clock,
) -> super::IndexSynced {
    let (at, mark) = match checkpoint {
        Some(cp) if !rebuild_index => (cp.index_dispatched.max(log_min), cp.index),
        _ => (log_min, IndexMark::default()),
    };
    super::IndexSynced {
        at,
        mark,
        when: clock.monotonic(),
    }
}

fn read_checkpoint<D: Disk>(disk: &D, config: &StoreConfig) -> Result<Option<Checkpoint>> {
    let path = join(&config.root, CHECKPOINT_FILE);
    let Some(raw) = disk
        .read_small(&path)
        .map_err(|e| Error::io("read", &path, e))?
    else {
        return Ok(None);
    };
    match Checkpoint::decode(&raw) {
        Ok(cp) => Ok(Some(cp)),
        Err(e) if config.repair_truncate_corrupt => {
            tracing::warn!(error = %e, "repair: ignoring a damaged checkpoint; rebuilding from the log");
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

impl<D: Disk, C: Clock> MessageStore<D, C> {
    /// Marks the store opened: the abort marker, and the recovered state
    /// as the new safe point where a checkpoint is owed.
    async fn mark_opened(
        &self,
        abort_path: &str,
        abnormal: bool,
        had_checkpoint: bool,
    ) -> Result<()> {
        // The marker survives a crash, so after one it is already there.
        if !abnormal {
            tolerate_full(
                self.disk
                    .replace_atomically(abort_path, b"")
                    .await
                    .map_err(|e| Error::io("write", abort_path, e)),
                "the abort marker (a crash before space returns recovers as a clean stop: \
                 no re-verification window)",
            )?;
        }
        // The recovered state becomes the safe point now: a later crash must
        // not fall back to a checkpoint whose queue sectors this start rewrote
        // (a device without power-safe overwrite may garble them). With no
        // checkpoint at all there is nothing to fall back to — a crash before
        // the periodic checkpoint rebuilds every queue and the index from the
        // log again — so that start leaves it to the periodic one: writing it
        // here synced every rebuilt queue and the whole key index before the
        // store could take a put (0.3 s after a full scan of 1 GB). A repair
        // always writes it (it may cut the log below an old one on disk).
        if had_checkpoint || self.config.repair_truncate_corrupt {
            tolerate_full(self.write_checkpoint(true).await, "the checkpoint")?;
        }
        Ok(())
    }

    /// Cuts every queue named by the checkpoint back to its safe length and
    /// returns those whose files are damaged or missing (emptied, to be
    /// rebuilt from the log).
    async fn restore_queues(
        &self,
        checkpoint: Option<&Checkpoint>,
        start: u64,
    ) -> Result<BTreeSet<(String, i32)>> {
        let mut damaged = BTreeSet::new();
        for m in checkpoint.iter().flat_map(|cp| cp.queues.iter()) {
            let (cq, _) = self.queues.get_or_open(&m.topic, m.queue_id)?;
            // Opened from disk, a queue starts at its first file: starting
            // above the min the checkpoint recorded, its first files were
            // lost, not retired by retention.
            let head_lost = m.min.is_some_and(|min| cq.min_offset().0 > min);
            cq.truncate(QueueOffset(m.len)).await?;
            if head_lost || !self.queue_intact(&cq, start) {
                tracing::warn!(topic = %m.topic, queue = m.queue_id, "ConsumeQueue damaged or missing; rebuilding it");
                cq.truncate(QueueOffset(0)).await?;
                damaged.insert((m.topic.clone(), m.queue_id));
            }
        }
        let listed: BTreeSet<(&str, i32)> = checkpoint
            .iter()
            .flat_map(|cp| cp.queues.iter())
            .map(|m| (m.topic.as_str(), m.queue_id))
            .collect();
        self.reset_unlisted_queues(&listed, checkpoint.is_none())
            .await?;
        Ok(damaged)
    }

    /// Empties every queue found on disk that the checkpoint does not list:
    /// all its records lie after the safe point, so the scan from there
    /// rebuilds it — from its first entry, whichever of its files survived.
    /// With no checkpoint at all the zeroed entries are not synced (see
    /// [`ConsumeQueue::clear_unsynced`]; a sync per queue was 10–15 ms).
    async fn reset_unlisted_queues(
        &self,
        listed: &BTreeSet<(&str, i32)>,
        no_checkpoint: bool,
    ) -> Result<()> {
        let root = join(&self.config.root, "consumequeue");
        let list = |dir: &str| self.disk.list(dir).map_err(|e| Error::io("list", dir, e));
        for topic in list(&root)? {
            for name in list(&join(&root, &topic))? {
                let Ok(queue_id) = name.parse::<i32>() else {
                    continue;
                };
                if listed.contains(&(topic.as_str(), queue_id)) {
                    continue;
                }
                let (cq, _) = self.queues.get_or_open(&topic, queue_id)?;
                if no_checkpoint {
                    cq.clear_unsynced()?;
                } else {
                    cq.truncate(QueueOffset(0)).await?;
                }
            }
        }
        Ok(())
    }

    /// Below the safe point: rebuilds damaged queues from the start of the
    /// log, re-indexes the records from `index_from` (the start of the log
    /// when the index is rebuilt) and, after a crash, re-verifies a window
    /// of the log. Returns where the forward scan starts: `start`, or the
    /// damaged offset when a repair truncates there.
    fn verify_and_rebuild(
        &self,
        verify: bool,
        start: u64,
        damaged: &BTreeSet<(String, i32)>,
        index_from: u64,
    ) -> Result<u64> {
        let log_min = self.log.min_offset().0;
        let verify_from = if verify {
            let back = start
                .saturating_sub(self.config.recovery_verify_bytes)
                .max(log_min);
            self.log.chain().segment_start(back).max(log_min)
        } else {
            start
        };
        let rebuild_from = if damaged.is_empty() {
            index_from.min(start)
        } else {
            log_min
        };
        let walk_from = verify_from.min(rebuild_from);
        if walk_from >= start {
            return Ok(start);
        }
        match self.walk(walk_from, start, rebuild_from, damaged, index_from)? {
            WalkEnd::Reached => Ok(start),
            WalkEnd::Damaged { at, reason } if self.config.repair_truncate_corrupt => {
                tracing::warn!(
                    offset = at,
                    reason,
                    "repair: truncating the CommitLog at a corrupt record"
                );
                Ok(at)
            }
            WalkEnd::Damaged { at, reason } => Err(Error::Corrupt {
                path: join(&self.config.root, "commitlog"),
                offset: at,
                reason,
            }),
        }
    }

    /// From the safe point on, re-dispatches every valid record; the first
    /// invalid one is the end (a torn tail of unacknowledged writes). On
    /// a full device dispatch stops at the first record it cannot place
    /// and the scan goes on to the end, noting each queue's next offset.
    fn scan_after_safe_point(&self, start: u64, mut last_ms: i64) -> Result<Tail> {
        let mut pos = start;
        let mut undispatched = None;
        let mut undispatched_next: BTreeMap<(String, i32), u64> = BTreeMap::new();
        let mut units = AheadWalk::start(&self.disk, self.log.chain(), start, u64::MAX);
        loop {
            let step = units.step(pos, |rec| -> Result<i64> {
                if undispatched.is_none() {
                    if let Err(e) = self.dispatch_record(&Dispatched::from(rec), Scope::Scan) {
                        if !e.is_storage_full() {
                            return Err(e);
                        }
                        tracing::warn!(error = %e, offset = pos, "disk full at start-up: records from here on become visible once space returns");
                        undispatched = Some((pos, last_ms));
                    }
                }
                if undispatched.is_some() && is_dispatchable(rec.sys_flag) {
                    let next = u64::try_from(rec.queue_offset).unwrap_or(0) + 1;
                    let slot = undispatched_next
                        .entry((rec.topic.to_owned(), rec.queue_id))
                        .or_default();
                    *slot = (*slot).max(next);
                }
                Ok(rec.store_timestamp_ms)
            })?;
            match step {
                Step::Record(stored_ms, raw) => {
                    last_ms = stored_ms?;
                    pos += raw.len() as u64;
                }
                Step::Blank { next } | Step::Pad { next } => pos = next,
                Step::End(reason) => {
                    self.report_tail(pos, reason);
                    return Ok(Tail {
                        end: pos,
                        last_ms,
                        undispatched,
                        undispatched_next,
                    });
                }
            }
        }
    }

    /// Truncates and zeroes the log after `end`, makes `[start, end)`
    /// durable, trims queues to the log and sets the write position.
    async fn resume_at(&mut self, start: u64, tail: Tail, abnormal: bool) -> Result<()> {
        let (end, last_ms) = (tail.end, tail.last_ms);
        self.log.chain().truncate(end).await?;
        // After a crash, records found after the safe point may sit only in
        // the page cache (a process crash keeps it) — even in pages the
        // kernel believes clean after a failed fsync (fsyncgate). Rewrite
        // them so they are dirty for sure, then sync: a later power loss
        // must not leave a hole under records that are now trusted and
        // acknowledged after. A clean stop synced the whole log before it
        // removed the abort marker (a failed sync poisons the store and
        // leaves the marker), so there is nothing to rewrite — and with no
        // checkpoint, rewriting would write the whole log to the device.
        if abnormal {
            self.log.chain().rewrite(start.min(end), end)?;
        }
        self.log.chain().sync(start.min(end), end).await?;
        let mut queue_next: BTreeMap<String, BTreeMap<i32, u64>> = BTreeMap::new();
        for cq in self.queues.all() {
            self.trim_beyond(&cq, end).await?;
            cq.advance_min(cq.first_at_or_after(self.log.min_offset())?)?;
            queue_next
                .entry(cq.topic().to_owned())
                .or_default()
                .insert(cq.queue_id(), cq.max_offset().0);
        }
        // Records not yet dispatched hold queue offsets their queues do not
        // show: new puts must continue after them.
        for ((topic, queue_id), next) in tail.undispatched_next {
            let slot = queue_next
                .entry(topic)
                .or_default()
                .entry(queue_id)
                .or_default();
            *slot = (*slot).max(next);
        }
        self.log.resume(end, queue_next, last_ms);
        let end = if self.config.replicated {
            self.log.set_follower(true);
            end
        } else {
            self.log.pad_after_recovery().await?
        };
        // Dispatch resumes at the first record recovery could not place.
        let (cursor, cursor_ms) = tail.undispatched.unwrap_or((end, last_ms));
        // Allocate (and pre-fault) the active segment now, not inside the
        // first put: a fresh 1 GiB segment takes seconds to prepare. On a
        // full device the put that needs it tries again. An index file is
        // named by the first record it holds, so the next one starts at the
        // cursor: the undispatched records go into it, in order.
        tolerate_full(
            self.log.chain().get_or_create(end).map(|_| ()),
            "the active CommitLog segment",
        )?;
        tolerate_full(
            self.index.ensure_writable(CommitLogOffset(cursor)),
            "the next index file",
        )?;
        let d = self
            .dispatcher
            .get_mut()
            .expect("invariant: lock not poisoned");
        (d.cursor, d.last_store_ms) = (cursor, cursor_ms);
        Ok(())
    }

    /// Walks records from `from` (a record boundary) to exactly `to`,
    /// dispatching those at or after `dispatch_from` to the listed (damaged)
    /// `queues`, and to the index those at or after `index_from`.
    fn walk(
        &self,
        from: u64,
        to: u64,
        dispatch_from: u64,
        queues: &BTreeSet<(String, i32)>,
        index_from: u64,
    ) -> Result<WalkEnd> {
        let mut pos = from;
        let mut units = AheadWalk::start(&self.disk, self.log.chain(), from, to);
        while pos < to {
            let step = units.step(pos, |rec| {
                if pos < dispatch_from {
                    return Ok(());
                }
                let index = pos >= index_from;
                self.dispatch_record(&Dispatched::from(rec), Scope::Rebuild { queues, index })
                    .map(|_| ())
            })?;
            match step {
                Step::Record(dispatched, raw) => {
                    dispatched?;
                    pos += raw.len() as u64;
                }
                Step::Blank { next } | Step::Pad { next } => pos = next,
                Step::End(reason) => return Ok(WalkEnd::Damaged { at: pos, reason }),
            }
        }
        if pos == to {
            Ok(WalkEnd::Reached)
        } else {
            Ok(WalkEnd::Damaged {
                at: to,
                reason: "the checkpoint does not fall on a record boundary",
            })
        }
    }

    /// Logs how the log ends; a valid-looking record after the end means
    /// unsynced writes were torn (they were never acknowledged in SYNC
    /// flush mode) and is worth an operator's attention.
    fn report_tail(&self, end: u64, reason: &'static str) {
        let Some(last) = self.log.chain().last_start() else {
            return;
        };
        // Torn writes sit just after the end (at most a few group commits'
        // worth); probing the whole rest of a 1 GiB segment made every
        // restart take seconds.
        let limit =
            (last + self.log.chain().segment_bytes()).min(end.saturating_add(TAIL_PROBE_BYTES));
        if end >= limit {
            return;
        }
        if let Some(found) = find_valid_record_after(self.log.chain(), end + 1, limit) {
            tracing::warn!(
                end,
                reason,
                found,
                "torn CommitLog tail: discarding unsynced records after the end"
            );
        }
    }
}
