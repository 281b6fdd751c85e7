//! Opening a store: trust the checkpoint's safe point, verify and rebuild
//! what it does not cover, find the true end of the CommitLog, truncate and
//! zero a torn tail, and make the recovered state the new safe point.
//! Corruption (a damaged record where data must be intact) is reported and
//! stops the start unless `repair_truncate_corrupt` is set.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::AtomicBool;
use std::sync::{Mutex, RwLock};

use crate::checkpoint::{Checkpoint, CHECKPOINT_FILE};
use crate::clock::Clock;
use crate::commit_log::scan::{find_valid_record_after, step, Step};
use crate::commit_log::CommitLog;
use crate::consume_queue::{ConsumeQueue, ConsumeQueueTable};
use crate::disk::Disk;
use crate::error::{Error, Result};
use crate::index::{IndexMark, IndexService};
use crate::offset::QueueOffset;
use crate::segment_chain::join;

use super::dispatch::{Dispatcher, Scope};
use super::{MessageStore, StoreConfig, ABORT_FILE};

/// Where a walk over the log stopped.
enum WalkEnd {
    /// Reached the target offset exactly.
    Reached,
    /// Found no valid record at this offset before the target.
    Damaged { at: u64, reason: &'static str },
}

pub(super) async fn open<D: Disk, C: Clock>(
    disk: D,
    clock: C,
    config: StoreConfig,
) -> Result<MessageStore<D, C>> {
    let root = config.root.clone();
    let abort_path = join(&root, ABORT_FILE);
    let abnormal = disk
        .read_small(&abort_path)
        .map_err(|e| Error::io("read", &abort_path, e))?
        .is_some();
    let mut checkpoint = read_checkpoint(&disk, &config)?;
    let log = CommitLog::open(
        disk.clone(),
        clock.clone(),
        &join(&root, "commitlog"),
        config.commit_log_segment_bytes,
    )?;
    let log_min = log.min_offset().0;
    if let Some(cp) = &checkpoint {
        let missing = cp.dispatched > log_min && log.chain().first_start().is_none();
        if missing || cp.dispatched < log_min {
            if !config.repair_truncate_corrupt {
                return Err(Error::Corrupt {
                    path: join(&root, "commitlog"),
                    offset: cp.dispatched,
                    reason: "CommitLog segments named by the checkpoint are missing",
                });
            }
            tracing::warn!("repair: CommitLog does not cover the checkpoint; rebuilding from the log");
            checkpoint = None;
        }
    }
    let mark = checkpoint.as_ref().map_or(IndexMark::default(), |cp| cp.index);
    let index_dir = join(&root, "index");
    let mut index = IndexService::open(disk.clone(), &index_dir, config.index_slots, config.index_entries, mark)?;
    let mut rebuild_index = false;
    if mark.newest_file.is_some_and(|f| !index.has_file(f)) {
        tracing::warn!("index file named by the checkpoint is missing; rebuilding the index");
        index = IndexService::open(
            disk.clone(),
            &index_dir,
            config.index_slots,
            config.index_entries,
            IndexMark::default(),
        )?;
        rebuild_index = true;
    }
    let queues = ConsumeQueueTable::new(disk.clone(), &join(&root, "consumequeue"), config.cq_entries_per_segment);
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
        shut_down: AtomicBool::new(false),
        checkpointing: AtomicBool::new(false),
    };
    let start = checkpoint.as_ref().map_or(log_min, |cp| cp.dispatched);
    let mut last_store_ms = checkpoint.as_ref().map_or(0, |cp| cp.last_store_ms);

    // Queues named by the checkpoint: cut back to the safe point; rebuild
    // any whose files are damaged or missing.
    let mut damaged = BTreeSet::new();
    for m in checkpoint.iter().flat_map(|cp| cp.queues.iter()) {
        let (cq, _) = store.queues.get_or_open(&m.topic, m.queue_id)?;
        cq.truncate(QueueOffset(m.len)).await?;
        if !store.queue_intact(&cq, start) {
            tracing::warn!(topic = %m.topic, queue = m.queue_id, "ConsumeQueue damaged or missing; rebuilding it");
            cq.truncate(QueueOffset(0)).await?;
            damaged.insert((m.topic.clone(), m.queue_id));
        }
    }

    // Below the safe point: rebuild what is damaged, and after a crash
    // re-verify a window of the log for corruption.
    let mut scan_from = start;
    let verify_from = if abnormal && checkpoint.is_some() {
        let back = start.saturating_sub(store.config.recovery_verify_bytes).max(log_min);
        store.log.chain().segment_start(back).max(log_min)
    } else {
        start
    };
    let rebuild_from = if damaged.is_empty() && !rebuild_index { start } else { log_min };
    let walk_from = verify_from.min(rebuild_from);
    if walk_from < start {
        let scope = Scope::Rebuild { queues: &damaged, index: rebuild_index };
        if let WalkEnd::Damaged { at, reason } = store.walk(walk_from, start, rebuild_from, scope)? {
            if !store.config.repair_truncate_corrupt {
                return Err(Error::Corrupt {
                    path: join(&store.config.root, "commitlog"),
                    offset: at,
                    reason,
                });
            }
            tracing::warn!(offset = at, reason, "repair: truncating the CommitLog at a corrupt record");
            scan_from = at;
        }
    }

