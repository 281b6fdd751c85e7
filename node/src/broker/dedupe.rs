//! The dedupe window of retried sends: per topic, the `UNIQ_KEY`s stored
//! recently (at most `dedupe_window_ms` ago; at least the newest
//! `dedupe_window_keys` over the broker and at most twice as many, dropped
//! a generation at a time — see `ring`), each mapped to where the
//! original was stored and how it was answered. A send whose key is in the
//! window is answered with the original's position and not stored again
//! (see `handlers::send_dedupe` and docs/dedupe.md).
//!
//! A send claims its key before it is stored (a `Pending` slot), so a
//! retry that arrives while the first attempt is still being stored waits
//! for it instead of storing a second copy; the claim is released if the
//! store refuses the message. The window lives in memory and is rebuilt
//! from the CommitLog's tail on open and when a replica becomes master
//! (`rebuild`); a lone broker also saves it (`saved`), so its restart reads
//! back only the log written since the save. One short mutex, never held
//! across an await.
//!
//! Sends stamped with a producer id and sequence number (the Sluice
//! client's) are also checked against `sequences`, exact beyond the window.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use sluice_core::message::indexed_properties::for_each_pair;
use sluice_core::message::sys_flag::TRANSACTION_MASK;
use sluice_core::message::{
    is_dlq_topic, is_retry_topic, keys, offset_msg_id, push_offset_msg_id, RecordView,
    StoredRecord, HALF_TOPIC, OP_HALF_TOPIC, SCHEDULE_TOPIC,
};

use sluice_core::disk::Disk;
use sluice_core::Clock;

pub use self::ring::Ticket;
use self::ring::{Found, Ring};
pub use self::saved::WINDOW_FILE;
use self::saved::{File, Params, Writer};
use self::sequences::{Seen, Sequences, Stamp};
use super::{Broker, TIMER_TOPIC};

mod key;
mod persist;
mod ring;
mod saved;
pub mod sequences;

impl<D: Disk, C: Clock> Broker<D, C> {
    /// The dedupe window of retried sends.
    pub fn dedupe(&self) -> &DedupeWindow {
        &self.dedupe
    }

    /// Refills the dedupe window from the CommitLog's records stored within
    /// it, in log order: on open (a lone broker) and when a replica becomes
    /// master — before its store takes writes, so no send races it — since
    /// its log holds what the old master stored, answered or not, and a
    /// retry that crosses the failover must still be recognised.
    pub(super) fn rebuild_dedupe(&self) {
        if !self.dedupe.enabled() || self.config.mutant_dedupe_not_rebuilt {
            return;
        }
        let now = self.now_ms();
        self.dedupe.clear();
        let since = self.dedupe.rebuild_since_ms(now);
        self.store
            .visit_recent(since, |r| self.dedupe.recovered(r, now));
        tracing::info!(
            keys = self.dedupe.len(),
            producer_lanes = self.dedupe.sequences().lanes(),
            "dedupe window rebuilt"
        );
    }
}

/// Where the original of a key was stored, as its send was answered. Kept
/// without its `msgId` string (built when a duplicate is answered): a
/// window of 100,000 keys holds no string per answer, and recording one
/// allocates nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Original {
    /// The store host of the stored record (the first half of its offset
    /// message id).
    pub store_host: SocketAddr,
    /// Its CommitLog offset (the second half).
    pub phys_offset: i64,
    /// The answered queue (the real queue of a delayed message).
    pub queue_id: i32,
    /// The answered queue offset.
    pub queue_offset: i64,
    /// The CommitLog offset just past the record (what a SYNC-replicated
    /// answer waits for).
    pub end: u64,
}

/// What a send's key finds in the window.
#[derive(Debug, PartialEq, Eq)]
pub enum Claim {
    /// Stored before: answer with the original, store nothing.
    Stored(Original),
    /// Another send with this key is being stored now.
    InFlight,
    /// New, and claimed now: the caller stores it, then calls
    /// [`DedupeWindow::stored_claim`] (or [`DedupeWindow::release_claim`])
    /// with the ticket.
    Claimed(Ticket),
}

impl Original {
    /// The answered `msgId`: the offset message id of the stored record.
    pub fn msg_id(&self) -> String {
        offset_msg_id(self.store_host, self.phys_offset)
    }

    /// Appends [`msg_id`](Self::msg_id) to `out`.
    pub fn push_msg_id(&self, out: &mut String) {
        push_offset_msg_id(out, self.store_host, self.phys_offset);
    }
}

/// A pause in sends saves the window once claims since the last save reach
/// the key cap over this (1,562 at the default 100,000 keys).
pub const IDLE_SAVE_SHARE: u64 = 64;

