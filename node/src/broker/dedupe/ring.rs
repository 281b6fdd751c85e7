//! The window's keys: the stored ones in store order (a ring, oldest at
//! the front) with a hash table from each key to its place in the ring, and
//! the claims in flight apart.
//!
//! A full window evicts one key per new one, and the evicted key is the
//! coldest in memory. The ring keeps each key's hash beside it, so an
//! eviction reads the ring's front (sequential, prefetched) and finds the
//! key's table slot by that hash alone: the slot holds the key's sequence
//! number, compared without following it anywhere. An `IndexMap` with a
//! separate expiry queue touched five cold places per eviction (its control
//! group, bucket, entry, then the bucket of the entry `swap_remove` moved);
//! this touches the table's control group and slot, and frees the key
//! (criterion and paired runs: docs/benchmarks.md, issue 20).

use std::collections::VecDeque;
use std::hash::{BuildHasher, RandomState};

use hashbrown::HashTable;

use super::key::{Key, Parts};
use super::Original;

/// One stored key, in store order.
struct Stored {
    hash: u64,
    key: Key<2>,
    original: Original,
    at_ms: i64,
}

/// A claim in flight.
struct Claimed {
    hash: u64,
    /// Names this claim to its [`Ticket`] (unique within the ring).
    token: u64,
    key: Key<2>,
}

/// What a claim is found by when its send ends: the key's hash and the
/// claim's token, so the send path neither keeps the key's strings nor
/// hashes them again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ticket {
    hash: u64,
    token: u64,
}

/// The keys of a window. A key stored again leaves its older ring item
/// behind, *stale*: the table no longer names that item's sequence number,
/// so its eviction removes nothing.
pub(super) struct Ring {
    hasher: RandomState,
    /// Sequence number of each stored key's live ring item.
    table: HashTable<u64>,
    /// Stored keys oldest first; `items[i]` has sequence `first_seq + i`.
    items: VecDeque<Stored>,
    first_seq: u64,
    claims: HashTable<Claimed>,
    next_token: u64,
}

impl Default for Ring {
    fn default() -> Self {
        Self {
            hasher: RandomState::new(),
            table: HashTable::new(),
            items: VecDeque::new(),
            first_seq: 0,
            claims: HashTable::new(),
            next_token: 0,
        }
    }
}

/// What a key is in the ring.
pub(super) enum Found {
    Stored(Original),
    InFlight,
    /// Absent, and claimed now.
    Claimed(Ticket),
}

impl Ring {
    /// The hash of `topic` and `key` (computed once per call into the ring).
    pub fn hash(&self, topic: &str, key: &str) -> u64 {
        self.hasher.hash_one(Parts([topic, key]))
    }

    fn item(&self, seq: u64) -> &Stored {
        let at = usize::try_from(seq - self.first_seq).unwrap_or(usize::MAX);
        &self.items[at]
    }

    fn find_stored(&self, hash: u64, parts: [&str; 2]) -> Option<u64> {
        self.table
            .find(hash, |&seq| {
                let item = self.item(seq);
                item.hash == hash && item.key.parts() == parts
            })
            .copied()
    }

    /// Looks the key up; claims it when absent.
    pub fn claim(&mut self, hash: u64, topic: &str, key: &str) -> Found {
        let parts = [topic, key];
        if let Some(seq) = self.find_stored(hash, parts) {
            return Found::Stored(self.item(seq).original);
        }
        let hasher = |c: &Claimed| c.hash;
        match self
            .claims
            .entry(hash, |c| c.hash == hash && c.key.parts() == parts, hasher)
        {
            hashbrown::hash_table::Entry::Occupied(_) => Found::InFlight,
            hashbrown::hash_table::Entry::Vacant(v) => {
                let token = self.next_token;
                self.next_token += 1;
                v.insert(Claimed {
                    hash,
                    token,
                    key: Key::new(parts),
                });
                Found::Claimed(Ticket { hash, token })
            }
        }
    }

    /// Forgets the claim of the key, if any; its key object, if it was one.
    pub fn release(&mut self, hash: u64, topic: &str, key: &str) -> Option<Key<2>> {
        let parts = [topic, key];
        self.claims
            .find_entry(hash, |c| c.hash == hash && c.key.parts() == parts)
            .ok()
            .map(|e| e.remove().0.key)
    }

    /// Ends the claim of `ticket`, if it still stands; its key object.
    pub fn release_claim(&mut self, ticket: Ticket) -> Option<Key<2>> {
        self.claims
            .find_entry(ticket.hash, |c| c.token == ticket.token)
            .ok()
            .map(|e| e.remove().0.key)
    }

    /// True when the key is stored or claimed.
    pub fn holds(&self, hash: u64, topic: &str, key: &str) -> bool {
        let parts = [topic, key];
        self.find_stored(hash, parts).is_some()
            || self
                .claims
                .find(hash, |c| c.hash == hash && c.key.parts() == parts)
                .is_some()
    }

    /// Records the key stored at `at_ms` as `original` (its claim, if any,
    /// ends; a live older item of it goes stale).
    pub fn store(&mut self, hash: u64, topic: &str, key: &str, original: Original, at_ms: i64) {
        let held = self
            .release(hash, topic, key)
            .unwrap_or_else(|| Key::new([topic, key]));
        if let Some(old) = self.find_stored(hash, [topic, key]) {
            if let Ok(slot) = self.table.find_entry(hash, |&s| s == old) {
                slot.remove();
            }
        }
        self.push_stored(hash, held, original, at_ms);
    }

    /// Records the key claimed under `ticket` stored at `at_ms` as
    /// `original`, and ends the claim; nothing when the claim no longer
    /// stands (released, or ended by a store of its key by name). A
    /// claimed key is never stored (a claim is only taken when the key is
    /// absent, and the window's other writers skip claimed keys), so no
    /// older item of it is looked for.
    pub fn store_claimed(&mut self, ticket: Ticket, original: Original, at_ms: i64) {
        if let Some(key) = self.release_claim(ticket) {
            self.push_stored(ticket.hash, key, original, at_ms);
        }
    }

    /// Appends the stored `key` to the ring and names its item in the
    /// table.
    fn push_stored(&mut self, hash: u64, held: Key<2>, original: Original, at_ms: i64) {
        let seq = self.first_seq + self.items.len() as u64;
        self.items.push_back(Stored {
            hash,
            key: held,
            original,
            at_ms,
        });
        let items = &self.items;
        let first = self.first_seq;
        self.table.insert_unique(hash, seq, |&s| {
            items[usize::try_from(s - first).unwrap_or(usize::MAX)].hash
        });
    }

    /// Ring items (stale ones included).
    pub fn items(&self) -> usize {
        self.items.len()
    }

    /// The store time of the oldest ring item.
    pub fn oldest_ms(&self) -> Option<i64> {
        self.items.front().map(|s| s.at_ms)
    }

    /// Drops the oldest ring item (and its key, unless it is stale).
    pub fn evict_oldest(&mut self) {
        let Some(oldest) = self.items.pop_front() else {
            return;
        };
        let seq = self.first_seq;
        self.first_seq += 1;
        if let Ok(slot) = self.table.find_entry(oldest.hash, |&s| s == seq) {
            slot.remove();
        }
    }

    /// Keys stored now (claims in flight not counted).
    pub fn stored_keys(&self) -> usize {
        self.table.len()
    }

    /// Forgets every stored key; the claims in flight stay (their sends
    /// still end with a store or a release).
    pub fn clear_stored(&mut self) {
        self.table = HashTable::new();
        self.items = VecDeque::new();
        self.first_seq = 0;
    }
}

#[cfg(test)]
mod tests;
