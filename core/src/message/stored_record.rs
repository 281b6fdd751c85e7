//! Reading stored records: `StoredRecord::decode`, the 8-byte head of a
//! CommitLog position (message or end-of-segment blank), and single-field
//! accessors for recovery. Invariant: no input panics; every read is
//! bounds-checked, and a record is accepted only if its fields fill TOTALSIZE.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use bytes::Bytes;

use super::properties::Properties;
use super::record::{
    body_crc, corrupt, layout, store_timestamp_pos, sys_flag, DecodeError, BLANK_HEAD_BYTES,
    BLANK_MAGIC, MAGIC_V1, MAGIC_V2, RECORD_BYTES_MIN,
};

/// A decoded stored record; `body` and `properties` are zero-copy slices of the input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredRecord {
    /// TOTALSIZE.
    pub total_size: u32,
    /// BODYCRC.
    pub body_crc: u32,
    /// QUEUEID.
    pub queue_id: i32,
    /// FLAG.
    pub flag: i32,
    /// QUEUEOFFSET.
    pub queue_offset: i64,
    /// PHYSICALOFFSET.
    pub phys_offset: i64,
    /// SYSFLAG.
    pub sys_flag: i32,
    /// BORNTIMESTAMP.
    pub born_timestamp_ms: i64,
    /// BORNHOST.
    pub born_host: SocketAddr,
    /// STORETIMESTAMP.
    pub store_timestamp_ms: i64,
    /// STOREHOST.
    pub store_host: SocketAddr,
    /// RECONSUMETIMES.
    pub reconsume_times: i32,
    /// PREPARED TRANSACTION OFFSET.
    pub prepared_transaction_offset: i64,
    /// BODY.
    pub body: Bytes,
    /// TOPIC.
    pub topic: String,
    /// PROPERTIES (the encoded string).
    pub properties: Bytes,
}

/// A bounds-checked big-endian reader over one record.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let end = self
            .pos
            .checked_add(n)
            .ok_or(corrupt("field length overflows"))?;
        let bytes = self
            .buf
            .get(self.pos..end)
            .ok_or(corrupt("field overruns total size"))?;
        self.pos = end;
        Ok(bytes)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let bytes = self.take(N)?;
        Ok(bytes.try_into().expect("invariant: take returns N bytes"))
    }

    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(u8::from_be_bytes(self.array()?))
    }

    fn i16(&mut self) -> Result<i16, DecodeError> {
        Ok(i16::from_be_bytes(self.array()?))
    }

    fn i32(&mut self) -> Result<i32, DecodeError> {
        Ok(i32::from_be_bytes(self.array()?))
    }

    fn i64(&mut self) -> Result<i64, DecodeError> {
        Ok(i64::from_be_bytes(self.array()?))
    }

    fn host(&mut self, v6: bool) -> Result<SocketAddr, DecodeError> {
        let ip = if v6 {
            IpAddr::V6(Ipv6Addr::from(self.array::<16>()?))
        } else {
            IpAddr::V4(Ipv4Addr::from(self.array::<4>()?))
        };
        let port = u16::try_from(self.i32()?).map_err(|_| corrupt("host port out of range"))?;
        Ok(SocketAddr::new(ip, port))
    }
}

fn read_i32_at(buf: &[u8], pos: usize) -> Result<i32, DecodeError> {
    let end = pos + 4;
    let bytes = buf.get(pos..end).ok_or(DecodeError::Incomplete {
        needed: end,
        have: buf.len(),
    })?;
    Ok(i32::from_be_bytes(
        bytes.try_into().expect("invariant: 4 bytes"),
    ))
}

fn read_i64_at(buf: &[u8], pos: usize) -> Result<i64, DecodeError> {
    let end = pos + 8;
    let bytes = buf.get(pos..end).ok_or(DecodeError::Incomplete {
        needed: end,
        have: buf.len(),
    })?;
    Ok(i64::from_be_bytes(
        bytes.try_into().expect("invariant: 8 bytes"),
    ))
}

