//! Verifying the log ahead of a recovery walk, on a helper thread.
//!
//! A walk over a log with no safe point checks every record (seal, body
//! CRC, stored offset: about a third of its CPU) and dispatches it (the
//! rest). Where the disk has a helper thread ([`Disk::run_beside`]) the
//! checks run there, ahead of the walk, and the walk reads the records the
//! helper has passed without checking them again: on two cores the walk
//! takes about as long as the larger of the two halves. The helper
//! publishes how far the log is valid and, where it stops, why — the same
//! answer the walk would have found itself ([`step_viewed`] and
//! [`step_verified_in`] share one definition), so where the checks run
//! changes no result. A helper that goes away without an answer (never
//! run, or it panicked) leaves the walk to check the rest itself.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use bytes::Bytes;

use super::scan::{step_trusted, step_verified_in, step_viewed, Step};
use crate::disk::{Disk, Segment};
use crate::error::Result;
use crate::message::RecordView;
use crate::segment_chain::SegmentChain;

/// The helper publishes its progress, and the walk its position, this
/// often.
const PUBLISH_BYTES: u64 = 1 << 20;

/// The helper waits when this far ahead of the walk: the walk then reads
/// bytes the helper read a moment ago, still in a shared cache, instead of
/// missing on every record (a helper racing ahead through the whole log
/// saved the walk nothing).
const LEAD_BYTES_MAX: u64 = 6 << 20;

/// A walk over the log whose units are verified ahead of it where the disk
/// has a helper thread. Dropping it stops the helper.
pub(crate) struct AheadWalk<'a, D: Disk> {
    chain: &'a SegmentChain<D>,
    ahead: Option<Arc<Shared>>,
    /// Every unit starting below this was verified by the helper.
    known_to: u64,
    /// Where the walk last told the helper it was.
    told: u64,
}

#[derive(Default)]
struct Shared {
    progress: Mutex<Progress>,
    moved: Condvar,
}

#[derive(Default)]
struct Progress {
    /// The helper verified every unit starting below `to`.
    to: u64,
    /// Why the log ends at `to`, once the helper found that it does.
    end: Option<&'static str>,
    /// The helper publishes nothing more.
    over: bool,
    /// Where the walk is (as last told).
    walked: u64,
    /// The walk is still handing the job over: a disk may run it inline
    /// there, with no walk to wait for yet.
    handing_over: bool,
    /// The walk needs nothing more: the helper stops.
    stop: bool,
}

/// What the helper knows about a position.
enum Known {
    /// Every unit below this (past the position) is valid.
    ValidTo(u64),
    /// The log ends at the position, for this reason.
    End(&'static str),
    /// Nothing: the walk checks for itself.
    Nothing,
}

impl<'a, D: Disk> AheadWalk<'a, D> {
    /// A walk starting at `from` (a unit boundary) that needs nothing at or
    /// past `limit`; hands the checks to `disk`'s helper if it has one.
    pub(crate) fn start(disk: &D, chain: &'a SegmentChain<D>, from: u64, limit: u64) -> Self {
        let shared = Arc::new(Shared::default());
        {
            let mut p = shared.lock();
            (p.walked, p.handing_over) = (from, true);
        }
        let (segments, segment_bytes) = (chain.snapshot(), chain.segment_bytes());
        let publisher = Publisher {
            shared: Arc::clone(&shared),
        };
        let job = Box::new(move || {
            let view = ChainView::of(segments, segment_bytes);
            verify(&view, from, limit, &publisher);
        });
        let ahead = disk.run_beside(job).is_ok().then_some(shared);
        if let Some(shared) = &ahead {
            shared.lock().handing_over = false;
        }
        Self {
            chain,
            ahead,
            known_to: from,
            told: from,
        }
    }

