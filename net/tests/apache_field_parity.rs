//! Field parity with Apache RocketMQ: for every response header and JSON
//! body Sluice sends, the key set Apache's own Java class serializes (4.9.x,
//! plus the 5.x fields 5.x-era clients read), checked against what our
//! encoders produce. Strict clients reject replies that lack a key, so each
//! fixture fails the moment an encoder drops, renames or retypes a field.
//!
//! Headers are flattened into `extFields` the way Apache's
//! `RemotingCommand.makeCustomHeaderToNet` does: every non-null field as its
//! `toString()`, primitives always. Bodies are fastjson: null fields left
//! out, primitives always written. So each fixture lists `required` keys
//! (primitives and fields Apache fills on every answer) and `optional` keys
//! (nullable ones, checked on a fully populated value), each with the JSON
//! type fastjson writes. Any key we emit beyond those must be listed in
//! `extra` with its reason.
//!
//! Class paths are apache/rocketmq HEAD (5.x); the 4.9.x class of the same
//! name lives under `common/src/main/java/org/apache/rocketmq/common/...`.

use std::collections::BTreeMap;

use serde_json::{Map, Value};
use sluice_net::body::{
    self, BrokerData, ClusterInfo, Connection, ConsumeStats, ConsumerConnection, ConsumerListBody,
    DataVersion, JsonStyle, KvTable, LockBatchResponseBody, MessageQueue, OffsetWrapper, QueueData,
    RegisterBrokerBody, ResetOffsetBody, SubscriptionData, SubscriptionGroupConfig,
    SubscriptionGroupWrapper, TopicConfig, TopicConfigSerializeWrapper, TopicList, TopicRouteData,
};
use sluice_net::header::{
    self, CheckTransactionStateRequestHeader, ConsumeMessageDirectlyRequestHeader,
    EarliestMsgStoretimeResponseHeader, GetConsumerRunningInfoRequestHeader,
    GetKvConfigResponseHeader, HeartbeatResponseHeader, NotifyConsumerIdsChangedRequestHeader,
    OffsetResponseHeader, PullMessageResponseHeader, QueryDataVersionResponseHeader,
    QueryMessageResponseHeader, RegisterBrokerResponseHeader, ResetOffsetRequestHeader,
    SendMessageResponseHeader,
};

/// The JSON type fastjson writes for a Java field (in a header: the type
/// its `toString()` text must parse as).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ty {
    /// `String` or an enum (written by name).
    Str,
    /// `int` / `Integer`.
    Int,
    /// `long` / `Long` / `AtomicLong`.
    Long,
    /// `boolean` / `Boolean`.
    Bool,
    /// `double`.
    Double,
    /// A bean or a `Map`.
    Obj,
    /// A `List` or `Set`.
    Arr,
}
use Ty::{Arr, Bool, Double, Int, Long, Obj, Str};

/// The key set of one Apache class.
struct Fixture {
    /// Apache's class, for messages.
    class: &'static str,
    /// Keys Apache always writes.
    required: &'static [(&'static str, Ty)],
    /// Keys Apache writes when the field is non-null.
    optional: &'static [(&'static str, Ty)],
    /// Keys we write that Apache's current class does not, with a reason.
    extra: &'static [&'static str],
}

fn json_type_matches(value: &Value, ty: Ty) -> bool {
    match ty {
        Str => value.is_string(),
        Int => value.as_i64().is_some_and(|v| i32::try_from(v).is_ok()),
        Long => value.is_i64() || value.is_u64(),
        Bool => value.is_boolean(),
        Double => value.is_number(),
        Obj => value.is_object(),
        Arr => value.is_array(),
    }
}

fn text_type_matches(text: &str, ty: Ty) -> bool {
    match ty {
        Str => true,
        Int => text.parse::<i32>().is_ok(),
        Long => text.parse::<i64>().is_ok(),
        Bool => text == "true" || text == "false",
        Double => text.parse::<f64>().is_ok(),
        Obj | Arr => false,
    }
}

/// Checks a JSON object against a fixture. With `populated`, the optional
/// keys must be present too.
fn check_object(object: &Value, fixture: &Fixture, populated: bool) {
    let class = fixture.class;
    let map = object
        .as_object()
        .unwrap_or_else(|| panic!("{class}: not a JSON object: {object}"));
    check_keys(
        fixture,
        populated,
        map.keys().map(String::as_str),
        |key, ty| {
            map.get(key).map(|value| {
                assert!(
                    json_type_matches(value, ty),
                    "{class}.{key} must be a JSON {ty:?}, got {value}"
                );
            })
        },
    );
}

