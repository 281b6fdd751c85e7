//! The `SEND_BATCH_MESSAGE` body: items concatenated, each `i32 totalSize |
//! i32 magic | i32 bodyCRC | i32 flag | i32 bodyLen + body | i16 propLen +
//! props`. Invariant: decoding checks every length against the input and
//! totalSize against the fields, and stops at [`BATCH_ITEMS_MAX`] items.

use bytes::{BufMut, Bytes};

use super::properties::PROPERTY_SEPARATOR;
use super::record::{corrupt, DecodeError, EncodeError, PROPERTIES_BYTES_MAX, RECORD_BYTES_MAX};

/// Most items one batch body may hold.
pub const BATCH_ITEMS_MAX: usize = 10_000;
/// Bytes of an item besides its body and properties.
const ITEM_FIXED_BYTES: usize = 4 + 4 + 4 + 4 + 4 + 2;

/// One message of a batch body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchItem {
    /// The user flag.
    pub flag: i32,
    /// The body.
    pub body: Bytes,
    /// The item's encoded properties string.
    pub properties: Bytes,
}

fn read_array<const N: usize>(body: &[u8], pos: usize) -> Result<[u8; N], DecodeError> {
    let end = pos
        .checked_add(N)
        .ok_or(corrupt("batch offset overflows"))?;
    let bytes = body.get(pos..end).ok_or(DecodeError::Incomplete {
        needed: end,
        have: body.len(),
    })?;
    Ok(bytes.try_into().expect("invariant: N bytes"))
}

/// Decodes a batch body into zero-copy items. A body that ends inside an
/// item is Incomplete (`needed` counts from the start of the body); a
/// negative length, a totalSize that disagrees with the fields, or more than
/// [`BATCH_ITEMS_MAX`] items is Corrupt.
pub fn decode_batch(body: &Bytes) -> Result<Vec<BatchItem>, DecodeError> {
    let mut items = Vec::new();
    let mut pos = 0;
    while pos < body.len() {
        if items.len() == BATCH_ITEMS_MAX {
            return Err(corrupt("batch has too many items"));
        }
        let total = i32::from_be_bytes(read_array(body, pos)?);
        let total = usize::try_from(total).map_err(|_| corrupt("negative batch item size"))?;
        let fields_max = total
            .checked_sub(ITEM_FIXED_BYTES)
            .ok_or(corrupt("batch item size below minimum"))?;
        // Skip magic and body CRC: clients send zeros and the store recomputes the CRC.
        let flag = i32::from_be_bytes(read_array(body, pos + 12)?);
        let body_len = i32::from_be_bytes(read_array(body, pos + 16)?);
        let body_len =
            usize::try_from(body_len).map_err(|_| corrupt("negative batch body length"))?;
        if body_len > fields_max {
            return Err(corrupt("batch item size does not match fields"));
        }
        let body_start = pos + 20;
        let body_end = body_start + body_len;
        let props_len = i16::from_be_bytes(read_array(body, body_end)?);
        let props_len =
            usize::try_from(props_len).map_err(|_| corrupt("negative batch properties length"))?;
        if body_len + props_len != fields_max {
            return Err(corrupt("batch item size does not match fields"));
        }
        let props_start = body_end + 2;
        let end = props_start + props_len;
        if end > body.len() {
            return Err(DecodeError::Incomplete {
                needed: end,
                have: body.len(),
            });
        }
        items.push(BatchItem {
            flag,
            body: body.slice(body_start..body_end),
            properties: body.slice(props_start..end),
        });
        pos = end;
    }
    Ok(items)
}

