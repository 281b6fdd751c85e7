//! The store's whole-record checksum ("seal"). RocketMQ's BODYCRC covers
//! only the body, so a torn sector in a record's header, topic or
//! properties would pass as valid. Every record the store writes ends with
//! a `__CRC32#` property whose value, 10 decimal digits, is the CRC32 of
//! every record byte before the digits except the body itself — the body
//! is covered by BODYCRC, which sits in the sealed header — so each byte is
//! checksummed once. A record is trusted only when its seal and its BODYCRC
//! both match. Clients see the seal as one more property and ignore it.

use std::ops::Range;

use bytes::BufMut;

use super::properties::keys;
use super::record::{
    check_len, layout, sys_flag, EncodeError, MessageInput, RecordStamp, PROPERTIES_BYTES_MAX,
    RECORD_BYTES_MAX,
};

/// Bytes the seal adds to the properties: key, 0x01, 10 digits, 0x02.
pub const SEAL_PROPERTY_BYTES: usize = SEAL_PREFIX.len() + SEAL_DIGITS + 1;

const SEAL_PREFIX: &[u8] = b"__CRC32#\x01";
const SEAL_DIGITS: usize = 10;

/// `properties` (without any earlier seal) followed by a placeholder seal,
/// with a 0x02 separator inserted when the input lacks a trailing one: the
/// properties [`encode_sealed`] writes, with zeros for the digits.
pub fn with_seal_placeholder(properties: &[u8]) -> Vec<u8> {
    let base = strip_seal(properties);
    let mut out = Vec::with_capacity(base.len() + 1 + SEAL_PROPERTY_BYTES);
    put_sealed_properties(base, &mut out);
    out
}

/// Writes `base` (properties without a seal), a separator when needed and
/// the seal with zeros for its digits.
fn put_sealed_properties(base: &[u8], out: &mut impl BufMut) {
    out.put_slice(base);
    if needs_separator(base) {
        out.put_u8(0x02);
    }
    out.put_slice(SEAL_PREFIX);
    out.put_slice(&[b'0'; SEAL_DIGITS]);
    out.put_u8(0x02);
}

/// A non-empty properties string must end with 0x02 before the seal follows.
fn needs_separator(base: &[u8]) -> bool {
    base.last().is_some_and(|&b| b != 0x02)
}

/// Size of `msg` encoded with its seal (see [`encode_sealed`]); errors when
/// a field, the sealed properties included, exceeds its length prefix.
pub fn sealed_len(msg: &MessageInput) -> Result<usize, EncodeError> {
    debug_assert_eq!(
        keys::CRC32.as_bytes(),
        &SEAL_PREFIX[..SEAL_PREFIX.len() - 1]
    );
    msg.encoded_len()?;
    let base = strip_seal(&msg.properties);
    let props = base.len() + usize::from(needs_separator(base)) + SEAL_PROPERTY_BYTES;
    check_len("properties", props, PROPERTIES_BYTES_MAX)?;
    let len = msg.len_before_properties() + props;
    check_len("record", len, RECORD_BYTES_MAX)?;
    Ok(len)
}

/// Encodes `msg` straight into `out`, exactly [`sealed_len`] bytes, with its
/// properties ending in the seal: one pass writes the record, a second
/// checksums its bytes outside the body. `body_crc` is `body_crc(&msg.body)`,
/// which the caller computes (outside the put lock).
pub fn encode_sealed(msg: &MessageInput, stamp: &RecordStamp, body_crc: u32, out: &mut [u8]) {
    let base = strip_seal(&msg.properties);
    let mut w = msg.encode_before_properties(stamp, body_crc, out);
    put_sealed_properties(base, &mut w);
    debug_assert!(w.is_empty(), "sealed_len and encode_sealed disagree");
    let digits_at = out.len() - SEAL_DIGITS - 1;
    let crc = seal_crc(out, digits_at).expect("invariant: a record just encoded has a body");
    write_digits(crc, &mut out[digits_at..digits_at + SEAL_DIGITS]);
}

/// `value` as exactly `out.len()` zero-padded decimal digits (10 for a u32).
fn write_digits(mut value: u32, out: &mut [u8]) {
    for d in out.iter_mut().rev() {
        let digit = (value % 10) as u8;
        *d = b'0' + digit;
        value /= 10;
    }
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
    seal_crc(record, digits_at) == Some(stored)
}

/// CRC32 of `record[..digits_at]` without the body bytes.
fn seal_crc(record: &[u8], digits_at: usize) -> Option<u32> {
    let head = record.get(..digits_at)?;
    let body = body_range(head)?;
    let mut h = crc32fast::Hasher::new();
    h.update(&head[..body.start]);
    h.update(&head[body.end..]);
    Some(h.finalize())
}

