//! `extFields`: a command's string-to-string header map. Every key and value
//! lives in one text buffer, with a sorted table of where each entry lies,
//! so decoding a header costs two allocations instead of two per field plus
//! tree nodes (the codec's main cost, see docs/benchmarks.md). Iteration is
//! in key order, as a `BTreeMap`'s, so encodings are unchanged.

use std::collections::BTreeMap;
use std::fmt;

/// A command's `extFields`: string keys to string values, in key order.
/// Inserting an existing key replaces its value (the last one wins, as
/// when a header repeats a key). An empty map allocates nothing, and the
/// handle is one pointer, so commands stay small.
#[derive(Clone, Default)]
pub struct ExtFields {
    table: Option<Box<Table>>,
}

/// The entries of a non-empty [`ExtFields`].
#[derive(Clone, Default)]
struct Table {
    /// Keys and values back to back. Replaced and removed entries leave
    /// dead bytes, reclaimed once they outweigh the live ones.
    text: String,
    /// One per entry, sorted by key.
    spans: Vec<Span>,
}

/// `text[key..value]` is the key and `text[value..end]` its value.
#[derive(Clone, Copy, Debug)]
struct Span {
    key: usize,
    value: usize,
    end: usize,
}

impl ExtFields {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty map with room for `entries` entries of `bytes` text.
    pub fn with_capacity(entries: usize, bytes: usize) -> Self {
        Self {
            table: Some(Box::new(Table::with_capacity(entries, bytes))),
        }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.table.as_ref().map_or(0, |t| t.len())
    }

    /// True when there are no entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The value of `key`, if present.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.table.as_ref()?.get(key)
    }

    /// True when `key` is present.
    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// Sets `key` to `value`, replacing any earlier value.
    pub fn insert(&mut self, key: impl AsRef<str>, value: impl AsRef<str>) {
        self.table_mut().insert(key.as_ref(), value.as_ref());
    }

    /// Sets `key` to the value `render` appends to the buffer it is given
    /// (typed headers render numbers without a temporary string).
    pub fn insert_with(&mut self, key: &str, render: impl FnOnce(&mut String)) {
        self.table_mut().insert_with(key, render);
    }

    /// Removes `key`, returning its value.
    pub fn remove(&mut self, key: &str) -> Option<String> {
        self.table.as_mut()?.remove(key)
    }

    /// Entries in key order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &str)> + '_ {
        let (text, spans) = match &self.table {
            Some(t) => (t.text.as_str(), t.spans.as_slice()),
            None => ("", &[][..]),
        };
        spans
            .iter()
            .map(move |s| (&text[s.key..s.value], &text[s.value..s.end]))
    }

    /// Keys in order.
    pub fn keys(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        self.iter().map(|(k, _)| k)
    }

    /// Records an entry whose key and value a decoder has just written to
    /// the end of [`ExtFields::text_mut`]: the key is `text[start..value]`
    /// and the value `text[value..]`. Entries are kept in arrival order
    /// until [`ExtFields::finish_decoded`], so a hostile header of many
    /// keys in reverse order costs a sort, not a quadratic insertion.
    pub(crate) fn push_decoded(&mut self, start: usize, value: usize) {
        let table = self.table_mut();
        debug_assert!(start <= value && value <= table.text.len());
        let end = table.text.len();
        table.spans.push(Span {
            key: start,
            value,
            end,
        });
    }

    /// Puts decoded entries in key order; of repeated keys the last wins.
    pub(crate) fn finish_decoded(&mut self) {
        if let Some(table) = &mut self.table {
            table.sort_keeping_last();
        }
    }

    /// The text buffer, for decoders that append a key and a value and then
    /// [`ExtFields::push_decoded`] them (or truncate back to drop them).
    pub(crate) fn text_mut(&mut self) -> &mut String {
        &mut self.table_mut().text
    }

    fn table_mut(&mut self) -> &mut Table {
        self.table.get_or_insert_with(Box::default)
    }
}

impl Table {
    /// An empty map with room for `entries` entries of `bytes` text.
    fn with_capacity(entries: usize, bytes: usize) -> Self {
        Self {
            text: String::with_capacity(bytes),
            spans: Vec::with_capacity(entries),
        }
    }

