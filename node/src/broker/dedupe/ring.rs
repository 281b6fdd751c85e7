//! The window's keys: two generations of stored keys (the current one takes
//! every new key; when it holds the cap, it becomes the previous one and
//! the old previous one is dropped whole), and the claims in flight apart.
//!
//! A key is kept as a 128-bit identity: the keyed SipHash-1-3 (128-bit
//! output) of its topic and text, not the text. An item is a fixed-size
//! value in its generation's array (written in store order), found through
//! a table of 4-byte indices: no allocation per key, nothing to free when
//! it goes. Two different keys share an identity with probability about
//! 2^-128 per pair (the hash is keyed with a secret drawn when the window
//! is first made, so no client can aim for it): below 10^-28 for a full
//! window of 200,000 keys. The secret is saved with the window (`saved`),
//! so identities read back from the file are the ones the next process
//! computes.
//!
//! Why generations: a window that drops exactly its oldest key per new one
//! must find that key's table slot, which is cold (stored 100,000 sends
//! ago), and free its key. That eviction was the largest single part of the
//! window's cost on the send path (two dependent cache misses per send).
//! Dropping a generation whole costs one pass over its control bytes per
//! `cap` sends, and the tables keep their memory for the next generation.
//! The price is the cap's meaning: the window remembers at least the newest
//! `cap` keys and at most twice as many (docs/dedupe.md). Time expiry stays
//! exact: a stored key older than the window is never answered from, and a
//! generation whose newest key is older than the window is dropped.

use std::hash::{BuildHasher, Hasher, RandomState};

use hashbrown::HashTable;
use siphasher::sip128::{Hasher128, SipHasher13};

use super::Original;

/// A key's identity: its topic and text under the keyed 128-bit hash. `lo`
/// is also its hash in the tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Id {
    pub(super) lo: u64,
    pub(super) hi: u64,
}

/// One stored key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Stored {
    pub(super) id: Id,
    pub(super) original: Original,
    pub(super) at_ms: i64,
}

/// The secret the identities are hashed with.
pub(super) type Secret = (u64, u64);

/// One generation as saved: its newest store time and its items in store
/// order (an item whose key was stored again later may still stand in an
/// older generation; the newer item shadows it).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Saved {
    pub(super) newest_ms: i64,
    pub(super) items: Vec<Stored>,
}

/// The stored keys of a ring at one moment, and the lowest log position
/// a claim in flight then could store its record at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Snapshot {
    pub(super) secret: Secret,
    pub(super) previous: Saved,
    pub(super) current: Saved,
    /// `None` when no claim was in flight.
    pub(super) claims_from: Option<u64>,
}

/// Keys stored in one span of sends: the items in store order, and a
/// table from each key's identity to its item (4 bytes a slot, so the
/// table a lookup touches stays small; the items are written in order).
struct Generation {
    table: HashTable<u32>,
    items: Vec<Stored>,
    /// The newest store time in the generation (`i64::MIN` when empty).
    newest_ms: i64,
}

impl Default for Generation {
    fn default() -> Self {
        Self {
            table: HashTable::new(),
            items: Vec::new(),
            newest_ms: i64::MIN,
        }
    }
}

impl Generation {
    fn item(&self, at: u32) -> &Stored {
        &self.items[at as usize]
    }

    fn get(&self, id: Id) -> Option<&Stored> {
        let at = self.table.find(id.lo, |&at| self.item(at).id == id)?;
        Some(self.item(*at))
    }

    fn remove(&mut self, id: Id) {
        let items = &self.items;
        if let Ok(e) = self
            .table
            .find_entry(id.lo, |&at| items[at as usize].id == id)
        {
            e.remove();
        }
    }

    /// Keys in the generation.
    fn len(&self) -> usize {
        self.table.len()
    }

    /// Puts the item: over the key's older item, if it has one here.
    fn put(&mut self, item: Stored) {
        let id = item.id;
        let items = &mut self.items;
        let slot = self.table.entry(
            id.lo,
            |&at| items[at as usize].id == id,
            |&at| items[at as usize].id.lo,
        );
        match slot {
            hashbrown::hash_table::Entry::Occupied(e) => items[*e.get() as usize] = item,
            hashbrown::hash_table::Entry::Vacant(v) => {
                let at = u32::try_from(items.len()).unwrap_or(u32::MAX);
                items.push(item);
                v.insert(at);
            }
        }
        self.newest_ms = self.newest_ms.max(item.at_ms);
    }