/// Checks a header's `extFields` against a fixture.
fn check_header(header: &impl header::CommandHeader, fixture: &Fixture, populated: bool) {
    let class = fixture.class;
    let ext = header::to_map(header);
    check_keys(fixture, populated, ext.keys(), |key, ty| {
        ext.get(key).map(|text| {
            assert!(
                text_type_matches(text, ty),
                "{class}.{key} must read as a Java {ty:?}, got {text:?}"
            );
        })
    });
}

/// The fixture's rule over one encoded value: every required key (and, on
/// a fully filled value, every optional one) is present with its type
/// (`typed` checks the type and is `None` when the key is absent), and no
/// key outside the fixture appears.
fn check_keys<'k>(
    fixture: &Fixture,
    populated: bool,
    present: impl Iterator<Item = &'k str>,
    typed: impl Fn(&str, Ty) -> Option<()>,
) {
    let class = fixture.class;
    let expected = fixture
        .required
        .iter()
        .map(|(k, t)| (*k, *t, true))
        .chain(fixture.optional.iter().map(|(k, t)| (*k, *t, populated)));
    for (key, ty, must) in expected {
        if typed(key, ty).is_none() {
            assert!(!must, "{class}: key `{key}` is missing");
        }
    }
    for key in present {
        let known = fixture.required.iter().any(|(k, _)| *k == key)
            || fixture.optional.iter().any(|(k, _)| *k == key)
            || fixture.extra.contains(&key);
        assert!(known, "{class}: key `{key}` is not Apache's");
    }
}

/// Parses fastjson output into a `Value`: standard JSON, plus the two
/// fastjson liberties Sluice reproduces — unquoted integer keys
/// (`{0:"addr"}`) and object keys (`{{"topic":..}:1}`), both kept as their
/// compact JSON text.
fn parse_fastjson(text: &[u8]) -> Value {
    fn ws(s: &[u8], i: &mut usize) {
        while s.get(*i).is_some_and(u8::is_ascii_whitespace) {
            *i += 1;
        }
    }
    fn value(s: &[u8], i: &mut usize) -> Value {
        ws(s, i);
        match s[*i] {
            b'{' => {
                *i += 1;
                let mut map = Map::new();
                ws(s, i);
                if s[*i] == b'}' {
                    *i += 1;
                    return Value::Object(map);
                }
                loop {
                    let key = match value(s, i) {
                        Value::String(k) => k,
                        other => other.to_string(),
                    };
                    ws(s, i);
                    assert_eq!(s[*i], b':', "colon expected at {i}");
                    *i += 1;
                    map.insert(key, value(s, i));
                    ws(s, i);
                    *i += 1;
                    if s[*i - 1] == b'}' {
                        return Value::Object(map);
                    }
                }
            }
            b'[' => {
                *i += 1;
                let mut list = Vec::new();
                ws(s, i);
                if s[*i] == b']' {
                    *i += 1;
                    return Value::Array(list);
                }
                loop {
                    list.push(value(s, i));
                    ws(s, i);
                    *i += 1;
                    if s[*i - 1] == b']' {
                        return Value::Array(list);
                    }
                }
            }
            b'"' => {
                let start = *i;
                *i += 1;
                while s[*i] != b'"' {
                    *i += if s[*i] == b'\\' { 2 } else { 1 };
                }
                *i += 1;
                serde_json::from_slice(&s[start..*i]).expect("string literal")
            }
            _ => {
                let start = *i;
                while s
                    .get(*i)
                    .is_some_and(|c| c.is_ascii_alphanumeric() || b"-+.".contains(c))
                {
                    *i += 1;
                }
                serde_json::from_slice(&s[start..*i]).expect("scalar literal")
            }
        }
    }
    let mut i = 0;
    let parsed = value(text, &mut i);
    ws(text, &mut i);
    assert_eq!(i, text.len(), "trailing text after the JSON value");
    parsed
}

fn to_value<T: serde::Serialize>(body: &T, what: &'static str) -> Value {
    parse_fastjson(&body::encode(body, what).expect("encodable"))
}

fn first(map: &Value) -> &Value {
    map.as_object()
        .and_then(|m| m.values().next())
        .expect("a non-empty JSON object")
}

fn mq(queue_id: i32) -> MessageQueue {
    MessageQueue {
        topic: "T".into(),
        broker_name: "broker-a".into(),
        queue_id,
    }
}

// ---------------------------------------------------------------- headers

/// `remoting/.../protocol/header/SendMessageResponseHeader.java`, plus the
/// `MSG_REGION` and `TRACE_ON` extFields `SendMessageProcessor` adds to
/// every send answer (`broker/.../processor/SendMessageProcessor.java`).
const SEND_MESSAGE_RESPONSE: Fixture = Fixture {
    class: "SendMessageResponseHeader",
    required: &[
        ("msgId", Str),
        ("queueId", Int),
        ("queueOffset", Long),
        ("MSG_REGION", Str),
        ("TRACE_ON", Bool),
    ],
    optional: &[
        ("transactionId", Str),
        ("batchUniqId", Str),
        ("recallHandle", Str),
    ],
    extra: &[],
};

