//! The stored-message record (RocketMQ V1 layout, big-endian): limits, field
//! positions, SYSFLAG bits, the codec errors and the encoder. Invariant:
//! `encode_into` writes exactly `encoded_len` bytes; decoding lives in
//! `stored_record`.

use std::net::{IpAddr, SocketAddr};

use bytes::{BufMut, Bytes};

/// Magic code of a V1 stored message (`0xDAA320A7`).
pub const MAGIC_V1: i32 = i32::from_be_bytes([0xDA, 0xA3, 0x20, 0xA7]);
/// Magic code of a 5.x V2 stored message (2-byte topic length); never written, rejected on read.
pub const MAGIC_V2: i32 = i32::from_be_bytes([0xDA, 0xA3, 0x20, 0xAB]);
/// Magic code of the end-of-segment blank (`0xCBD43194`).
pub const BLANK_MAGIC: i32 = i32::from_be_bytes([0xCB, 0xD4, 0x31, 0x94]);
/// Default store limit on a message body (4 MiB); the broker enforces it, the codec does not.
pub const BODY_BYTES_MAX: usize = 4 * 1024 * 1024;
/// Largest encoded properties string (it has an i16 length).
pub const PROPERTIES_BYTES_MAX: usize = 32_767;
/// Largest topic in a V1 record (it has a u8 length).
pub const TOPIC_BYTES_MAX: usize = 255;
/// Largest record the codec writes or accepts (TOTALSIZE is a positive i32).
pub const RECORD_BYTES_MAX: usize = 0x7FFF_FFFF;
/// Size of a record with IPv4 hosts and an empty body, topic and properties.
pub const RECORD_BYTES_MIN: usize =
    FIXED_BYTES_BEFORE_HOSTS + 2 * HOST_V4_BYTES + FIXED_BYTES_AFTER_HOSTS;
/// Size of the end-of-segment blank header (`i32 remaining | i32 BLANK_MAGIC`).
pub const BLANK_HEAD_BYTES: usize = 8;

pub(crate) const HOST_V4_BYTES: usize = 8;
pub(crate) const HOST_V6_BYTES: usize = 20;
/// TOTALSIZE..BORNTIMESTAMP plus STORETIMESTAMP.
const FIXED_BYTES_BEFORE_HOSTS: usize = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + 8;
/// RECONSUMETIMES, PREPARED TX OFFSET and the three length prefixes.
const FIXED_BYTES_AFTER_HOSTS: usize = 4 + 8 + 4 + 1 + 2;

/// Byte positions of the fixed-position fields of a stored record.
pub mod layout {
    /// `i32` TOTALSIZE.
    pub const TOTAL_SIZE: usize = 0;
    /// `i32` MAGICCODE.
    pub const MAGIC: usize = 4;
    /// `i32` BODYCRC.
    pub const BODY_CRC: usize = 8;
    /// `i32` QUEUEID.
    pub const QUEUE_ID: usize = 12;
    /// `i32` FLAG.
    pub const FLAG: usize = 16;
    /// `i64` QUEUEOFFSET.
    pub const QUEUE_OFFSET: usize = 20;
    /// `i64` PHYSICALOFFSET.
    pub const PHYS_OFFSET: usize = 28;
    /// `i32` SYSFLAG.
    pub const SYS_FLAG: usize = 36;
    /// `i64` BORNTIMESTAMP.
    pub const BORN_TIMESTAMP: usize = 40;
    /// BORNHOST (8 or 20 bytes).
    pub const BORN_HOST: usize = 48;
    /// `i64` STORETIMESTAMP when BORNHOST is IPv4; see [`super::store_timestamp_pos`].
    pub const STORE_TIMESTAMP_V4: usize = 56;
}

