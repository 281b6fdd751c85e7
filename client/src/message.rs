//! Messages: [`Message`] is what a producer sends, [`MessageExt`] what a
//! consumer receives (decoded from the stored records a pull returns).

use std::io::Read;
use std::net::SocketAddr;

use bytes::Bytes;
use sluice_core::message::{
    keys, offset_msg_id, strip_seal, sys_flag, Properties, StoredRecord, BODY_BYTES_MAX,
};
pub use sluice_net::body::MessageQueue;

use crate::error::{Error, Result};

/// Most bytes a compressed body may inflate to; a larger one is refused as
/// corrupt rather than allowed to exhaust memory.
const INFLATED_BYTES_MAX: u64 = 64 * 1024 * 1024;

/// A message to send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// Destination topic.
    pub topic: String,
    /// Body bytes (compressed by the producer when large).
    pub body: Bytes,
    /// User flag, stored as is.
    pub flag: i32,
    properties: Vec<(String, String)>,
}

impl Message {
    /// A message for `topic` with `body`.
    pub fn new(topic: impl Into<String>, body: impl Into<Bytes>) -> Self {
        Self {
            topic: topic.into(),
            body: body.into(),
            flag: 0,
            properties: Vec::new(),
        }
    }

    /// Sets the tag (the broker filters on its hash).
    #[must_use]
    pub fn with_tags(self, tags: impl Into<String>) -> Self {
        self.with_property(keys::TAGS, tags)
    }

    /// Sets the business keys (each is indexed; query them with the admin API).
    #[must_use]
    pub fn with_keys<I, S>(self, keys: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let joined = keys
            .into_iter()
            .map(|k| k.as_ref().to_owned())
            .collect::<Vec<_>>()
            .join(" ");
        self.with_property(keys::KEYS, joined)
    }

    /// Delivers the message after RocketMQ delay level `level` (1–18).
    #[must_use]
    pub fn with_delay_level(self, level: u32) -> Self {
        self.with_property(keys::DELAY, level.to_string())
    }

    /// Delivers the message at `ms`, an absolute wall-clock time in
    /// milliseconds since the Unix epoch, on the broker's clock (RocketMQ
    /// 5.x `TIMER_DELIVER_MS`). A time already past delivers at once; one
    /// further ahead than the broker's `timer_max_delay_ms` is refused with
    /// `MESSAGE_ILLEGAL`. Takes precedence over a delay level.
    #[must_use]
    pub fn with_deliver_time_ms(self, ms: u64) -> Self {
        self.with_property(keys::TIMER_DELIVER_MS, ms.to_string())
    }

    /// Delivers the message `ms` milliseconds after the broker stores it
    /// (RocketMQ 5.x `TIMER_DELAY_MS`); the same limits as
    /// [`Self::with_deliver_time_ms`].
    #[must_use]
    pub fn with_delay_ms(self, ms: u64) -> Self {
        self.with_property(keys::TIMER_DELAY_MS, ms.to_string())
    }

    /// Sets a user property; an empty value removes it.
    #[must_use]
    pub fn with_property(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.set_property(key, value);
        self
    }

    /// Sets a user property in place; an empty value removes it.
    pub fn set_property(&mut self, key: impl Into<String>, value: impl Into<String>) {
        let (key, value) = (key.into(), value.into());
        self.properties.retain(|(k, _)| *k != key);
        if !value.is_empty() {
            self.properties.push((key, value));
        }
    }

