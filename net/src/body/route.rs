//! Route and cluster bodies: `TopicRouteData` (`GET_ROUTEINFO_BY_TOPIC`) and
//! `ClusterInfo` (`GET_BROKER_CLUSTER_INFO`). `brokerAddrs` is a `Long`-keyed
//! map, written fastjson-style or standard per client; both forms parse.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::fastjson::{self, JsonStyle};
use crate::Result;

/// Permission bit: topic config inherits from the default topic.
pub const PERM_INHERIT: i32 = 1;
/// Permission bit: writable.
pub const PERM_WRITE: i32 = 2;
/// Permission bit: readable.
pub const PERM_READ: i32 = 4;
/// Permission bit: priority.
pub const PERM_PRIORITY: i32 = 8;

/// The broker ID of a master.
pub const MASTER_ID: i64 = 0;

/// One broker's queues of a topic.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(from = "QueueDataWire", into = "QueueDataWire")]
pub struct QueueData {
    /// Broker name.
    pub broker_name: String,
    /// Read queue count.
    pub read_queue_nums: i32,
    /// Write queue count.
    pub write_queue_nums: i32,
    /// `PERM_*` bits.
    pub perm: i32,
    /// Topic sys flag.
    pub topic_sys_flag: i32,
}

/// Wire form: 4.0–4.8 spell the flag `topicSynFlag`, 4.9+ `topicSysFlag`;
/// both are written and either is read.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct QueueDataWire {
    #[serde(default)]
    broker_name: String,
    #[serde(default)]
    perm: i32,
    #[serde(default)]
    read_queue_nums: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    topic_syn_flag: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    topic_sys_flag: Option<i32>,
    #[serde(default)]
    write_queue_nums: i32,
}

impl From<QueueDataWire> for QueueData {
    fn from(w: QueueDataWire) -> Self {
        Self {
            broker_name: w.broker_name,
            read_queue_nums: w.read_queue_nums,
            write_queue_nums: w.write_queue_nums,
            perm: w.perm,
            topic_sys_flag: w.topic_sys_flag.or(w.topic_syn_flag).unwrap_or(0),
        }
    }
}

impl From<QueueData> for QueueDataWire {
    fn from(q: QueueData) -> Self {
        Self {
            broker_name: q.broker_name,
            perm: q.perm,
            read_queue_nums: q.read_queue_nums,
            topic_syn_flag: Some(q.topic_sys_flag),
            topic_sys_flag: Some(q.topic_sys_flag),
            write_queue_nums: q.write_queue_nums,
        }
    }
}

/// One broker set: a master (ID 0) and its slaves.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct BrokerData {
    /// Broker ID → `ip:port`.
    pub broker_addrs: BTreeMap<i64, String>,
    /// Broker name.
    pub broker_name: String,
    /// Cluster name.
    pub cluster: String,
    /// Whether a slave may act as master for this set while the master is
    /// away (RocketMQ 5 `BrokerData.enableActingMaster`; 5.x-era clients
    /// require the key). Sluice fails over through its controller instead,
    /// so it is always `false`.
    pub enable_acting_master: bool,
}

/// `GET_ROUTEINFO_BY_TOPIC` response body.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TopicRouteData {
    /// Broker sets serving the topic.
    pub broker_datas: Vec<BrokerData>,
    /// Broker address → filter servers.
    pub filter_server_table: BTreeMap<String, Vec<String>>,
    /// Ordered-topic config (`brokerName:queueNum;...`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub order_topic_conf: Option<String>,
    /// Queues per broker.
    pub queue_datas: Vec<QueueData>,
}

/// `GET_BROKER_CLUSTER_INFO` response body.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ClusterInfo {
    /// Broker name → broker set.
    pub broker_addr_table: BTreeMap<String, BrokerData>,
    /// Cluster name → broker names.
    pub cluster_addr_table: BTreeMap<String, Vec<String>>,
}

fn to_json_styled<T: Serialize>(
    value: &T,
    what: &'static str,
    style: JsonStyle,
) -> Result<Vec<u8>> {
    let json = serde_json::to_vec(value).map_err(|source| crate::Error::Json { what, source })?;
    Ok(match style {
        JsonStyle::Standard => json,
        JsonStyle::Fastjson => fastjson::unquote_integer_keys_under(&json, "brokerAddrs"),
    })
}

impl TopicRouteData {
    /// Serializes the route in `style`.
    pub fn to_json(&self, style: JsonStyle) -> Result<Vec<u8>> {
        to_json_styled(self, "TopicRouteData", style)
    }

    /// Parses a route in either style.
    pub fn from_json(json: &[u8]) -> Result<Self> {
        super::decode(json, "TopicRouteData")
    }
}

impl ClusterInfo {
    /// Serializes the cluster info in `style`.
    pub fn to_json(&self, style: JsonStyle) -> Result<Vec<u8>> {
        to_json_styled(self, "ClusterInfo", style)
    }

