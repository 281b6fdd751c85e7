//! `MessageStore`: the facade the broker uses. It owns the CommitLog, the
//! ConsumeQueues and the index, dispatches records from the log to the
//! queues and the index in log order, and decides what consumers may see.
//! Invariants: a put is acknowledged only after the configured durability;
//! in SYNC flush mode consumers see only durable records; ConsumeQueue
//! entries and index entries always point at valid records below the
//! dispatch cursor.

mod admit;
mod config;
mod dispatch;
mod get;
mod queue_check;
mod recovery;
mod retention;
mod tail;

pub use config::{DiskPressureRetention, FlushMode, StoreConfig, Wait};
pub use dispatch::ArrivalListener;
pub use get::{GetResult, GetStatus, MessageFilter, TagsFilter, SCAN_ENTRIES_MAX};
pub use retention::{ConsumedFloor, RetentionReport, SPACE_RECHECK_INTERVAL_MS};

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, RwLock};

use bytes::Bytes;

use crate::checkpoint::{Checkpoint, QueueMark, CHECKPOINT_FILE};
use crate::clock::Clock;
use crate::commit_log::{Appended, CommitLog};
use crate::consume_queue::ConsumeQueueTable;
use crate::disk::Disk;
use crate::error::{Error, Result};
use crate::index::{IndexMark, IndexService};
use crate::message::{MessageInput, StoredRecord};
use crate::offset::{CommitLogOffset, QueueOffset};
use crate::segment_chain::join;
use dispatch::Dispatcher;

/// File whose presence at start means the last run did not shut down cleanly.
pub const ABORT_FILE: &str = "abort";

/// The storage engine of one broker.
pub struct MessageStore<D: Disk, C: Clock> {
    config: StoreConfig,
    disk: D,
    clock: C,
    log: CommitLog<D, C>,
    queues: ConsumeQueueTable<D>,
    index: IndexService<D>,
    dispatcher: Mutex<Dispatcher>,
    listener: RwLock<Option<ArrivalListener>>,
    disk_full: AtomicBool,
    /// Monotonic ms + 1 of the last space query made for a refused put
    /// (0: none yet).
    space_checked_ms: AtomicU64,
    /// The broker's committed-offset floor per queue, which gates
    /// disk-pressure retention in `DiskPressureRetention::Consumed` mode.
    consumed_floor: RwLock<Option<ConsumedFloor>>,
    shut_down: AtomicBool,
    checkpointing: AtomicBool,
    /// Where the index was last made durable (what checkpoints name until
    /// it is synced again).
    index_synced: Mutex<IndexSynced>,
    /// Consumers see nothing at or past this offset (`u64::MAX`: no gate).
    /// A SYNC-replicated broker sets it to the offset its in-sync set holds.
    confirmed: AtomicU64,
    appended: RwLock<Option<AppendListener>>,
}

/// The index's own safe point: the records below `at` have their index
/// entries durable, the index then standing at `mark`; synced at monotonic
/// time `when`.
#[derive(Clone, Copy, Debug, Default)]
struct IndexSynced {
    at: u64,
    mark: IndexMark,
    when: std::time::Duration,
}

/// Told the CommitLog's new written end after every put (a master's
/// replication wakes the replicas' parked fetches with it); must be cheap.
pub type AppendListener = std::sync::Arc<dyn Fn(CommitLogOffset) + Send + Sync>;

impl<D: Disk, C: Clock> MessageStore<D, C> {
    /// Opens (recovering if needed) the store under `config.root`.
    pub async fn open(disk: D, clock: C, config: StoreConfig) -> Result<Self> {
        recovery::open(disk, clock, config).await
    }

    /// The configuration in force.
    pub fn config(&self) -> &StoreConfig {
        &self.config
    }

    /// The CommitLog (read-only use: offsets, raw reads).
    pub fn commit_log(&self) -> &CommitLog<D, C> {
        &self.log
    }

    /// The ConsumeQueues.
    pub fn consume_queues(&self) -> &ConsumeQueueTable<D> {
        &self.queues
    }

    /// Registers the callback told about newly visible messages (the broker
    /// wakes long-polling pulls with it).
    pub fn set_arrival_listener(&self, listener: ArrivalListener) {
        *self.listener.write().expect("invariant: lock not poisoned") = Some(listener);
    }

