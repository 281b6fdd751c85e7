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
    /// and, like `Properties::parse`, every segment without a non-empty
    /// key, a 0x01 and a non-empty value.
    pub fn scan(bytes: &'a [u8]) -> Self {
        let mut out = Self::default();
        let Ok(text) = std::str::from_utf8(bytes) else {
            return out;
        };
        let raw = text.as_bytes();
        let mut at = 0;
        while at < raw.len() {
            let end = raw[at..]
                .iter()
                .position(|b| *b == PROPERTY_SEPARATOR)
                .map_or(raw.len(), |i| at + i);
            let segment = &raw[at..end];
            // Only the first 0x01 splits; the separators are ASCII, so the
            // indices are char boundaries of `text`.
            if let Some(sep) = segment.iter().position(|b| *b == NAME_VALUE_SEPARATOR) {
                let (key, value) = (&text[at..at + sep], &text[at + sep + 1..end]);
                if !value.is_empty() {
                    match key {
                        keys::TAGS => out.tags = Some(value),
                        keys::KEYS => out.keys_raw = Some(value),
                        keys::UNIQ_KEY => out.uniq_key = Some(value),
                        _ => {}
                    }
                }
            }
            at = end + 1;
        }
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
