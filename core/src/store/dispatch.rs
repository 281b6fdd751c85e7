//! Dispatch: walks the CommitLog in order from the cursor and adds each
//! record's ConsumeQueue entry and index keys. One code path serves live
//! appends and recovery. Invariant: the cursor only moves over records
//! whose entries have been written, so everything below it is visible.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::clock::Clock;
use crate::commit_log::fresh::Fresh;
use crate::commit_log::is_dispatchable;
use crate::commit_log::scan::{step_fresh_or_io, Step};
use crate::consume_queue::{ConsumeQueue, CqEntry};
use crate::disk::Disk;
use crate::error::{Error, Result};
use crate::index::topic_key_prefix;
use crate::message::{
    java_string_hash_extend, tags_code, IndexedProperties, RecordView, StoredRecord,
};
use crate::offset::{CommitLogOffset, QueueOffset};

use super::MessageStore;

/// Told `(topic, queue_id, new max offset)` whenever messages become
/// visible; must be cheap and must not call back into the store's put path.
pub type ArrivalListener = Arc<dyn Fn(&str, i32, QueueOffset) + Send + Sync>;

/// Which derived structures a dispatch writes: everything (live appends
/// and the scan after the checkpoint) or only what recovery is rebuilding.
#[derive(Clone, Copy)]
pub(crate) enum Scope<'a> {
    /// Every ConsumeQueue and the index.
    All,
    /// Like `All`, for the records recovery finds after the safe point.
    Scan,
    /// Only the listed (damaged) queues, and the index when it is rebuilt.
    Rebuild {
        queues: &'a BTreeSet<(String, i32)>,
        index: bool,
    },
}

/// What dispatch reads of a record: from the record read back from the
/// log, or from the note its appender left (`commit_log::fresh`).
pub(crate) struct Dispatched<'a> {
    pub(crate) topic: &'a str,
    pub(crate) queue_id: i32,
    pub(crate) queue_offset: i64,
    pub(crate) phys_offset: i64,
    pub(crate) total_size: u32,
    pub(crate) sys_flag: i32,
    pub(crate) store_timestamp_ms: i64,
    pub(crate) properties: &'a [u8],
}

impl<'a> From<&RecordView<'a>> for Dispatched<'a> {
    fn from(rec: &RecordView<'a>) -> Self {
        Self {
            topic: rec.topic,
            queue_id: rec.queue_id,
            queue_offset: rec.queue_offset,
            phys_offset: rec.phys_offset,
            total_size: rec.total_size,
            sys_flag: rec.sys_flag,
            store_timestamp_ms: rec.store_timestamp_ms,
            properties: rec.properties,
        }
    }
}

impl<'a> From<&'a StoredRecord> for Dispatched<'a> {
    fn from(rec: &'a StoredRecord) -> Self {
        Self::from(&rec.view())
    }
}

impl<'a> From<&'a Fresh> for Dispatched<'a> {
    fn from(note: &'a Fresh) -> Self {
        Self {
            topic: &note.topic,
            queue_id: note.queue_id,
            queue_offset: i64::try_from(note.queue_offset).unwrap_or(i64::MAX),
            phys_offset: i64::try_from(note.phys).unwrap_or(i64::MAX),
            total_size: note.size,
            sys_flag: note.sys_flag,
            store_timestamp_ms: note.store_ms,
            properties: &note.properties,
        }
    }
}

/// The queues a dispatch grew, each with its new max offset, in the
/// order the runs ended (a queue may appear more than once; the later
/// entry is its max). Kept as the queues themselves: nothing is copied per
/// run, and no map is built for the one or two queues a send touches.
type Grown<D> = Vec<(Arc<ConsumeQueue<D>>, QueueOffset)>;

/// Runs noted before [`compact_grown`] folds the list (a catch-up over a
/// long log with queues interleaved stays bounded).
const GROWN_FOLD_AT: usize = 4_096;