#[test]
fn send_response_header_has_apaches_keys() {
    let mut h = SendMessageResponseHeader::new("0A0000010000000000000001", 2, 7);
    check_header(&h, &SEND_MESSAGE_RESPONSE, false);
    h.transaction_id = Some("UNIQ".into());
    h.batch_uniq_id = Some("BATCH".into());
    h.recall_handle = Some("HANDLE".into());
    check_header(&h, &SEND_MESSAGE_RESPONSE, true);
}

/// `remoting/.../protocol/header/PullMessageResponseHeader.java`; the 5.x
/// fields are nullable and filled by the 5.x broker.
const PULL_MESSAGE_RESPONSE: Fixture = Fixture {
    class: "PullMessageResponseHeader",
    required: &[
        ("suggestWhichBrokerId", Long),
        ("nextBeginOffset", Long),
        ("minOffset", Long),
        ("maxOffset", Long),
    ],
    optional: &[
        ("offsetDelta", Long),
        ("topicSysFlag", Int),
        ("groupSysFlag", Int),
        ("forbiddenType", Int),
    ],
    extra: &[],
};

#[test]
fn pull_response_header_has_apaches_keys() {
    let mut h = PullMessageResponseHeader {
        next_begin_offset: 5,
        max_offset: 9,
        ..PullMessageResponseHeader::default()
    };
    check_header(&h, &PULL_MESSAGE_RESPONSE, false);
    h.offset_delta = Some(0);
    h.topic_sys_flag = Some(0);
    h.group_sys_flag = Some(0);
    h.forbidden_type = Some(1);
    check_header(&h, &PULL_MESSAGE_RESPONSE, true);
}

/// `remoting/.../protocol/header/QueryConsumerOffsetResponseHeader.java`,
/// `GetMaxOffsetResponseHeader.java`, `GetMinOffsetResponseHeader.java` and
/// `SearchOffsetResponseHeader.java`: one `Long offset` each.
const OFFSET_RESPONSE: Fixture = Fixture {
    class: "QueryConsumerOffset/GetMaxOffset/GetMinOffset/SearchOffsetResponseHeader",
    required: &[("offset", Long)],
    optional: &[],
    extra: &[],
};

#[test]
fn offset_response_headers_have_apaches_keys() {
    check_header(&OffsetResponseHeader { offset: 42 }, &OFFSET_RESPONSE, true);
}

/// `remoting/.../protocol/header/GetEarliestMsgStoretimeResponseHeader.java`.
const EARLIEST_MSG_STORETIME_RESPONSE: Fixture = Fixture {
    class: "GetEarliestMsgStoretimeResponseHeader",
    required: &[("timestamp", Long)],
    optional: &[],
    extra: &[],
};

#[test]
fn earliest_msg_storetime_header_has_apaches_keys() {
    let h = EarliestMsgStoretimeResponseHeader {
        timestamp: 1_700_000_000_000,
    };
    check_header(&h, &EARLIEST_MSG_STORETIME_RESPONSE, true);
}

/// `remoting/.../protocol/header/QueryMessageResponseHeader.java`.
const QUERY_MESSAGE_RESPONSE: Fixture = Fixture {
    class: "QueryMessageResponseHeader",
    required: &[
        ("indexLastUpdateTimestamp", Long),
        ("indexLastUpdatePhyoffset", Long),
    ],
    optional: &[],
    extra: &[],
};

#[test]
fn query_message_header_has_apaches_keys() {
    let h = QueryMessageResponseHeader {
        index_last_update_timestamp: 1,
        index_last_update_phyoffset: 2,
    };
    check_header(&h, &QUERY_MESSAGE_RESPONSE, true);
}

/// `remoting/.../protocol/header/namesrv/RegisterBrokerResponseHeader.java`.
const REGISTER_BROKER_RESPONSE: Fixture = Fixture {
    class: "RegisterBrokerResponseHeader",
    required: &[],
    optional: &[("haServerAddr", Str), ("masterAddr", Str)],
    extra: &[],
};

#[test]
fn register_broker_response_header_has_apaches_keys() {
    let h = RegisterBrokerResponseHeader {
        ha_server_addr: Some("10.0.0.1:10912".into()),
        master_addr: Some("10.0.0.1:10911".into()),
    };
    check_header(&h, &REGISTER_BROKER_RESPONSE, true);
}

/// `remoting/.../protocol/header/namesrv/QueryDataVersionResponseHeader.java`.
const QUERY_DATA_VERSION_RESPONSE: Fixture = Fixture {
    class: "QueryDataVersionResponseHeader",
    required: &[("changed", Bool)],
    optional: &[],
    extra: &[],
};