/// A stored record read in place: the fields of [`StoredRecord`] with the
/// body, topic and properties borrowed from the bytes, so reading one
/// allocates nothing (what a walk over a long stretch of the log wants).
/// The one field walk: [`StoredRecord::decode_unchecked_crc`] is this,
/// owned. The body CRC is not checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordView<'a> {
    /// TOTALSIZE.
    pub total_size: u32,
    /// BODYCRC (as stored, not verified).
    pub body_crc: u32,
    /// QUEUEID.
    pub queue_id: i32,
    /// FLAG.
    pub flag: i32,
    /// QUEUEOFFSET.
    pub queue_offset: i64,
    /// PHYSICALOFFSET.
    pub phys_offset: i64,
    /// SYSFLAG.
    pub sys_flag: i32,
    /// BORNTIMESTAMP.
    pub born_timestamp_ms: i64,
    /// BORNHOST.
    pub born_host: SocketAddr,
    /// STORETIMESTAMP.
    pub store_timestamp_ms: i64,
    /// STOREHOST.
    pub store_host: SocketAddr,
    /// RECONSUMETIMES.
    pub reconsume_times: i32,
    /// PREPARED TRANSACTION OFFSET.
    pub prepared_transaction_offset: i64,
    /// BODY.
    pub body: &'a [u8],
    /// TOPIC.
    pub topic: &'a str,
    /// PROPERTIES, encoded.
    pub properties: &'a [u8],
}

impl<'a> RecordView<'a> {
    /// Reads the record at the start of `buf` (which may extend past it):
    /// the magic, every field, and that they fill TOTALSIZE exactly.
    pub fn parse(buf: &'a [u8]) -> Result<Self, DecodeError> {
        let total = message_total_size(buf)?;
        let record = buf.get(..total).ok_or(DecodeError::Incomplete {
            needed: total,
            have: buf.len(),
        })?;
        let mut r = Reader {
            buf: record,
            pos: layout::BODY_CRC,
        };
        let body_crc = u32::from_be_bytes(r.array()?);
        let queue_id = r.i32()?;
        let flag = r.i32()?;
        let queue_offset = r.i64()?;
        let phys_offset = r.i64()?;
        let sys_flag = r.i32()?;
        let born_timestamp_ms = r.i64()?;
        let born_host = r.host(sys_flag & sys_flag::BORNHOST_V6 != 0)?;
        let store_timestamp_ms = r.i64()?;
        let store_host = r.host(sys_flag & sys_flag::STOREHOST_V6 != 0)?;
        let reconsume_times = r.i32()?;
        let prepared_transaction_offset = r.i64()?;
        let body_len = usize::try_from(r.i32()?).map_err(|_| corrupt("negative body length"))?;
        let body = r.take(body_len)?;
        let topic_len = usize::from(r.u8()?);
        let topic =
            std::str::from_utf8(r.take(topic_len)?).map_err(|_| corrupt("topic is not utf-8"))?;
        let props_len =
            usize::try_from(r.i16()?).map_err(|_| corrupt("negative properties length"))?;
        let properties = r.take(props_len)?;
        if r.pos != total {
            return Err(corrupt("total size does not match fields"));
        }
        Ok(Self {
            total_size: u32::try_from(total).expect("invariant: peek_head bounds total size"),
            body_crc,
            queue_id,
            flag,
            queue_offset,
            phys_offset,
            sys_flag,
            born_timestamp_ms,
            born_host,
            store_timestamp_ms,
            store_host,
            reconsume_times,
            prepared_transaction_offset,
            body,
            topic,
            properties,
        })
    }
}

/// Checks the 8-byte head of a message record and returns its TOTALSIZE.
fn message_total_size(buf: &[u8]) -> Result<usize, DecodeError> {
    match peek_head(buf)? {
        RecordHead::Message { total_size } => {
            Ok(usize::try_from(total_size).expect("invariant: u32 fits usize"))
        }
        RecordHead::Blank { .. } => Err(corrupt("blank record where a message was expected")),
        RecordHead::Pad { .. } => Err(corrupt("pad record where a message was expected")),
    }
}

impl StoredRecord {
    /// Decodes the record at the start of `buf` (which may extend past it).
    /// Verifies the magic, that TOTALSIZE matches the fields, and the body CRC.
    pub fn decode(buf: &Bytes) -> Result<StoredRecord, DecodeError> {
        let record = Self::decode_unchecked_crc(buf)?;
        if body_crc(&record.body) != record.body_crc {
            return Err(corrupt("body crc mismatch"));
        }
        Ok(record)
    }