    /// What is at `pos`, the walk's next unit boundary, as [`step_viewed`]
    /// finds it (a read the disk fails is an error); the checks are
    /// skipped where the helper made them.
    pub(crate) fn step<T>(
        &mut self,
        pos: u64,
        read: impl FnOnce(&RecordView<'_>) -> T,
    ) -> Result<Step<T>> {
        if pos - self.told.min(pos) >= PUBLISH_BYTES {
            self.tell(pos);
        }
        if pos >= self.known_to {
            match self.wait_for(pos) {
                Known::ValidTo(to) => self.known_to = to,
                Known::End(reason) => return Ok(Step::End(reason)),
                Known::Nothing => self.ahead = None,
            }
        }
        if self.ahead.is_some() && pos < self.known_to {
            step_trusted(self.chain, pos, read)
        } else {
            step_viewed(self.chain, pos, read)
        }
    }

    /// Tells the helper the walk is at `pos`.
    fn tell(&mut self, pos: u64) {
        self.told = pos;
        if let Some(shared) = &self.ahead {
            shared.lock().walked = pos;
            shared.moved.notify_all();
        }
    }

    /// Waits until the helper has passed `pos` or stopped.
    fn wait_for(&self, pos: u64) -> Known {
        let Some(shared) = &self.ahead else {
            return Known::Nothing;
        };
        let mut p = shared.lock();
        loop {
            if p.to > pos {
                return Known::ValidTo(p.to);
            }
            if p.over {
                return match p.end {
                    Some(reason) if p.to == pos => Known::End(reason),
                    _ => Known::Nothing,
                };
            }
            p = shared.moved.wait(p).unwrap_or_else(PoisonError::into_inner);
        }
    }
}

impl<D: Disk> Drop for AheadWalk<'_, D> {
    fn drop(&mut self) {
        if let Some(shared) = &self.ahead {
            shared.lock().stop = true;
            shared.moved.notify_all();
        }
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Progress> {
        self.progress.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The helper's side; dropped unfinished (the job never ran, or it
/// panicked), it tells the walk it will publish nothing more.
struct Publisher {
    shared: Arc<Shared>,
}

impl Publisher {
    /// Publishes that every unit below `to` is valid (and, with `end`,
    /// that the log ends there), then waits while the helper is too far
    /// ahead of the walk; false when the walk wants no more.
    fn publish(&self, to: u64, end: Option<&'static str>) -> bool {
        let mut p = self.shared.lock();
        p.to = to;
        p.end = end;
        p.over |= end.is_some();
        self.shared.moved.notify_all();
        while !p.stop && !p.over && !p.handing_over && to.saturating_sub(p.walked) > LEAD_BYTES_MAX
        {
            p = self
                .shared
                .moved
                .wait(p)
                .unwrap_or_else(PoisonError::into_inner);
        }
        !p.stop
    }
}

impl Drop for Publisher {
    fn drop(&mut self) {
        self.shared.lock().over = true;
        self.shared.moved.notify_all();
    }
}

/// The helper: checks every unit from `from` until the log ends or the
/// walk's `limit`, publishing as it goes.
fn verify(view: &ChainView, from: u64, limit: u64, publisher: &Publisher) {
    let mut pos = from;
    let mut told = from;
    while pos < limit {
        let step = step_verified_in(
            |at| view.head(at),
            |at, len| view.read(at, len),
            view.segment_bytes,
            pos,
        );
        match step {
            Step::Record((), raw) => pos += raw.len() as u64,
            Step::Blank { next } | Step::Pad { next } => pos = next,
            // A segment the helper could not read (EIO) is no answer: the
            // walk reads it itself and fails there, never cuts the log.
            Step::End(_) if view.unreadable(pos) => {
                publisher.publish(pos, None);
                return;
            }
            Step::End(reason) => {
                publisher.publish(pos, Some(reason));
                return;
            }
        }
        if pos - told >= PUBLISH_BYTES {
            if !publisher.publish(pos, None) {
                return;
            }
            told = pos;
        }
    }
    publisher.publish(pos, None);
}

/// The log's segments as they were when the walk started (recovery
/// neither adds nor removes one while it walks), each as one view: the
/// helper's reads slice its own views, so the walk and the helper never
/// count references to one shared mapping per record (two cores bouncing
/// one cache line cost the walk more than the checks it was spared).
struct ChainView {
    segments: BTreeMap<u64, Bytes>,
    /// The segments whose view could not be made (a read the disk failed).
    unreadable: BTreeSet<u64>,
    segment_bytes: u64,
}

impl ChainView {
    fn of<S: Segment>(segments: BTreeMap<u64, Arc<S>>, segment_bytes: u64) -> Self {
        let len = usize::try_from(segment_bytes).unwrap_or(0);
        let mut view = Self {
            segments: BTreeMap::new(),
            unreadable: BTreeSet::new(),
            segment_bytes,
        };
        for (start, seg) in segments {
            if let Ok(bytes) = seg.slice(0, len) {
                view.segments.insert(start, bytes);
            } else {
                view.unreadable.insert(start);
            }
        }
        view
    }

    /// True when `at` lies in a segment the view could not read.
    fn unreadable(&self, at: u64) -> bool {
        self.unreadable.contains(&(at - at % self.segment_bytes))
    }

    fn bytes(&self, at: u64, len: usize) -> Option<(&Bytes, usize)> {
        let rel = at % self.segment_bytes;
        if rel + len as u64 > self.segment_bytes {
            return None;
        }
        Some((self.segments.get(&(at - rel))?, usize::try_from(rel).ok()?))
    }

    fn head(&self, at: u64) -> Option<[u8; 8]> {
        let (seg, rel) = self.bytes(at, 8)?;
        seg.get(rel..rel + 8)?.try_into().ok()
    }

    fn read(&self, at: u64, len: usize) -> Option<Bytes> {
        let (seg, rel) = self.bytes(at, len)?;
        (rel + len <= seg.len()).then(|| seg.slice(rel..rel + len))
    }
}
