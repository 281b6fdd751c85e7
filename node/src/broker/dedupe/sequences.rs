//! Exact dedupe for producers that number their sends (the Sluice client
//! stamps `__SLUICE_PID` and `__SLUICE_SEQ`): per (topic, producer id,
//! lane) the set of sequence numbers stored, as ranges, and the answers of
//! the newest `ANSWERS_MAX` of them. A stored number is a duplicate however
//! long ago it was stored; a number never stored is new, so sends that
//! arrive out of order are never mistaken for duplicates. Bounded: at most
//! `lanes_max` lanes (least recently used dropped first) and `RANGES_MAX`
//! ranges per lane (lowest dropped first); what is dropped is forgotten, and
//! a forgotten number is new again (stored, never lost; the `UNIQ_KEY`
//! window still catches it within the window).

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use indexmap::IndexMap;

use sluice_core::message::{keys, Properties};

use super::key::{Key, Parts};
use super::saved::{Reader, Writer, ORIGINAL_BYTES};
use super::Original;

/// Answers (msgId, queue, offset) kept per lane, newest numbers first. A
/// stored number older than these is still a duplicate, answered without
/// its position ([`Seen::Forgotten`]).
pub const ANSWERS_MAX: usize = 16;
/// Ranges of stored numbers kept per lane. A lane has one range plus one
/// per gap (a number whose send went to another broker group, or failed);
/// past the cap the lowest range is forgotten.
pub const RANGES_MAX: usize = 64;
/// Longest producer id or lane name taken; a longer stamp is ignored (the
/// send is deduplicated by its `UNIQ_KEY` only).
pub const NAME_BYTES_MAX: usize = 128;

/// A send's producer id, lane and sequence number.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stamp<S = String> {
    /// The producer id (`__SLUICE_PID`).
    pub producer: S,
    /// The lane: the broker and queue of the first attempt, as the producer
    /// names them.
    pub lane: S,
    /// The number in the lane (`__SLUICE_SEQ` is `<lane>/<seq>`).
    pub seq: u64,
}

impl Stamp {
    /// The stamp in `props`, if it has a well-formed one.
    pub fn of(props: &Properties) -> Option<Self> {
        Self::from_values(
            props.get(keys::SLUICE_PRODUCER_ID),
            props.get(keys::SLUICE_SEQUENCE),
        )
    }

    /// The stamp of a producer id and a `<lane>/<sequence>` property
    /// value, if both are there and well formed.
    pub fn from_values(producer: Option<&str>, sequence: Option<&str>) -> Option<Self> {
        Stamp::read(producer, sequence).map(|s| Self {
            producer: s.producer.to_owned(),
            lane: s.lane.to_owned(),
            seq: s.seq,
        })
    }
}

impl<'a> Stamp<&'a str> {
    /// [`Stamp::from_values`] borrowing the values (a log walk keeps no
    /// stamp past its record).
    pub fn read(producer: Option<&'a str>, sequence: Option<&'a str>) -> Option<Self> {
        let producer = producer?;
        let (lane, seq) = sequence?.rsplit_once('/')?;
        let seq = seq.parse().ok()?;
        let fits = |s: &str| !s.is_empty() && s.len() <= NAME_BYTES_MAX;
        (fits(producer) && fits(lane)).then_some(Self {
            producer,
            lane,
            seq,
        })
    }
}

/// What a stamped send's number finds.
#[derive(Debug, PartialEq, Eq)]
pub enum Seen {
    /// Stored before, and its answer is kept: answer with it.
    Known(Original),
    /// Stored before, but its answer is no longer kept.
    Forgotten,
    /// Not stored (as far as is remembered).
    New,
}

type LaneId = Key<3>;

#[derive(Default)]
struct Lane {
    /// Stored numbers: range start -> range end (inclusive), disjoint and
    /// not adjacent.
    ranges: BTreeMap<u64, u64>,
    answers: BTreeMap<u64, Original>,
    used: u64,
}

impl Lane {
    fn contains(&self, seq: u64) -> bool {
        self.ranges
            .range(..=seq)
            .next_back()
            .is_some_and(|(_, end)| seq <= *end)
    }

