//! Property tests of the stored-record codec through the public API: round
//! trips with IPv4 and IPv6 hosts, and no panic on truncated, corrupted or
//! arbitrary input.

use std::net::{IpAddr, SocketAddr};

use bytes::Bytes;
use proptest::prelude::*;
use sluice_core::message::{
    body_crc, encode_blank, encode_pad_head, peek_head, stored_phys_offset, stored_queue_offset,
    stored_store_timestamp_ms, sys_flag, DecodeError, MessageInput, RecordHead, RecordStamp,
    RecordView, StoredRecord, RECORD_BYTES_MIN,
};

fn socket_addr(v6: bool) -> BoxedStrategy<SocketAddr> {
    if v6 {
        (any::<[u8; 16]>(), any::<u16>())
            .prop_map(|(ip, port)| SocketAddr::new(IpAddr::from(ip), port))
            .boxed()
    } else {
        (any::<[u8; 4]>(), any::<u16>())
            .prop_map(|(ip, port)| SocketAddr::new(IpAddr::from(ip), port))
            .boxed()
    }
}

fn message_input(born_v6: bool, store_v6: bool) -> impl Strategy<Value = MessageInput> {
    (
        (
            "[a-zA-Z0-9_%|-]{0,40}",
            any::<i32>(),
            any::<i32>(),
            // Any flags except the host bits, which encode derives from the addresses.
            any::<i32>().prop_map(|f| f & !(sys_flag::BORNHOST_V6 | sys_flag::STOREHOST_V6)),
            any::<i64>(),
        ),
        (socket_addr(born_v6), socket_addr(store_v6)),
        (
            any::<i32>(),
            any::<i64>(),
            proptest::collection::vec(any::<u8>(), 0..200),
            proptest::collection::vec(any::<u8>(), 0..100),
        ),
    )
        .prop_map(
            |(
                (topic, queue_id, flag, sys_flag, born_timestamp_ms),
                (born_host, store_host),
                (reconsume_times, prepared_transaction_offset, body, properties),
            )| MessageInput {
                topic,
                queue_id,
                flag,
                sys_flag,
                born_timestamp_ms,
                born_host,
                store_host,
                reconsume_times,
                prepared_transaction_offset,
                body: body.into(),
                properties: properties.into(),
            },
        )
}

fn any_message_input() -> impl Strategy<Value = MessageInput> {
    (any::<bool>(), any::<bool>()).prop_flat_map(|(b, s)| message_input(b, s))
}

fn stamp() -> impl Strategy<Value = RecordStamp> {
    (any::<i64>(), any::<i64>(), any::<i64>()).prop_map(
        |(queue_offset, phys_offset, store_timestamp_ms)| RecordStamp {
            queue_offset,
            phys_offset,
            store_timestamp_ms,
        },
    )
}

fn encode(input: &MessageInput, stamp: &RecordStamp) -> Bytes {
    let mut out = vec![0; input.encoded_len().expect("strategy stays within limits")];
    input.encode_into(stamp, &mut out).expect("encode");
    Bytes::from(out)
}

fn check_round_trip(input: &MessageInput, stamp: &RecordStamp) -> Result<(), TestCaseError> {
    let encoded = encode(input, stamp);
    let record = StoredRecord::decode(&encoded).expect("own encoding decodes");
    prop_assert_eq!(record.total_size as usize, encoded.len());
    prop_assert_eq!(record.body_crc, body_crc(&input.body));
    prop_assert_eq!(record.queue_id, input.queue_id);
    prop_assert_eq!(record.flag, input.flag);
    prop_assert_eq!(record.queue_offset, stamp.queue_offset);
    prop_assert_eq!(record.phys_offset, stamp.phys_offset);
    prop_assert_eq!(record.sys_flag, input.effective_sys_flag());
    prop_assert_eq!(
        record.sys_flag & sys_flag::BORNHOST_V6 != 0,
        input.born_host.is_ipv6()
    );
    prop_assert_eq!(
        record.sys_flag & sys_flag::STOREHOST_V6 != 0,
        input.store_host.is_ipv6()
    );
    prop_assert_eq!(record.born_timestamp_ms, input.born_timestamp_ms);
    prop_assert_eq!(record.born_host, input.born_host);
    prop_assert_eq!(record.store_timestamp_ms, stamp.store_timestamp_ms);
    prop_assert_eq!(record.store_host, input.store_host);
    prop_assert_eq!(record.reconsume_times, input.reconsume_times);
    prop_assert_eq!(
        record.prepared_transaction_offset,
        input.prepared_transaction_offset
    );
    prop_assert_eq!(&record.body, &input.body);
    prop_assert_eq!(&record.topic, &input.topic);
    prop_assert_eq!(&record.properties, &input.properties);
    // Read in place, the record has the same fields.
    prop_assert_eq!(RecordView::parse(&encoded), Ok(record.view()));
    prop_assert_eq!(
        peek_head(&encoded),
        Ok(RecordHead::Message {
            total_size: record.total_size
        })
    );
    prop_assert_eq!(stored_phys_offset(&encoded), Ok(stamp.phys_offset));
    prop_assert_eq!(stored_queue_offset(&encoded), Ok(stamp.queue_offset));
    prop_assert_eq!(
        stored_store_timestamp_ms(&encoded),
        Ok(stamp.store_timestamp_ms)
    );
    Ok(())
}

