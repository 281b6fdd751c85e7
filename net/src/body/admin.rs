//! Admin bodies: `GET_CONSUME_STATS`'s `ConsumeStats` (a map keyed by
//! `MessageQueue` objects, which fastjson writes as bare JSON objects in key
//! position), subscription-group configs and `CHECK_CLIENT_CONFIG`'s body.

use std::collections::BTreeMap;

use serde::de::{DeserializeOwned, IgnoredAny};
use serde::{Deserialize, Serialize};

use super::broker::DataVersion;
use super::client::{MessageQueue, SubscriptionData};
use crate::{Error, Result};

/// One queue's consumption progress in [`ConsumeStats`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct OffsetWrapper {
    /// The queue's max offset (next offset to be written).
    pub broker_offset: i64,
    /// The group's committed offset (next offset to consume).
    pub consumer_offset: i64,
    /// Store timestamp of the last consumed message, ms (0 if none).
    pub last_timestamp: i64,
    /// 5.x: the offset the group has pulled up to (Apache writes the larger
    /// of its pull-offset cache and `consumerOffset`).
    pub pull_offset: i64,
}

/// `GET_CONSUME_STATS` (208) response body. Java's fastjson writes the
/// `MessageQueue`-keyed map with object keys —
/// `{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{...}}}` —
/// which standard JSON parsers reject, so this type has its own writer
/// ([`ConsumeStats::to_fastjson`]) and reader ([`ConsumeStats::parse`]).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ConsumeStats {
    /// Progress per queue.
    pub offset_table: BTreeMap<MessageQueue, OffsetWrapper>,
    /// Messages consumed per second.
    pub consume_tps: f64,
}

impl ConsumeStats {
    /// The body as RocketMQ's broker writes it: fields in fastjson's
    /// alphabetical order, each `MessageQueue` key a JSON object.
    pub fn to_fastjson(&self) -> Vec<u8> {
        let mut out = String::with_capacity(32 + self.offset_table.len() * 128);
        out.push_str("{\"consumeTps\":");
        out.push_str(&json_text(&self.consume_tps));
        out.push_str(",\"offsetTable\":");
        write_mq_table(&mut out, &self.offset_table);
        out.push('}');
        out.into_bytes()
    }

    /// Reads the fastjson form, and also the standard-JSON form where each
    /// key is the queue's JSON text in a string. Unknown fields are
    /// ignored and missing ones (4.9.x has no `pullOffset`) default to 0;
    /// nothing panics on bad input.
    pub fn parse(json: &[u8]) -> Result<Self> {
        let mut stats = Self::default();
        parse_object(json, |key, c| {
            match key {
                "offsetTable" => stats.offset_table = c.offset_table()?,
                "consumeTps" => stats.consume_tps = c.value::<Option<f64>>()?.unwrap_or(0.0),
                _ => {
                    c.value::<IgnoredAny>()?;
                }
            }
            Ok(())
        })?;
        Ok(stats)
    }
}

/// Reads one JSON object, handing each field's key and the cursor (placed
/// at its value, which the callback must consume) to `field`; the object
/// must be the whole text.
fn parse_object(
    json: &[u8],
    mut field: impl FnMut(&str, &mut Cursor<'_>) -> Result<()>,
) -> Result<()> {
    let mut c = Cursor { json, at: 0 };
    c.expect(b'{')?;
    if !c.eat(b'}') {
        loop {
            let key: String = c.value()?;
            c.expect(b':')?;
            field(&key, &mut c)?;
            if c.eat(b',') {
                continue;
            }
            c.expect(b'}')?;
            break;
        }
    }
    c.skip_ws();
    if c.at < json.len() {
        return Err(c.error("trailing characters"));
    }
    Ok(())
}

/// Writes a `MessageQueue`-keyed map the way fastjson does: each key a
/// bare JSON object with the fields in alphabetical order.
fn write_mq_table<V: Serialize>(out: &mut String, table: &BTreeMap<MessageQueue, V>) {
    out.push('{');
    for (i, (mq, value)) in table.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("{\"brokerName\":");
        out.push_str(&json_text(&mq.broker_name));
        out.push_str(",\"queueId\":");
        out.push_str(&mq.queue_id.to_string());
        out.push_str(",\"topic\":");
        out.push_str(&json_text(&mq.topic));
        out.push_str("}:");
        out.push_str(&json_text(value));
    }
    out.push('}');
}