/// The window.
pub struct DedupeWindow {
    window_ms: u64,
    keys_max: usize,
    state: Mutex<Ring>,
    sequences: Sequences,
    lanes_max: usize,
    sequences_rebuild_ms: u64,
    /// The claims taken when the window was last saved (`u64::MAX`: not
    /// saved yet).
    saved_token: AtomicU64,
    /// The claims taken when the saver last looked.
    seen_token: AtomicU64,
    /// When the window was last saved (the broker's monotonic clock, ms).
    saved_at_ms: AtomicU64,
}

impl DedupeWindow {
    /// A window of `window_ms` that remembers at least the newest
    /// `keys_max` keys and at most twice as many (either 0: off).
    pub fn new(window_ms: u64, keys_max: usize) -> Self {
        Self {
            window_ms,
            keys_max,
            state: Mutex::new(Ring::new(keys_max)),
            sequences: Sequences::new(0),
            lanes_max: 0,
            sequences_rebuild_ms: 0,
            saved_token: AtomicU64::new(u64::MAX),
            seen_token: AtomicU64::new(u64::MAX),
            saved_at_ms: AtomicU64::new(0),
        }
    }

    /// The window and lanes `config` asks for.
    pub fn of(config: &super::BrokerConfig) -> Self {
        Self::new(config.dedupe_window_ms, config.dedupe_window_keys).with_sequences(
            config.dedupe_producer_lanes,
            config.dedupe_sequences_rebuild_ms,
        )
    }

    /// Also checks stamped sends' numbers, in at most `lanes_max` lanes
    /// (0: off), rebuilt on open from the records of the last
    /// `rebuild_ms` (or of the window, if longer). Off while the window is.
    #[must_use]
    pub fn with_sequences(mut self, lanes_max: usize, rebuild_ms: u64) -> Self {
        let lanes_max = if self.enabled() { lanes_max } else { 0 };
        self.sequences = Sequences::new(lanes_max);
        self.lanes_max = lanes_max;
        self.sequences_rebuild_ms = rebuild_ms;
        self
    }

    /// The stamped sends' numbers.
    pub fn sequences(&self) -> &Sequences {
        &self.sequences
    }

    /// Whether a stamped send was stored before (`Seen::New` when unstamped
    /// or when stamps are off).
    pub fn seen(&self, topic: &str, stamp: Option<&Stamp>) -> Seen {
        stamp.map_or(Seen::New, |s| self.sequences.check(topic, s))
    }

    /// True when sends are deduplicated at all.
    pub fn enabled(&self) -> bool {
        self.window_ms > 0 && self.keys_max > 0
    }

    fn lock(&self) -> MutexGuard<'_, Ring> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Keys stored in the window now (claims in flight not counted).
    pub fn len(&self) -> usize {
        self.lock().stored_keys()
    }

    /// True when no key is stored in the window.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Looks `key` of `topic` up at `now_ms`, claiming it when new, with
    /// no bound on where its record will be stored (a save taken while
    /// the claim stands replays the whole log: see [`claim_at`]).
    ///
    /// [`claim_at`]: Self::claim_at
    pub fn claim(&self, topic: &str, key: &str, now_ms: i64) -> Claim {
        self.claim_at(topic, key, now_ms, 0)
    }

    /// [`claim`](Self::claim) by a send whose record, if stored, starts at
    /// or after log position `log_at` (the log's written end, read before
    /// the call): a save taken while the claim stands replays from there.
    pub fn claim_at(&self, topic: &str, key: &str, now_ms: i64, log_at: u64) -> Claim {
        let cutoff = self.since_ms(now_ms);
        let mut ring = self.lock();
        ring.expire(cutoff);
        let id = ring.id(topic, key);
        match ring.claim(id, cutoff, log_at) {
            Found::Stored(original) => Claim::Stored(original),
            Found::InFlight => Claim::InFlight,
            Found::Claimed(ticket) => Claim::Claimed(ticket),
        }
    }

    /// The key claimed under `ticket` (a send to `topic` stamped `stamp`,
    /// if any) was stored at `stored_ms` as `original`: the send path's
    /// [`stored`](Self::stored), without the key's strings or a second
    /// hash of them.
    pub fn stored_claim(
        &self,
        ticket: Ticket,
        stamped: Option<(&str, &Stamp)>,
        original: Original,
        stored_ms: i64,
    ) {
        if let Some((topic, stamp)) = stamped {
            self.sequences.stored(topic, stamp, original);
        }
        let mut ring = self.lock();
        ring.store_claimed(ticket, original, stored_ms);
        ring.expire(self.since_ms(stored_ms));
    }

