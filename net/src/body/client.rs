//! Client bodies: `HEART_BEAT`'s `HeartbeatData`, LOCK/`UNLOCK_BATCH_MQ` bodies
//! and `GET_CONSUMER_LIST_BY_GROUP`'s answer. Enum-like fields stay strings so
//! deprecated or future values never fail a heartbeat.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A queue: topic, broker name and queue ID.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MessageQueue {
    /// Topic.
    pub topic: String,
    /// Broker name.
    pub broker_name: String,
    /// Queue ID.
    pub queue_id: i32,
}

/// `HEART_BEAT` (34) body.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HeartbeatData {
    /// `ip@instance`.
    #[serde(rename = "clientID")]
    pub client_id: String,
    /// Producer groups of this client.
    pub producer_data_set: Vec<ProducerData>,
    /// Consumer groups of this client.
    pub consumer_data_set: Vec<ConsumerData>,
}

/// One producer group.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ProducerData {
    /// Group name.
    pub group_name: String,
}

/// One consumer group and its subscriptions.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConsumerData {
    /// Group name.
    pub group_name: String,
    /// `CONSUME_PASSIVELY` (push) or `CONSUME_ACTIVELY` (pull).
    #[serde(deserialize_with = "lenient::consume_type")]
    pub consume_type: String,
    /// `CLUSTERING` or `BROADCASTING`.
    #[serde(deserialize_with = "lenient::message_model")]
    pub message_model: String,
    /// `CONSUME_FROM_LAST_OFFSET`, `..._FIRST_OFFSET`, `..._TIMESTAMP`, ...
    #[serde(deserialize_with = "lenient::consume_from_where")]
    pub consume_from_where: String,
    /// Subscriptions.
    pub subscription_data_set: Vec<SubscriptionData>,
    /// Unit mode.
    pub unit_mode: bool,
}

/// One topic subscription.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SubscriptionData {
    /// Class filter mode.
    pub class_filter_mode: bool,
    /// Topic.
    pub topic: String,
    /// Expression: `*`, `a||b`, or SQL92.
    pub sub_string: String,
    /// Tags.
    pub tags_set: Vec<String>,
    /// Java `String.hashCode` of each tag.
    pub code_set: Vec<i32>,
    /// Version (ms timestamp).
    #[serde(deserialize_with = "lenient::integer")]
    pub sub_version: i64,
    /// `TAG` or `SQL92`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expression_type: Option<String>,
}

/// `LOCK_BATCH_MQ` (41) and `UNLOCK_BATCH_MQ` (42) request body.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LockBatchRequestBody {
    /// Consumer group.
    pub consumer_group: String,
    /// Client ID.
    pub client_id: String,
    /// Only lock on this broker.
    pub only_this_broker: bool,
    /// Queues to lock.
    pub mq_set: Vec<MessageQueue>,
}

/// `LOCK_BATCH_MQ` response body.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct LockBatchResponseBody {
    /// Queues now locked by the requester.
    #[serde(rename = "lockOKMQSet")]
    pub lock_ok_mq_set: Vec<MessageQueue>,
}

/// `GET_CONSUMER_LIST_BY_GROUP` (38) response body.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConsumerListBody {
    /// Client IDs in the group.
    pub consumer_id_list: Vec<String>,
}

/// One client connection of a group (RocketMQ's `Connection`), as admin
/// tools list them.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Connection {
    /// The client's `ip:port` as the broker sees it.
    pub client_addr: String,
    /// `ip@instance`.
    pub client_id: String,
    /// The client's `LanguageCode` name (`JAVA`, `CPP`, ...).
    pub language: String,
    /// The client's `MQVersion` ordinal.
    pub version: i32,
}

/// `GET_CONSUMER_CONNECTION_LIST` (203) response body: a consumer group's
/// live connections and what it subscribes to (RocketMQ's
/// `ConsumerConnection`). The enum-like fields are absent until a
/// heartbeat set them, as Apache leaves them null.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConsumerConnection {
    /// The group's connections.
    pub connection_set: Vec<Connection>,
    /// `CONSUME_FROM_LAST_OFFSET`, `..._FIRST_OFFSET`, `..._TIMESTAMP`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consume_from_where: Option<String>,
    /// `CONSUME_PASSIVELY` (push) or `CONSUME_ACTIVELY` (pull).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consume_type: Option<String>,
    /// `CLUSTERING` or `BROADCASTING`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message_model: Option<String>,
    /// Topic → subscription.
    pub subscription_table: BTreeMap<String, SubscriptionData>,
}

/// `GET_PRODUCER_CONNECTION_LIST` (204) response body (RocketMQ's
/// `ProducerConnection`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ProducerConnection {
    /// The group's connections.
    pub connection_set: Vec<Connection>,
}

