//! Message properties: the `k 0x01 v 0x02` string, parsed leniently like
//! RocketMQ and kept in insertion order. Invariant: every stored pair has a
//! non-empty key without 0x01/0x02 and a non-empty value without 0x02, so
//! `parse(encode(p)) == p`.

use super::indexed_properties::for_each_pair_in;
use super::record::{corrupt, DecodeError, EncodeError};

/// Separates a key from its value.
pub const NAME_VALUE_SEPARATOR: u8 = 0x01;
/// Terminates each key/value pair.
pub const PROPERTY_SEPARATOR: u8 = 0x02;

/// Well-known property keys.
pub mod keys {
    /// Business keys, separated by spaces; each is indexed.
    pub const KEYS: &str = "KEYS";
    /// The message tag (filtering; its hash is the ConsumeQueue tagsCode).
    pub const TAGS: &str = "TAGS";
    /// "true" (default): the send waits for flush/replication.
    pub const WAIT: &str = "WAIT";
    /// Delay level (1–18).
    pub const DELAY: &str = "DELAY";
    /// Retry topic of a sent-back message.
    pub const RETRY_TOPIC: &str = "RETRY_TOPIC";
    /// Original topic of a delayed/half/retried message.
    pub const REAL_TOPIC: &str = "REAL_TOPIC";
    /// Original queue id of a delayed/half message.
    pub const REAL_QID: &str = "REAL_QID";
    /// "true" for a transactional (half) message.
    pub const TRAN_MSG: &str = "TRAN_MSG";
    /// Producer group.
    pub const PGROUP: &str = "PGROUP";
    /// Minimum queue offset (added by the client on pull).
    pub const MIN_OFFSET: &str = "MIN_OFFSET";
    /// Maximum queue offset (added by the client on pull).
    pub const MAX_OFFSET: &str = "MAX_OFFSET";
    /// Client-side unique message id.
    pub const UNIQ_KEY: &str = "UNIQ_KEY";
    /// Maximum reconsume attempts before the DLQ.
    pub const MAX_RECONSUME_TIMES: &str = "MAX_RECONSUME_TIMES";
    /// Reconsume count (carried through retries).
    pub const RECONSUME_TIME: &str = "RECONSUME_TIME";
    /// Message id of the message a retry was made from.
    pub const ORIGIN_MESSAGE_ID: &str = "ORIGIN_MESSAGE_ID";
    /// When consumption started (client side).
    pub const CONSUME_START_TIME: &str = "CONSUME_START_TIME";
    /// Transaction id.
    pub const TRANSACTION_ID: &str = "__transactionId__";
    /// How many times a half message was checked.
    pub const TRANSACTION_CHECK_TIMES: &str = "TRANSACTION_CHECK_TIMES";
    /// Seconds before the first transaction check.
    pub const CHECK_IMMUNITY_TIME_IN_SECONDS: &str = "CHECK_IMMUNITY_TIME_IN_SECONDS";
    /// The broker's cluster, stamped on every stored message (request-reply
    /// helpers name the reply topic `{CLUSTER}_REPLY_TOPIC` from it).
    pub const CLUSTER: &str = "CLUSTER";
    /// Request-reply correlation id.
    pub const CORRELATION_ID: &str = "CORRELATION_ID";
    /// Request-reply: the client to reply to.
    pub const REPLY_TO_CLIENT: &str = "REPLY_TO_CLIENT";
    /// Request-reply time to live.
    pub const TTL: &str = "TTL";
    /// Request-reply message type.
    pub const MSG_TYPE: &str = "MSG_TYPE";
    /// Region of the message.
    pub const MSG_REGION: &str = "MSG_REGION";
    /// Whether tracing is on.
    pub const TRACE_ON: &str = "TRACE_ON";
    /// Sharding key of an ordered message.
    pub const SHARDING_KEY: &str = "__SHARDINGKEY";
    /// Number of inner messages (5.x).
    pub const INNER_NUM: &str = "INNER_NUM";
    /// Base offset of inner messages (5.x).
    pub const INNER_BASE: &str = "INNER_BASE";
    /// Absolute delivery time (5.x timer).
    pub const TIMER_DELIVER_MS: &str = "TIMER_DELIVER_MS";
    /// Delay in seconds (5.x timer).
    pub const TIMER_DELAY_SEC: &str = "TIMER_DELAY_SEC";
    /// Delay in milliseconds (5.x timer).
    pub const TIMER_DELAY_MS: &str = "TIMER_DELAY_MS";
    /// Timer enqueue time (5.x timer).
    pub const TIMER_ENQUEUE_MS: &str = "TIMER_ENQUEUE_MS";
    /// Timer dequeue time (5.x timer).
    pub const TIMER_DEQUEUE_MS: &str = "TIMER_DEQUEUE_MS";
    /// Timer roll count (5.x timer).
    pub const TIMER_ROLL_TIMES: &str = "TIMER_ROLL_TIMES";
    /// Timer output time (5.x timer).
    pub const TIMER_OUT_MS: &str = "TIMER_OUT_MS";
    /// `UNIQ_KEY` of a timer message being deleted (5.x timer).
    pub const TIMER_DEL_UNIQKEY: &str = "TIMER_DEL_UNIQKEY";
    /// Body CRC carried as a property.
    pub const CRC32: &str = "__CRC32#";
    /// Original topic of a dead-lettered message.
    pub const DLQ_ORIGIN_TOPIC: &str = "DLQ_ORIGIN_TOPIC";
    /// Original message id of a dead-lettered message.
    pub const DLQ_ORIGIN_MESSAGE_ID: &str = "DLQ_ORIGIN_MESSAGE_ID";
    /// Sluice's own (not Apache's): the producer id a Sluice producer
    /// stamps on every message it sends, stable for the producer's life.
    /// With [`SLUICE_SEQUENCE`] it makes the broker's dedupe of that
    /// producer's retries exact (docs/dedupe.md); Apache brokers and
    /// clients carry it as any unknown property and ignore it.
    pub const SLUICE_PRODUCER_ID: &str = "__SLUICE_PID";
    /// Sluice's own: `<lane>/<sequence>`, the message's number in its
    /// producer's lane (the broker and queue of its first attempt); a
    /// retry keeps it.
    pub const SLUICE_SEQUENCE: &str = "__SLUICE_SEQ";
}