    /// Empties the generation, keeping its memory.
    fn clear(&mut self) {
        self.table.clear();
        self.items.clear();
        self.newest_ms = i64::MIN;
    }
}

/// The identity of `key` on `topic` under `secret`.
pub(super) fn identity(secret: Secret, topic: &str, key: &str) -> Id {
    let mut h = SipHasher13::new_with_keys(secret.0, secret.1);
    // Each part ends with a byte no UTF-8 text holds, so parts that
    // concatenate alike differ.
    h.write(topic.as_bytes());
    h.write_u8(0xff);
    h.write(key.as_bytes());
    h.write_u8(0xff);
    let hash = h.finish128();
    Id {
        lo: hash.h1,
        hi: hash.h2,
    }
}

/// A claim in flight.
struct Claimed {
    id: Id,
    /// Names this claim to its [`Ticket`] (unique within the ring).
    token: u64,
    /// The log's written position when the claim was taken: its record, if
    /// stored, starts at or after it.
    log_at: u64,
}

/// What a claim is found by when its send ends: the key's identity and
/// the claim's token, so the send path neither keeps the key's strings nor
/// hashes them again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ticket {
    id: Id,
    token: u64,
}

/// The keys of a window, `cap` per generation.
pub(super) struct Ring {
    secret: Secret,
    current: Generation,
    previous: Generation,
    cap: usize,
    claims: HashTable<Claimed>,
    next_token: u64,
}

/// What a key is in the ring.
pub(super) enum Found {
    Stored(Original),
    InFlight,
    /// Absent, and claimed now.
    Claimed(Ticket),
}

impl Ring {
    /// An empty ring whose generations hold `cap` keys each (at least 1,
    /// at most `u32::MAX`).
    pub fn new(cap: usize) -> Self {
        let entropy = RandomState::new();
        Self::with_secret(cap, (entropy.hash_one(1_u8), entropy.hash_one(2_u8)))
    }

    /// An empty ring hashing with `secret`.
    pub fn with_secret(cap: usize, secret: Secret) -> Self {
        Self {
            secret,
            current: Generation::default(),
            previous: Generation::default(),
            // Items are numbered by `u32` within a generation.
            cap: cap.clamp(1, u32::MAX as usize),
            claims: HashTable::new(),
            next_token: 0,
        }
    }

    /// The identity of `key` on `topic` (computed once per call into the
    /// ring).
    pub fn id(&self, topic: &str, key: &str) -> Id {
        identity(self.secret, topic, key)
    }

    /// The stored item of `id` stored at or after `cutoff_ms`.
    fn fresh(&self, id: Id, cutoff_ms: i64) -> Option<&Stored> {
        let fresh = |s: &&Stored| s.at_ms >= cutoff_ms;
        match self.current.get(id) {
            Some(s) => Some(s).filter(fresh),
            None => self.previous.get(id).filter(fresh),
        }
    }

    /// Looks the key up (stored at or after `cutoff_ms`); claims it when
    /// absent.
    pub fn claim(&mut self, id: Id, cutoff_ms: i64, log_at: u64) -> Found {
        if let Some(s) = self.fresh(id, cutoff_ms) {
            return Found::Stored(s.original);
        }
        let hasher = |c: &Claimed| c.id.lo;
        match self.claims.entry(id.lo, |c| c.id == id, hasher) {
            hashbrown::hash_table::Entry::Occupied(_) => Found::InFlight,
            hashbrown::hash_table::Entry::Vacant(v) => {
                let token = self.next_token;
                self.next_token += 1;
                v.insert(Claimed { id, token, log_at });
                Found::Claimed(Ticket { id, token })
            }
        }
    }

    /// Forgets the claim of the key, if any.
    pub fn release(&mut self, id: Id) {
        if let Ok(e) = self.claims.find_entry(id.lo, |c| c.id == id) {
            e.remove();
        }
    }