    // From the safe point on: re-dispatch everything valid; the first
    // invalid record is the end (a torn tail of unacknowledged writes).
    let mut pos = scan_from;
    if scan_from == start {
        loop {
            match step(store.log.chain(), pos) {
                Step::Record(rec, _) => {
                    store.dispatch_record(&rec, Scope::All)?;
                    pos += u64::from(rec.total_size);
                    last_store_ms = rec.store_timestamp_ms;
                }
                Step::Blank { next } => pos = next,
                Step::End(reason) => {
                    store.report_tail(pos, reason);
                    break;
                }
            }
        }
    }
    let end = pos;

    store.log.chain().truncate(end).await?;
    // Records found after the safe point may sit only in the page cache
    // (a process crash keeps it): make them durable before appending after
    // them, or a later power loss could leave a hole under synced data.
    store.log.chain().sync(start.min(end), end).await?;
    let mut queue_next: BTreeMap<String, BTreeMap<i32, u64>> = BTreeMap::new();
    for cq in store.queues.all() {
        store.trim_beyond(&cq, end).await?;
        cq.advance_min(cq.first_at_or_after(store.log.min_offset())?)?;
        queue_next
            .entry(cq.topic().to_owned())
            .or_default()
            .insert(cq.queue_id(), cq.max_offset().0);
    }
    store.log.resume(end, queue_next, last_store_ms);
    {
        let d = store.dispatcher.get_mut().expect("invariant: lock not poisoned");
        d.cursor = end;
        d.last_store_ms = last_store_ms;
    }
    store
        .disk
        .replace_atomically(&abort_path, b"")
        .await
        .map_err(|e| Error::io("write", &abort_path, e))?;
    store.write_checkpoint().await?;
    tracing::info!(end, abnormal, "store opened");
    Ok(store)
}

fn read_checkpoint<D: Disk>(disk: &D, config: &StoreConfig) -> Result<Option<Checkpoint>> {
    let path = join(&config.root, CHECKPOINT_FILE);
    let Some(raw) = disk.read_small(&path).map_err(|e| Error::io("read", &path, e))? else {
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
    /// Walks records from `from` (a record boundary) to exactly `to`,
    /// dispatching in `scope` those at or after `dispatch_from`.
    fn walk(&self, from: u64, to: u64, dispatch_from: u64, scope: Scope<'_>) -> Result<WalkEnd> {
        let mut pos = from;
        while pos < to {
            match step(self.log.chain(), pos) {
                Step::Record(rec, _) => {
                    if pos >= dispatch_from {
                        self.dispatch_record(&rec, scope)?;
                    }
                    pos += u64::from(rec.total_size);
                }
                Step::Blank { next } => pos = next,
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

    /// True when the queue's segments cover `[min, max)` and its last entry
    /// points at a record of this queue with the matching offset, below the
    /// safe point `start`.
    fn queue_intact(&self, cq: &ConsumeQueue<D>, start: u64) -> bool {
        let (min, max) = (cq.min_offset().0, cq.max_offset().0);
        if max == min {
            return true;
        }
        if !cq.segments_cover() {
            return false;
        }
        // Only the last entry is checked against the log: a clean restart
        // must not read the log below the checkpoint.
        let q = max - 1;
        let Ok(Some(e)) = cq.entry(QueueOffset(q)) else {
            return false;
        };
        if e.phys_offset >= self.log.min_offset() {
            if e.phys_offset.0 + u64::from(e.size) > start {
                return false;
            }
            let Step::Record(rec, _) = step(self.log.chain(), e.phys_offset.0) else {
                return false;
            };
            let same_offset = u64::try_from(rec.queue_offset).ok() == Some(q);
            if rec.topic != cq.topic() || rec.queue_id != cq.queue_id() || !same_offset {
                return false;
            }
        }
        true
    }

    /// Drops ConsumeQueue entries that point at or past `end` (only after a
    /// repair truncated the log below the checkpoint).
    async fn trim_beyond(&self, cq: &ConsumeQueue<D>, end: u64) -> Result<()> {
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

    /// Logs how the log ends; a valid-looking record after the end means
    /// unsynced writes were torn (they were never acknowledged in SYNC
    /// flush mode) and is worth an operator's attention.
    fn report_tail(&self, end: u64, reason: &'static str) {
        let Some(last) = self.log.chain().last_start() else {
            return;
        };
        let limit = last + self.log.chain().segment_bytes();
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
