//! Stored-message records as RocketMQ 4.x brokers put them in pull bodies
//! (V1 layout, IPv4 hosts): a fixed head, the body, a one-byte-length
//! topic and the properties string.
//!
//! `DrainTopic`'s messages all come from one [`Template`] encoded once;
//! serving a message copies it and patches the fields that tell messages
//! apart (queue ID, queue offset, physical offset and the `UNIQ_KEY`).

use bytes::{BufMut, BytesMut};

/// `MAGICCODE` of a V1 record.
const MAGIC_V1: i32 = -626_843_481;
/// Offsets of the patched fields in a record (IPv4 hosts).
const AT_QUEUE_ID: usize = 12;
const AT_QUEUE_OFFSET: usize = 20;
const AT_PHYS_OFFSET: usize = 28;
/// Fixed part of a record: everything but body, topic and properties.
const FIXED_LEN: usize = 91;
/// `UNIQ_KEY` values: the loopback address as a client IP, then 24 hex
/// digits of the message's index in the whole backlog.
const UNIQ_PREFIX: &str = "7F000001";
const UNIQ_LEN: usize = 32;
/// Property separators.
const NAME_END: char = '\u{1}';
const VALUE_END: char = '\u{2}';

/// Per-message fields of one record.
pub struct Fields<'a> {
    pub topic: &'a str,
    pub queue_id: i32,
    pub queue_offset: i64,
    pub phys_offset: i64,
    pub reconsume_times: i32,
    pub store_ms: i64,
    /// `[u8; 4]` address and port of the store host (the broker).
    pub store_host: ([u8; 4], u16),
    /// The encoded properties string (see [`properties`]).
    pub properties: &'a str,
}

/// The properties string of `pairs`: `name 0x01 value 0x02` each.
pub fn properties(pairs: &[(&str, &str)]) -> String {
    let mut s = String::new();
    for (name, value) in pairs {
        s.push_str(name);
        s.push(NAME_END);
        s.push_str(value);
        s.push(VALUE_END);
    }
    s
}

/// The `UNIQ_KEY` (client message ID) of the backlog's `index`-th message.
pub fn uniq_key(index: u64) -> String {
    format!("{UNIQ_PREFIX}{index:024X}")
}

/// `CRC32(body) & 0x7FFFFFFF`, as brokers store it (IEEE polynomial).
pub fn body_crc(body: &[u8]) -> i32 {
    i32::try_from(crc32fast::hash(body) & 0x7FFF_FFFF).unwrap_or_default()
}

/// Appends one record. Topic names longer than 127 bytes and properties
/// longer than 32767 bytes are the caller's to avoid (they are cut here).
pub fn encode(out: &mut BytesMut, f: &Fields<'_>, body: &[u8], crc: i32) {
    let topic = &f.topic.as_bytes()[..f.topic.len().min(127)];
    let props = &f.properties.as_bytes()[..f.properties.len().min(32_767)];
    let total = FIXED_LEN + body.len() + topic.len() + props.len();
    out.reserve(total);
    out.put_i32(i32::try_from(total).unwrap_or(i32::MAX));
    out.put_i32(MAGIC_V1);
    out.put_i32(crc);
    out.put_i32(f.queue_id);
    out.put_i32(0); // flag
    out.put_i64(f.queue_offset);
    out.put_i64(f.phys_offset);
    out.put_i32(0); // sysFlag: IPv4 hosts, not compressed, not a transaction
    out.put_i64(f.store_ms - 1); // born
    out.put_slice(&[127, 0, 0, 1]);
    out.put_i32(0); // born port
    out.put_i64(f.store_ms);
    out.put_slice(&f.store_host.0);
    out.put_i32(i32::from(f.store_host.1));
    out.put_i32(f.reconsume_times);
    out.put_i64(0); // prepared transaction offset
    out.put_i32(i32::try_from(body.len()).unwrap_or(i32::MAX));
    out.put_slice(body);
    out.put_u8(u8::try_from(topic.len()).unwrap_or(u8::MAX));
    out.put_slice(topic);
    out.put_i16(i16::try_from(props.len()).unwrap_or(i16::MAX));
    out.put_slice(props);
}

/// One encoded record whose per-message fields are patched on copy.
pub struct Template {
    bytes: Vec<u8>,
    /// Where the `UNIQ_KEY` value's 24 index digits start.
    uniq_digits_at: usize,
}

impl Template {
    /// The record of a message of `topic` with `body`; its properties
    /// start with `UNIQ_KEY`, then `extra`.
    pub fn new(
        topic: &str,
        body: &[u8],
        store_ms: i64,
        store_host: ([u8; 4], u16),
        extra: &[(&str, &str)],
    ) -> Self {
        let key = uniq_key(0);
        let mut pairs = vec![("UNIQ_KEY", key.as_str())];
        pairs.extend_from_slice(extra);
        let props = properties(&pairs);
        let fields = Fields {
            topic,
            queue_id: 0,
            queue_offset: 0,
            phys_offset: 0,
            reconsume_times: 0,
            store_ms,
            store_host,
            properties: &props,
        };
        let mut out = BytesMut::new();
        encode(&mut out, &fields, body, body_crc(body));
        let props_at = out.len() - props.len();
        Self {
            bytes: out.to_vec(),
            uniq_digits_at: props_at + "UNIQ_KEY".len() + 1 + UNIQ_PREFIX.len(),
        }
    }

    /// Bytes per record.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Appends the record of the backlog's `index`-th message at
    /// `queue_offset` of `queue_id`, stored at `phys_offset`.
    pub fn put(
        &self,
        out: &mut BytesMut,
        queue_id: i32,
        queue_offset: i64,
        phys_offset: i64,
        index: u64,
    ) {
        let start = out.len();
        out.extend_from_slice(&self.bytes);
        let record = &mut out[start..];
        record[AT_QUEUE_ID..AT_QUEUE_ID + 4].copy_from_slice(&queue_id.to_be_bytes());
        record[AT_QUEUE_OFFSET..AT_QUEUE_OFFSET + 8].copy_from_slice(&queue_offset.to_be_bytes());
        record[AT_PHYS_OFFSET..AT_PHYS_OFFSET + 8].copy_from_slice(&phys_offset.to_be_bytes());
        let digits = UNIQ_LEN - UNIQ_PREFIX.len();
        put_hex(
            &mut record[self.uniq_digits_at..self.uniq_digits_at + digits],
            index,
        );
    }
}

/// Writes `value` as upper-case hex digits filling `dst`, most
/// significant first.
fn put_hex(dst: &mut [u8], mut value: u64) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for digit in dst.iter_mut().rev() {
        *digit = HEX[usize::try_from(value & 0xF).unwrap_or_default()];
        value >>= 4;
    }
}