/// Encodes items as a batch body (magic and body CRC written as 0, like the client).
pub fn encode_batch(items: &[BatchItem]) -> Result<Vec<u8>, EncodeError> {
    if items.len() > BATCH_ITEMS_MAX {
        return Err(EncodeError::TooLarge {
            field: "batch items",
            len: items.len(),
            max: BATCH_ITEMS_MAX,
        });
    }
    let mut total_len: usize = 0;
    for item in items {
        if item.properties.len() > PROPERTIES_BYTES_MAX {
            return Err(EncodeError::TooLarge {
                field: "properties",
                len: item.properties.len(),
                max: PROPERTIES_BYTES_MAX,
            });
        }
        let item_len = ITEM_FIXED_BYTES
            .saturating_add(item.body.len())
            .saturating_add(item.properties.len());
        if item_len > RECORD_BYTES_MAX {
            return Err(EncodeError::TooLarge {
                field: "batch item",
                len: item_len,
                max: RECORD_BYTES_MAX,
            });
        }
        total_len = total_len.saturating_add(item_len);
    }
    let mut out = Vec::with_capacity(total_len);
    for item in items {
        let item_len = ITEM_FIXED_BYTES + item.body.len() + item.properties.len();
        out.put_i32(i32::try_from(item_len).expect("invariant: checked ≤ RECORD_BYTES_MAX"));
        out.put_i32(0);
        out.put_i32(0);
        out.put_i32(item.flag);
        out.put_i32(i32::try_from(item.body.len()).expect("invariant: body < item size"));
        out.put_slice(&item.body);
        out.put_i16(
            i16::try_from(item.properties.len())
                .expect("invariant: checked ≤ PROPERTIES_BYTES_MAX"),
        );
        out.put_slice(&item.properties);
    }
    Ok(out)
}

/// An inner message's properties with the batch header's properties
/// appended, inserting a 0x02 separator if the item's string lacks a
/// trailing one (what the broker stores for each batch item).
pub fn merge_batch_properties(item: &[u8], header: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(item.len() + 1 + header.len());
    merge_batch_properties_into(item, header, &mut out);
    out
}