/// Most pairs [`Properties::parse`] reserves room for before it reads them.
const PAIRS_RESERVED_MAX: usize = 32;

/// Ordered message properties.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Properties {
    pairs: Vec<(String, String)>,
}

impl Properties {
    /// No properties.
    pub fn new() -> Self {
        Self::default()
    }

    /// Parses a properties string like RocketMQ: segments without a non-empty
    /// key, a 0x01 and a non-empty value are skipped; a repeated key keeps its
    /// first position and its last value. Input that is not UTF-8 is Corrupt.
    pub fn parse(bytes: &[u8]) -> Result<Self, DecodeError> {
        let text = std::str::from_utf8(bytes).map_err(|_| corrupt("properties are not utf-8"))?;
        // One slot per pair up front: growing from empty reallocated the
        // table three times for a typical send's five or six pairs. Capped,
        // so a string of separators cannot reserve 48 bytes per byte.
        let pairs = count_byte(bytes, PROPERTY_SEPARATOR) + 1;
        let pairs = pairs.min(PAIRS_RESERVED_MAX);
        let mut props = Self {
            pairs: Vec::with_capacity(pairs),
        };
        // The same one-pass walk (and skipping rules) as `for_each_pair`.
        for_each_pair_in(text, |key, value| {
            props.set(key, value);
        });
        Ok(props)
    }

