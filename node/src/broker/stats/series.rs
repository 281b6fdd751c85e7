//! Labelled figures read on the hot path without a lock: a copy-on-write
//! map from a label value (a topic, a `topic/group` pair, a code pair) to
//! its figures. Lookups load an `ArcSwap` and search an immutable map;
//! only the first update of a new label set takes the writers' mutex and
//! swaps in a copy with it added.
//!
//! Cardinality is bounded: past `cap` label sets a new one is folded into
//! the shared `other` figures (its key still stored, as an alias, so the
//! next update finds it without the mutex) and counted as dropped; past
//! `4 × cap` keys nothing more is stored and every new key goes straight
//! to `other` (then the dropped count stops growing: it counts label sets
//! seen while there was room to remember them).

use std::borrow::Borrow;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;

/// Figures per label set `K`, at most `cap` of them.
pub struct Series<K, V> {
    map: ArcSwap<BTreeMap<K, Arc<V>>>,
    other: Arc<V>,
    cap: usize,
    writers: Mutex<()>,
    dropped: AtomicU64,
}

impl<K: Ord + Clone, V: Default> Series<K, V> {
    /// An empty series admitting `cap` label sets (at least one).
    pub fn new(cap: usize) -> Self {
        Self {
            map: ArcSwap::from_pointee(BTreeMap::new()),
            other: Arc::new(V::default()),
            cap: cap.max(1),
            writers: Mutex::new(()),
            dropped: AtomicU64::new(0),
        }
    }

    /// The figures of `key`, created on first use (or `other` past the
    /// cap).
    pub fn get<Q>(&self, key: &Q) -> Arc<V>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized + ToOwned<Owned = K>,
    {
        if let Some(v) = self.map.load().get(key) {
            return Arc::clone(v);
        }
        if self.map.load().len() >= self.cap.saturating_mul(4) {
            return Arc::clone(&self.other);
        }
        let _writer = self
            .writers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let current = self.map.load_full();
        if let Some(v) = current.get(key) {
            return Arc::clone(v);
        }
        let admitted = current.values().filter(|v| !self.is_other(v)).count();
        let value = if admitted < self.cap {
            Arc::new(V::default())
        } else {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            Arc::clone(&self.other)
        };
        let mut next = (*current).clone();
        next.insert(key.to_owned(), Arc::clone(&value));
        self.map.store(Arc::new(next));
        value
    }

    fn is_other(&self, v: &Arc<V>) -> bool {
        Arc::ptr_eq(v, &self.other)
    }

    /// Every admitted label set with its figures, ascending, then the
    /// `other` figures (shared by every label set past the cap).
    pub fn entries(&self) -> (Vec<(K, Arc<V>)>, Arc<V>) {
        let map = self.map.load_full();
        let admitted = map
            .iter()
            .filter(|(_, v)| !self.is_other(v))
            .map(|(k, v)| (k.clone(), Arc::clone(v)))
            .collect();
        (admitted, Arc::clone(&self.other))
    }

    /// Label sets folded into `other` so far.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

/// A message count and its bytes.
#[derive(Default)]
pub struct Traffic {
    messages: AtomicU64,
    bytes: AtomicU64,
}

impl Traffic {
    /// Adds `messages` of `bytes` in all.
    pub fn add(&self, messages: u64, bytes: u64) {
        self.messages.fetch_add(messages, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// `(messages, bytes)` now.
    pub fn read(&self) -> (u64, u64) {
        (
            self.messages.load(Ordering::Relaxed),
            self.bytes.load(Ordering::Relaxed),
        )
    }
}

/// The key of a `(topic, consumer group)` pair: both names joined by a
/// byte neither may hold (RocketMQ names are `[%|a-zA-Z0-9_-]`).
pub fn pair_key(topic: &str, group: &str) -> String {
    let mut key = String::with_capacity(topic.len() + group.len() + 1);
    key.push_str(topic);
    key.push('\u{1}');
    key.push_str(group);
    key
}

/// The `(topic, group)` a [`pair_key`] was made of.
pub fn split_pair(key: &str) -> (&str, &str) {
    key.split_once('\u{1}').unwrap_or((key, ""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_gets_the_same_figures_every_time() {
        let s: Series<String, Traffic> = Series::new(10);
        s.get("a").add(1, 10);
        s.get("a").add(2, 20);
        s.get("b").add(1, 1);
        let (entries, other) = s.entries();
        let read: Vec<_> = entries
            .iter()
            .map(|(k, v)| (k.as_str(), v.read()))
            .collect();
        assert_eq!(read, vec![("a", (3, 30)), ("b", (1, 1))]);
        assert_eq!(other.read(), (0, 0));
        assert_eq!(s.dropped(), 0);
    }

    #[test]
    fn past_the_cap_new_keys_fold_into_other_and_are_counted() {
        let s: Series<String, Traffic> = Series::new(2);
        for k in ["a", "b", "c", "d"] {
            s.get(k).add(1, 1);
        }
        s.get("c").add(1, 1);
        let (entries, other) = s.entries();
        assert_eq!(entries.len(), 2, "only the first two are admitted");
        assert_eq!(other.read(), (3, 3), "c twice and d once");
        assert_eq!(s.dropped(), 2, "c and d, each counted once");
    }

    #[test]
    fn far_past_the_cap_nothing_more_is_stored() {
        let s: Series<String, Traffic> = Series::new(1);
        for i in 0..100 {
            s.get(format!("k{i}").as_str()).add(1, 0);
        }
        assert_eq!(s.map.load().len(), 4, "1 admitted + 3 aliases");
        assert_eq!(s.dropped(), 3);
        assert_eq!(s.entries().1.read().0, 99);
    }

    #[test]
    fn pair_keys_split_back() {
        let k = pair_key("%RETRY%g", "g");
        assert_eq!(split_pair(&k), ("%RETRY%g", "g"));
    }
}