/// [`merge_batch_properties`] appended to `out`: a batch's merged
/// properties can share one buffer.
pub fn merge_batch_properties_into(item: &[u8], header: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(item);
    if !item.is_empty() && item.last() != Some(&PROPERTY_SEPARATOR) && !header.is_empty() {
        out.push(PROPERTY_SEPARATOR);
    }
    out.extend_from_slice(header);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn item(flag: i32, body: &'static [u8], props: &'static [u8]) -> BatchItem {
        BatchItem {
            flag,
            body: Bytes::from_static(body),
            properties: Bytes::from_static(props),
        }
    }

    #[test]
    fn batch_golden_layout() {
        let encoded = encode_batch(&[item(7, b"hi", b"a\x01b\x02")]).expect("encode");
        let expected: &[u8] = &[
            0, 0, 0, 28, // totalSize = 22 + 2 + 4
            0, 0, 0, 0, // magic
            0, 0, 0, 0, // body crc
            0, 0, 0, 7, // flag
            0, 0, 0, 2, b'h', b'i', // body
            0, 4, b'a', 1, b'b', 2, // properties
        ];
        assert_eq!(encoded, expected);
    }

    #[test]
    fn decode_batch_is_zero_copy() {
        let body = Bytes::from(encode_batch(&[item(1, b"xyz", b"")]).expect("encode"));
        let items = decode_batch(&body).expect("decode");
        assert_eq!(items.len(), 1);
        let inner = body.as_ptr() as usize + 20;
        assert_eq!(items[0].body.as_ptr() as usize, inner);
    }

    #[test]
    fn decode_batch_rejects_size_mismatch_and_negative_lengths() {
        let mut raw = encode_batch(&[item(1, b"xyz", b"k\x01v\x02")]).expect("encode");
        raw[3] += 1;
        assert_eq!(
            decode_batch(&Bytes::from(raw.clone())),
            Err(corrupt("batch item size does not match fields"))
        );
        raw[3] -= 1;
        raw[16] = 0xFF;
        assert_eq!(
            decode_batch(&Bytes::from(raw)),
            Err(corrupt("negative batch body length"))
        );
    }

    #[test]
    fn decode_batch_rejects_more_than_max_items() {
        let items = vec![item(0, b"", b""); BATCH_ITEMS_MAX];
        let mut raw = encode_batch(&items).expect("at the limit encodes");
        assert_eq!(
            decode_batch(&Bytes::from(raw.clone())).map(|v| v.len()),
            Ok(BATCH_ITEMS_MAX)
        );
        raw.extend_from_within(..22);
        assert_eq!(
            decode_batch(&Bytes::from(raw)),
            Err(corrupt("batch has too many items"))
        );
        let too_many = vec![item(0, b"", b""); BATCH_ITEMS_MAX + 1];
        assert!(matches!(
            encode_batch(&too_many),
            Err(EncodeError::TooLarge { .. })
        ));
    }

    #[test]
    fn merge_batch_properties_adds_separator_only_when_missing() {
        assert_eq!(
            merge_batch_properties(b"a\x01b\x02", b"W\x01t\x02"),
            b"a\x01b\x02W\x01t\x02"
        );
        assert_eq!(
            merge_batch_properties(b"a\x01b", b"W\x01t\x02"),
            b"a\x01b\x02W\x01t\x02"
        );
        assert_eq!(merge_batch_properties(b"", b"W\x01t\x02"), b"W\x01t\x02");
        assert_eq!(merge_batch_properties(b"a\x01b", b""), b"a\x01b");
    }

    fn batch_item() -> impl Strategy<Value = BatchItem> {
        (
            any::<i32>(),
            proptest::collection::vec(any::<u8>(), 0..40),
            proptest::collection::vec(any::<u8>(), 0..40),
        )
            .prop_map(|(flag, body, props)| BatchItem {
                flag,
                body: body.into(),
                properties: props.into(),
            })
    }

    proptest! {
        #[test]
        fn batch_round_trips(items in proptest::collection::vec(batch_item(), 0..8)) {
            let encoded = Bytes::from(encode_batch(&items).expect("encode"));
            prop_assert_eq!(decode_batch(&encoded), Ok(items));
        }

        #[test]
        fn batch_truncation_is_incomplete(items in proptest::collection::vec(batch_item(), 1..4)) {
            let encoded = Bytes::from(encode_batch(&items).expect("encode"));
            let item_ends: Vec<usize> = items
                .iter()
                .scan(0, |end, i| { *end += 22 + i.body.len() + i.properties.len(); Some(*end) })
                .collect();
            for cut in 1..encoded.len() {
                let result = decode_batch(&encoded.slice(..cut));
                if item_ends.contains(&cut) {
                    let n = item_ends.iter().position(|&e| e == cut).expect("found") + 1;
                    prop_assert_eq!(result, Ok(items[..n].to_vec()));
                } else {
                    prop_assert!(matches!(result, Err(DecodeError::Incomplete { .. })), "cut {}: {:?}", cut, result);
                }
            }
        }

        #[test]
        fn decode_batch_with_a_corrupted_byte_never_panics(
            items in proptest::collection::vec(batch_item(), 1..4),
            index in any::<prop::sample::Index>(),
            value in any::<u8>(),
        ) {
            let mut raw = encode_batch(&items).expect("encode");
            let at = index.index(raw.len());
            raw[at] = value;
            if let Ok(decoded) = decode_batch(&Bytes::from(raw.clone())) {
                prop_assert_eq!(encode_batch(&decoded).expect("encode").len(), raw.len());
            }
        }

        #[test]
        fn decode_batch_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..128)) {
            if let Ok(items) = decode_batch(&Bytes::from(bytes.clone())) {
                // Whatever decodes re-encodes to the same bytes, magic/CRC aside.
                let again = encode_batch(&items).expect("encode");
                prop_assert_eq!(again.len(), bytes.len());
            }
        }
    }
}
