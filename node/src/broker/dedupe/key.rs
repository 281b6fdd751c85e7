//! Map keys made of several strings (a topic, a producer and a lane), kept
//! in one allocation and looked up by borrowed parts: the send path checks
//! every message against these maps, and a lookup that allocated its key
//! (or compared strings down a tree) cost more than storing the message.
//! [`Parts`] also hashes a topic and a `UNIQ_KEY` into the window's key
//! identities (`ring`), which keep no text.

use std::hash::{Hash, Hasher};

use indexmap::Equivalent;

/// `N` strings in one buffer: one allocation per key.
#[derive(Debug)]
pub struct Key<const N: usize> {
    text: Box<str>,
    ends: [usize; N],
}

impl<const N: usize> Key<N> {
    /// Copies `parts` into one buffer.
    pub fn new(parts: [&str; N]) -> Self {
        let mut text = String::with_capacity(parts.iter().map(|p| p.len()).sum());
        let mut ends = [0; N];
        for (end, part) in ends.iter_mut().zip(parts) {
            text.push_str(part);
            *end = text.len();
        }
        Self {
            text: text.into_boxed_str(),
            ends,
        }
    }

    /// The strings, in the order given.
    pub fn parts(&self) -> [&str; N] {
        let mut start = 0;
        self.ends.map(|end| {
            let part = &self.text[start..end];
            start = end;
            part
        })
    }
}

impl<const N: usize> PartialEq for Key<N> {
    fn eq(&self, other: &Self) -> bool {
        self.ends == other.ends && self.text == other.text
    }
}

impl<const N: usize> Eq for Key<N> {}

impl<const N: usize> Hash for Key<N> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        Parts(self.parts()).hash(state);
    }
}

/// A [`Key`] to look up, borrowed: hashes and compares as the owned key
/// with the same parts.
pub struct Parts<'a, const N: usize>(pub [&'a str; N]);

impl<const N: usize> Hash for Parts<'_, N> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        for part in self.0 {
            part.hash(state);
        }
    }
}

impl<const N: usize> Equivalent<Key<N>> for Parts<'_, N> {
    fn equivalent(&self, key: &Key<N>) -> bool {
        self.0 == key.parts()
    }
}

#[cfg(test)]
mod tests {
    use indexmap::IndexMap;

    use super::*;

    /// Parts that concatenate alike are different keys, and a borrowed
    /// lookup finds exactly the owned key with the same parts.
    #[test]
    fn a_borrowed_lookup_finds_the_owned_key_with_the_same_parts_only() {
        let mut map: IndexMap<Key<2>, u32> = IndexMap::new();
        map.insert(Key::new(["ab", "c"]), 1);
        map.insert(Key::new(["a", "bc"]), 2);
        map.insert(Key::new(["", "abc"]), 3);
        assert_eq!(map.get(&Parts(["ab", "c"])), Some(&1));
        assert_eq!(map.get(&Parts(["a", "bc"])), Some(&2));
        assert_eq!(map.get(&Parts(["", "abc"])), Some(&3));
        assert_eq!(map.get(&Parts(["abc", ""])), None);
        assert_eq!(Key::new(["t", "p", "l"]).parts(), ["t", "p", "l"]);
        // An equal key built apart finds the same entry.
        assert_eq!(map.get(&Key::new(["a", "bc"])), Some(&2));
        assert_ne!(Key::new(["ab", "c"]), Key::new(["a", "bc"]));
    }
}