    /// Number of entries.
    fn len(&self) -> usize {
        self.spans.len()
    }

    /// The value of `key`, if present.
    fn get(&self, key: &str) -> Option<&str> {
        self.position(key).map(|i| self.value_at(i))
    }

    /// Sets `key` to `value`, replacing any earlier value.
    fn insert(&mut self, key: &str, value: &str) {
        let start = self.text.len();
        self.text.push_str(key);
        self.text.push_str(value);
        self.place(Span {
            key: start,
            value: start + key.len(),
            end: self.text.len(),
        });
    }

    /// Sets `key` to the value `render` appends to the buffer it is given
    /// (typed headers render numbers without a temporary string).
    fn insert_with(&mut self, key: &str, render: impl FnOnce(&mut String)) {
        let start = self.text.len();
        self.text.push_str(key);
        let value = self.text.len();
        render(&mut self.text);
        self.commit(start, value);
    }

    /// Removes `key`, returning its value.
    fn remove(&mut self, key: &str) -> Option<String> {
        let i = self.find(key).ok()?;
        let value = self.value_at(i).to_owned();
        self.spans.remove(i);
        self.compact_if_sparse();
        Some(value)
    }

    /// Places the entry whose key is `text[start..value]` and whose value
    /// is the rest of the text.
    fn commit(&mut self, start: usize, value: usize) {
        debug_assert!(start <= value && value <= self.text.len());
        self.place(Span {
            key: start,
            value,
            end: self.text.len(),
        });
    }

    fn value_at(&self, i: usize) -> &str {
        let s = self.spans[i];
        &self.text[s.value..s.end]
    }

    /// Where `key` is (`Ok`) or would go (`Err`). Bytes compare in the
    /// same order as the strings (UTF-8 keeps code point order).
    fn find(&self, key: &str) -> Result<usize, usize> {
        let text = self.text.as_bytes();
        self.spans
            .binary_search_by(|s| text[s.key..s.value].cmp(key.as_bytes()))
    }

    /// The index of `key`: a scan comparing lengths first for the usual
    /// dozen fields, a binary search beyond.
    fn position(&self, key: &str) -> Option<usize> {
        if self.spans.len() > 16 {
            return self.find(key).ok();
        }
        let (text, key) = (self.text.as_bytes(), key.as_bytes());
        self.spans
            .iter()
            .position(|s| s.value - s.key == key.len() && &text[s.key..s.value] == key)
    }

    /// Puts a span whose bytes are already in `text` into its sorted place.
    fn place(&mut self, span: Span) {
        let key = &self.text[span.key..span.value];
        // Appends usually arrive in key order (encoders write sorted keys).
        let place = match self.spans.last() {
            None => Place::Insert(0),
            Some(last) if &self.text[last.key..last.value] < key => Place::Insert(self.spans.len()),
            Some(_) => match self.find(key) {
                Ok(existing) => Place::Replace(existing),
                Err(at) => Place::Insert(at),
            },
        };
        match place {
            Place::Insert(i) => self.spans.insert(i, span),
            Place::Replace(i) => {
                self.spans[i] = span;
                self.compact_if_sparse();
            }
        }
    }

    /// Sorts spans pushed in arrival order by key (a stable sort, so
    /// repeated keys stay in arrival order) and keeps the last of each key.
    fn sort_keeping_last(&mut self) {
        let text = self.text.as_bytes();
        let key = |s: &Span| &text[s.key..s.value];
        self.spans.sort_by(|a, b| key(a).cmp(key(b)));
        let before = self.spans.len();
        // `dedup_by` passes the later span first and keeps the earlier one:
        // move the later into its place.
        self.spans.dedup_by(|later, earlier| {
            let same = key(later) == key(earlier);
            if same {
                *earlier = *later;
            }
            same
        });
        if self.spans.len() < before {
            self.compact_if_sparse();
        }
    }

