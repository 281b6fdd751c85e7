//! Notes of the records this log's writer has just appended — what dispatch
//! needs of each (its queue, offsets, store time and properties) — so the
//! live dispatch of a record need not read it back through the mapping,
//! check its seal and decode it again: that read-back was about 4 % of the
//! broker's CPU per message at 64 senders and more with batches, where it
//! also faulted in pages the warmer had just unmapped (docs/benchmarks.md,
//! issue 20).
//!
//! A note is only a shortcut: dispatch takes the note of the record at its
//! cursor and reads the log for anything else (pads, blanks, a replica's
//! copied bytes, records whose notes were dropped). So the notes may be
//! incomplete — at most [`NOTES_MAX`] are kept; later appends go without
//! while dispatch is behind (a confirmed-offset gate held back, say) — but
//! never wrong: they are pushed after their run was written, in log order,
//! and cleared whenever the log's tail is rewritten (rewind, a switch to
//! follower). A note shares its message's properties buffer (a reference,
//! not a copy) until dispatch: at most [`NOTES_MAX`] of them are held.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bytes::Bytes;

/// Most notes kept: at 1 KiB per record, 8 MiB of log ahead of dispatch.
pub(crate) const NOTES_MAX: usize = 8192;

/// What dispatch needs of one appended record, or of a unit it passes
/// over (a sector pad, a segment's closing blank).
#[derive(Debug, Clone)]
pub(crate) struct Fresh {
    /// Physical offset of the record.
    pub(crate) phys: u64,
    /// Its total size (of a pad or blank: the bytes to the next unit).
    pub(crate) size: u32,
    /// True for a pad or blank: nothing to dispatch.
    pub(crate) skip: bool,
    /// Its queue id.
    pub(crate) queue_id: i32,
    /// Its queue offset (0 for a record no queue lists).
    pub(crate) queue_offset: u64,
    /// Its SYSFLAG.
    pub(crate) sys_flag: i32,
    /// Its store time.
    pub(crate) store_ms: i64,
    /// Its topic (shared by the notes of a run to one topic).
    pub(crate) topic: Arc<str>,
    /// Its encoded properties (a view of the message's own buffer).
    pub(crate) properties: Bytes,
}

impl Fresh {
    /// The note of a pad or blank at `phys`, `size` bytes up to the next
    /// unit.
    pub(crate) fn skip(phys: u64, size: u64) -> Self {
        Self {
            phys,
            size: u32::try_from(size).unwrap_or(u32::MAX),
            skip: true,
            queue_id: 0,
            queue_offset: 0,
            sys_flag: 0,
            store_ms: 0,
            topic: Arc::from(""),
            properties: Bytes::new(),
        }
    }
}

/// The notes of records appended and not yet dispatched, in log order.
#[derive(Debug, Default)]
pub(crate) struct FreshNotes {
    notes: Mutex<VecDeque<Fresh>>,
}

impl FreshNotes {
    fn lock(&self) -> MutexGuard<'_, VecDeque<Fresh>> {
        self.notes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds the notes of a run just written (in log order, after every
    /// note already held); those past [`NOTES_MAX`] are dropped.
    pub(crate) fn push(&self, run: impl IntoIterator<Item = Fresh>) {
        let mut notes = self.lock();
        for note in run {
            if notes.len() >= NOTES_MAX {
                return;
            }
            notes.push_back(note);
        }
    }

    /// Moves into `out` the notes of the units from `pos` on, one after
    /// another without a gap, that start below `limit`; notes of units below
    /// `pos` are dropped (dispatch read those from the log). One lock for a
    /// whole run of notes. False when there is no note at `pos`.
    pub(crate) fn take_run(&self, pos: u64, limit: u64, out: &mut Vec<Fresh>) -> bool {
        let mut notes = self.lock();
        while notes.front().is_some_and(|n| n.phys < pos) {
            notes.pop_front();
        }
        let held = out.len();
        let mut next = pos;
        while notes
            .front()
            .is_some_and(|n| n.phys == next && n.phys < limit)
        {
            let Some(note) = notes.pop_front() else { break };
            next += u64::from(note.size);
            out.push(note);
        }
        out.len() > held
    }

    /// Forgets every note (the log's tail is about to change).
    pub(crate) fn clear(&self) {
        self.lock().clear();
    }

    /// Notes held now (tests).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note(phys: u64) -> Fresh {
        Fresh {
            phys,
            size: 10,
            skip: false,
            queue_id: 0,
            queue_offset: phys / 10,
            sys_flag: 0,
            store_ms: 0,
            topic: Arc::from("T"),
            properties: Bytes::new(),
        }
    }

    fn taken(notes: &FreshNotes, pos: u64, limit: u64) -> Vec<u64> {
        let mut out = Vec::new();
        let any = notes.take_run(pos, limit, &mut out);
        assert_eq!(any, !out.is_empty());
        out.iter().map(|n| n.phys).collect()
    }

    #[test]
    fn a_run_is_taken_from_its_own_position_and_older_notes_are_dropped() {
        let notes = FreshNotes::default();
        notes.push([note(10), note(20), note(30)]);
        assert!(taken(&notes, 5, 100).is_empty(), "no note at 5; 10 stays");
        assert_eq!(notes.len(), 3);
        assert_eq!(taken(&notes, 10, 100), [10, 20, 30], "one contiguous run");
        notes.push([note(40), note(50), note(60)]);
        // Dispatch read 40 from the log (say after a failure): 40 is stale.
        assert_eq!(taken(&notes, 50, 100), [50, 60]);
        assert_eq!(notes.len(), 0);
        notes.push([note(70)]);
        notes.clear();
        assert!(taken(&notes, 70, 100).is_empty());
    }

    #[test]
    fn a_run_stops_at_a_gap_and_at_the_limit() {
        let notes = FreshNotes::default();
        // 10, 20 and 30 follow each other; the note at 50 leaves a gap.
        notes.push([note(10), note(20), note(30), note(50), note(60)]);
        assert_eq!(taken(&notes, 10, 30), [10, 20], "30 is not below the limit");
        assert_eq!(taken(&notes, 30, 100), [30], "40 has no note: the run ends");
        assert_eq!(notes.len(), 2, "the notes past the gap are kept");
        assert_eq!(taken(&notes, 50, 100), [50, 60]);
    }

    #[test]
    fn past_the_cap_later_notes_are_dropped_not_earlier_ones() {
        let notes = FreshNotes::default();
        let cap = u64::try_from(NOTES_MAX).expect("fits");
        notes.push((0..cap + 5).map(|i| note(i * 10)));
        assert_eq!(notes.len(), NOTES_MAX);
        assert_eq!(taken(&notes, 0, 10), [0]);
        assert!(
            taken(&notes, cap * 10, u64::MAX).is_empty(),
            "dropped at the cap"
        );
    }
}