/// `INVOKE_BROKER_TO_RESET_OFFSET`'s answer and `RESET_CONSUMER_CLIENT_OFFSET`'s
/// body: the new offset of each queue, keyed like [`ConsumeStats`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ResetOffsetBody {
    /// Queue → the offset to consume next.
    pub offset_table: BTreeMap<MessageQueue, i64>,
}

impl ResetOffsetBody {
    /// The fastjson form RocketMQ writes.
    pub fn to_fastjson(&self) -> Vec<u8> {
        let mut out = String::from("{\"offsetTable\":");
        write_mq_table(&mut out, &self.offset_table);
        out.push('}');
        out.into_bytes()
    }

    /// The list form Apache's broker sends to C++ clients
    /// (`ResetOffsetBodyForC`: `{"offsetTable":[{"brokerName","offset",
    /// "queueId","topic"}]}`); their parser rejects the map form, whose keys
    /// are objects and so not JSON.
    pub fn to_list_json(&self) -> Vec<u8> {
        let mut out = String::from("{\"offsetTable\":[");
        for (i, (mq, offset)) in self.offset_table.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str("{\"brokerName\":");
            out.push_str(&json_text(&mq.broker_name));
            out.push_str(",\"offset\":");
            out.push_str(&offset.to_string());
            out.push_str(",\"queueId\":");
            out.push_str(&mq.queue_id.to_string());
            out.push_str(",\"topic\":");
            out.push_str(&json_text(&mq.topic));
            out.push('}');
        }
        out.push_str("]}");
        out.into_bytes()
    }

    /// Reads the fastjson form (or standard JSON with string keys).
    pub fn parse(json: &[u8]) -> Result<Self> {
        let mut body = Self::default();
        parse_object(json, |key, c| {
            if key == "offsetTable" && c.peek() == Some(b'[') {
                let list: Vec<QueueOffsetForC> = c.value()?;
                body.offset_table = list
                    .into_iter()
                    .map(|q| {
                        let mq = MessageQueue {
                            topic: q.topic,
                            broker_name: q.broker_name,
                            queue_id: q.queue_id,
                        };
                        (mq, q.offset)
                    })
                    .collect();
            } else if key == "offsetTable" {
                body.offset_table = c.offset_table()?;
            } else {
                c.value::<IgnoredAny>()?;
            }
            Ok(())
        })?;
        Ok(body)
    }
}

/// One entry of the list form (`MessageQueueForC`).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct QueueOffsetForC {
    #[serde(default)]
    broker_name: String,
    #[serde(default)]
    offset: i64,
    #[serde(default)]
    queue_id: i32,
    #[serde(default)]
    topic: String,
}

fn json_text<T: Serialize + ?Sized>(value: &T) -> String {
    // Strings, numbers and plain structs always serialize.
    serde_json::to_string(value).unwrap_or_else(|_| "null".to_owned())
}