proptest! {
    #[test]
    fn message_round_trips_with_ipv4_hosts(input in message_input(false, false), stamp in stamp()) {
        check_round_trip(&input, &stamp)?;
    }

    #[test]
    fn message_round_trips_with_ipv6_hosts(input in message_input(true, true), stamp in stamp()) {
        check_round_trip(&input, &stamp)?;
    }

    #[test]
    fn message_round_trips_with_mixed_hosts(input in any_message_input(), stamp in stamp()) {
        check_round_trip(&input, &stamp)?;
    }

    #[test]
    fn message_truncated_anywhere_is_incomplete(input in any_message_input(), stamp in stamp()) {
        let encoded = encode(&input, &stamp);
        for cut in 0..encoded.len() {
            let prefix = encoded.slice(..cut);
            let result = StoredRecord::decode(&prefix);
            prop_assert!(matches!(result, Err(DecodeError::Incomplete { .. })), "cut {}: {:?}", cut, result);
            if let Err(DecodeError::Incomplete { needed, have }) = result {
                prop_assert_eq!(have, cut);
                prop_assert!(needed > cut && needed <= encoded.len());
            }
            let head = peek_head(&prefix);
            if cut < 8 {
                prop_assert_eq!(head, Err(DecodeError::Incomplete { needed: 8, have: cut }));
            } else {
                prop_assert!(matches!(head, Ok(RecordHead::Message { .. })), "{:?}", head);
            }
        }
    }

    #[test]
    fn message_with_any_flipped_body_byte_is_crc_corrupt(
        input in any_message_input().prop_filter("needs a body", |m| !m.body.is_empty()),
        stamp in stamp(),
        index in any::<prop::sample::Index>(),
        bit in 0_u8..8,
    ) {
        let encoded = encode(&input, &stamp);
        let body_start = encoded.len() - input.properties.len() - 2 - input.topic.len() - 1 - input.body.len();
        let mut corrupted = encoded.to_vec();
        corrupted[body_start + index.index(input.body.len())] ^= 1 << bit;
        prop_assert_eq!(
            StoredRecord::decode(&Bytes::from(corrupted)),
            Err(DecodeError::Corrupt { reason: "body crc mismatch" })
        );
    }

    #[test]
    fn message_with_any_corrupted_byte_never_panics(
        input in any_message_input(),
        stamp in stamp(),
        index in any::<prop::sample::Index>(),
        value in any::<u8>(),
    ) {
        let mut corrupted = encode(&input, &stamp).to_vec();
        let at = index.index(corrupted.len());
        corrupted[at] = value;
        let corrupted = Bytes::from(corrupted);
        if let Ok(record) = StoredRecord::decode(&corrupted) {
            // Anything accepted is self-consistent: its size is the input's.
            prop_assert_eq!(record.total_size as usize, corrupted.len());
        }
        let _ = peek_head(&corrupted);
        let _ = stored_store_timestamp_ms(&corrupted);
    }

    #[test]
    fn message_decode_of_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let bytes = Bytes::from(bytes);
        match StoredRecord::decode(&bytes) {
            Ok(record) => prop_assert!(record.total_size as usize <= bytes.len()),
            Err(DecodeError::Incomplete { needed, have }) => {
                prop_assert_eq!(have, bytes.len());
                prop_assert!(needed > have);
            }
            Err(DecodeError::Corrupt { .. }) => {}
        }
        prop_assert_eq!(
            RecordView::parse(&bytes).map(|v| v.total_size),
            StoredRecord::decode_unchecked_crc(&bytes).map(|r| r.total_size)
        );
        let _ = stored_phys_offset(&bytes);
        let _ = stored_queue_offset(&bytes);
        let _ = stored_store_timestamp_ms(&bytes);
    }

    #[test]
    fn message_head_of_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..16)) {
        match peek_head(&bytes) {
            Ok(RecordHead::Message { total_size }) => prop_assert!(total_size as usize >= RECORD_BYTES_MIN),
            Ok(RecordHead::Blank { remaining }) => prop_assert!(remaining >= 8),
            Ok(RecordHead::Pad { size }) => prop_assert!(size >= 8),
            Err(DecodeError::Incomplete { needed, have }) => {
                prop_assert_eq!((needed, have), (8, bytes.len()));
            }
            Err(DecodeError::Corrupt { .. }) => prop_assert!(bytes.len() >= 8),
        }
    }

    #[test]
    fn message_pad_head_round_trips(size in 8_u32..=520) {
        prop_assert_eq!(peek_head(&encode_pad_head(size)), Ok(RecordHead::Pad { size }));
    }

    #[test]
    fn message_blank_round_trips(remaining in 8_u32..=0x7FFF_FFFF) {
        prop_assert_eq!(peek_head(&encode_blank(remaining)), Ok(RecordHead::Blank { remaining }));
    }
}