#[test]
fn query_data_version_header_has_apaches_keys() {
    let h = QueryDataVersionResponseHeader { changed: true };
    check_header(&h, &QUERY_DATA_VERSION_RESPONSE, true);
}

/// `remoting/.../protocol/header/namesrv/GetKVConfigResponseHeader.java`.
const GET_KV_CONFIG_RESPONSE: Fixture = Fixture {
    class: "GetKVConfigResponseHeader",
    required: &[],
    optional: &[("value", Str)],
    extra: &[],
};

#[test]
fn get_kv_config_header_has_apaches_keys() {
    let h = GetKvConfigResponseHeader {
        value: Some("v".into()),
    };
    check_header(&h, &GET_KV_CONFIG_RESPONSE, true);
}

/// The extFields of a 5.x `HEART_BEAT` answer
/// (`broker/.../processor/ClientManageProcessor.java`, keys from
/// `common/.../MixAll.java`); 5.x clients using heartbeat V2 read both
/// without a null check.
const HEARTBEAT_RESPONSE: Fixture = Fixture {
    class: "HEART_BEAT response extFields",
    required: &[("IS_SUPPORT_HEART_BEAT_V2", Bool), ("IS_SUB_CHANGE", Bool)],
    optional: &[],
    extra: &[],
};

#[test]
fn heartbeat_response_header_has_apaches_keys() {
    check_header(
        &HeartbeatResponseHeader::full_heartbeats_only(),
        &HEARTBEAT_RESPONSE,
        true,
    );
}

// ------------------------------------------- broker-to-client request headers

/// `remoting/.../protocol/header/NotifyConsumerIdsChangedRequestHeader.java`.
const NOTIFY_CONSUMER_IDS_CHANGED: Fixture = Fixture {
    class: "NotifyConsumerIdsChangedRequestHeader",
    required: &[("consumerGroup", Str)],
    optional: &[],
    extra: &[],
};

#[test]
fn notify_consumer_ids_changed_header_has_apaches_keys() {
    let h = NotifyConsumerIdsChangedRequestHeader {
        consumer_group: "g".into(),
    };
    check_header(&h, &NOTIFY_CONSUMER_IDS_CHANGED, true);
}

/// `remoting/.../protocol/header/CheckTransactionStateRequestHeader.java`
/// (`topic` is 5.x).
const CHECK_TRANSACTION_STATE: Fixture = Fixture {
    class: "CheckTransactionStateRequestHeader",
    required: &[("tranStateTableOffset", Long), ("commitLogOffset", Long)],
    optional: &[
        ("topic", Str),
        ("msgId", Str),
        ("transactionId", Str),
        ("offsetMsgId", Str),
    ],
    extra: &[],
};

#[test]
fn check_transaction_state_header_has_apaches_keys() {
    let h = CheckTransactionStateRequestHeader {
        topic: Some("RMQ_SYS_TRANS_HALF_TOPIC".into()),
        tran_state_table_offset: 3,
        commit_log_offset: 4096,
        msg_id: Some("UNIQ".into()),
        transaction_id: Some("UNIQ".into()),
        offset_msg_id: Some("0A00000100002A9F0000000000001000".into()),
    };
    check_header(&h, &CHECK_TRANSACTION_STATE, true);
}

/// `remoting/.../protocol/header/ResetOffsetRequestHeader.java`: 4.9.x
/// decodes `timestamp` and `isForce` as `@CFNotNull` primitives, so a
/// pushed reset must carry both; `queueId` and `offset` are 5.x.
const RESET_OFFSET_REQUEST: Fixture = Fixture {
    class: "ResetOffsetRequestHeader",
    required: &[("topic", Str), ("group", Str), ("timestamp", Long)],
    optional: &[("isForce", Bool), ("queueId", Int), ("offset", Long)],
    extra: &[],
};

#[test]
fn reset_offset_header_has_apaches_keys() {
    let h = ResetOffsetRequestHeader {
        topic: "T".into(),
        group: "g".into(),
        timestamp: -1,
        is_force: Some(true),
        queue_id: Some(-1),
        offset: Some(5),
    };
    check_header(&h, &RESET_OFFSET_REQUEST, true);
}

/// `remoting/.../protocol/header/GetConsumerRunningInfoRequestHeader.java`
/// (`jstackEnable` is a primitive Apache always writes).
const GET_CONSUMER_RUNNING_INFO: Fixture = Fixture {
    class: "GetConsumerRunningInfoRequestHeader",
    required: &[("consumerGroup", Str), ("clientId", Str)],
    optional: &[("jstackEnable", Bool)],
    extra: &[],
};

#[test]
fn get_consumer_running_info_header_has_apaches_keys() {
    let h = GetConsumerRunningInfoRequestHeader {
        consumer_group: "g".into(),
        client_id: "10.0.0.2@1".into(),
        jstack_enable: Some(false),
    };
    check_header(&h, &GET_CONSUMER_RUNNING_INFO, true);
}