    /// The properties string: `k 0x01 v 0x02` per pair, in order.
    pub fn encode(&self) -> Vec<u8> {
        let len = self.pairs.iter().map(|(k, v)| k.len() + v.len() + 2).sum();
        let mut out = Vec::with_capacity(len);
        for (key, value) in &self.pairs {
            out.extend_from_slice(key.as_bytes());
            out.push(NAME_VALUE_SEPARATOR);
            out.extend_from_slice(value.as_bytes());
            out.push(PROPERTY_SEPARATOR);
        }
        out
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Sets `key` to `value` (replacing in place if present) and returns the
    /// old value. Errors, leaving the properties unchanged, when the pair
    /// could not survive encoding: an empty key or value, 0x01/0x02 in the
    /// key, or 0x02 in the value.
    pub fn insert(&mut self, key: &str, value: &str) -> Result<Option<String>, EncodeError> {
        let invalid = |reason| Err(EncodeError::InvalidProperty { reason });
        if key.is_empty() {
            return invalid("empty key");
        }
        if value.is_empty() {
            return invalid("empty value");
        }
        if key
            .bytes()
            .any(|b| b == NAME_VALUE_SEPARATOR || b == PROPERTY_SEPARATOR)
        {
            return invalid("separator byte in key");
        }
        if value.bytes().any(|b| b == PROPERTY_SEPARATOR) {
            return invalid("separator byte in value");
        }
        Ok(self.set(key, value))
    }

    fn set(&mut self, key: &str, value: &str) -> Option<String> {
        if let Some((_, v)) = self.pairs.iter_mut().find(|(k, _)| k == key) {
            return Some(std::mem::replace(v, value.to_owned()));
        }
        self.pairs.push((key.to_owned(), value.to_owned()));
        None
    }

    /// Removes `key` and returns its value.
    pub fn remove(&mut self, key: &str) -> Option<String> {
        let index = self.pairs.iter().position(|(k, _)| k == key)?;
        Some(self.pairs.remove(index).1)
    }

    /// The pairs in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.pairs.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Number of pairs.
    pub fn len(&self) -> usize {
        self.pairs.len()
    }

    /// True when there are no pairs.
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// The TAGS value.
    pub fn tags(&self) -> Option<&str> {
        self.get(keys::TAGS)
    }

    /// The business keys: KEYS split on spaces, empty pieces skipped.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.get(keys::KEYS)
            .unwrap_or_default()
            .split(' ')
            .filter(|k| !k.is_empty())
    }

    /// The `UNIQ_KEY` value.
    pub fn uniq_key(&self) -> Option<&str> {
        self.get(keys::UNIQ_KEY)
    }
}