/// Where the body lies in an encoded record, if its header is plausible.
fn body_range(record: &[u8]) -> Option<Range<usize>> {
    let flags = i32::from_be_bytes(
        record
            .get(layout::SYS_FLAG..layout::SYS_FLAG + 4)?
            .try_into()
            .ok()?,
    );
    let host = |v6: bool| if v6 { 20 } else { 8 };
    let born = host(flags & sys_flag::BORNHOST_V6 != 0);
    let store = host(flags & sys_flag::STOREHOST_V6 != 0);
    // BORNHOST, STORETIMESTAMP, STOREHOST, RECONSUMETIMES, PREPARED TX OFFSET.
    let len_at = layout::BORN_HOST + born + 8 + store + 4 + 8;
    let len = i32::from_be_bytes(record.get(len_at..len_at + 4)?.try_into().ok()?);
    let start = len_at + 4;
    let end = start.checked_add(usize::try_from(len).ok()?)?;
    (end <= record.len()).then_some(start..end)
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

    fn sealed_parts() -> (MessageInput, crate::message::RecordStamp, u32) {
        let msg = crate::message::MessageInput {
            topic: "T".into(),
            queue_id: 1,
            flag: 0,
            sys_flag: 0,
            born_timestamp_ms: 5,
            born_host: "10.0.0.1:1".parse().expect("addr"),
            store_host: "[::1]:2".parse().expect("addr"),
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body: bytes::Bytes::from_static(b"the body"),
            properties: bytes::Bytes::from_static(b"KEYS\x01k1\x02"),
        };
        let stamp = crate::message::RecordStamp {
            queue_offset: 3,
            phys_offset: 7,
            store_timestamp_ms: 9,
        };
        let crc = crate::message::body_crc(&msg.body);
        (msg, stamp, crc)
    }

    fn sealed_record() -> (Vec<u8>, std::ops::Range<usize>) {
        let (msg, stamp, crc) = sealed_parts();
        let placeholder = MessageInput {
            properties: with_seal_placeholder(&msg.properties).into(),
            ..msg.clone()
        };
        let unsealed = placeholder.encode_to_vec(&stamp).expect("encodes");
        assert!(!seal_matches(&unsealed), "placeholder must not verify");
        let mut rec = vec![0; sealed_len(&msg).expect("fits")];
        encode_sealed(&msg, &stamp, crc, &mut rec);
        assert_eq!(rec.len(), unsealed.len());
        let digits_at = rec.len() - SEAL_DIGITS - 1;
        assert_eq!(
            rec[..digits_at],
            unsealed[..digits_at],
            "same bytes but the digits"
        );
        let crc = seal_crc(&rec, digits_at).expect("crc");
        assert_eq!(
            &rec[digits_at..digits_at + SEAL_DIGITS],
            format!("{crc:010}").as_bytes()
        );
        let body = body_range(&rec).expect("body");
        assert_eq!(&rec[body.clone()], b"the body");
        (rec, body)
    }

    #[test]
    fn sealed_record_verifies_and_any_flip_outside_the_body_breaks_it() {
        let (rec, body) = sealed_record();
        assert!(seal_matches(&rec));
        for i in (0..rec.len()).filter(|i| !body.contains(i)) {
            let mut bad = rec.clone();
            bad[i] ^= 0x01;
            assert!(!seal_matches(&bad), "flip at {i} accepted");
        }
    }

    #[test]
    fn body_flips_are_left_to_bodycrc_which_the_seal_protects() {
        let (rec, body) = sealed_record();
        let mut bad = rec.clone();
        bad[body.start] ^= 0x01;
        assert!(seal_matches(&bad), "the seal skips the body");
        let err = crate::message::StoredRecord::decode(&bytes::Bytes::from(bad));
        assert!(err.is_err(), "BODYCRC catches the body flip");
    }

    /// `Segment::write_with` hands its fill a buffer whose prior contents
    /// are unspecified (the mapped disk reuses its staging buffer without
    /// zeroing it), so the record must not depend on them.
    #[test]
    fn encode_sealed_writes_every_byte_whatever_the_buffer_held() {
        let (rec, _) = sealed_record();
        for junk in [0xFF, 0xA5, 0x01] {
            let (msg, stamp, crc) = sealed_parts();
            let mut reused = vec![junk; rec.len()];
            encode_sealed(&msg, &stamp, crc, &mut reused);
            assert_eq!(reused, rec, "bytes left from {junk:#x}");
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
