//! The store's whole-record checksum ("seal"). RocketMQ's BODYCRC covers
//! only the body, so a torn sector in a record's header, topic or
//! properties would pass as valid. Every record the store writes ends with
//! a `__CRC32#` property whose value, 10 decimal digits, is the CRC32 of
//! every record byte before the digits; a record is trusted only when its
//! seal matches. Clients see it as one more property and ignore it.

use super::properties::keys;

/// Bytes the seal adds to the properties: key, 0x01, 10 digits, 0x02.
pub const SEAL_PROPERTY_BYTES: usize = SEAL_PREFIX.len() + SEAL_DIGITS + 1;

const SEAL_PREFIX: &[u8] = b"__CRC32#\x01";
const SEAL_DIGITS: usize = 10;

/// `properties` (without any earlier seal) followed by a placeholder seal,
/// with a 0x02 separator inserted when the input lacks a trailing one.
pub fn with_seal_placeholder(properties: &[u8]) -> Vec<u8> {
    debug_assert_eq!(
        keys::CRC32.as_bytes(),
        &SEAL_PREFIX[..SEAL_PREFIX.len() - 1]
    );
    let base = strip_seal(properties);
    let mut out = Vec::with_capacity(base.len() + 1 + SEAL_PROPERTY_BYTES);
    out.extend_from_slice(base);
    if !out.is_empty() && out.last() != Some(&0x02) {
        out.push(0x02);
    }
    out.extend_from_slice(SEAL_PREFIX);
    out.extend_from_slice(&[b'0'; SEAL_DIGITS]);
    out.push(0x02);
    out
}

/// Writes the seal into an encoded record whose properties end with the
/// placeholder; false when the record does not end with one.
pub fn seal_record(record: &mut [u8]) -> bool {
    let Some(digits_at) = seal_digits_at(record) else {
        return false;
    };
    let crc = crc32fast::hash(&record[..digits_at]);
    let digits = format!("{crc:010}");
    record[digits_at..digits_at + SEAL_DIGITS].copy_from_slice(digits.as_bytes());
    true
}

/// True when `record` ends with a seal matching its bytes.
pub fn seal_matches(record: &[u8]) -> bool {
    let Some(digits_at) = seal_digits_at(record) else {
        return false;
    };
    let Ok(text) = std::str::from_utf8(&record[digits_at..digits_at + SEAL_DIGITS]) else {
        return false;
    };
    let Ok(stored) = text.parse::<u32>() else {
        return false;
    };
    stored == crc32fast::hash(&record[..digits_at])
}

/// `properties` without a trailing seal (for re-storing a stored message).
pub fn strip_seal(properties: &[u8]) -> &[u8] {
    match seal_digits_at(properties) {
        Some(at) => &properties[..at - SEAL_PREFIX.len()],
        None => properties,
    }
}

/// Where the seal's digits start, if `bytes` ends with a seal.
fn seal_digits_at(bytes: &[u8]) -> Option<usize> {
    let start = bytes.len().checked_sub(SEAL_PROPERTY_BYTES)?;
    let tail = &bytes[start..];
    (tail.starts_with(SEAL_PREFIX) && tail.last() == Some(&0x02))
        .then_some(start + SEAL_PREFIX.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_record_verifies_and_any_flip_breaks_it() {
        let mut rec = b"header-topic-".to_vec();
        rec.extend(with_seal_placeholder(b"KEYS\x01k1\x02"));
        assert!(!seal_matches(&rec), "placeholder must not verify");
        assert!(seal_record(&mut rec));
        assert!(seal_matches(&rec));
        for i in 0..rec.len() {
            let mut bad = rec.clone();
            bad[i] ^= 0x01;
            assert!(!seal_matches(&bad), "flip at {i} accepted");
        }
    }

    #[test]
    fn placeholder_adds_separator_and_replaces_an_old_seal() {
        let p = with_seal_placeholder(b"A\x01b");
        assert!(p.starts_with(b"A\x01b\x02__CRC32#\x01"));
        let again = with_seal_placeholder(&p);
        assert_eq!(again, p, "an existing seal is replaced, not doubled");
        assert_eq!(strip_seal(&p), b"A\x01b\x02");
        assert_eq!(with_seal_placeholder(b"").len(), SEAL_PROPERTY_BYTES);
        assert_eq!(strip_seal(b"no seal"), b"no seal");
    }
}