/// How many times `needle` occurs in `bytes`. Counted per chunk in a `u8`
/// (a chunk of 255 cannot overflow it), which the compiler vectorises.
fn count_byte(bytes: &[u8], needle: u8) -> usize {
    bytes
        .chunks(usize::from(u8::MAX))
        .map(|chunk| chunk.iter().fold(0_u8, |n, &b| n + u8::from(b == needle)))
        .map(usize::from)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parse_keeps_order_and_round_trips_bytes() {
        let raw = b"TAGS\x01TagA\x02KEYS\x01k1 k2\x02UNIQ_KEY\x01AB\x02";
        let props = Properties::parse(raw).expect("valid");
        let pairs: Vec<_> = props.iter().collect();
        assert_eq!(
            pairs,
            [("TAGS", "TagA"), ("KEYS", "k1 k2"), ("UNIQ_KEY", "AB")]
        );
        assert_eq!(props.encode(), raw);
        assert_eq!(props.tags(), Some("TagA"));
        assert_eq!(props.uniq_key(), Some("AB"));
    }

    #[test]
    fn parse_skips_malformed_segments_like_rocketmq() {
        let raw = b"\x02ab\x02\x01v\x02k\x01\x02noval\x02a\x01b\x01c\x02x\x01y";
        let props = Properties::parse(raw).expect("valid utf-8");
        let pairs: Vec<_> = props.iter().collect();
        // "ab" (no 0x01), "\x01v" (empty key), "k\x01" (empty value) and
        // "noval" are dropped; the value keeps later 0x01s; no trailing 0x02 needed.
        assert_eq!(pairs, [("a", "b\x01c"), ("x", "y")]);
    }

    #[test]
    fn parse_repeated_key_keeps_first_position_last_value() {
        let props = Properties::parse(b"a\x011\x02b\x012\x02a\x013\x02").expect("valid");
        let pairs: Vec<_> = props.iter().collect();
        assert_eq!(pairs, [("a", "3"), ("b", "2")]);
    }

    #[test]
    fn parse_reserves_one_slot_per_segment_up_to_the_cap() {
        let props = Properties::parse(b"a\x011\x02b\x012\x02c").expect("valid");
        assert!(props.pairs.capacity() >= 3);
        let separators = vec![PROPERTY_SEPARATOR; 600];
        let props = Properties::parse(&separators).expect("valid");
        assert!(props.is_empty());
        assert!(props.pairs.capacity() <= PAIRS_RESERVED_MAX);
    }

    #[test]
    fn count_byte_counts_across_chunks() {
        let mut raw = vec![b'k'; 700];
        for i in (0..700).step_by(3) {
            raw[i] = PROPERTY_SEPARATOR;
        }
        let expected = raw.split(|b| *b == PROPERTY_SEPARATOR).count() - 1;
        assert_eq!(count_byte(&raw, PROPERTY_SEPARATOR), expected);
        assert_eq!(
            count_byte(&vec![PROPERTY_SEPARATOR; 600], PROPERTY_SEPARATOR),
            600
        );
        assert_eq!(count_byte(b"", PROPERTY_SEPARATOR), 0);
    }

    #[test]
    fn parse_rejects_invalid_utf8() {
        assert!(matches!(
            Properties::parse(b"a\x01\xff\x02"),
            Err(DecodeError::Corrupt { .. })
        ));
    }

    #[test]
    fn keys_split_on_spaces_skipping_empty() {
        let mut props = Properties::new();
        assert_eq!(props.keys().count(), 0);
        props.insert(keys::KEYS, " k1  k2 ").expect("valid");
        assert_eq!(props.keys().collect::<Vec<_>>(), ["k1", "k2"]);
    }

    #[test]
    fn insert_replaces_in_place_and_remove_returns_value() {
        let mut props = Properties::new();
        assert_eq!(props.insert("a", "1"), Ok(None));
        assert_eq!(props.insert("b", "2"), Ok(None));
        assert_eq!(props.insert("a", "3"), Ok(Some("1".to_owned())));
        assert_eq!(props.encode(), b"a\x013\x02b\x012\x02");
        assert_eq!(props.remove("a"), Some("3".to_owned()));
        assert_eq!(props.remove("a"), None);
        assert_eq!(props.len(), 1);
    }

    #[test]
    fn insert_rejects_pairs_that_would_not_survive_encoding() {
        let mut props = Properties::new();
        for (k, v) in [
            ("", "v"),
            ("k", ""),
            ("k\x01", "v"),
            ("k\x02", "v"),
            ("k", "v\x02"),
        ] {
            assert!(
                matches!(props.insert(k, v), Err(EncodeError::InvalidProperty { .. })),
                "{k:?}={v:?}"
            );
        }
        assert!(props.is_empty());
        // 0x01 inside a value is fine: parsing splits at the first 0x01.
        props.insert("k", "a\x01b").expect("valid");
        assert_eq!(Properties::parse(&props.encode()).expect("valid"), props);
    }

    fn pair() -> impl Strategy<Value = (String, String)> {
        ("[^\x01\x02]{1,12}", "[^\x02]{1,12}")
    }

    proptest! {
        #[test]
        fn properties_round_trip(pairs in proptest::collection::vec(pair(), 0..12)) {
            let mut props = Properties::new();
            for (k, v) in &pairs {
                props.insert(k, v).expect("strategy yields valid pairs");
            }
            let encoded = props.encode();
            let parsed = Properties::parse(&encoded).expect("own encoding parses");
            prop_assert_eq!(&parsed, &props);
            prop_assert_eq!(parsed.encode(), encoded);
        }

        #[test]
        fn properties_parse_never_panics(
            bytes in proptest::collection::vec(
                prop_oneof![Just(NAME_VALUE_SEPARATOR), Just(PROPERTY_SEPARATOR), Just(b'k'), Just(0xC3), Just(0xA9), any::<u8>()],
                0..64,
            ),
        ) {
            match Properties::parse(&bytes) {
                Ok(props) => {
                    // Whatever parsed is valid, so it re-encodes and re-parses identically.
                    let again = Properties::parse(&props.encode()).expect("re-parse");
                    prop_assert_eq!(again, props);
                }
                Err(e) => prop_assert!(matches!(e, DecodeError::Corrupt { .. }), "{:?}", e),
            }
        }
    }
}