/// Each queue of `grown` once, with its latest max, in (topic, queue)
/// order.
fn compact_grown<D: Disk>(grown: &mut Grown<D>) {
    if grown.len() < 2 {
        return;
    }
    // Stable: among one queue's entries the last noted stays last.
    grown.sort_by(|(a, _), (b, _)| (a.topic(), a.queue_id()).cmp(&(b.topic(), b.queue_id())));
    // `dedup_by` hands the later entry first; the earlier one is kept,
    // with the later max.
    grown.dedup_by(|(later, later_max), (kept, kept_max)| {
        let same = later.queue_id() == kept.queue_id() && later.topic() == kept.topic();
        if same {
            *kept_max = *later_max;
        }
        same
    });
}

/// The queue of a run of records being dispatched (a batch's records
/// share one), and its new max offset once an entry went in.
struct LastQueue<D: Disk> {
    cq: Arc<ConsumeQueue<D>>,
    grown: Option<QueueOffset>,
}

fn note_run_grown<D: Disk>(grown: &mut Grown<D>, run: Option<LastQueue<D>>) {
    if let Some(LastQueue {
        cq,
        grown: Some(max),
    }) = run
    {
        grown.push((cq, max));
        if grown.len() >= GROWN_FOLD_AT {
            compact_grown(grown);
        }
    }
}

/// How many records at the head of `notes` form one run: dispatchable
/// records (not pads) of one queue with consecutive queue offsets. At
/// least one when the first is such a record.
fn queue_run_len(notes: &[Fresh]) -> usize {
    let Some(first) = notes.first() else {
        return 0;
    };
    1 + notes
        .windows(2)
        .take_while(|pair| {
            let (a, b) = (&pair[0], &pair[1]);
            !b.skip
                && is_dispatchable(b.sys_flag)
                && b.queue_id == a.queue_id
                && a.queue_offset.checked_add(1) == Some(b.queue_offset)
                && (Arc::ptr_eq(&b.topic, &first.topic) || b.topic == first.topic)
        })
        .count()
}

/// The dispatch cursor.
#[derive(Debug, Default)]
pub(crate) struct Dispatcher {
    /// CommitLog offset up to which records are dispatched (and visible).
    pub(crate) cursor: u64,
    /// Store time of the last dispatched record.
    pub(crate) last_store_ms: i64,
}

impl Dispatcher {
    /// Moves the cursor over the noted unit at it, dispatched (or nothing
    /// to dispatch); a record's store time becomes the last one.
    fn pass(&mut self, note: &Fresh) {
        if !note.skip {
            self.last_store_ms = note.store_ms;
        }
        self.cursor += u64::from(note.size);
    }
}

impl<D: Disk, C: Clock> MessageStore<D, C> {
    /// Dispatches every record below `limit` and below the confirmed-offset
    /// gate not yet dispatched, then tells the arrival listener which
    /// queues grew.
    pub(crate) fn dispatch_to(&self, limit: u64) -> Result<()> {
        self.dispatch_to_ungated(limit.min(self.confirmed().0))
    }

    /// Like [`dispatch_to`](Self::dispatch_to), ignoring the gate.
    pub(crate) fn dispatch_to_ungated(&self, limit: u64) -> Result<()> {
        let mut grown = Grown::new();
        let outcome = {
            let mut d = self.lock_dispatcher();
            self.dispatch_below(&mut d, limit, &mut grown)
        };
        // Queues that grew before a failure are told too: their records are
        // visible, and a parked long poll must not miss them.
        let listener = self
            .listener
            .read()
            .expect("invariant: lock not poisoned")
            .clone();
        if let Some(listener) = listener {
            compact_grown(&mut grown);
            for (cq, max) in grown {
                listener(cq.topic(), cq.queue_id(), max);
            }
        }
        outcome
    }

    /// Moves the cursor over every record below `limit`, noting in `grown`
    /// each queue's new max offset. A disk error (ENOSPC creating a queue
    /// segment or an index file, EIO reading the log) stops it with the
    /// cursor on the record that failed, to be retried by a later dispatch;
    /// only a record that is not valid fences the store.
    fn dispatch_below(&self, d: &mut Dispatcher, limit: u64, grown: &mut Grown<D>) -> Result<()> {
        let mut last = None;
        let result = self.dispatch_runs_below(d, limit, &mut last, grown);
        // The last run's queue grew too (before a failure as well).
        note_run_grown(grown, last);
        result
    }