/// `remoting/.../protocol/header/ConsumeMessageDirectlyResultRequestHeader.java`
/// (`topic`, `topicSysFlag`, `groupSysFlag` are 5.x).
const CONSUME_MESSAGE_DIRECTLY: Fixture = Fixture {
    class: "ConsumeMessageDirectlyResultRequestHeader",
    required: &[("consumerGroup", Str)],
    optional: &[
        ("clientId", Str),
        ("msgId", Str),
        ("brokerName", Str),
        ("topic", Str),
        ("topicSysFlag", Int),
        ("groupSysFlag", Int),
    ],
    extra: &[],
};

#[test]
fn consume_message_directly_header_has_apaches_keys() {
    let h = ConsumeMessageDirectlyRequestHeader {
        consumer_group: "g".into(),
        client_id: Some("10.0.0.2@1".into()),
        msg_id: Some("ID".into()),
        broker_name: Some("broker-a".into()),
        topic: Some("T".into()),
        topic_sys_flag: Some(0),
        group_sys_flag: Some(0),
    };
    check_header(&h, &CONSUME_MESSAGE_DIRECTLY, true);
}

// ----------------------------------------------------------------- bodies

/// `remoting/.../protocol/route/TopicRouteData.java`.
/// `topicQueueMappingByBroker` (5.x) is null for every topic that is not
/// a static topic, so Apache leaves it out; Sluice has none.
const TOPIC_ROUTE_DATA: Fixture = Fixture {
    class: "TopicRouteData",
    required: &[
        ("brokerDatas", Arr),
        ("filterServerTable", Obj),
        ("queueDatas", Arr),
    ],
    optional: &[("orderTopicConf", Str), ("topicQueueMappingByBroker", Obj)],
    extra: &[],
};

/// `remoting/.../protocol/route/QueueData.java`.
const QUEUE_DATA: Fixture = Fixture {
    class: "QueueData",
    required: &[
        ("brokerName", Str),
        ("perm", Int),
        ("readQueueNums", Int),
        ("topicSysFlag", Int),
        ("writeQueueNums", Int),
    ],
    optional: &[],
    // 4.0–4.8 spelled the flag `topicSynFlag`; both are written.
    extra: &["topicSynFlag"],
};

/// `remoting/.../protocol/route/BrokerData.java` (`enableActingMaster` and
/// the nullable `zoneName` are 5.x).
const BROKER_DATA: Fixture = Fixture {
    class: "BrokerData",
    required: &[
        ("brokerAddrs", Obj),
        ("brokerName", Str),
        ("cluster", Str),
        ("enableActingMaster", Bool),
    ],
    optional: &[("zoneName", Str)],
    extra: &[],
};

fn broker_data() -> BrokerData {
    BrokerData {
        broker_addrs: BTreeMap::from([(0, "10.0.0.1:10911".to_owned())]),
        broker_name: "broker-a".into(),
        cluster: "DefaultCluster".into(),
        ..BrokerData::default()
    }
}

fn route() -> TopicRouteData {
    TopicRouteData {
        broker_datas: vec![broker_data()],
        filter_server_table: BTreeMap::new(),
        order_topic_conf: Some("broker-a:4".into()),
        queue_datas: vec![QueueData {
            broker_name: "broker-a".into(),
            read_queue_nums: 4,
            write_queue_nums: 4,
            perm: 6,
            topic_sys_flag: 0,
        }],
    }
}

#[test]
fn topic_route_data_has_apaches_keys_in_both_json_styles() {
    for style in [JsonStyle::Fastjson, JsonStyle::Standard] {
        let json = parse_fastjson(&route().to_json(style).expect("encodable"));
        check_object(&json, &TOPIC_ROUTE_DATA, false);
        check_object(&json["queueDatas"][0], &QUEUE_DATA, true);
        check_object(&json["brokerDatas"][0], &BROKER_DATA, false);
        assert_eq!(json["orderTopicConf"], "broker-a:4");
        assert_eq!(json["brokerDatas"][0]["brokerAddrs"]["0"], "10.0.0.1:10911");
    }
}

/// `remoting/.../protocol/body/ClusterInfo.java`.
const CLUSTER_INFO: Fixture = Fixture {
    class: "ClusterInfo",
    required: &[("brokerAddrTable", Obj), ("clusterAddrTable", Obj)],
    optional: &[],
    extra: &[],
};

#[test]
fn cluster_info_has_apaches_keys() {
    let info = ClusterInfo {
        broker_addr_table: BTreeMap::from([("broker-a".to_owned(), broker_data())]),
        cluster_addr_table: BTreeMap::from([(
            "DefaultCluster".to_owned(),
            vec!["broker-a".to_owned()],
        )]),
    };
    for style in [JsonStyle::Fastjson, JsonStyle::Standard] {
        let json = parse_fastjson(&info.to_json(style).expect("encodable"));
        check_object(&json, &CLUSTER_INFO, true);
        check_object(first(&json["brokerAddrTable"]), &BROKER_DATA, false);
        assert!(json["clusterAddrTable"]["DefaultCluster"].is_array());
    }
}

