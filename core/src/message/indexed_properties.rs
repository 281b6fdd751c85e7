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
/// a non-empty value are skipped; only the first 0x01 in a segment splits
/// (the value may hold more); a repeated key is visited each time (the
/// last value is the one `parse` keeps); properties that are not UTF-8
/// have no pairs.
///
/// [`Properties::parse`]: super::Properties::parse
pub fn for_each_pair<'a>(bytes: &'a [u8], visit: impl FnMut(&'a str, &'a str)) {
    if let Ok(text) = std::str::from_utf8(bytes) {
        for_each_pair_in(text, visit);
    }
}

/// [`for_each_pair`] over text already known to be UTF-8: one pass over its
/// bytes, noting where the current segment starts and where its first 0x01
/// is, and stepping over runs of other bytes a word at a time (see
/// [`next_control`]). Both separators are ASCII, so every index cut at is a
/// char boundary.
pub(crate) fn for_each_pair_in<'a>(text: &'a str, mut visit: impl FnMut(&'a str, &'a str)) {
    let bytes = text.as_bytes();
    let mut start = 0;
    let mut split = None;
    let mut at = next_control(bytes, 0);
    while let Some(&b) = bytes.get(at) {
        if b == PROPERTY_SEPARATOR {
            visit_segment(text, start, split, at, &mut visit);
            start = at + 1;
            split = None;
        } else if b == NAME_VALUE_SEPARATOR && split.is_none() {
            split = Some(at);
        }
        at = next_control(bytes, at + 1);
    }
    // The last segment needs no trailing 0x02.
    visit_segment(text, start, split, bytes.len(), &mut visit);
}

/// Eight 0x01 bytes: multiplied, a byte value repeated across a word.
const ONES: u64 = u64::from_le_bytes([1; 8]);

/// The index of the first byte below 0x03 at or after `from` (a separator,
/// or a 0x00 the caller passes over), or `bytes.len()` if there is none.
/// Keys and values are runs of other bytes, so this reads eight at a time.
#[inline]
fn next_control(bytes: &[u8], mut from: usize) -> usize {
    while let Some(word) = bytes
        .get(from..from + 8)
        .and_then(|chunk| <[u8; 8]>::try_from(chunk).ok())
    {
        let word = u64::from_le_bytes(word);
        // Subtracting 3 from every byte sets the high bit of each byte below
        // 3; `!word` drops bytes whose high bit was already set. A borrow can
        // flag a byte after the first match but none before it, so the
        // lowest flag (the first byte: little-endian) is exact.
        let below_three = word.wrapping_sub(ONES * 3) & !word & (ONES * 0x80);
        if below_three != 0 {
            return from + (below_three.trailing_zeros() / 8) as usize;
        }
        from += 8;
    }
    let tail = bytes.get(from..).unwrap_or_default();
    tail.iter()
        .position(|&b| b <= PROPERTY_SEPARATOR)
        .map_or(bytes.len(), |i| from + i)
}

/// Visits the segment `text[start..end]` split at its first 0x01, `split`,
/// when it has one with a non-empty key and value.
#[inline]
fn visit_segment<'a>(
    text: &'a str,
    start: usize,
    split: Option<usize>,
    end: usize,
    visit: &mut impl FnMut(&'a str, &'a str),
) {
    let Some(split) = split else {
        return;
    };
    let value_start = split + 1;
    if start < split && value_start < end {
        if let (Some(key), Some(value)) = (text.get(start..split), text.get(value_start..end)) {
            visit(key, value);
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

    /// The pair walk as it was, with `split` and `split_once`: the reference
    /// the one-pass walk must agree with.
    fn reference_pairs(bytes: &[u8]) -> Vec<(&str, &str)> {
        let Ok(text) = std::str::from_utf8(bytes) else {
            return Vec::new();
        };
        text.split(char::from(PROPERTY_SEPARATOR))
            .filter_map(|segment| segment.split_once(char::from(NAME_VALUE_SEPARATOR)))
            .filter(|(key, value)| !key.is_empty() && !value.is_empty())
            .collect()
    }

    /// What `Properties::parse` built with the reference walk: the pairs
    /// by first position with their last value; `None` when not UTF-8.
    fn reference_parse(bytes: &[u8]) -> Option<Vec<(String, String)>> {
        std::str::from_utf8(bytes).ok()?;
        let mut table: Vec<(String, String)> = Vec::new();
        for (key, value) in reference_pairs(bytes) {
            match table.iter_mut().find(|(k, _)| k == key) {
                Some(slot) => value.clone_into(&mut slot.1),
                None => table.push((key.to_owned(), value.to_owned())),
            }
        }
        Some(table)
    }

    /// Bytes biased toward what the walk cuts at: both separators, a few
    /// ASCII letters (so keys repeat), 2-, 3- and 4-byte UTF-8, and now and
    /// then an arbitrary byte (often making the whole input invalid UTF-8).
    fn biased_bytes() -> impl Strategy<Value = Vec<u8>> {
        let piece = prop_oneof![
            6 => Just(vec![NAME_VALUE_SEPARATOR]),
            6 => Just(vec![PROPERTY_SEPARATOR]),
            12 => prop::sample::select(b"TAGSKEYab ".to_vec()).prop_map(|b| vec![b]),
            3 => Just("\u{e9}".as_bytes().to_vec()),
            2 => Just("\u{20ac}".as_bytes().to_vec()),
            2 => Just("\u{1f600}".as_bytes().to_vec()),
            1 => any::<u8>().prop_map(|b| vec![b]),
        ];
        proptest::collection::vec(piece, 0..48).prop_map(|pieces| pieces.concat())
    }

    #[test]
    fn one_pass_walk_matches_the_reference_on_edge_cases() {
        for raw in [
            &b""[..],
            b"\x02",
            b"\x01",
            b"\x01\x02",
            b"a\x01",
            b"\x01b",
            b"a\x01b",
            b"a\x01\x01",
            b"a\x01\x01b\x02\x02c\x01d\x01",
            b"\xC3\xA9\x01\xE2\x82\xAC\x02\xF0\x9F\x98\x80\x01x",
            b"a\x01b\x02\xC3",
        ] {
            let mut pairs = Vec::new();
            for_each_pair(raw, |k, v| pairs.push((k, v)));
            assert_eq!(pairs, reference_pairs(raw), "{raw:?}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1024))]

        #[test]
        fn one_pass_walk_visits_what_split_visits(raw in biased_bytes()) {
            let mut pairs = Vec::new();
            for_each_pair(&raw, |k, v| pairs.push((k, v)));
            prop_assert_eq!(pairs, reference_pairs(&raw));
        }

        #[test]
        fn next_control_finds_the_first_byte_below_three(
            raw in proptest::collection::vec(
                prop::sample::select(vec![0x00, 0x01, 0x02, 0x03, b'a', 0x7F, 0x80, 0x83, 0xFF]),
                0..40,
            ),
        ) {
            for from in 0..=raw.len() {
                let expected = raw
                    .iter()
                    .skip(from)
                    .position(|&b| b < 3)
                    .map_or(raw.len(), |i| from + i);
                prop_assert_eq!(next_control(&raw, from), expected, "from {}", from);
            }
        }

        #[test]
        fn parse_builds_what_the_reference_walk_builds(raw in biased_bytes()) {
            let parsed = Properties::parse(&raw).ok().map(|props| {
                props.iter().map(|(k, v)| (k.to_owned(), v.to_owned())).collect::<Vec<_>>()
            });
            prop_assert_eq!(parsed, reference_parse(&raw));
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