    fn dispatch_runs_below(
        &self,
        d: &mut Dispatcher,
        limit: u64,
        last: &mut Option<LastQueue<D>>,
        grown: &mut Grown<D>,
    ) -> Result<()> {
        let mut notes = Vec::new();
        while d.cursor < limit {
            // Units this process just appended: from their notes.
            if self.log.take_fresh_run(d.cursor, limit, &mut notes) {
                let outcome = self.dispatch_notes(d, &notes, last, grown);
                notes.clear();
                outcome?;
                continue;
            }
            match step_fresh_or_io(self.log.chain(), d.cursor)? {
                Step::Record(rec, _) => {
                    self.dispatch_in_run(&Dispatched::from(&*rec), last, grown)?;
                    d.cursor += u64::from(rec.total_size);
                    d.last_store_ms = rec.store_timestamp_ms;
                }
                Step::Blank { next } | Step::Pad { next } => d.cursor = next,
                Step::End(reason) => {
                    let e = Error::Corrupt {
                        path: "commitlog".to_owned(),
                        offset: d.cursor,
                        reason,
                    };
                    self.log.poison(e.to_string());
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// Dispatches the units of `notes` (contiguous, the first at the
    /// cursor), moving the cursor over each run of records as its entries
    /// and keys go in: see [`dispatch_note_run`](Self::dispatch_note_run).
    fn dispatch_notes(
        &self,
        d: &mut Dispatcher,
        notes: &[Fresh],
        last: &mut Option<LastQueue<D>>,
        grown: &mut Grown<D>,
    ) -> Result<()> {
        let mut rest = notes;
        while let Some(note) = rest.first() {
            if note.skip || !is_dispatchable(note.sys_flag) {
                d.pass(note);
                rest = &rest[1..];
                continue;
            }
            let (run, after) = rest.split_at(queue_run_len(rest));
            self.dispatch_note_run(d, run, last, grown)?;
            rest = after;
        }
        Ok(())
    }

    /// Dispatches a run of noted records of one queue with consecutive
    /// queue offsets (a batch's records): their ConsumeQueue entries in a
    /// few stores ([`ConsumeQueue::append_run`]) and their keys under one
    /// index lock ([`crate::index::IndexService::put_run`]), not one lookup
    /// and lock per record. The cursor moves over the run once both are in;
    /// after a failure a retry finds some entries written and takes the
    /// records one by one, as it always did.
    fn dispatch_note_run(
        &self,
        d: &mut Dispatcher,
        run: &[Fresh],
        last: &mut Option<LastQueue<D>>,
        grown: &mut Grown<D>,
    ) -> Result<()> {
        let Some(first) = run.first() else {
            return Ok(());
        };
        let queue = self.run_queue(&first.topic, first.queue_id, last, grown)?;
        let q = QueueOffset(first.queue_offset);
        if q < queue.cq.max_offset() {
            for note in run {
                self.dispatch_in_run(&Dispatched::from(note), last, grown)?;
                d.pass(note);
            }
            return Ok(());
        }
        let props: Vec<IndexedProperties<'_>> = run
            .iter()
            .map(|note| IndexedProperties::scan(&note.properties))
            .collect();
        let entries: Vec<CqEntry> = run
            .iter()
            .zip(&props)
            .map(|(note, p)| CqEntry {
                phys_offset: CommitLogOffset(note.phys),
                size: note.size,
                tags_code: p.tags.map_or(0, tags_code),
            })
            .collect();
        let appended = queue.cq.append_run(q, &entries);
        // Entries in before a failure are visible: announce them.
        let max = queue.cq.max_offset();
        if max > q {
            queue.grown = Some(max);
        }
        appended?;
        let prefix = topic_key_prefix(&first.topic);
        let mut keys = Vec::with_capacity(run.len());
        for (note, p) in run.iter().zip(&props) {
            for key in p.uniq_key.into_iter().chain(p.keys()) {
                keys.push((
                    java_string_hash_extend(prefix, key),
                    CommitLogOffset(note.phys),
                    note.store_ms,
                ));
            }
        }
        self.index.put_run(&keys)?;
        for note in run {
            d.pass(note);
        }
        Ok(())
    }

    /// The queue of a run of records, kept from the run before when it is
    /// the same; the queue a run grew is noted when the run ends.
    fn run_queue<'l>(
        &self,
        topic: &str,
        queue_id: i32,
        last: &'l mut Option<LastQueue<D>>,
        grown: &mut Grown<D>,
    ) -> Result<&'l mut LastQueue<D>> {
        let same = last
            .as_ref()
            .is_some_and(|l| l.cq.queue_id() == queue_id && l.cq.topic() == topic);
        if !same {
            note_run_grown(grown, last.take());
            let (cq, _) = self.queues.get_or_open(topic, queue_id)?;
            *last = Some(LastQueue { cq, grown: None });
        }
        Ok(last.as_mut().expect("invariant: set above"))
    }

    /// Dispatches one live record (`Scope::All`) of a run that shares its
    /// queue with the record before, looking the queue up only when it
    /// changes; the queue a run grew is noted when the run ends.
    fn dispatch_in_run(
        &self,
        rec: &Dispatched<'_>,
        last: &mut Option<LastQueue<D>>,
        grown: &mut Grown<D>,
    ) -> Result<()> {
        if !is_dispatchable(rec.sys_flag) {
            return Ok(());
        }
        let run = self.run_queue(rec.topic, rec.queue_id, last, grown)?;
        if let Some(max) = self.dispatch_into(rec, Scope::All, Some(&run.cq))? {
            run.grown = Some(max);
        }
        Ok(())
    }

    /// Adds one record's ConsumeQueue entry and index keys; returns the
    /// queue's new max offset when an entry was added.
    pub(crate) fn dispatch_record(
        &self,
        rec: &Dispatched<'_>,
        scope: Scope<'_>,
    ) -> Result<Option<QueueOffset>> {
        if !is_dispatchable(rec.sys_flag) {
            return Ok(None);
        }
        let to_queue = match scope {
            Scope::All | Scope::Scan => true,
            Scope::Rebuild { queues, .. } => queues.contains(&(rec.topic.to_owned(), rec.queue_id)),
        };
        let cq = if to_queue {
            Some(self.queues.get_or_open(rec.topic, rec.queue_id)?.0)
        } else {
            None
        };
        self.dispatch_into(rec, scope, cq.as_ref())
    }

    /// Adds a dispatchable record's entry to `cq` (its queue, when this
    /// dispatch writes it) and its index keys when `scope` indexes.
    fn dispatch_into(
        &self,
        rec: &Dispatched<'_>,
        scope: Scope<'_>,
        cq: Option<&Arc<ConsumeQueue<D>>>,
    ) -> Result<Option<QueueOffset>> {
        let props = IndexedProperties::scan(rec.properties);
        let phys = CommitLogOffset(u64::try_from(rec.phys_offset).unwrap_or(0));
        let to_index = match scope {
            Scope::All | Scope::Scan => true,
            Scope::Rebuild { index, .. } => index,
        };
        let mut grown = None;
        if let Some(cq) = cq {
            let q = QueueOffset(u64::try_from(rec.queue_offset).unwrap_or(0));
            let mut entry = CqEntry {
                phys_offset: phys,
                size: rec.total_size,
                tags_code: props.tags.map_or(0, tags_code),
            };
            let recovering = matches!(scope, Scope::Rebuild { .. } | Scope::Scan);
            if self.config.mutant_shifted_rebuild && recovering {
                if let Some(before) = q.0.checked_sub(1).map(QueueOffset) {
                    entry = cq.entry(before)?.unwrap_or(entry);
                }
            }
            // An earlier dispatch of this record may have written its entry
            // and then failed on the index (ENOSPC rolling an index file):
            // the retry must not refuse its own entry as a rewrite.
            let written_before = q < cq.max_offset() && cq.entry(q)? == Some(entry);
            if !written_before {
                cq.append(q, entry)?;
            }
            grown = Some(q.plus(1));
        }
        if !to_index {
            return Ok(grown);
        }
        let keys = props.uniq_key.into_iter().chain(props.keys());
        self.index
            .put_keys(rec.topic, keys, phys, rec.store_timestamp_ms)?;
        Ok(grown)
    }
}