    /// A property's value.
    pub fn property(&self, key: &str) -> Option<&str> {
        self.properties
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The tag.
    pub fn tags(&self) -> Option<&str> {
        self.property(keys::TAGS)
    }

    /// All properties in the order they were set.
    pub fn properties(&self) -> impl Iterator<Item = (&str, &str)> {
        self.properties
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// The properties in wire form; fails on a key or value that cannot be
    /// encoded (separator bytes).
    pub(crate) fn encoded_properties(&self) -> Result<Properties> {
        let mut props = Properties::new();
        for (k, v) in &self.properties {
            props
                .insert(k, v)
                .map_err(|e| Error::InvalidMessage(format!("property `{k}`: {e}")))?;
        }
        Ok(props)
    }

    /// Checks what the broker would refuse, before anything is sent.
    pub(crate) fn validate(&self) -> Result<()> {
        sluice_core::message::validate_topic(&self.topic)
            .map_err(|e| Error::InvalidMessage(e.to_string()))?;
        if self.body.is_empty() {
            return Err(Error::InvalidMessage("the body is empty".to_owned()));
        }
        if self.body.len() > BODY_BYTES_MAX {
            return Err(Error::InvalidMessage(format!(
                "the body is {} bytes; at most {BODY_BYTES_MAX} are allowed",
                self.body.len()
            )));
        }
        Ok(())
    }
}

/// A received message with everything the broker stored about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MessageExt {
    /// The topic it was read from (a retry topic for redeliveries is
    /// replaced by the original topic).
    pub topic: String,
    /// The body, inflated if it was stored compressed.
    pub body: Bytes,
    /// User flag.
    pub flag: i32,
    /// Properties as stored, without Sluice's internal seal.
    pub properties: Properties,
    /// Broker the message was read from.
    pub broker_name: String,
    /// Queue ID.
    pub queue_id: i32,
    /// Logical offset in the queue.
    pub queue_offset: i64,
    /// Physical offset in the broker's CommitLog.
    pub commit_log_offset: i64,
    /// Stored sys flag.
    pub sys_flag: i32,
    /// Producer-side timestamp, ms.
    pub born_timestamp_ms: i64,
    /// Producer address.
    pub born_host: SocketAddr,
    /// Broker-side timestamp, ms.
    pub store_timestamp_ms: i64,
    /// Broker address.
    pub store_host: SocketAddr,
    /// How many times this message was redelivered.
    pub reconsume_times: i32,
    /// The broker's offset message id (store host + physical offset).
    pub offset_msg_id: String,
}

impl MessageExt {
    /// The message id clients show: the producer's `UNIQ_KEY`, else the
    /// offset id.
    pub fn msg_id(&self) -> &str {
        self.properties.uniq_key().unwrap_or(&self.offset_msg_id)
    }

    /// The tag.
    pub fn tags(&self) -> Option<&str> {
        self.properties.tags()
    }

    /// The business keys.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.properties.keys()
    }

    /// A property's value.
    pub fn property(&self, key: &str) -> Option<&str> {
        self.properties.get(key)
    }

    /// The queue this message was read from.
    pub fn queue(&self) -> MessageQueue {
        MessageQueue {
            topic: self.topic.clone(),
            broker_name: self.broker_name.clone(),
            queue_id: self.queue_id,
        }
    }

    /// Decodes one stored record.
    pub fn from_record(record: StoredRecord, broker_name: &str) -> Result<Self> {
        let properties = Properties::parse(strip_seal(&record.properties))
            .map_err(|e| Error::decode("message properties", e))?;
        let body = if record.sys_flag & sys_flag::COMPRESSED != 0 {
            Bytes::from(inflate(&record.body)?)
        } else {
            record.body
        };
        Ok(Self {
            offset_msg_id: offset_msg_id(record.store_host, record.phys_offset),
            topic: record.topic,
            body,
            flag: record.flag,
            properties,
            broker_name: broker_name.to_owned(),
            queue_id: record.queue_id,
            queue_offset: record.queue_offset,
            commit_log_offset: record.phys_offset,
            sys_flag: record.sys_flag,
            born_timestamp_ms: record.born_timestamp_ms,
            born_host: record.born_host,
            store_timestamp_ms: record.store_timestamp_ms,
            store_host: record.store_host,
            reconsume_times: record.reconsume_times,
        })
    }
}