/// A read position in a JSON text that hands single values to serde.
struct Cursor<'a> {
    json: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn error(&self, reason: &str) -> Error {
        Error::Json {
            what: "ConsumeStats",
            source: <serde_json::Error as serde::de::Error>::custom(format!(
                "{reason} at byte {}",
                self.at
            )),
        }
    }

    fn skip_ws(&mut self) {
        while self
            .json
            .get(self.at)
            .is_some_and(|b| matches!(b, b' ' | b'\n' | b'\r' | b'\t'))
        {
            self.at += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_ws();
        self.json.get(self.at).copied()
    }

    fn eat(&mut self, byte: u8) -> bool {
        if self.peek() == Some(byte) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, byte: u8) -> Result<()> {
        if self.eat(byte) {
            Ok(())
        } else {
            Err(self.error(&format!("expected `{}`", char::from(byte))))
        }
    }

    /// One JSON value of type `T` starting here.
    fn value<T: DeserializeOwned>(&mut self) -> Result<T> {
        let rest = self.json.get(self.at..).unwrap_or_default();
        let mut values = serde_json::Deserializer::from_slice(rest).into_iter::<T>();
        match values.next() {
            Some(Ok(v)) => {
                self.at += values.byte_offset();
                Ok(v)
            }
            Some(Err(source)) => Err(Error::Json {
                what: "ConsumeStats",
                source,
            }),
            None => Err(self.error("unexpected end")),
        }
    }

    fn offset_table<V: DeserializeOwned>(&mut self) -> Result<BTreeMap<MessageQueue, V>> {
        let mut table = BTreeMap::new();
        if self.peek() == Some(b'n') {
            self.value::<()>()?;
            return Ok(table);
        }
        self.expect(b'{')?;
        if self.eat(b'}') {
            return Ok(table);
        }
        loop {
            let mq = if self.peek() == Some(b'"') {
                let text: String = self.value()?;
                serde_json::from_str(&text).map_err(|source| Error::Json {
                    what: "ConsumeStats",
                    source,
                })?
            } else {
                self.value::<MessageQueue>()?
            };
            self.expect(b':')?;
            let value: V = self.value()?;
            table.insert(mq, value);
            if self.eat(b',') {
                continue;
            }
            self.expect(b'}')?;
            return Ok(table);
        }
    }
}

/// A consumer group's broker-side settings (RocketMQ's
/// `SubscriptionGroupConfig`); absent fields take RocketMQ's defaults.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
#[expect(
    clippy::struct_excessive_bools,
    reason = "the wire form is RocketMQ's, one boolean per switch"
)]
pub struct SubscriptionGroupConfig {
    /// Group name.
    pub group_name: String,
    /// `false` refuses the group's pulls (`NO_PERMISSION`).
    pub consume_enable: bool,
    /// Allow consuming from the minimum offset.
    pub consume_from_min_enable: bool,
    /// Allow broadcasting consumption.
    pub consume_broadcast_enable: bool,
    /// Queues of the group's `%RETRY%` topic.
    pub retry_queue_nums: i32,
    /// Retries before a message goes to the group's DLQ.
    pub retry_max_times: i32,
    /// Broker id consumers pull from (0 = master).
    pub broker_id: i64,
    /// Broker id suggested when consumption falls behind.
    pub which_broker_when_consume_slowly: i64,
    /// Tell members when the group's membership changes.
    pub notify_consumer_ids_changed_enable: bool,
    /// 5.x: the group consumes orderly (pop consumers).
    pub consume_message_orderly: bool,
    /// 5.x: group sys flag.
    pub group_sys_flag: i32,
    /// 5.x: minutes before a pop consumer's message times out.
    pub consume_timeout_minute: i32,
    /// 5.x: the group's subscriptions as configured on the broker (Apache
    /// leaves it null, so it is left out unless set).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subscription_data_set: Option<Vec<SimpleSubscriptionData>>,
    /// 5.x: the group's retry back-off policy.
    pub group_retry_policy: GroupRetryPolicy,
    /// 5.x: group attributes; empty unless set.
    pub attributes: BTreeMap<String, String>,
}

/// 5.x `SimpleSubscriptionData`: one configured subscription of a group.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SimpleSubscriptionData {
    /// Topic.
    pub topic: String,
    /// `TAG` or `SQL92`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expression_type: Option<String>,
    /// The filter expression.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expression: Option<String>,
    /// Version (ms timestamp).
    pub version: i64,
}