    /// Rewrites the text without dead bytes once they outweigh the live.
    fn compact_if_sparse(&mut self) {
        let live: usize = self.spans.iter().map(|s| s.end - s.key).sum();
        if live >= self.text.len() / 2 {
            return;
        }
        let mut text = String::with_capacity(live);
        for span in &mut self.spans {
            let start = text.len();
            text.push_str(&self.text[span.key..span.end]);
            *span = Span {
                key: start,
                value: start + (span.value - span.key),
                end: text.len(),
            };
        }
        self.text = text;
    }
}

/// Where a new span goes.
enum Place {
    Insert(usize),
    Replace(usize),
}

impl fmt::Debug for ExtFields {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl PartialEq for ExtFields {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for ExtFields {}

impl<K: AsRef<str>, V: AsRef<str>> FromIterator<(K, V)> for ExtFields {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut out = Self::new();
        out.extend(iter);
        out
    }
}

impl<K: AsRef<str>, V: AsRef<str>> Extend<(K, V)> for ExtFields {
    fn extend<I: IntoIterator<Item = (K, V)>>(&mut self, iter: I) {
        for (k, v) in iter {
            self.insert(k, v);
        }
    }
}

impl From<BTreeMap<String, String>> for ExtFields {
    fn from(map: BTreeMap<String, String>) -> Self {
        map.into_iter().collect()
    }
}

impl From<&ExtFields> for BTreeMap<String, String> {
    fn from(ext: &ExtFields) -> Self {
        ext.iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn keeps_key_order_and_replaces_repeated_keys() {
        let mut ext = ExtFields::new();
        ext.insert("b", "2");
        ext.insert("a", "1");
        ext.insert("c", "3");
        ext.insert("b", "two");
        assert_eq!(
            ext.iter().collect::<Vec<_>>(),
            [("a", "1"), ("b", "two"), ("c", "3")]
        );
        assert_eq!(ext.get("b"), Some("two"));
        assert_eq!(ext.get("d"), None);
        assert_eq!(ext.remove("a").as_deref(), Some("1"));
        assert!(!ext.contains_key("a"));
        assert_eq!(ext.len(), 2);
    }

    #[test]
    fn empty_keys_and_values_are_entries() {
        let ext: ExtFields = [("", "x"), ("k", "")].into_iter().collect();
        assert_eq!(ext.get(""), Some("x"));
        assert_eq!(ext.get("k"), Some(""));
        assert_eq!(ext.len(), 2);
    }

    #[test]
    fn decoded_entries_are_sorted_and_the_last_repeat_wins() {
        let mut ext = ExtFields::new();
        for (k, v) in [("b", "1"), ("a", "2"), ("b", "3"), ("c", "4"), ("a", "5")] {
            let start = ext.text_mut().len();
            ext.text_mut().push_str(k);
            let value = ext.text_mut().len();
            ext.text_mut().push_str(v);
            ext.push_decoded(start, value);
        }
        ext.finish_decoded();
        assert_eq!(
            ext.iter().collect::<Vec<_>>(),
            [("a", "5"), ("b", "3"), ("c", "4")]
        );
    }

    #[test]
    fn dead_bytes_are_reclaimed() {
        let mut ext = ExtFields::new();
        for i in 0..1000 {
            ext.insert("key", i.to_string());
        }
        let len = ext.table.as_ref().map_or(0, |t| t.text.len());
        assert!(len < 64, "text grew to {len}");
        assert_eq!(ext.get("key"), Some("999"));
    }

    proptest! {
        /// Any sequence of inserts and removes behaves as a BTreeMap does.
        #[test]
        fn behaves_as_a_btree_map(ops in proptest::collection::vec(
            (any::<bool>(), "[a-e]{0,2}", ".{0,6}"), 0..64)
        ) {
            let mut ext = ExtFields::new();
            let mut model = BTreeMap::new();
            for (insert, key, value) in ops {
                if insert {
                    ext.insert(&key, &value);
                    model.insert(key, value);
                } else {
                    prop_assert_eq!(ext.remove(&key), model.remove(&key));
                }
                prop_assert_eq!(BTreeMap::from(&ext), model.clone());
                for k in model.keys() {
                    prop_assert_eq!(ext.get(k), model.get(k).map(String::as_str));
                }
            }
        }
    }
}