    /// Ends the claim of `ticket`; true when it still stood.
    pub fn release_claim(&mut self, ticket: Ticket) -> bool {
        self.claims
            .find_entry(ticket.id.lo, |c| c.token == ticket.token)
            .map(hashbrown::hash_table::OccupiedEntry::remove)
            .is_ok()
    }

    /// True when the key is stored (at or after `cutoff_ms`) or claimed.
    pub fn holds(&self, id: Id, cutoff_ms: i64) -> bool {
        self.fresh(id, cutoff_ms).is_some() || self.claims.find(id.lo, |c| c.id == id).is_some()
    }

    /// Records the key stored at `at_ms` as `original` (its claim, if any,
    /// ends; an older item of it is replaced).
    pub fn store(&mut self, id: Id, original: Original, at_ms: i64) {
        self.release(id);
        // A live item of the key may stand in the previous generation.
        self.previous.remove(id);
        self.put(id, original, at_ms);
    }

    /// Records the key claimed under `ticket` stored at `at_ms` as
    /// `original`, and ends the claim; nothing when the claim no longer
    /// stands (released, or ended by a store of its key by name). A claim
    /// is only taken when the key has no live item, and the window's other
    /// writers skip claimed keys, so an older item of it in the previous
    /// generation is expired: the new item shadows it until it goes.
    pub fn store_claimed(&mut self, ticket: Ticket, original: Original, at_ms: i64) {
        if self.release_claim(ticket) {
            self.put(ticket.id, original, at_ms);
        }
    }

    /// Puts the item in the current generation (replacing an older item
    /// of the key there), turning the generations over first when it is
    /// full.
    fn put(&mut self, id: Id, original: Original, at_ms: i64) {
        if self.current.len() >= self.cap && self.current.get(id).is_none() {
            self.turn_over();
        }
        self.current.put(Stored {
            id,
            original,
            at_ms,
        });
    }

    /// The current generation becomes the previous one; the old previous
    /// one is dropped (its table, emptied, becomes the new current one).
    fn turn_over(&mut self) {
        self.previous.clear();
        std::mem::swap(&mut self.current, &mut self.previous);
    }

    /// Drops every generation whose keys are all older than `cutoff_ms`.
    pub fn expire(&mut self, cutoff_ms: i64) {
        if self.previous.newest_ms < cutoff_ms && !self.previous.items.is_empty() {
            self.previous.clear();
        }
        if self.current.newest_ms < cutoff_ms && !self.current.items.is_empty() {
            self.current.clear();
        }
    }

    /// Stored items (expired ones whose generation still stands included).
    pub fn stored_keys(&self) -> usize {
        self.current.len() + self.previous.len()
    }

    /// Forgets every stored key; the claims in flight stay (their sends
    /// still end with a store or a release).
    pub fn clear_stored(&mut self) {
        self.current.clear();
        self.previous.clear();
    }

    /// Claims taken so far (a count that moves whenever a send is
    /// checked): the saver's sign of activity.
    pub fn claims_taken(&self) -> u64 {
        self.next_token
    }

    /// The stored keys, the secret and the claims' lowest log position.
    pub fn snapshot(&self) -> Snapshot {
        let saved = |g: &Generation| Saved {
            newest_ms: g.newest_ms,
            items: g.items.clone(),
        };
        Snapshot {
            secret: self.secret,
            previous: saved(&self.previous),
            current: saved(&self.current),
            claims_from: self.claims.iter().map(|c| c.log_at).min(),
        }
    }

    /// Replaces the stored keys and the secret with `copy`'s; false (and
    /// nothing changed) while a claim is in flight, since its identity was
    /// hashed with the old secret.
    pub fn restore(&mut self, copy: &Snapshot) -> bool {
        if !self.claims.is_empty() {
            return false;
        }
        self.secret = copy.secret;
        self.clear_stored();
        for item in &copy.current.items {
            self.current.put(*item);
        }
        for item in &copy.previous.items {
            // Shadowed by a newer item of its key: not put back.
            if self.current.get(item.id).is_none() {
                self.previous.put(*item);
            }
        }
        self.current.newest_ms = copy.current.newest_ms;
        self.previous.newest_ms = copy.previous.newest_ms;
        true
    }
}

#[cfg(test)]
mod tests;