/// 5.x `GroupRetryPolicy`: which back-off a group's retries follow. Apache
/// writes `{"type":"CUSTOMIZED"}` by default (the policies themselves are
/// null); their contents are kept as JSON, Sluice applies neither.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GroupRetryPolicy {
    /// `CUSTOMIZED` (delay levels) or `EXPONENTIAL`.
    #[serde(rename = "type")]
    pub policy_type: String,
    /// Exponential back-off (`initial`, `max`, `multiplier`), if set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exponential_retry_policy: Option<serde_json::Value>,
    /// Customized back-off (`next`: delays in ms), if set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub customized_retry_policy: Option<serde_json::Value>,
}

impl Default for GroupRetryPolicy {
    fn default() -> Self {
        Self {
            policy_type: "CUSTOMIZED".to_owned(),
            exponential_retry_policy: None,
            customized_retry_policy: None,
        }
    }
}

impl Default for SubscriptionGroupConfig {
    fn default() -> Self {
        Self {
            group_name: String::new(),
            consume_enable: true,
            consume_from_min_enable: true,
            consume_broadcast_enable: true,
            retry_queue_nums: 1,
            retry_max_times: 16,
            broker_id: 0,
            which_broker_when_consume_slowly: 1,
            notify_consumer_ids_changed_enable: true,
            consume_message_orderly: false,
            group_sys_flag: 0,
            consume_timeout_minute: 15,
            subscription_data_set: None,
            group_retry_policy: GroupRetryPolicy::default(),
            attributes: BTreeMap::new(),
        }
    }
}

/// `GET_ALL_SUBSCRIPTIONGROUP_CONFIG` (201) response body, and the shape of
/// the broker's `subscriptionGroup.json`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SubscriptionGroupWrapper {
    /// Group name → config.
    pub subscription_group_table: BTreeMap<String, SubscriptionGroupConfig>,
    /// 5.x: group → topic → forbidden-permission bits; empty unless set.
    pub forbidden_table: BTreeMap<String, BTreeMap<String, i32>>,
    /// Version of the table.
    pub data_version: DataVersion,
}

