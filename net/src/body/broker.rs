//! Broker bodies: `REGISTER_BROKER`'s topic configs and data version, topic
//! lists, and the KV table.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A topic's configuration as a broker registers it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TopicConfig {
    /// Topic.
    pub topic_name: String,
    /// Read queue count.
    pub read_queue_nums: i32,
    /// Write queue count.
    pub write_queue_nums: i32,
    /// `PERM_*` bits.
    pub perm: i32,
    /// `SINGLE_TAG` or `MULTI_TAG`.
    pub topic_filter_type: String,
    /// Topic sys flag.
    pub topic_sys_flag: i32,
    /// Ordered topic.
    pub order: bool,
    /// 5.x: topic attributes (`+message.type`, queue type, ...); empty
    /// unless set, as Apache writes it.
    pub attributes: BTreeMap<String, String>,
}

/// A monotonically increasing version of a broker's topic configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DataVersion {
    /// Wall-clock ms of the last change.
    pub timestamp: i64,
    /// Change counter.
    pub counter: i64,
    /// 5.x: the broker's controller state version (0 outside controller
    /// mode, as Apache writes it).
    pub state_version: i64,
}

/// Topic configs plus their version.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TopicConfigSerializeWrapper {
    /// Topic name → config.
    pub topic_config_table: BTreeMap<String, TopicConfig>,
    /// Version of the table.
    pub data_version: DataVersion,
}

/// `REGISTER_BROKER` (103) request body.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RegisterBrokerBody {
    /// The broker's topics.
    pub topic_config_serialize_wrapper: TopicConfigSerializeWrapper,
    /// Filter servers.
    pub filter_server_list: Vec<String>,
}

/// `GET_ALL_TOPIC_LIST_FROM_NAMESERVER` / `GET_TOPICS_BY_CLUSTER` body.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TopicList {
    /// Topics.
    pub topic_list: Vec<String>,
    /// Broker address, when relevant.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub broker_addr: Option<String>,
}

/// KV table (`REGISTER_BROKER` response body: the `ORDER_TOPIC_CONFIG` namespace).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct KvTable {
    /// Key → value.
    pub table: BTreeMap<String, String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn register_body_round_trips_with_java_names() {
        let body = RegisterBrokerBody {
            topic_config_serialize_wrapper: TopicConfigSerializeWrapper {
                topic_config_table: BTreeMap::from([(
                    "T".to_owned(),
                    TopicConfig {
                        topic_name: "T".into(),
                        read_queue_nums: 4,
                        write_queue_nums: 4,
                        perm: 6,
                        topic_filter_type: "SINGLE_TAG".into(),
                        topic_sys_flag: 0,
                        order: false,
                        attributes: BTreeMap::new(),
                    },
                )]),
                data_version: DataVersion {
                    timestamp: 5,
                    counter: 2,
                    state_version: 0,
                },
            },
            filter_server_list: vec![],
        };
        let json = crate::body::encode(&body, "RegisterBrokerBody").expect("serializable");
        let text = String::from_utf8(json.clone()).expect("utf8");
        assert!(text.contains(
            r#""topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"topicName":"T""#
        ));
        assert!(text.contains(r#""dataVersion":{"timestamp":5,"counter":2,"stateVersion":0}"#));
        let back: RegisterBrokerBody =
            crate::body::decode(&json, "RegisterBrokerBody").expect("parses");
        assert_eq!(back, body);
    }
}