    /// The key claimed under `ticket` was not stored: forget the claim.
    pub fn release_claim(&self, ticket: Ticket) {
        self.lock().release_claim(ticket);
    }

    /// The claimed key (and `stamp`, if any) was stored at `stored_ms` as
    /// `original`.
    pub fn stored(
        &self,
        topic: &str,
        key: &str,
        stamp: Option<&Stamp>,
        original: Original,
        stored_ms: i64,
    ) {
        if let Some(stamp) = stamp {
            self.sequences.stored(topic, stamp, original);
        }
        let mut ring = self.lock();
        let id = ring.id(topic, key);
        ring.store(id, original, stored_ms);
        ring.expire(self.since_ms(stored_ms));
    }

    /// The claimed key was not stored: forget the claim.
    pub fn release(&self, topic: &str, key: &str) {
        let mut ring = self.lock();
        let id = ring.id(topic, key);
        ring.release(id);
    }

    /// The stored time from which records belong in the window at `now_ms`.
    pub fn since_ms(&self, now_ms: i64) -> i64 {
        now_ms.saturating_sub(i64::try_from(self.window_ms).unwrap_or(i64::MAX))
    }

    /// The stored time from which records are read to rebuild the window
    /// and the stamped sends' numbers at `now_ms`.
    pub fn rebuild_since_ms(&self, now_ms: i64) -> i64 {
        let span = self.window_ms.max(if self.sequences.enabled() {
            self.sequences_rebuild_ms
        } else {
            0
        });
        now_ms.saturating_sub(i64::try_from(span).unwrap_or(i64::MAX))
    }

    /// The parameters a saved window must have been saved under.
    fn params(&self) -> Params {
        Params {
            window_ms: self.window_ms,
            keys_max: self.keys_max as u64,
            lanes_max: self.lanes_max as u64,
        }
    }

    /// The window's saved form for a log whose written end was `written`
    /// (read before the call), and the claims taken when it was copied
    /// (for [`mark_saved`](Self::mark_saved)). The stored keys are copied
    /// under the lock (two arrays, no per-key work) and the lanes encoded
    /// after, so each lane holds at least what the copied keys do.
    pub fn save(&self, written: u64) -> (Vec<u8>, u64) {
        let (ring, token) = {
            let ring = self.lock();
            (ring.snapshot(), ring.claims_taken())
        };
        let from = ring.claims_from.map_or(written, |c| c.min(written));
        let mut lanes = Writer(Vec::new());
        let newest_answer = self.sequences.save(&mut lanes);
        let covered_end = File::keys_end(&ring).max(newest_answer.map_or(0, |o| o.end));
        let file = File {
            params: self.params(),
            from,
            covered_end,
            ring,
            lanes: lanes.0,
        };
        (file.encode(), token)
    }

    /// True, at `now_ms`, when the window changed since it was last saved
    /// and either `interval_ms` passed since the last save, or `force`, or
    /// sends paused (no claim since the previous call) after at least
    /// [`IDLE_SAVE_SHARE`] of the key cap's worth of claims since the last
    /// save: a save writes the whole window while a restart replays only
    /// the records since it, so a broker with sparse sends saves on the
    /// interval and one that paused after a burst saves at once.
    pub fn save_due(&self, now_ms: u64, interval_ms: u64, force: bool) -> bool {
        let token = self.lock().claims_taken();
        let seen = self.seen_token.swap(token, Ordering::Relaxed);
        let saved = self.saved_token.load(Ordering::Relaxed);
        if token == saved {
            return false;
        }
        let waited = now_ms.saturating_sub(self.saved_at_ms.load(Ordering::Relaxed));
        let burst = (self.keys_max as u64 / IDLE_SAVE_SHARE).max(1);
        let since = if saved == u64::MAX {
            u64::MAX
        } else {
            token.wrapping_sub(saved)
        };
        force || waited >= interval_ms || (seen == token && since >= burst)
    }

    /// The window as copied at `token` claims was saved at `now_ms`.
    pub fn mark_saved(&self, token: u64, now_ms: u64) {
        self.saved_token.store(token, Ordering::Relaxed);
        self.saved_at_ms.store(now_ms, Ordering::Relaxed);
    }