    /// Registers the callback told the written end after every put.
    pub fn set_append_listener(&self, listener: AppendListener) {
        *self.appended.write().expect("invariant: lock not poisoned") = Some(listener);
    }

    fn appended(&self) {
        let listener = self
            .appended
            .read()
            .expect("invariant: lock not poisoned")
            .clone();
        if let Some(listener) = listener {
            listener(self.log.written());
        }
    }

    /// Appends one message and returns once it is as durable as the flush
    /// mode requires (`wait = false` returns before the sync in SYNC mode,
    /// as RocketMQ's `WAIT=false`; see [`Wait`]).
    pub async fn put(&self, msg: MessageInput, wait: impl Into<Wait>) -> Result<Appended> {
        self.check_put(&msg)?;
        let a = self.log.append(&msg)?;
        drop(msg); // freed outside the put lock, before the durability wait
        self.appended();
        self.settle(a.end(), wait.into()).await?;
        Ok(a)
    }

    /// [`MessageStore::put`] for a caller that acknowledges later: in
    /// ASYNC flush mode the record may stay in memory, unwritten and
    /// invisible, until the next put or [`MessageStore::write_deferred`]
    /// writes it together with whatever else waits (see
    /// [`CommitLog::append_deferred`]). The caller must see
    /// `write_deferred` return `Ok` before it acknowledges. In SYNC flush
    /// mode this is [`MessageStore::put`] with `wait`.
    pub async fn put_deferred(&self, msg: MessageInput, wait: Wait) -> Result<Appended> {
        if self.config.flush_mode == FlushMode::Sync {
            return self.put(msg, wait).await;
        }
        self.check_put(&msg)?;
        self.log.append_deferred(&msg)
    }

    /// Writes and publishes what [`MessageStore::put_deferred`] left in
    /// memory, and says whether answers may leave: `Err` once deferred
    /// records were lost to a failed write (which also fences the log).
    pub fn write_deferred(&self) -> Result<()> {
        if self.log.write_deferred()? {
            self.appended();
            if let Err(e) = self.dispatch_to(self.log.written().0) {
                tracing::warn!(error = %e, "dispatch deferred; the stored record becomes visible on a later attempt");
            }
        }
        Ok(())
    }

    /// Appends several messages under one hold of the put lock; acknowledged
    /// together.
    pub async fn put_batch(
        &self,
        msgs: Vec<MessageInput>,
        wait: impl Into<Wait>,
    ) -> Result<Vec<Appended>> {
        self.check_writable()?;
        let mut valid_topic = None;
        for m in &msgs {
            // A batch's messages share a topic: validated once.
            if valid_topic == Some(m.topic.as_str()) {
                self.check_body(m)?;
            } else {
                self.check_message(m)?;
                valid_topic = Some(&m.topic);
            }
        }
        let out = self.log.append_batch(&msgs)?;
        drop(msgs);
        self.appended();
        if let Some(last) = out.last() {
            self.settle(last.end(), wait.into()).await?;
        }
        Ok(out)
    }

    /// Waits for the durability the flush mode asks for, then makes the
    /// record visible to consumers.
    ///
    /// A dispatch failure (say ENOSPC on a new ConsumeQueue segment) does not
    /// fail the put: the record is already stored, and reporting failure
    /// would make the producer treat a stored message as never sent. The
    /// dispatch is retried by the next put or flush.
    async fn settle(&self, end: CommitLogOffset, wait: Wait) -> Result<()> {
        let visible_to = match self.config.flush_mode {
            FlushMode::Async => self.log.written().0,
            FlushMode::Sync => {
                if let Wait::Durable { company } = wait {
                    self.log.wait_durable_among(end, company).await?;
                }
                self.log.durable().0
            }
        };
        if let Err(e) = self.dispatch_to(visible_to) {
            tracing::warn!(error = %e, "dispatch deferred; the stored record becomes visible on a later attempt");
        }
        Ok(())
    }

