//! The three properties dispatch reads from every record — TAGS (the
//! ConsumeQueue tagsCode), KEYS and `UNIQ_KEY` (the index) — found in the
//! encoded properties string without building a [`Properties`]: no
//! allocation per record, which matters when recovery re-dispatches a
//! whole CommitLog. Invariant: each value is what [`Properties::parse`]
//! gives for the same bytes (a repeated key's last value; nothing at all
//! for properties that are not UTF-8).
//!
//! [`Properties`]: super::Properties
//! [`Properties::parse`]: super::Properties::parse

use super::properties::{keys, NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR};

/// TAGS, KEYS and `UNIQ_KEY` of one record, borrowed from its properties.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IndexedProperties<'a> {
    /// The TAGS value.
    pub tags: Option<&'a str>,
    /// The raw KEYS value (see [`IndexedProperties::keys`]).
    pub keys_raw: Option<&'a str>,
    /// The `UNIQ_KEY` value.
    pub uniq_key: Option<&'a str>,
}

impl<'a> IndexedProperties<'a> {
    /// Finds TAGS, KEYS and `UNIQ_KEY` in `bytes`, skipping every other pair
    /// (see [`for_each_pair`]).
    pub fn scan(bytes: &'a [u8]) -> Self {
        let mut out = Self::default();
        for_each_pair(bytes, |key, value| match key {
            keys::TAGS => out.tags = Some(value),
            keys::KEYS => out.keys_raw = Some(value),
            keys::UNIQ_KEY => out.uniq_key = Some(value),
            _ => {}
        });
        out
    }

    /// The business keys: KEYS split on spaces, empty pieces skipped (as
    /// `Properties::keys`).
    pub fn keys(&self) -> impl Iterator<Item = &'a str> {
        self.keys_raw
            .unwrap_or_default()
            .split(' ')
            .filter(|k| !k.is_empty())
    }
}

/// Calls `visit(key, value)` for every pair [`Properties::parse`] keeps, in
/// order, without allocating: segments without a non-empty key, a 0x01 and
/// a non-empty value are skipped; a repeated key is visited each time (the
/// last value is the one `parse` keeps); properties that are not UTF-8
/// have no pairs.
///
/// [`Properties::parse`]: super::Properties::parse
pub fn for_each_pair<'a>(bytes: &'a [u8], mut visit: impl FnMut(&'a str, &'a str)) {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return;
    };
    for segment in text.split(char::from(PROPERTY_SEPARATOR)) {
        // Only the first 0x01 splits.
        if let Some((key, value)) = segment.split_once(char::from(NAME_VALUE_SEPARATOR)) {
            if !key.is_empty() && !value.is_empty() {
                visit(key, value);
            }
        }
    }
}

/// The value [`Properties::parse`] gives `key` in `bytes`, without building
/// the map.
///
/// [`Properties::parse`]: super::Properties::parse
pub fn find<'a>(bytes: &'a [u8], key: &str) -> Option<&'a str> {
    let mut found = None;
    for_each_pair(bytes, |k, v| {
        if k == key {
            found = Some(v);
        }
    });
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Properties;
    use proptest::prelude::*;

    fn agrees_with_parse(bytes: &[u8]) -> Result<(), TestCaseError> {
        let light = IndexedProperties::scan(bytes);
        let full = Properties::parse(bytes).unwrap_or_default();
        prop_assert_eq!(light.tags, full.tags());
        prop_assert_eq!(light.uniq_key, full.uniq_key());
        prop_assert_eq!(
            light.keys().collect::<Vec<_>>(),
            full.keys().collect::<Vec<_>>()
        );
        for key in ["TAGS", "KEYS", "A", "\u{e9}"] {
            prop_assert_eq!(find(bytes, key), full.get(key));
        }
        let mut pairs = Vec::new();
        for_each_pair(bytes, |k, v| pairs.push((k, v)));
        let last_wins = full
            .iter()
            .all(|(k, v)| pairs.iter().rev().find(|p| p.0 == k) == Some(&(k, v)));
        prop_assert!(last_wins && pairs.iter().all(|(k, _)| full.get(k).is_some()));
        Ok(())
    }

    #[test]
    fn finds_the_three_keys_among_others_with_the_last_value_winning() {
        let raw = b"TAGS\x01a\x02X\x01y\x02KEYS\x01k1  k2\x02UNIQ_KEY\x01U\x02TAGS\x01b\x02";
        let p = IndexedProperties::scan(raw);
        assert_eq!(p.tags, Some("b"));
        assert_eq!(p.uniq_key, Some("U"));
        assert_eq!(p.keys().collect::<Vec<_>>(), ["k1", "k2"]);
    }

    #[test]
    fn skips_empty_values_and_keys_and_non_utf8_like_parse() {
        let p = IndexedProperties::scan(b"TAGS\x01\x02\x01v\x02KEYS\x02UNIQ_KEY\x01a\x01b");
        assert_eq!(p.tags, None);
        assert_eq!(p.keys_raw, None);
        assert_eq!(p.uniq_key, Some("a\x01b"), "only the first 0x01 splits");
        assert_eq!(
            IndexedProperties::scan(b"TAGS\x01a\x02\xFF"),
            IndexedProperties::default()
        );
        for raw in [
            &b"TAGS\x01\x02\x01v\x02KEYS\x02UNIQ_KEY\x01a\x01b"[..],
            b"TAGS\x01a\x02\xFF",
        ] {
            agrees_with_parse(raw).expect("agrees");
        }
    }

    proptest! {
        #[test]
        fn scan_agrees_with_a_full_parse(
            bytes in proptest::collection::vec(
                prop_oneof![
                    Just(NAME_VALUE_SEPARATOR), Just(PROPERTY_SEPARATOR), Just(b' '),
                    Just(b'T'), Just(b'A'), Just(b'G'), Just(b'S'), Just(0xC3), Just(0xA9),
                    any::<u8>(),
                ],
                0..64,
            ),
            prefix in prop_oneof![Just(&b""[..]), Just(&b"TAGS\x01"[..]), Just(&b"KEYS\x01"[..]), Just(&b"UNIQ_KEY\x01"[..])],
        ) {
            let mut raw = prefix.to_vec();
            raw.extend_from_slice(&bytes);
            agrees_with_parse(&raw)?;
        }
    }
}