    /// Adds `seq` to the ranges, merging with its neighbours.
    fn insert(&mut self, seq: u64) {
        let below = self.ranges.range(..=seq).next_back().map(|(s, e)| (*s, *e));
        let above = seq
            .checked_add(1)
            .and_then(|next| self.ranges.get(&next).map(|end| (next, *end)));
        let start = match below {
            Some((_, end)) if seq <= end => return,
            Some((start, end)) if end + 1 == seq => start,
            _ => seq,
        };
        let end = match above {
            Some((next, end)) => {
                self.ranges.remove(&next);
                end
            }
            None => seq,
        };
        self.ranges.insert(start, end);
        while self.ranges.len() > RANGES_MAX {
            self.ranges.pop_first();
        }
    }
}

#[derive(Default)]
struct State {
    /// Each lane notes the tick of its last use; the least recently used
    /// is found by a scan when a new lane arrives at the cap (rare: a new
    /// producer, or a queue it had not sent to), instead of keeping an
    /// ordered index up to date on every send.
    lanes: IndexMap<LaneId, Lane>,
    tick: u64,
}

impl State {
    fn touch(&mut self, id: &Parts<'_, 3>) -> Option<&mut Lane> {
        self.tick += 1;
        let tick = self.tick;
        let lane = self.lanes.get_mut(id)?;
        lane.used = tick;
        Some(lane)
    }

    /// The kept answer with the furthest end.
    fn newest_answer(&self) -> Option<Original> {
        self.lanes
            .values()
            .flat_map(|lane| lane.answers.values())
            .max_by_key(|o| o.end)
            .copied()
    }

    /// Forgets the least recently used lane.
    fn evict_oldest(&mut self) {
        let oldest = self
            .lanes
            .values()
            .enumerate()
            .min_by_key(|(_, lane)| lane.used)
            .map(|(index, _)| index);
        if let Some(index) = oldest {
            self.lanes.swap_remove_index(index);
        }
    }
}

/// The lanes of one broker.
pub struct Sequences {
    lanes_max: usize,
    state: Mutex<State>,
}

impl Sequences {
    /// At most `lanes_max` lanes (0: off, every stamp ignored).
    pub fn new(lanes_max: usize) -> Self {
        Self {
            lanes_max,
            state: Mutex::default(),
        }
    }

