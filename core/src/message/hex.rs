//! Uppercase hex for message ids (the JVM's `UtilAll.bytes2string`) and its
//! strict inverse. Decoding works on bytes, so non-ASCII input cannot panic.

use super::record::{corrupt, DecodeError};

const DIGITS: &[u8; 16] = b"0123456789ABCDEF";

/// Appends `bytes` as uppercase hex to `out`.
pub(crate) fn push_upper(out: &mut String, bytes: &[u8]) {
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0xF)]));
    }
}

fn nibble(c: u8) -> Result<u8, DecodeError> {
    match c {
        b'0'..=b'9' => Ok(c - b'0'),
        b'A'..=b'F' => Ok(c - b'A' + 10),
        b'a'..=b'f' => Ok(c - b'a' + 10),
        _ => Err(corrupt("not a hex digit")),
    }
}

/// Decodes hex (either case) into bytes; odd length or a non-hex byte is Corrupt.
pub(crate) fn decode(text: &str) -> Result<Vec<u8>, DecodeError> {
    let digits = text.as_bytes();
    if digits.len() % 2 != 0 {
        return Err(corrupt("odd hex length"));
    }
    digits
        .chunks_exact(2)
        .map(|pair| Ok(nibble(pair[0])? << 4 | nibble(pair[1])?))
        .collect()
}