/// `CHECK_CLIENT_CONFIG` (46) request body: a consumer asks whether the
/// broker accepts a (non-tag) subscription before it starts.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct CheckClientRequestBody {
    /// Client id.
    pub client_id: String,
    /// Consumer group.
    pub group: String,
    /// The subscription to check.
    pub subscription_data: Option<SubscriptionData>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mq(topic: &str, queue_id: i32) -> MessageQueue {
        MessageQueue {
            topic: topic.into(),
            broker_name: "broker-a".into(),
            queue_id,
        }
    }

    #[test]
    fn reset_offset_body_list_form_is_json_an_array_and_parses_back() {
        let mut body = ResetOffsetBody::default();
        body.offset_table.insert(mq("T", 0), 2);
        body.offset_table.insert(mq("T", 1), 7);
        let json = body.to_list_json();
        assert_eq!(
            std::str::from_utf8(&json).expect("utf-8"),
            r#"{"offsetTable":[{"brokerName":"broker-a","offset":2,"queueId":0,"topic":"T"},{"brokerName":"broker-a","offset":7,"queueId":1,"topic":"T"}]}"#
        );
        let value: serde_json::Value = serde_json::from_slice(&json).expect("standard JSON");
        assert!(value["offsetTable"].is_array());
        assert_eq!(ResetOffsetBody::parse(&json).expect("parses"), body);
    }

    #[test]
    fn reset_offset_body_round_trips_in_fastjson_form() {
        let mut body = ResetOffsetBody::default();
        for q in 0..3 {
            body.offset_table.insert(
                MessageQueue {
                    topic: "T".to_owned(),
                    broker_name: "b".to_owned(),
                    queue_id: q,
                },
                i64::from(q) * 10,
            );
        }
        let json = body.to_fastjson();
        assert!(json.starts_with(b"{\"offsetTable\":{{\"brokerName\":\"b\",\"queueId\":0"));
        assert_eq!(ResetOffsetBody::parse(&json).expect("parses"), body);
        for cut in 0..json.len() {
            assert!(
                ResetOffsetBody::parse(&json[..cut]).is_err(),
                "prefix {cut}"
            );
        }
    }

    fn sample() -> ConsumeStats {
        let mut s = ConsumeStats {
            consume_tps: 1.5,
            ..ConsumeStats::default()
        };
        s.offset_table.insert(
            mq("T", 0),
            OffsetWrapper {
                broker_offset: 5,
                consumer_offset: 3,
                last_timestamp: 1_700_000_000_123,
                pull_offset: 4,
            },
        );
        s.offset_table
            .insert(mq("%RETRY%g \"q\"", 1), OffsetWrapper::default());
        s
    }

    #[test]
    fn consume_stats_are_written_with_object_keys_as_fastjson_does() {
        let text = String::from_utf8(sample().to_fastjson()).expect("utf8");
        assert!(
            text.starts_with(r#"{"consumeTps":1.5,"offsetTable":{{"brokerName":"broker-a","queueId":1,"topic":"%RETRY%g \"q\""}:{"brokerOffset":0,"consumerOffset":0,"lastTimestamp":0,"pullOffset":0},"#),
            "{text}"
        );
        assert!(text.contains(r#"{"brokerName":"broker-a","queueId":0,"topic":"T"}:{"brokerOffset":5,"consumerOffset":3,"lastTimestamp":1700000000123,"pullOffset":4}"#));
        assert!(
            serde_json::from_str::<serde_json::Value>(&text).is_err(),
            "not standard JSON"
        );
        assert_eq!(
            ConsumeStats::parse(text.as_bytes()).expect("parses"),
            sample()
        );
    }

    #[test]
    fn consume_stats_parse_java_output_and_standard_json_keys() {
        let java = br#"{"consumeTps":0.0,"offsetTable":{{"brokerName":"b","queueId":2,"topic":"test"}:{"brokerOffset":9,"consumerOffset":7,"lastTimestamp":0,"pullOffset":8}, {"brokerName":"b","queueId":3,"topic":"test"} : {"brokerOffset":1,"consumerOffset":1,"lastTimestamp":42}}}"#;
        let s = ConsumeStats::parse(java).expect("parses");
        assert_eq!(s.offset_table.len(), 2);
        let q2 = MessageQueue {
            topic: "test".into(),
            broker_name: "b".into(),
            queue_id: 2,
        };
        assert_eq!(s.offset_table[&q2].consumer_offset, 7);
        let standard = br#"{"offsetTable":{"{\"brokerName\":\"b\",\"queueId\":2,\"topic\":\"test\"}":{"brokerOffset":9}},"extra":[1,{"x":2}]}"#;
        let s = ConsumeStats::parse(standard).expect("parses");
        assert_eq!(s.offset_table[&q2].broker_offset, 9);
        assert!(ConsumeStats::parse(b"{}")
            .expect("empty")
            .offset_table
            .is_empty());
    }

    #[test]
    fn malformed_consume_stats_are_errors_not_panics() {
        let good = sample().to_fastjson();
        for cut in 0..good.len() {
            assert!(ConsumeStats::parse(&good[..cut]).is_err(), "prefix {cut}");
        }
        for bad in [&b"[]"[..], b"{\"offsetTable\":{1:2}}", b"{} x", b"\xff"] {
            assert!(ConsumeStats::parse(bad).is_err());
        }
    }

    #[test]
    fn subscription_group_defaults_are_rocketmqs() {
        let c: SubscriptionGroupConfig =
            serde_json::from_str(r#"{"groupName":"g","retryMaxTimes":3}"#).expect("parses");
        assert_eq!(c.group_name, "g");
        assert_eq!(c.retry_max_times, 3);
        assert!(c.consume_enable && c.notify_consumer_ids_changed_enable);
        assert_eq!(
            (c.retry_queue_nums, c.which_broker_when_consume_slowly),
            (1, 1)
        );
        let text = serde_json::to_string(&c).expect("serializes");
        assert!(text.contains(r#""consumeBroadcastEnable":true"#), "{text}");
        assert!(
            text.contains(r#""whichBrokerWhenConsumeSlowly":1"#),
            "{text}"
        );
    }
}