    /// True when stamps are used at all.
    pub fn enabled(&self) -> bool {
        self.lanes_max > 0
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Lanes remembered now.
    pub fn lanes(&self) -> usize {
        self.lock().lanes.len()
    }

    /// Whether `stamp`'s number was stored on `topic`.
    pub fn check<S: AsRef<str>>(&self, topic: &str, stamp: &Stamp<S>) -> Seen {
        if !self.enabled() {
            return Seen::New;
        }
        let id = lane_id(topic, stamp);
        let mut st = self.lock();
        let Some(lane) = st.touch(&id) else {
            return Seen::New;
        };
        match lane.answers.get(&stamp.seq) {
            Some(original) => Seen::Known(*original),
            None if lane.contains(stamp.seq) => Seen::Forgotten,
            None => Seen::New,
        }
    }

    /// `stamp`'s number was stored on `topic` and answered as `original`
    /// (the first record of a number wins, as its first send did).
    pub fn stored<S: AsRef<str>>(&self, topic: &str, stamp: &Stamp<S>, original: Original) {
        if !self.enabled() {
            return;
        }
        let id = lane_id(topic, stamp);
        let mut st = self.lock();
        if !st.lanes.contains_key(&id) {
            while !st.lanes.is_empty() && st.lanes.len() >= self.lanes_max {
                st.evict_oldest();
            }
            st.lanes.insert(Key::new(id.0), Lane::default());
        }
        let lane = st.touch(&id).expect("invariant: the lane was just ensured");
        if lane.contains(stamp.seq) {
            return;
        }
        lane.insert(stamp.seq);
        lane.answers.insert(stamp.seq, original);
        while lane.answers.len() > ANSWERS_MAX {
            lane.answers.pop_first();
        }
    }

    /// Takes `other`'s lanes (leaving it empty).
    pub(super) fn replace_with(&self, other: &Sequences) {
        let taken = std::mem::take(&mut *other.lock());
        *self.lock() = taken;
    }

    /// Forgets every lane (before a rebuild).
    pub fn clear(&self) {
        *self.lock() = State::default();
    }

    /// Appends the lanes to `out` (the saved window's part, read back by
    /// [`restore`](Self::restore)); returns the newest answer kept (the
    /// one with the furthest end), if any.
    pub(super) fn save(&self, out: &mut Writer) -> Option<Original> {
        let st = self.lock();
        out.u64(st.tick);
        out.u64(st.lanes.len() as u64);
        for (id, lane) in &st.lanes {
            for part in id.parts() {
                out.str(part);
            }
            out.u64(lane.used);
            out.u64(lane.ranges.len() as u64);
            for (start, end) in &lane.ranges {
                out.u64(*start);
                out.u64(*end);
            }
            out.u64(lane.answers.len() as u64);
            for (seq, original) in &lane.answers {
                out.u64(*seq);
                out.original(original);
            }
        }
        st.newest_answer()
    }

    /// Replaces the lanes with those [`save`](Self::save) wrote in
    /// `bytes`, returning the newest answer as `save` did; `Err` (and
    /// nothing changed) when the bytes are not whole, or hold more lanes,
    /// ranges or answers than kept.
    pub(super) fn restore(&self, bytes: &[u8]) -> Result<Option<Original>, ()> {
        let st = self.read(bytes).ok_or(())?;
        let newest = st.newest_answer();
        *self.lock() = st;
        Ok(newest)
    }

    fn read(&self, bytes: &[u8]) -> Option<State> {
        let mut r = Reader(bytes);
        let mut st = State {
            tick: r.u64()?,
            ..State::default()
        };
        let lanes = r.len(3 * 2 + 8 * 3)?;
        if lanes > self.lanes_max {
            return None;
        }
        for _ in 0..lanes {
            let id = Key::new([r.str()?, r.str()?, r.str()?]);
            let mut lane = Lane {
                used: r.u64()?,
                ..Lane::default()
            };
            let ranges = r.len(16)?;
            if ranges > RANGES_MAX {
                return None;
            }
            for _ in 0..ranges {
                lane.ranges.insert(r.u64()?, r.u64()?);
            }
            let answers = r.len(8 + ORIGINAL_BYTES)?;
            if answers > ANSWERS_MAX {
                return None;
            }
            for _ in 0..answers {
                lane.answers.insert(r.u64()?, r.original()?);
            }
            st.lanes.insert(id, lane);
        }
        if !r.0.is_empty() {
            return None;
        }
        Some(st)
    }
}

fn lane_id<'a, S: AsRef<str>>(topic: &'a str, stamp: &'a Stamp<S>) -> Parts<'a, 3> {
    Parts([topic, stamp.producer.as_ref(), stamp.lane.as_ref()])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn original(offset: i64) -> Original {
        Original {
            store_host: "127.0.0.1:10911".parse().expect("addr"),
            phys_offset: offset,
            queue_id: 0,
            queue_offset: offset,
            end: 1_000 + u64::try_from(offset).expect("small"),
        }
    }

    fn stamp(producer: &str, lane: &str, seq: u64) -> Stamp {
        Stamp {
            producer: producer.to_owned(),
            lane: lane.to_owned(),
            seq,
        }
    }

    #[test]
    fn a_stored_number_is_known_and_others_lanes_producers_and_topics_are_new() {
        let s = Sequences::new(10);
        s.stored("T", &stamp("P", "b@0", 1), original(7));
        assert_eq!(
            s.check("T", &stamp("P", "b@0", 1)),
            Seen::Known(original(7))
        );
        assert_eq!(s.check("T", &stamp("P", "b@0", 2)), Seen::New);
        assert_eq!(s.check("T", &stamp("P", "b@1", 1)), Seen::New);
        assert_eq!(s.check("T", &stamp("Q", "b@0", 1)), Seen::New);
        assert_eq!(s.check("U", &stamp("P", "b@0", 1)), Seen::New);
    }

    #[test]
    fn numbers_arriving_out_of_order_or_with_gaps_are_new_until_stored() {
        let s = Sequences::new(10);
        for seq in [1, 2, 5, 3] {
            s.stored(
                "T",
                &stamp("P", "L", seq),
                original(i64::try_from(seq).expect("small")),
            );
        }
        // 4 was never stored (its send went elsewhere, or is still coming):
        // new, not a duplicate, though numbers above it were stored.
        assert_eq!(s.check("T", &stamp("P", "L", 4)), Seen::New);
        assert_eq!(s.check("T", &stamp("P", "L", 6)), Seen::New);
        s.stored("T", &stamp("P", "L", 4), original(4));
        for seq in 1..=5 {
            let offset = i64::try_from(seq).expect("small");
            assert_eq!(
                s.check("T", &stamp("P", "L", seq)),
                Seen::Known(original(offset))
            );
        }
    }

    #[test]
    fn an_old_number_past_the_kept_answers_is_still_a_duplicate() {
        let s = Sequences::new(10);
        let n = u64::try_from(ANSWERS_MAX).expect("small") + 5;
        for seq in 1..=n {
            s.stored(
                "T",
                &stamp("P", "L", seq),
                original(i64::try_from(seq).expect("small")),
            );
        }
        assert_eq!(s.check("T", &stamp("P", "L", 1)), Seen::Forgotten);
        assert_eq!(s.check("T", &stamp("P", "L", 5)), Seen::Forgotten);
        let newest = i64::try_from(n).expect("small");
        assert_eq!(
            s.check("T", &stamp("P", "L", n)),
            Seen::Known(original(newest))
        );
        // A second store of a number keeps the first answer.
        s.stored("T", &stamp("P", "L", n), original(99));
        assert_eq!(
            s.check("T", &stamp("P", "L", n)),
            Seen::Known(original(newest))
        );
    }

    #[test]
    fn past_the_range_cap_the_lowest_numbers_are_forgotten_as_new() {
        let s = Sequences::new(10);
        // Every other number: one range per number.
        let n = u64::try_from(RANGES_MAX).expect("small") + 2;
        for i in 0..n {
            s.stored("T", &stamp("P", "L", 2 * i), original(0));
        }
        assert_eq!(s.check("T", &stamp("P", "L", 0)), Seen::New);
        assert_eq!(s.check("T", &stamp("P", "L", 2)), Seen::New);
        assert_eq!(s.check("T", &stamp("P", "L", 4)), Seen::Forgotten);
    }

    #[test]
    fn past_the_lane_cap_the_least_recently_used_lane_goes_first() {
        let s = Sequences::new(2);
        s.stored("T", &stamp("A", "L", 1), original(1));
        s.stored("T", &stamp("B", "L", 1), original(2));
        // A is used again, so B is the least recently used.
        assert_eq!(s.check("T", &stamp("A", "L", 1)), Seen::Known(original(1)));
        s.stored("T", &stamp("C", "L", 1), original(3));
        assert_eq!(s.lanes(), 2);
        assert_eq!(s.check("T", &stamp("B", "L", 1)), Seen::New);
        assert_eq!(s.check("T", &stamp("A", "L", 1)), Seen::Known(original(1)));
        assert_eq!(s.check("T", &stamp("C", "L", 1)), Seen::Known(original(3)));
    }

    #[test]
    fn stamps_parse_from_properties_and_malformed_ones_are_ignored() {
        let mut p = Properties::new();
        p.insert(keys::SLUICE_PRODUCER_ID, "P1").expect("fits");
        p.insert(keys::SLUICE_SEQUENCE, "broker-a@3/42")
            .expect("fits");
        assert_eq!(Stamp::of(&p), Some(stamp("P1", "broker-a@3", 42)));
        for bad in ["42", "L/", "L/x", "/4", "L/-1"] {
            p.insert(keys::SLUICE_SEQUENCE, bad).expect("fits");
            assert_eq!(Stamp::of(&p), None, "{bad}");
        }
        let off = Sequences::new(0);
        off.stored("T", &stamp("P", "L", 1), original(1));
        assert_eq!(off.check("T", &stamp("P", "L", 1)), Seen::New);
    }
}