    /// Replication, on a follower: appends bytes copied verbatim from the
    /// master at `at` (this log's end), makes them as durable as the flush
    /// mode asks, and returns the offset this replica now holds for sure —
    /// the one it may report to its master.
    pub async fn append_replicated(
        &self,
        at: CommitLogOffset,
        bytes: &Bytes,
    ) -> Result<CommitLogOffset> {
        if self.shut_down.load(Ordering::Acquire) {
            return Err(Error::ShutDown);
        }
        if !self.log.is_follower() {
            return Err(Error::Corrupt {
                path: "replicated bytes".to_owned(),
                offset: at.0,
                reason: "the log is a writer's, not a follower's",
            });
        }
        let end = CommitLogOffset(self.log.append_units(at, bytes)?);
        let held = match self.config.flush_mode {
            FlushMode::Async => end,
            FlushMode::Sync => {
                self.log.wait_durable(end).await?;
                self.log.durable()
            }
        };
        if let Err(e) = self.dispatch_to(held.0) {
            tracing::warn!(error = %e, "dispatch deferred on a replica");
        }
        Ok(held)
    }

    /// Offset this store holds for sure: durable in SYNC flush mode,
    /// written in ASYNC flush mode.
    pub fn held_offset(&self) -> CommitLogOffset {
        match self.config.flush_mode {
            FlushMode::Async => self.log.written(),
            FlushMode::Sync => self.log.durable(),
        }
    }

    /// Gates what consumers see: records at or past `offset` stay invisible
    /// until a later call moves the gate. A SYNC-replicated broker passes
    /// the offset its in-sync set holds; [`CommitLogOffset::UNGATED`]
    /// lifts the gate.
    pub fn set_confirmed(&self, offset: CommitLogOffset) {
        self.confirmed.store(offset.0, Ordering::Release);
        let limit = match self.config.flush_mode {
            FlushMode::Async => self.log.written().0,
            FlushMode::Sync => self.log.durable().0,
        };
        if let Err(e) = self.dispatch_to(limit) {
            tracing::warn!(error = %e, "dispatch deferred");
        }
    }

    /// The consumer-visibility gate in force ([`CommitLogOffset::UNGATED`]:
    /// none).
    pub fn confirmed(&self) -> CommitLogOffset {
        CommitLogOffset(self.confirmed.load(Ordering::Acquire))
    }

    /// Takes the writer role (a follower promoted to master): pads the log
    /// to a sector boundary and syncs it, then accepts puts. Returns where
    /// this writer's history starts — the log's end before the pad, the
    /// start offset of the new master epoch.
    pub async fn become_writer(&self) -> Result<CommitLogOffset> {
        let start = self.log.written();
        if !self.log.is_follower() {
            return Ok(start);
        }
        // Everything this replica holds is now the master's history.
        self.log.flush().await?;
        self.dispatch_to_ungated(self.log.written().0)?;
        self.log.set_follower(false);
        self.log.pad_after_recovery().await?;
        self.appended();
        Ok(start)
    }

    /// Gives up the writer role: the log becomes a follower's copy again
    /// (a deposed master about to follow the new one).
    pub fn become_follower(&self) {
        self.log.set_follower(true);
    }

    /// Cuts the log back to `offset`, a unit boundary: a replica dropping
    /// its divergent tail before following a new master. Queue entries and
    /// the checkpoint move back with it, then the cut bytes are zeroed, so
    /// a crash at any point recovers either the old tail (cut again on the
    /// next join) or the cut log — never a hole.
    pub async fn truncate_to(&self, offset: CommitLogOffset) -> Result<()> {
        let to = offset.0;
        if to >= self.log.written().0 {
            return Ok(());
        }
        if to < self.log.min_offset().0 {
            return Err(Error::Corrupt {
                path: join(&self.config.root, "commitlog"),
                offset: to,
                reason: "truncation point below the oldest retained segment",
            });
        }
        if !matches!(
            crate::commit_log::scan::step(self.log.chain(), to),
            crate::commit_log::scan::Step::Record(..)
                | crate::commit_log::scan::Step::Blank { .. }
                | crate::commit_log::scan::Step::Pad { .. }
        ) {
            return Err(Error::Corrupt {
                path: join(&self.config.root, "commitlog"),
                offset: to,
                reason: "truncation point is not a unit boundary",
            });
        }
        // The common history below the cut becomes visible (and indexed).
        self.dispatch_to_ungated(to)?;
        {
            let mut d = self.lock_dispatcher();
            d.cursor = d.cursor.min(to);
        }
        let mut queue_next: BTreeMap<String, BTreeMap<i32, u64>> = BTreeMap::new();
        for cq in self.queues.all() {
            self.trim_beyond(&cq, to).await?;
            queue_next
                .entry(cq.topic().to_owned())
                .or_default()
                .insert(cq.queue_id(), cq.max_offset().0);
        }
        self.log.rewind(to, queue_next);
        self.write_checkpoint(true).await?;
        self.log.chain().truncate(to).await?;
        tracing::warn!(offset = to, "CommitLog truncated to the master's history");
        Ok(())
    }