/// The C++ client writes enums as their ordinals (`"messageModel":1`)
/// and `subVersion` as a string; Java writes names and numbers. Accept both.
mod lenient {
    use serde::de::{Deserializer, Error};
    use serde::Deserialize;

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum NameOrOrdinal {
        Name(String),
        Ordinal(i64),
    }

    fn named<'de, D: Deserializer<'de>>(d: D, names: &[&str]) -> Result<String, D::Error> {
        match NameOrOrdinal::deserialize(d)? {
            NameOrOrdinal::Name(n) => Ok(n),
            NameOrOrdinal::Ordinal(i) => usize::try_from(i)
                .ok()
                .and_then(|i| names.get(i))
                .map(|n| (*n).to_owned())
                .ok_or_else(|| D::Error::custom(format!("unknown enum ordinal {i}"))),
        }
    }

    /// Java `ConsumeType` ordinals.
    pub(super) fn consume_type<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
        named(d, &["CONSUME_ACTIVELY", "CONSUME_PASSIVELY"])
    }

    /// Java `MessageModel` ordinals.
    pub(super) fn message_model<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
        named(d, &["BROADCASTING", "CLUSTERING"])
    }

    /// Java `ConsumeFromWhere` ordinals.
    pub(super) fn consume_from_where<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
        named(
            d,
            &[
                "CONSUME_FROM_LAST_OFFSET",
                "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST",
                "CONSUME_FROM_MIN_OFFSET",
                "CONSUME_FROM_MAX_OFFSET",
                "CONSUME_FROM_FIRST_OFFSET",
                "CONSUME_FROM_TIMESTAMP",
            ],
        )
    }

    /// A number written as a number or as a decimal string.
    pub(super) fn integer<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
        match NameOrOrdinal::deserialize(d)? {
            NameOrOrdinal::Ordinal(i) => Ok(i),
            NameOrOrdinal::Name(s) => s.trim().parse().map_err(D::Error::custom),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_cpp_client_heartbeat_with_ordinals_and_string_versions() {
        // As rocketmq-client-cpp 2.x sends it (captured from PyPI rocketmq 0.4.4).
        let json = br#"{"clientID":"29180-127.0.0.1@DEFAULT","consumerDataSet":[{"consumeFromWhere":0,"consumeType":1,"groupName":"g","messageModel":1,"subscriptionDataSet":[{"subString":"*","subVersion":"1796001879624","topic":"%RETRY%g"},{"subString":"TagA","subVersion":"1796001879624","topic":"T"}]}]}"#;
        let hb: HeartbeatData = crate::body::decode(json, "HeartbeatData").expect("parses");
        let c = &hb.consumer_data_set[0];
        assert_eq!(c.consume_type, "CONSUME_PASSIVELY");
        assert_eq!(c.message_model, "CLUSTERING");
        assert_eq!(c.consume_from_where, "CONSUME_FROM_LAST_OFFSET");
        assert_eq!(c.subscription_data_set[1].sub_version, 1_796_001_879_624);
        assert_eq!(c.subscription_data_set[1].sub_string, "TagA");
        let bad = br#"{"consumerDataSet":[{"messageModel":7}]}"#;
        assert!(crate::body::decode::<HeartbeatData>(bad, "HeartbeatData").is_err());
    }

    #[test]
    fn parses_a_java_heartbeat() {
        let json = br#"{"clientID":"10.0.0.1@123#456","consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","consumeType":"CONSUME_PASSIVELY","groupName":"g","messageModel":"CLUSTERING","subscriptionDataSet":[{"classFilterMode":false,"codeSet":[],"expressionType":"TAG","subString":"*","subVersion":1700000000000,"tagsSet":[],"topic":"T"}],"unitMode":false}],"producerDataSet":[{"groupName":"CLIENT_INNER_PRODUCER"}]}"#;
        let hb: HeartbeatData = crate::body::decode(json, "HeartbeatData").expect("parses");
        assert_eq!(hb.client_id, "10.0.0.1@123#456");
        assert_eq!(hb.consumer_data_set[0].subscription_data_set[0].topic, "T");
        assert_eq!(hb.producer_data_set[0].group_name, "CLIENT_INNER_PRODUCER");
    }

    #[test]
    fn lock_response_uses_rocketmq_key() {
        let body = LockBatchResponseBody {
            lock_ok_mq_set: vec![MessageQueue {
                topic: "T".into(),
                broker_name: "b".into(),
                queue_id: 1,
            }],
        };
        let json = crate::body::encode(&body, "LockBatchResponseBody").expect("serializable");
        assert_eq!(
            String::from_utf8(json).expect("utf8"),
            r#"{"lockOKMQSet":[{"topic":"T","brokerName":"b","queueId":1}]}"#
        );
    }
}