/// `remoting/.../protocol/header/GetConsumerListByGroupResponseBody.java`.
const CONSUMER_LIST: Fixture = Fixture {
    class: "GetConsumerListByGroupResponseBody",
    required: &[("consumerIdList", Arr)],
    optional: &[],
    extra: &[],
};

#[test]
fn consumer_list_body_has_apaches_keys() {
    let body = ConsumerListBody {
        consumer_id_list: vec!["10.0.0.2@1".into()],
    };
    check_object(&to_value(&body, "ConsumerListBody"), &CONSUMER_LIST, true);
}

/// `remoting/.../protocol/admin/ConsumeStats.java`.
const CONSUME_STATS: Fixture = Fixture {
    class: "ConsumeStats",
    required: &[("consumeTps", Double), ("offsetTable", Obj)],
    optional: &[],
    extra: &[],
};

/// `common/.../message/MessageQueue.java` (a map key in `offsetTable`).
const MESSAGE_QUEUE: Fixture = Fixture {
    class: "MessageQueue",
    required: &[("brokerName", Str), ("queueId", Int), ("topic", Str)],
    optional: &[],
    extra: &[],
};

/// `remoting/.../protocol/admin/OffsetWrapper.java` (`pullOffset` is 5.x).
const OFFSET_WRAPPER: Fixture = Fixture {
    class: "OffsetWrapper",
    required: &[
        ("brokerOffset", Long),
        ("consumerOffset", Long),
        ("lastTimestamp", Long),
        ("pullOffset", Long),
    ],
    optional: &[],
    extra: &[],
};

#[test]
fn consume_stats_have_apaches_keys() {
    let mut stats = ConsumeStats {
        consume_tps: 0.5,
        ..ConsumeStats::default()
    };
    let offsets = OffsetWrapper {
        broker_offset: 9,
        consumer_offset: 7,
        last_timestamp: 1_700_000_000_000,
        pull_offset: 8,
    };
    stats.offset_table.insert(mq(0), offsets);
    let json = parse_fastjson(&stats.to_fastjson());
    check_object(&json, &CONSUME_STATS, true);
    let (key, value) = json["offsetTable"]
        .as_object()
        .and_then(|m| m.iter().next())
        .expect("one queue");
    check_object(
        &serde_json::from_str(key).expect("object key"),
        &MESSAGE_QUEUE,
        true,
    );
    check_object(value, &OFFSET_WRAPPER, true);
}

/// `remoting/.../protocol/body/ConsumerConnection.java`; the enum fields
/// are null until a consumer registered them.
const CONSUMER_CONNECTION: Fixture = Fixture {
    class: "ConsumerConnection",
    required: &[("connectionSet", Arr), ("subscriptionTable", Obj)],
    optional: &[
        ("consumeFromWhere", Str),
        ("consumeType", Str),
        ("messageModel", Str),
    ],
    extra: &[],
};

/// `remoting/.../protocol/body/Connection.java`.
const CONNECTION: Fixture = Fixture {
    class: "Connection",
    required: &[
        ("clientAddr", Str),
        ("clientId", Str),
        ("language", Str),
        ("version", Int),
    ],
    optional: &[],
    extra: &[],
};

#[test]
fn consumer_connection_has_apaches_keys() {
    let body = ConsumerConnection {
        connection_set: vec![Connection {
            client_addr: "10.0.0.2:50000".into(),
            client_id: "10.0.0.2@1".into(),
            language: "JAVA".into(),
            version: 409,
        }],
        consume_from_where: Some("CONSUME_FROM_LAST_OFFSET".into()),
        consume_type: Some("CONSUME_PASSIVELY".into()),
        message_model: Some("CLUSTERING".into()),
        subscription_table: BTreeMap::from([(
            "T".to_owned(),
            SubscriptionData {
                topic: "T".into(),
                sub_string: "*".into(),
                ..SubscriptionData::default()
            },
        )]),
    };
    let json = to_value(&body, "ConsumerConnection");
    check_object(&json, &CONSUMER_CONNECTION, true);
    check_object(&json["connectionSet"][0], &CONNECTION, true);
}

/// `remoting/.../protocol/body/TopicList.java` (`brokerAddr` is null unless
/// the list is one broker's).
const TOPIC_LIST: Fixture = Fixture {
    class: "TopicList",
    required: &[("topicList", Arr)],
    optional: &[("brokerAddr", Str)],
    extra: &[],
};