    /// Parses cluster info in either style.
    pub fn from_json(json: &[u8]) -> Result<Self> {
        super::decode(json, "ClusterInfo")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> TopicRouteData {
        TopicRouteData {
            broker_datas: vec![BrokerData {
                broker_addrs: BTreeMap::from([
                    (0, "127.0.0.1:10911".into()),
                    (1, "127.0.0.2:10911".into()),
                ]),
                broker_name: "broker-a".into(),
                cluster: "DefaultCluster".into(),
                enable_acting_master: false,
            }],
            filter_server_table: BTreeMap::new(),
            order_topic_conf: None,
            queue_datas: vec![QueueData {
                broker_name: "broker-a".into(),
                read_queue_nums: 4,
                write_queue_nums: 4,
                perm: PERM_READ | PERM_WRITE,
                topic_sys_flag: 0,
            }],
        }
    }

    #[test]
    fn fastjson_style_writes_unquoted_broker_ids() {
        let json = sample().to_json(JsonStyle::Fastjson).expect("serializable");
        let text = String::from_utf8(json).expect("utf8");
        assert_eq!(
            text,
            r#"{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.2:10911"},"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSynFlag":0,"topicSysFlag":0,"writeQueueNums":4}]}"#
        );
    }

    #[test]
    fn both_styles_parse_back() {
        for style in [JsonStyle::Fastjson, JsonStyle::Standard] {
            let json = sample().to_json(style).expect("serializable");
            assert_eq!(TopicRouteData::from_json(&json).expect("parses"), sample());
        }
    }

    #[test]
    fn old_topic_syn_flag_spelling_is_read() {
        let json = br#"{"queueDatas":[{"brokerName":"b","perm":6,"readQueueNums":1,"writeQueueNums":1,"topicSynFlag":3}],"brokerDatas":[]}"#;
        let route = TopicRouteData::from_json(json).expect("parses");
        assert_eq!(route.queue_datas[0].topic_sys_flag, 3);
    }

    #[test]
    fn cluster_info_keeps_numeric_broker_names_quoted() {
        let info = ClusterInfo {
            broker_addr_table: BTreeMap::from([(
                "7".to_owned(),
                BrokerData {
                    broker_addrs: BTreeMap::from([(0, "h:1".into())]),
                    broker_name: "7".into(),
                    cluster: "c".into(),
                    enable_acting_master: false,
                },
            )]),
            cluster_addr_table: BTreeMap::from([("c".to_owned(), vec!["7".to_owned()])]),
        };
        let json = info.to_json(JsonStyle::Fastjson).expect("serializable");
        let text = String::from_utf8(json.clone()).expect("utf8");
        assert!(
            text.starts_with(r#"{"brokerAddrTable":{"7":{"brokerAddrs":{0:"h:1"}"#),
            "{text}"
        );
        assert_eq!(ClusterInfo::from_json(&json).expect("parses"), info);
    }

    mod properties {
        use proptest::prelude::*;

        use super::super::*;

        fn broker() -> impl Strategy<Value = BrokerData> {
            (
                prop::collection::btree_map(-3i64..20, "[0-9.:]{1,21}", 0..4),
                ".{0,10}",
                ".{0,10}",
            )
                .prop_map(|(broker_addrs, broker_name, cluster)| BrokerData {
                    broker_addrs,
                    broker_name,
                    cluster,
                    enable_acting_master: false,
                })
        }

        fn route() -> impl Strategy<Value = TopicRouteData> {
            (
                prop::collection::vec(broker(), 0..3),
                prop::collection::vec(
                    (
                        ".{0,10}",
                        any::<i32>(),
                        any::<i32>(),
                        0..16i32,
                        any::<i32>(),
                    )
                        .prop_map(
                            |(
                                broker_name,
                                read_queue_nums,
                                write_queue_nums,
                                perm,
                                topic_sys_flag,
                            )| QueueData {
                                broker_name,
                                read_queue_nums,
                                write_queue_nums,
                                perm,
                                topic_sys_flag,
                            },
                        ),
                    0..3,
                ),
                prop::option::of(".{0,10}"),
            )
                .prop_map(|(broker_datas, queue_datas, order_topic_conf)| {
                    TopicRouteData {
                        broker_datas,
                        filter_server_table: BTreeMap::new(),
                        order_topic_conf,
                        queue_datas,
                    }
                })
        }

        proptest! {
            #[test]
            fn routes_round_trip_in_both_styles(route in route()) {
                for style in [JsonStyle::Fastjson, JsonStyle::Standard] {
                    let json = route.to_json(style).expect("serializable");
                    prop_assert_eq!(TopicRouteData::from_json(&json).expect("parses"), route.clone());
                }
            }

            #[test]
            fn cluster_info_round_trips_in_both_styles(brokers in prop::collection::btree_map(".{0,8}", broker(), 0..4)) {
                let info = ClusterInfo {
                    cluster_addr_table: BTreeMap::from([("c".to_owned(), brokers.keys().cloned().collect())]),
                    broker_addr_table: brokers,
                };
                for style in [JsonStyle::Fastjson, JsonStyle::Standard] {
                    let json = info.to_json(style).expect("serializable");
                    prop_assert_eq!(ClusterInfo::from_json(&json).expect("parses"), info.clone());
                }
            }
        }
    }
}