    /// Reads a saved window: the file, its lanes (in a table of their
    /// own until installed) and their newest answer; why not, when the
    /// bytes are not an intact file saved under this window's parameters.
    fn load(
        &self,
        bytes: &[u8],
    ) -> std::result::Result<(File, Sequences, Option<Original>), &'static str> {
        let file = File::decode(bytes).ok_or("not an intact file")?;
        if file.params != self.params() {
            return Err("saved under other parameters");
        }
        let lanes = Sequences::new(self.lanes_max);
        let newest = lanes
            .restore(&file.lanes)
            .map_err(|()| "its lanes are not whole or exceed the caps")?;
        Ok((file, lanes, newest))
    }

    /// Replaces the window's keys with the file's and its lanes with
    /// `lanes`; false (nothing changed) while a claim is in flight.
    fn install(&self, file: &File, lanes: &Sequences) -> bool {
        if !self.lock().restore(&file.ring) {
            return false;
        }
        self.sequences.replace_with(lanes);
        true
    }

    /// Replaces the window with the keys of `records` (read in log order,
    /// stored at or after `since_ms(now_ms)`): `clear`, then `recovered`
    /// for each.
    pub fn rebuild<'a>(&self, records: impl IntoIterator<Item = &'a StoredRecord>, now_ms: i64) {
        self.clear();
        for rec in records {
            self.recovered(&rec.view(), now_ms);
        }
    }

    /// Empties the window of stored keys (before a rebuild); claims in
    /// flight stay, so their sends still end as they would have and a
    /// retry racing one still waits for it.
    pub fn clear(&self) {
        self.lock().clear_stored();
        self.sequences.clear();
    }

    /// Adds the key of a record read back from the log, in log order: the
    /// first record of a key wins, as the first send of it did. Memory
    /// stays bounded by the cap while a rebuild walks on.
    pub fn recovered(&self, rec: &RecordView<'_>, now_ms: i64) {
        let Some(sent) = original_of(rec) else {
            return;
        };
        if let Some(stamp) = &sent.stamp {
            self.sequences.stored(sent.topic, stamp, sent.original);
        }
        let cutoff = self.since_ms(now_ms);
        let mut ring = self.lock();
        let id = ring.id(sent.topic, sent.key);
        if !ring.holds(id, cutoff) {
            ring.store(id, sent.original, rec.store_timestamp_ms);
            ring.expire(cutoff);
        }
    }
}

/// True when a send to `topic` is deduplicated: not a retry or dead-letter
/// topic (consumers' send-backs), not a transaction's system topics.
pub fn dedupes_topic(topic: &str) -> bool {
    !(is_retry_topic(topic) || is_dlq_topic(topic) || topic == HALF_TOPIC || topic == OP_HALF_TOPIC)
}

/// What a stored record puts in the window, read in place.
pub struct Sent<'a> {
    /// The topic it was sent to.
    pub topic: &'a str,
    /// Its `UNIQ_KEY`.
    pub key: &'a str,
    /// Its producer's stamp, if any.
    pub stamp: Option<Stamp<&'a str>>,
    /// How its send was answered.
    pub original: Original,
}

/// The topic, key, stamp and original a stored record puts in the window, as the
/// send path would have: records a producer sent (normal, or delayed and
/// still parked in the schedule or timer topic, under their real topic and
/// queue), never transactional records, delivered copies of delayed
/// messages (they carry `REAL_TOPIC`) nor send-backs. Reads the properties
/// in place (the values `Properties::parse` would give), allocating
/// nothing: a rebuild reads minutes of log through this.
pub fn original_of<'a>(rec: &RecordView<'a>) -> Option<Sent<'a>> {
    if rec.sys_flag & TRANSACTION_MASK != 0 {
        return None;
    }
    let (mut key, mut real_topic, mut real_qid, mut producer, mut sequence) =
        (None, None, None, None, None);
    for_each_pair(rec.properties, |k, v| match k {
        keys::UNIQ_KEY => key = Some(v),
        keys::REAL_TOPIC => real_topic = Some(v),
        keys::REAL_QID => real_qid = Some(v),
        keys::SLUICE_PRODUCER_ID => producer = Some(v),
        keys::SLUICE_SEQUENCE => sequence = Some(v),
        _ => {}
    });
    let key = key?;
    let parked = rec.topic == SCHEDULE_TOPIC || rec.topic == TIMER_TOPIC;
    let (topic, queue_id) = if parked {
        (real_topic?, real_qid?.trim().parse().ok()?)
    } else if real_topic.is_some() {
        return None;
    } else {
        (rec.topic, rec.queue_id)
    };
    if !dedupes_topic(topic) || key.is_empty() {
        return None;
    }
    let end = u64::try_from(rec.phys_offset).ok()? + u64::from(rec.total_size);
    let original = Original {
        store_host: rec.store_host,
        phys_offset: rec.phys_offset,
        queue_id,
        queue_offset: rec.queue_offset,
        end,
    };
    Some(Sent {
        topic,
        key,
        stamp: Stamp::read(producer, sequence),
        original,
    })
}

#[cfg(test)]
mod tests;