#[test]
fn topic_list_has_apaches_keys() {
    let mut list = TopicList {
        topic_list: vec!["T".into()],
        broker_addr: None,
    };
    check_object(&to_value(&list, "TopicList"), &TOPIC_LIST, false);
    list.broker_addr = Some("10.0.0.1:10911".into());
    check_object(&to_value(&list, "TopicList"), &TOPIC_LIST, true);
}

/// `remoting/.../protocol/body/KVTable.java` (runtime info and the
/// `REGISTER_BROKER` answer).
const KV_TABLE: Fixture = Fixture {
    class: "KVTable",
    required: &[("table", Obj)],
    optional: &[],
    extra: &[],
};

#[test]
fn kv_table_has_apaches_keys() {
    let table = KvTable {
        table: BTreeMap::from([("k".to_owned(), "v".to_owned())]),
    };
    check_object(&to_value(&table, "KvTable"), &KV_TABLE, true);
}

/// `remoting/.../protocol/body/ResetOffsetBody.java`: `offsetTable` maps
/// `MessageQueue` objects to `Long` offsets.
const RESET_OFFSET_BODY: Fixture = Fixture {
    class: "ResetOffsetBody",
    required: &[("offsetTable", Obj)],
    optional: &[],
    extra: &[],
};

#[test]
fn reset_offset_body_has_apaches_keys() {
    let mut body = ResetOffsetBody::default();
    body.offset_table.insert(mq(1), 12);
    let json = parse_fastjson(&body.to_fastjson());
    check_object(&json, &RESET_OFFSET_BODY, true);
    let (key, value) = json["offsetTable"]
        .as_object()
        .and_then(|m| m.iter().next())
        .expect("one queue");
    check_object(
        &serde_json::from_str(key).expect("object key"),
        &MESSAGE_QUEUE,
        true,
    );
    assert!(json_type_matches(value, Long), "offset {value}");
}

/// `remoting/.../protocol/body/SubscriptionGroupWrapper.java`
/// (`forbiddenTable` is 5.x).
const SUBSCRIPTION_GROUP_WRAPPER: Fixture = Fixture {
    class: "SubscriptionGroupWrapper",
    required: &[
        ("dataVersion", Obj),
        ("forbiddenTable", Obj),
        ("subscriptionGroupTable", Obj),
    ],
    optional: &[],
    extra: &[],
};

/// `remoting/.../protocol/subscription/SubscriptionGroupConfig.java`; the
/// fields after `notifyConsumerIdsChangedEnable` are 5.x, and
/// `subscriptionDataSet` is null unless configured.
const SUBSCRIPTION_GROUP_CONFIG: Fixture = Fixture {
    class: "SubscriptionGroupConfig",
    required: &[
        ("groupName", Str),
        ("consumeEnable", Bool),
        ("consumeFromMinEnable", Bool),
        ("consumeBroadcastEnable", Bool),
        ("retryQueueNums", Int),
        ("retryMaxTimes", Int),
        ("brokerId", Long),
        ("whichBrokerWhenConsumeSlowly", Long),
        ("notifyConsumerIdsChangedEnable", Bool),
        ("consumeMessageOrderly", Bool),
        ("groupSysFlag", Int),
        ("consumeTimeoutMinute", Int),
        ("groupRetryPolicy", Obj),
        ("attributes", Obj),
    ],
    optional: &[("subscriptionDataSet", Arr)],
    extra: &[],
};

/// `remoting/.../protocol/subscription/GroupRetryPolicy.java`: `type` is
/// always written (default `CUSTOMIZED`), the policies only when set.
const GROUP_RETRY_POLICY: Fixture = Fixture {
    class: "GroupRetryPolicy",
    required: &[("type", Str)],
    optional: &[
        ("exponentialRetryPolicy", Obj),
        ("customizedRetryPolicy", Obj),
    ],
    extra: &[],
};

/// `remoting/.../protocol/DataVersion.java` (`stateVersion` is 5.x).
const DATA_VERSION: Fixture = Fixture {
    class: "DataVersion",
    required: &[
        ("counter", Long),
        ("stateVersion", Long),
        ("timestamp", Long),
    ],
    optional: &[],
    extra: &[],
};

#[test]
fn subscription_group_wrapper_has_apaches_keys_and_defaults() {
    let config = SubscriptionGroupConfig {
        group_name: "g".into(),
        ..SubscriptionGroupConfig::default()
    };
    let wrapper = SubscriptionGroupWrapper {
        subscription_group_table: BTreeMap::from([("g".to_owned(), config)]),
        ..SubscriptionGroupWrapper::default()
    };
    let json = to_value(&wrapper, "SubscriptionGroupWrapper");
    check_object(&json, &SUBSCRIPTION_GROUP_WRAPPER, true);
    check_object(&json["dataVersion"], &DATA_VERSION, true);
    let group = &json["subscriptionGroupTable"]["g"];
    check_object(group, &SUBSCRIPTION_GROUP_CONFIG, false);
    check_object(&group["groupRetryPolicy"], &GROUP_RETRY_POLICY, false);
    // Apache's field initializers.
    assert_eq!(group["consumeTimeoutMinute"], 15);
    assert_eq!(group["consumeMessageOrderly"], false);
    assert_eq!(group["retryMaxTimes"], 16);
    assert_eq!(group["whichBrokerWhenConsumeSlowly"], 1);
    assert_eq!(group["groupRetryPolicy"]["type"], "CUSTOMIZED");
}