/// SYSFLAG bits.
pub mod sys_flag {
    /// The stored body is compressed.
    pub const COMPRESSED: i32 = 0x1;
    /// TAGS holds several tags.
    pub const MULTI_TAGS: i32 = 0x2;
    /// Mask of the transaction type bits.
    pub const TRANSACTION_MASK: i32 = 0xC;
    /// Not a transactional message.
    pub const TRANSACTION_NOT: i32 = 0;
    /// A prepared (half) transactional message.
    pub const TRANSACTION_PREPARED: i32 = 0x4;
    /// A committed transactional message.
    pub const TRANSACTION_COMMIT: i32 = 0x8;
    /// A rolled-back transactional message.
    pub const TRANSACTION_ROLLBACK: i32 = 0xC;
    /// BORNHOST is IPv6 (20 bytes).
    pub const BORNHOST_V6: i32 = 0x10;
    /// STOREHOST is IPv6 (20 bytes).
    pub const STOREHOST_V6: i32 = 0x20;
}

/// Why bytes could not be decoded. Callers branch on the variant.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The input ends before the item does; more bytes may complete it.
    #[error("incomplete: need {needed} bytes, have {have}")]
    Incomplete {
        /// Bytes needed from the start of the item.
        needed: usize,
        /// Bytes available.
        have: usize,
    },
    /// The bytes can never form a valid item.
    #[error("corrupt: {reason}")]
    Corrupt {
        /// What was wrong.
        reason: &'static str,
    },
}

/// Why a message could not be encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// A field exceeds what its length prefix (or a codec limit) allows.
    #[error("{field} too large: {len} > {max}")]
    TooLarge {
        /// Which field.
        field: &'static str,
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The output buffer is not exactly `encoded_len` bytes.
    #[error("output buffer is {actual} bytes, record needs {expected}")]
    BufferLength {
        /// `encoded_len()`.
        expected: usize,
        /// The buffer handed in.
        actual: usize,
    },
    /// A property key or value cannot be represented in the properties string.
    #[error("invalid property: {reason}")]
    InvalidProperty {
        /// What was wrong.
        reason: &'static str,
    },
}

pub(crate) const fn corrupt(reason: &'static str) -> DecodeError {
    DecodeError::Corrupt { reason }
}

/// What the store is asked to append (the broker has validated it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MessageInput {
    /// Topic name (≤ 255 bytes).
    pub topic: String,
    /// Queue within the topic.
    pub queue_id: i32,
    /// The user flag.
    pub flag: i32,
    /// SYSFLAG; the host V6 bits are set from the addresses at encode time.
    pub sys_flag: i32,
    /// When the producer created the message.
    pub born_timestamp_ms: i64,
    /// The producer's address (IPv6 flow info and scope id are not stored).
    pub born_host: SocketAddr,
    /// The storing broker's address (IPv6 flow info and scope id are not stored).
    pub store_host: SocketAddr,
    /// How many times the message was sent back for reconsumption.
    pub reconsume_times: i32,
    /// CommitLog offset of the prepared message (for commit/rollback records).
    pub prepared_transaction_offset: i64,
    /// The (possibly compressed) body, stored as is.
    pub body: Bytes,
    /// The encoded `k\x01v\x02` properties string.
    pub properties: Bytes,
}

/// Fields the store assigns at append time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordStamp {
    /// Index of the record in its ConsumeQueue.
    pub queue_offset: i64,
    /// CommitLog byte offset of the record.
    pub phys_offset: i64,
    /// When the store appended it.
    pub store_timestamp_ms: i64,
}

/// Encoded size of a host address.
const fn host_bytes(addr: &SocketAddr) -> usize {
    match addr {
        SocketAddr::V4(_) => HOST_V4_BYTES,
        SocketAddr::V6(_) => HOST_V6_BYTES,
    }
}

pub(crate) fn check_len(field: &'static str, len: usize, max: usize) -> Result<(), EncodeError> {
    if len > max {
        return Err(EncodeError::TooLarge { field, len, max });
    }
    Ok(())
}

impl MessageInput {
    /// SYSFLAG as written: the input's flags with the host V6 bits taken from the addresses.
    pub fn effective_sys_flag(&self) -> i32 {
        let mut flag = self.sys_flag & !(sys_flag::BORNHOST_V6 | sys_flag::STOREHOST_V6);
        if self.born_host.is_ipv6() {
            flag |= sys_flag::BORNHOST_V6;
        }
        if self.store_host.is_ipv6() {
            flag |= sys_flag::STOREHOST_V6;
        }
        flag
    }