/// Decodes the concatenated stored records of a pull or query response.
/// A record whose body CRC does not match is an error, never a panic.
pub fn decode_messages(body: &Bytes, broker_name: &str) -> Result<Vec<MessageExt>> {
    let mut out = Vec::new();
    let mut rest = body.clone();
    while !rest.is_empty() {
        let record = StoredRecord::decode(&rest).map_err(|e| Error::decode("stored record", e))?;
        let len = usize::try_from(record.total_size).unwrap_or(usize::MAX);
        if len == 0 || len > rest.len() {
            return Err(Error::decode("stored record", "size out of range"));
        }
        rest = rest.slice(len..);
        out.push(MessageExt::from_record(record, broker_name)?);
    }
    Ok(out)
}

/// zlib-compresses `body` (RocketMQ's format for `COMPRESSED` bodies).
pub(crate) fn deflate(body: &[u8], level: u32) -> Vec<u8> {
    use std::io::Write;
    let mut encoder = flate2::write::ZlibEncoder::new(
        Vec::with_capacity(body.len() / 2),
        flate2::Compression::new(level),
    );
    // Writing to a Vec cannot fail.
    let _ = encoder.write_all(body);
    encoder.finish().unwrap_or_default()
}

/// Inflates a zlib body, refusing output beyond [`INFLATED_BYTES_MAX`].
fn inflate(body: &[u8]) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    flate2::read::ZlibDecoder::new(body)
        .take(INFLATED_BYTES_MAX + 1)
        .read_to_end(&mut out)
        .map_err(|e| Error::decode("compressed body", e))?;
    if out.len() as u64 > INFLATED_BYTES_MAX {
        return Err(Error::decode("compressed body", "inflates beyond 64 MiB"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compression_round_trips_and_refuses_garbage() {
        let body = b"sluice ".repeat(1000);
        let packed = deflate(&body, 5);
        assert!(packed.len() < body.len() / 10);
        assert_eq!(inflate(&packed).expect("valid zlib"), body);
        assert!(inflate(b"not zlib at all").is_err());
    }

    #[test]
    fn properties_builder_replaces_and_removes() {
        let m = Message::new("T", "b")
            .with_tags("a")
            .with_tags("b")
            .with_keys(["k1", "k2"])
            .with_property("x", "1")
            .with_property("x", "");
        assert_eq!(m.tags(), Some("b"));
        assert_eq!(m.property(keys::KEYS), Some("k1 k2"));
        assert_eq!(m.property("x"), None);
        let bad = Message::new("T", "b").with_property("k", "v\u{2}");
        assert!(bad.encoded_properties().is_err());
    }

    #[test]
    fn timer_setters_write_the_broker_timer_properties() {
        let m = Message::new("T", "b")
            .with_deliver_time_ms(1_700_000_123_456)
            .with_delay_ms(2_500);
        assert_eq!(m.property(keys::TIMER_DELIVER_MS), Some("1700000123456"));
        assert_eq!(m.property(keys::TIMER_DELAY_MS), Some("2500"));
        let props = m.encoded_properties().expect("encodes");
        assert_eq!(props.get(keys::TIMER_DELAY_MS), Some("2500"));
    }

    #[test]
    fn validation_names_the_problem() {
        let err = Message::new("bad topic!", "x")
            .validate()
            .expect_err("invalid topic");
        assert!(err.to_string().contains("invalid message"), "{err}");
        assert!(Message::new("T", Bytes::new()).validate().is_err());
        let big = Message::new("T", vec![0_u8; BODY_BYTES_MAX + 1]);
        assert!(big
            .validate()
            .expect_err("too big")
            .to_string()
            .contains("at most"));
        assert!(Message::new("T", "x").validate().is_ok());
    }

    #[test]
    fn decode_refuses_truncated_records() {
        let err = decode_messages(&Bytes::from_static(&[0, 0, 0, 9, 1, 2]), "b");
        assert!(err.is_err());
    }
}