    /// Like [`StoredRecord::decode`] but skips the body CRC check (for trusted
    /// bytes already verified, e.g. re-reading what recovery checked).
    pub fn decode_unchecked_crc(buf: &Bytes) -> Result<StoredRecord, DecodeError> {
        let v = RecordView::parse(buf)?;
        Ok(StoredRecord {
            total_size: v.total_size,
            body_crc: v.body_crc,
            queue_id: v.queue_id,
            flag: v.flag,
            queue_offset: v.queue_offset,
            phys_offset: v.phys_offset,
            sys_flag: v.sys_flag,
            born_timestamp_ms: v.born_timestamp_ms,
            born_host: v.born_host,
            store_timestamp_ms: v.store_timestamp_ms,
            store_host: v.store_host,
            reconsume_times: v.reconsume_times,
            prepared_transaction_offset: v.prepared_transaction_offset,
            body: buf.slice_ref(v.body),
            topic: v.topic.to_owned(),
            properties: buf.slice_ref(v.properties),
        })
    }

    /// The record read as a [`RecordView`] (borrowing its body, topic and
    /// properties).
    pub fn view(&self) -> RecordView<'_> {
        RecordView {
            total_size: self.total_size,
            body_crc: self.body_crc,
            queue_id: self.queue_id,
            flag: self.flag,
            queue_offset: self.queue_offset,
            phys_offset: self.phys_offset,
            sys_flag: self.sys_flag,
            born_timestamp_ms: self.born_timestamp_ms,
            born_host: self.born_host,
            store_timestamp_ms: self.store_timestamp_ms,
            store_host: self.store_host,
            reconsume_times: self.reconsume_times,
            prepared_transaction_offset: self.prepared_transaction_offset,
            body: &self.body,
            topic: &self.topic,
            properties: &self.properties,
        }
    }

    /// The properties string parsed.
    pub fn parsed_properties(&self) -> Result<Properties, DecodeError> {
        Properties::parse(&self.properties)
    }

    /// The transaction type bits of SYSFLAG.
    pub fn transaction_type(&self) -> i32 {
        self.sys_flag & sys_flag::TRANSACTION_MASK
    }
}

/// The first 8 bytes of what sits at a CommitLog position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordHead {
    /// A stored message of `total_size` bytes.
    Message {
        /// TOTALSIZE, within `RECORD_BYTES_MIN..=RECORD_BYTES_MAX`.
        total_size: u32,
    },
    /// The end-of-segment blank; `remaining` bytes (including these 8) to the segment end.
    Blank {
        /// Bytes from this position to the end of the segment.
        remaining: u32,
    },
    /// Sluice's sector pad: `size` bytes (including these 8) of filler the
    /// store writes so a group commit ends on a sector boundary. Never
    /// referenced by a ConsumeQueue, so clients never see one.
    Pad {
        /// Bytes from this position to the next record.
        size: u32,
    },
}

/// Reads the size and magic at the start of `buf`. Corrupt on an unknown
/// magic or a size no valid record or blank can have.
pub fn peek_head(buf: &[u8]) -> Result<RecordHead, DecodeError> {
    if buf.len() < BLANK_HEAD_BYTES {
        return Err(DecodeError::Incomplete {
            needed: BLANK_HEAD_BYTES,
            have: buf.len(),
        });
    }
    let size = read_i32_at(buf, layout::TOTAL_SIZE)?;
    let magic = read_i32_at(buf, layout::MAGIC)?;
    let size = usize::try_from(size).map_err(|_| corrupt("negative record size"))?;
    let size_u32 = u32::try_from(size).expect("invariant: from a non-negative i32");
    match magic {
        MAGIC_V1 if size >= RECORD_BYTES_MIN => Ok(RecordHead::Message {
            total_size: size_u32,
        }),
        MAGIC_V1 => Err(corrupt("record size below minimum")),
        BLANK_MAGIC if size >= BLANK_HEAD_BYTES => Ok(RecordHead::Blank {
            remaining: size_u32,
        }),
        BLANK_MAGIC => Err(corrupt("blank size below 8")),
        PAD_MAGIC if size >= BLANK_HEAD_BYTES => Ok(RecordHead::Pad { size: size_u32 }),
        PAD_MAGIC => Err(corrupt("pad size below 8")),
        MAGIC_V2 => Err(corrupt("v2 magic is not supported")),
        _ => Err(corrupt("unknown magic")),
    }
}

/// Magic of Sluice's sector pad record (not a RocketMQ code).
pub const PAD_MAGIC: i32 = 0x5A1C_E0AD;

/// The head of a pad record of `size` bytes; the rest of it is zeros.
pub fn encode_pad_head(size: u32) -> [u8; 8] {
    let mut out = [0; 8];
    out[..4].copy_from_slice(&size.to_be_bytes());
    out[4..].copy_from_slice(&PAD_MAGIC.to_be_bytes());
    out
}