    /// Size of the encoded record; errors when a field exceeds its length prefix.
    pub fn encoded_len(&self) -> Result<usize, EncodeError> {
        check_len("topic", self.topic.len(), TOPIC_BYTES_MAX)?;
        check_len("properties", self.properties.len(), PROPERTIES_BYTES_MAX)?;
        check_len("body", self.body.len(), RECORD_BYTES_MAX)?;
        // Each term is bounded above, so the sum cannot overflow a usize.
        let len = self.len_before_properties() + self.properties.len();
        check_len("record", len, RECORD_BYTES_MAX)?;
        Ok(len)
    }

    /// Encoded size of every field before the properties string.
    pub(crate) fn len_before_properties(&self) -> usize {
        FIXED_BYTES_BEFORE_HOSTS
            + host_bytes(&self.born_host)
            + host_bytes(&self.store_host)
            + FIXED_BYTES_AFTER_HOSTS
            + self.body.len()
            + self.topic.len()
    }

    /// Writes the record into `out`, which must be exactly `encoded_len()` bytes.
    /// BODYCRC is `crc32(body) & 0x7FFFFFFF`.
    pub fn encode_into(&self, stamp: &RecordStamp, out: &mut [u8]) -> Result<(), EncodeError> {
        let expected = self.encoded_len()?;
        if out.len() != expected {
            return Err(EncodeError::BufferLength {
                expected,
                actual: out.len(),
            });
        }
        let mut rest = self.encode_before_properties(stamp, body_crc(&self.body), out);
        rest.put_slice(&self.properties);
        debug_assert!(rest.is_empty(), "encoded_len and encode_into disagree");
        Ok(())
    }

    /// Writes every field up to and including PROPERTIESLENGTH, which is
    /// `out.len()` minus the bytes before the properties, and returns the
    /// rest of `out` for the caller to fill with that many property bytes.
    /// The caller has checked the field lengths (`encoded_len`) and sized
    /// `out` to hold at least the fields before the properties.
    pub(crate) fn encode_before_properties<'a>(
        &self,
        stamp: &RecordStamp,
        body_crc: u32,
        out: &'a mut [u8],
    ) -> &'a mut [u8] {
        let total_size = i32::try_from(out.len()).expect("invariant: checked ≤ RECORD_BYTES_MAX");
        let props_len = out.len() - self.len_before_properties();
        let body_len =
            i32::try_from(self.body.len()).expect("invariant: checked ≤ RECORD_BYTES_MAX");
        let topic_len = u8::try_from(self.topic.len()).expect("invariant: checked ≤ 255");
        let props_len =
            i16::try_from(props_len).expect("invariant: checked ≤ PROPERTIES_BYTES_MAX");

        // `out` has exactly the room the puts below need, so BufMut never runs out.
        let mut w: &mut [u8] = out;
        w.put_i32(total_size);
        w.put_i32(MAGIC_V1);
        w.put_u32(body_crc);
        w.put_i32(self.queue_id);
        w.put_i32(self.flag);
        w.put_i64(stamp.queue_offset);
        w.put_i64(stamp.phys_offset);
        w.put_i32(self.effective_sys_flag());
        w.put_i64(self.born_timestamp_ms);
        put_host(&mut w, &self.born_host);
        w.put_i64(stamp.store_timestamp_ms);
        put_host(&mut w, &self.store_host);
        w.put_i32(self.reconsume_times);
        w.put_i64(self.prepared_transaction_offset);
        w.put_i32(body_len);
        w.put_slice(&self.body);
        w.put_u8(topic_len);
        w.put_slice(self.topic.as_bytes());
        w.put_i16(props_len);
        w
    }

    /// Encodes into a fresh buffer.
    pub fn encode_to_vec(&self, stamp: &RecordStamp) -> Result<Vec<u8>, EncodeError> {
        let mut out = vec![0; self.encoded_len()?];
        self.encode_into(stamp, &mut out)?;
        Ok(out)
    }
}

/// The stored body CRC: `crc32(body) & 0x7FFFFFFF`.
pub fn body_crc(body: &[u8]) -> u32 {
    crc32fast::hash(body) & 0x7FFF_FFFF
}