    /// Makes everything written durable and visible.
    pub async fn flush(&self) -> Result<()> {
        self.log.flush().await?;
        self.dispatch_to(self.log.durable().0)
    }

    /// Offset up to which records are visible to consumers.
    pub fn visible_offset(&self) -> CommitLogOffset {
        CommitLogOffset(self.lock_dispatcher().cursor)
    }

    /// Smallest queue offset still stored (0 for an unknown queue).
    pub fn min_offset(&self, topic: &str, queue_id: i32) -> QueueOffset {
        self.queues
            .get(topic, queue_id)
            .map_or(QueueOffset(0), |q| q.min_offset())
    }

    /// Next queue offset to be consumed after the newest visible message.
    pub fn max_offset(&self, topic: &str, queue_id: i32) -> QueueOffset {
        self.queues
            .get(topic, queue_id)
            .map_or(QueueOffset(0), |q| q.max_offset())
    }

    /// The stored record at `phys`, if it is visible and intact.
    pub fn read_at(&self, phys: CommitLogOffset) -> Result<Option<Bytes>> {
        if phys < self.log.min_offset() || phys >= self.visible_offset() {
            return Ok(None);
        }
        match crate::commit_log::scan::step(self.log.chain(), phys.0) {
            crate::commit_log::scan::Step::Record(_, raw) => Ok(Some(raw)),
            _ => Ok(None),
        }
    }

    /// Records of `topic` whose `KEYS` or `UNIQ_KEY` equals `key`, stored within
    /// `[begin_ms, end_ms]`, newest first, at most `max`.
    pub fn query_by_key(
        &self,
        topic: &str,
        key: &str,
        max: usize,
        begin_ms: i64,
        end_ms: i64,
    ) -> Result<Vec<Bytes>> {
        // Ask for extra candidates: collisions are filtered out below.
        let candidates =
            self.index
                .query(topic, key, max.saturating_mul(2).max(max), begin_ms, end_ms)?;
        let mut out = Vec::new();
        let mut seen = std::collections::BTreeSet::new();
        for phys in candidates {
            if out.len() >= max || !seen.insert(phys) {
                continue;
            }
            let Some(raw) = self.read_at(phys)? else {
                continue;
            };
            let Ok(rec) = StoredRecord::decode(&raw) else {
                continue;
            };
            if rec.topic == topic && record_has_key(&rec, key) {
                out.push(raw);
            }
        }
        Ok(out)
    }

    /// The first queue offset whose message was stored at or after `ts_ms`
    /// (the queue's max offset when every message is older).
    pub fn search_offset_by_time(
        &self,
        topic: &str,
        queue_id: i32,
        ts_ms: i64,
    ) -> Result<QueueOffset> {
        let Some(q) = self.queues.get(topic, queue_id) else {
            return Ok(QueueOffset(0));
        };
        q.search_by_time(ts_ms, |e| self.store_time_at(e.phys_offset))
    }

    /// Store time of the oldest message still in the queue.
    pub fn earliest_store_time(&self, topic: &str, queue_id: i32) -> Result<Option<i64>> {
        let Some(q) = self.queues.get(topic, queue_id) else {
            return Ok(None);
        };
        Ok(q.entry(q.min_offset())?
            .and_then(|e| self.store_time_at(e.phys_offset)))
    }

    /// Store time of the message at `offset` of a queue (`None` past its
    /// end or before its start).
    pub fn store_time_of(
        &self,
        topic: &str,
        queue_id: i32,
        offset: QueueOffset,
    ) -> Result<Option<i64>> {
        let Some(q) = self.queues.get(topic, queue_id) else {
            return Ok(None);
        };
        if offset < q.min_offset() {
            return Ok(None);
        }
        Ok(q.entry(offset)?
            .and_then(|e| self.store_time_at(e.phys_offset)))
    }