/// The end-of-segment blank: `i32 remaining | i32 BLANK_MAGIC`. `remaining`
/// counts from this position to the segment end, these 8 bytes included.
pub fn encode_blank(remaining: u32) -> [u8; 8] {
    let mut out = [0; 8];
    out[..4].copy_from_slice(&remaining.to_be_bytes());
    out[4..].copy_from_slice(&BLANK_MAGIC.to_be_bytes());
    out
}

/// PHYSICALOFFSET of the record at the start of `buf` (for recovery checks).
pub fn stored_phys_offset(buf: &[u8]) -> Result<i64, DecodeError> {
    message_total_size(buf)?;
    read_i64_at(buf, layout::PHYS_OFFSET)
}

/// QUEUEOFFSET of the record at the start of `buf`.
pub fn stored_queue_offset(buf: &[u8]) -> Result<i64, DecodeError> {
    message_total_size(buf)?;
    read_i64_at(buf, layout::QUEUE_OFFSET)
}

/// STORETIMESTAMP of the record at the start of `buf` (recovery picks its start file by it).
pub fn stored_store_timestamp_ms(buf: &[u8]) -> Result<i64, DecodeError> {
    message_total_size(buf)?;
    let sys_flag = read_i32_at(buf, layout::SYS_FLAG)?;
    read_i64_at(buf, store_timestamp_pos(sys_flag))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::record::{MessageInput, RecordStamp};

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
    fn decode_rejects_flipped_body_byte_as_crc_corrupt() {
        let mut encoded = small_message().encode_to_vec(&STAMP).expect("encode");
        encoded[88] ^= 0x01; // first body byte
        let encoded = Bytes::from(encoded);
        assert_eq!(
            StoredRecord::decode(&encoded),
            Err(corrupt("body crc mismatch"))
        );
        assert!(StoredRecord::decode_unchecked_crc(&encoded).is_ok());
    }

    #[test]
    fn decode_rejects_total_size_mismatch() {
        let mut encoded = small_message().encode_to_vec(&STAMP).expect("encode");
        encoded.push(0);
        encoded[3] += 1; // TOTALSIZE one larger than the fields
        assert_eq!(
            StoredRecord::decode(&Bytes::from(encoded.clone())),
            Err(corrupt("total size does not match fields"))
        );
        encoded[3] -= 2; // one smaller: the properties overrun it
        assert_eq!(
            StoredRecord::decode(&Bytes::from(encoded)),
            Err(corrupt("field overruns total size"))
        );
    }

    #[test]
    fn decode_reads_only_its_record_from_a_longer_buffer() {
        let first = small_message().encode_to_vec(&STAMP).expect("encode");
        let mut log = first.clone();
        log.extend_from_slice(&encode_blank(64));
        let log = Bytes::from(log);
        let record = StoredRecord::decode(&log).expect("decode");
        assert_eq!(record.total_size as usize, first.len());
        assert_eq!(&record.body[..], b"hello");
        assert_eq!(&record.properties[..], b"a\x01b\x02");
        // Zero copy: the body points into the input buffer.
        assert_eq!(record.body.as_ptr() as usize, log.as_ptr() as usize + 88);
        let rest = log.slice(first.len()..);
        assert_eq!(peek_head(&rest), Ok(RecordHead::Blank { remaining: 64 }));
        assert_eq!(
            StoredRecord::decode(&rest),
            Err(corrupt("blank record where a message was expected"))
        );
    }

    #[test]
    fn peek_head_classifies_heads() {
        assert_eq!(encode_blank(8), [0, 0, 0, 8, 0xCB, 0xD4, 0x31, 0x94]);
        assert_eq!(
            peek_head(&encode_blank(8)),
            Ok(RecordHead::Blank { remaining: 8 })
        );
        assert_eq!(
            peek_head(&encode_blank(7)),
            Err(corrupt("blank size below 8"))
        );
        assert_eq!(
            peek_head(&[0, 0, 0, 90, 0xDA, 0xA3, 0x20, 0xA7]),
            Err(corrupt("record size below minimum"))
        );
        assert_eq!(
            peek_head(&[0x80, 0, 0, 100, 0xDA, 0xA3, 0x20, 0xA7]),
            Err(corrupt("negative record size"))
        );
        assert_eq!(
            peek_head(&[0, 0, 1, 0, 0xDA, 0xA3, 0x20, 0xAB]),
            Err(corrupt("v2 magic is not supported"))
        );
        assert_eq!(peek_head(&[0; 8]), Err(corrupt("unknown magic")));
        assert_eq!(
            peek_head(&[0; 5]),
            Err(DecodeError::Incomplete { needed: 8, have: 5 })
        );
    }
}