fn put_host(w: &mut impl BufMut, addr: &SocketAddr) {
    match addr.ip() {
        IpAddr::V4(ip) => w.put_slice(&ip.octets()),
        IpAddr::V6(ip) => w.put_slice(&ip.octets()),
    }
    w.put_i32(i32::from(addr.port()));
}

/// Position of STORETIMESTAMP, which follows the 8- or 20-byte BORNHOST.
pub fn store_timestamp_pos(sys_flag: i32) -> usize {
    if sys_flag & sys_flag::BORNHOST_V6 == 0 {
        layout::BORN_HOST + HOST_V4_BYTES
    } else {
        layout::BORN_HOST + HOST_V6_BYTES
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::stored_record::{
        peek_head, stored_phys_offset, stored_queue_offset, stored_store_timestamp_ms, RecordHead,
        StoredRecord,
    };

    fn small_message() -> MessageInput {
        MessageInput {
            topic: "T".to_owned(),
            queue_id: 3,
            flag: 0x0102_0304,
            sys_flag: sys_flag::TRANSACTION_COMMIT,
            born_timestamp_ms: 0x1111_2222_3333,
            born_host: "10.0.0.1:1234".parse().expect("addr"),
            store_host: "127.0.0.1:10911".parse().expect("addr"),
            reconsume_times: 2,
            prepared_transaction_offset: 77,
            body: Bytes::from_static(b"hello"),
            properties: Bytes::from_static(b"a\x01b\x02"),
        }
    }

    const STAMP: RecordStamp = RecordStamp {
        queue_offset: 9,
        phys_offset: 0x0A0B_0C0D,
        store_timestamp_ms: 0x4444_5555_6666,
    };

    #[test]
    fn magic_constants_match_rocketmq() {
        assert_eq!(MAGIC_V1, -626_843_481);
        assert_eq!(BLANK_MAGIC, -875_286_124);
        assert_eq!(RECORD_BYTES_MIN, 91);
    }

    #[test]
    fn record_golden_layout_ipv4() {
        let input = small_message();
        let crc: u32 = 0x3610_A686; // zlib.crc32(b"hello"), top bit already clear
        let mut expected: Vec<u8> = Vec::new();
        expected.extend_from_slice(&(91_i32 + 5 + 1 + 4).to_be_bytes()); // TOTALSIZE @0
        expected.extend_from_slice(&[0xDA, 0xA3, 0x20, 0xA7]); // MAGIC @4
        expected.extend_from_slice(&crc.to_be_bytes()); // BODYCRC @8
        expected.extend_from_slice(&[0, 0, 0, 3]); // QUEUEID @12
        expected.extend_from_slice(&[1, 2, 3, 4]); // FLAG @16
        expected.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 9]); // QUEUEOFFSET @20
        expected.extend_from_slice(&[0, 0, 0, 0, 0x0A, 0x0B, 0x0C, 0x0D]); // PHYSOFFSET @28
        expected.extend_from_slice(&[0, 0, 0, 8]); // SYSFLAG @36
        expected.extend_from_slice(&[0, 0, 0x11, 0x11, 0x22, 0x22, 0x33, 0x33]); // BORNTS @40
        expected.extend_from_slice(&[10, 0, 0, 1, 0, 0, 0x04, 0xD2]); // BORNHOST @48
        expected.extend_from_slice(&[0, 0, 0x44, 0x44, 0x55, 0x55, 0x66, 0x66]); // STORETS @56
        expected.extend_from_slice(&[127, 0, 0, 1, 0, 0, 0x2A, 0x9F]); // STOREHOST @64
        expected.extend_from_slice(&[0, 0, 0, 2]); // RECONSUMETIMES @72
        expected.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 77]); // PREPARED TX @76
        expected.extend_from_slice(&[0, 0, 0, 5]); // BODY len @84
        expected.extend_from_slice(b"hello");
        expected.extend_from_slice(&[1, b'T']); // TOPIC
        expected.extend_from_slice(&[0, 4, b'a', 1, b'b', 2]); // PROPERTIES

        assert_eq!(input.encoded_len(), Ok(expected.len()));
        let encoded = input.encode_to_vec(&STAMP).expect("encode");
        assert_eq!(encoded, expected);

        // The fixed offsets other modules rely on.
        assert_eq!(
            encoded[layout::MAGIC..layout::MAGIC + 4],
            MAGIC_V1.to_be_bytes()
        );
        assert_eq!(encoded[layout::FLAG..layout::FLAG + 4], [1, 2, 3, 4]);
        assert_eq!(layout::QUEUE_OFFSET, 20);
        assert_eq!(layout::PHYS_OFFSET, 28);
        assert_eq!(layout::SYS_FLAG, 36);
        assert_eq!(layout::STORE_TIMESTAMP_V4, 56);
        assert_eq!(store_timestamp_pos(0), 56);
        assert_eq!(stored_queue_offset(&encoded), Ok(9));
        assert_eq!(stored_phys_offset(&encoded), Ok(0x0A0B_0C0D));
        assert_eq!(stored_store_timestamp_ms(&encoded), Ok(0x4444_5555_6666));
        assert_eq!(
            peek_head(&encoded),
            Ok(RecordHead::Message { total_size: 101 })
        );

        let record = StoredRecord::decode(&Bytes::from(encoded)).expect("decode");
        assert_eq!(record.body_crc, crc);
        assert_eq!(record.transaction_type(), sys_flag::TRANSACTION_COMMIT);
    }

    #[test]
    fn body_crc_is_crc32_with_the_top_bit_cleared() {
        // zlib.crc32: b"hello" → 0x3610A686 (top bit clear), b"a" → 0xE8B7BE43.
        assert_eq!(body_crc(b"hello"), 0x3610_A686);
        assert_eq!(body_crc(b"a"), 0x68B7_BE43);
        let mut input = small_message();
        input.body = Bytes::from_static(b"a");
        let encoded = input.encode_to_vec(&STAMP).expect("encode");
        assert_eq!(
            encoded[layout::BODY_CRC..layout::BODY_CRC + 4],
            [0x68, 0xB7, 0xBE, 0x43]
        );
        assert!(StoredRecord::decode(&Bytes::from(encoded)).is_ok());
    }

    #[test]
    fn encode_sets_v6_bits_from_addresses() {
        let mut input = small_message();
        input.sys_flag |= sys_flag::BORNHOST_V6; // stale bit, born host is IPv4
        input.store_host = "[::1]:10911".parse().expect("addr");
        let encoded = Bytes::from(input.encode_to_vec(&STAMP).expect("encode"));
        assert_eq!(encoded.len(), 101 + 12);
        let record = StoredRecord::decode(&encoded).expect("decode");
        assert_eq!(
            record.sys_flag,
            sys_flag::TRANSACTION_COMMIT | sys_flag::STOREHOST_V6
        );
        assert_eq!(record.store_host, input.store_host);

        input.born_host = "[2001:db8::7]:1".parse().expect("addr");
        let encoded = input.encode_to_vec(&STAMP).expect("encode");
        assert_eq!(store_timestamp_pos(sys_flag::BORNHOST_V6), 68);
        assert_eq!(
            stored_store_timestamp_ms(&encoded),
            Ok(STAMP.store_timestamp_ms)
        );
    }

    #[test]
    fn encode_rejects_oversized_fields_and_wrong_buffers() {
        let mut input = small_message();
        input.topic = "t".repeat(256);
        assert_eq!(
            input.encoded_len(),
            Err(EncodeError::TooLarge {
                field: "topic",
                len: 256,
                max: 255
            })
        );
        let mut input = small_message();
        input.properties = Bytes::from(vec![b'a'; PROPERTIES_BYTES_MAX + 1]);
        assert!(matches!(
            input.encoded_len(),
            Err(EncodeError::TooLarge {
                field: "properties",
                ..
            })
        ));
        let input = small_message();
        let mut short = vec![0; 100];
        assert_eq!(
            input.encode_into(&STAMP, &mut short),
            Err(EncodeError::BufferLength {
                expected: 101,
                actual: 100
            })
        );
    }
}