/// `remoting/.../protocol/body/TopicConfigSerializeWrapper.java`.
const TOPIC_CONFIG_WRAPPER: Fixture = Fixture {
    class: "TopicConfigSerializeWrapper",
    required: &[("dataVersion", Obj), ("topicConfigTable", Obj)],
    optional: &[],
    extra: &[],
};

/// `common/.../TopicConfig.java` (`attributes` is 5.x; `topicMessageType`
/// is marked not to serialize).
const TOPIC_CONFIG: Fixture = Fixture {
    class: "TopicConfig",
    required: &[
        ("attributes", Obj),
        ("order", Bool),
        ("perm", Int),
        ("readQueueNums", Int),
        ("topicFilterType", Str),
        ("topicName", Str),
        ("topicSysFlag", Int),
        ("writeQueueNums", Int),
    ],
    optional: &[],
    extra: &[],
};

/// `remoting/.../protocol/body/RegisterBrokerBody.java` as JSON (the
/// uncompressed form).
const REGISTER_BROKER_BODY: Fixture = Fixture {
    class: "RegisterBrokerBody",
    required: &[
        ("filterServerList", Arr),
        ("topicConfigSerializeWrapper", Obj),
    ],
    optional: &[],
    extra: &[],
};

#[test]
fn topic_config_wrapper_has_apaches_keys() {
    let config = TopicConfig {
        topic_name: "T".into(),
        read_queue_nums: 4,
        write_queue_nums: 4,
        perm: 6,
        topic_filter_type: "SINGLE_TAG".into(),
        ..TopicConfig::default()
    };
    let body = RegisterBrokerBody {
        topic_config_serialize_wrapper: TopicConfigSerializeWrapper {
            topic_config_table: BTreeMap::from([("T".to_owned(), config)]),
            data_version: DataVersion {
                timestamp: 1,
                counter: 2,
                ..DataVersion::default()
            },
        },
        filter_server_list: vec![],
    };
    let json = to_value(&body, "RegisterBrokerBody");
    check_object(&json, &REGISTER_BROKER_BODY, true);
    let wrapper = &json["topicConfigSerializeWrapper"];
    check_object(wrapper, &TOPIC_CONFIG_WRAPPER, true);
    check_object(&wrapper["dataVersion"], &DATA_VERSION, true);
    check_object(&wrapper["topicConfigTable"]["T"], &TOPIC_CONFIG, true);
}

#[test]
fn query_data_version_body_has_apaches_keys() {
    let version = DataVersion {
        timestamp: 1,
        counter: 2,
        ..DataVersion::default()
    };
    check_object(&to_value(&version, "DataVersion"), &DATA_VERSION, true);
}

/// `remoting/.../protocol/body/LockBatchResponseBody.java`.
const LOCK_BATCH_RESPONSE: Fixture = Fixture {
    class: "LockBatchResponseBody",
    required: &[("lockOKMQSet", Arr)],
    optional: &[],
    extra: &[],
};

#[test]
fn lock_batch_response_has_apaches_keys() {
    let body = LockBatchResponseBody {
        lock_ok_mq_set: vec![mq(3)],
    };
    let json = to_value(&body, "LockBatchResponseBody");
    check_object(&json, &LOCK_BATCH_RESPONSE, true);
    check_object(&json["lockOKMQSet"][0], &MESSAGE_QUEUE, true);
}

#[test]
fn fixtures_fail_when_a_key_is_dropped() {
    // The checker itself: a body without a required key is caught.
    let mut json = to_value(&KvTable::default(), "KvTable");
    json.as_object_mut().expect("object").remove("table");
    let dropped = std::panic::catch_unwind(|| check_object(&json, &KV_TABLE, true));
    assert!(dropped.is_err(), "a dropped key must fail the fixture");
    let retyped = serde_json::json!({"table": []});
    let retyped = std::panic::catch_unwind(|| check_object(&retyped, &KV_TABLE, true));
    assert!(retyped.is_err(), "a retyped key must fail the fixture");
    let renamed = serde_json::json!({"table": {}, "tabel": {}});
    let renamed = std::panic::catch_unwind(|| check_object(&renamed, &KV_TABLE, true));
    assert!(renamed.is_err(), "an unknown key must fail the fixture");
}