    fn store_time_at(&self, phys: CommitLogOffset) -> Option<i64> {
        let raw = self.read_at(phys).ok()??;
        StoredRecord::decode(&raw)
            .ok()
            .map(|r| r.store_timestamp_ms)
    }

    /// Writes a checkpoint: flushes the log up to the dispatch cursor, syncs
    /// the ConsumeQueues and, when due (`StoreConfig::index_sync_*`), the
    /// index, then records the safe points. A concurrent call returns at
    /// once.
    pub async fn checkpoint(&self) -> Result<()> {
        if self.checkpointing.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        let result = self.write_checkpoint(false).await;
        self.checkpointing.store(false, Ordering::Release);
        result
    }

    /// Writes a checkpoint; `sync_index` syncs the index whether due or not
    /// (a clean stop, a truncation, the end of recovery).
    async fn write_checkpoint(&self, sync_index: bool) -> Result<()> {
        let (mut cp, lens, index_now, synced) = {
            let d = self.lock_dispatcher();
            let queues: Vec<_> = self.queues.all();
            let marks: Vec<QueueMark> = queues
                .iter()
                .map(|q| QueueMark {
                    topic: q.topic().to_owned(),
                    queue_id: q.queue_id(),
                    len: q.max_offset().0,
                    min: Some(q.min_offset().0),
                })
                .collect();
            let synced = *self.lock_index_synced();
            let cp = Checkpoint {
                dispatched: d.cursor,
                last_store_ms: d.last_store_ms,
                index_dispatched: synced.at.min(d.cursor),
                index: synced.mark,
                queues: marks,
            };
            (cp, queues, self.index.mark(), synced)
        };
        self.log
            .wait_durable(CommitLogOffset(cp.dispatched))
            .await?;
        for (q, mark) in lens.iter().zip(&cp.queues) {
            q.sync(QueueOffset(mark.len)).await?;
        }
        if sync_index || self.index_sync_due(&synced, cp.dispatched) {
            self.index.sync().await?;
            let synced = IndexSynced {
                at: cp.dispatched,
                mark: index_now,
                when: self.clock.monotonic(),
            };
            *self.lock_index_synced() = synced;
            (cp.index_dispatched, cp.index) = (synced.at, synced.mark);
        }
        let path = join(&self.config.root, CHECKPOINT_FILE);
        self.disk
            .replace_atomically(&path, &cp.encode())
            .await
            .map_err(|e| Error::io("write", &path, e))
    }

    /// True when the index, `last` synced, has gone unsynced too long, or
    /// over too much of the log, at a checkpoint of `dispatched`.
    fn index_sync_due(&self, last: &IndexSynced, dispatched: u64) -> bool {
        let interval = std::time::Duration::from_millis(self.config.index_sync_interval_ms);
        self.clock.monotonic().saturating_sub(last.when) >= interval
            || dispatched.saturating_sub(last.at) >= self.config.index_sync_lag_bytes
            || dispatched < last.at
    }

    fn lock_index_synced(&self) -> std::sync::MutexGuard<'_, IndexSynced> {
        self.index_synced
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Flushes everything, writes a final checkpoint and removes the abort
    /// marker, so the next start is a clean one. Puts fail afterwards.
    pub async fn shutdown(&self) -> Result<()> {
        self.shut_down.store(true, Ordering::Release);
        self.flush().await?;
        self.write_checkpoint(true).await?;
        let path = join(&self.config.root, ABORT_FILE);
        self.disk
            .remove(&path)
            .map_err(|e| Error::io("remove", &path, e))
    }

    fn lock_dispatcher(&self) -> std::sync::MutexGuard<'_, Dispatcher> {
        self.dispatcher
            .lock()
            .expect("invariant: dispatch lock not poisoned")
    }
}

/// True when `key` is one of the record's `KEYS` or its `UNIQ_KEY`.
fn record_has_key(rec: &StoredRecord, key: &str) -> bool {
    let Ok(props) = crate::message::Properties::parse(&rec.properties) else {
        return false;
    };
    props.uniq_key() == Some(key) || props.keys().any(|k| k == key)
}
