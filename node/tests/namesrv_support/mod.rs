//! Requests a fake broker and a fake client send to a name server, shared by
//! the tokio and turmoil name-server tests.

#![allow(dead_code, reason = "each test binary uses a subset")]

use std::collections::BTreeMap;

use sluice_net::body::{
    self, DataVersion, RegisterBrokerBody, TopicConfig, TopicConfigSerializeWrapper, PERM_READ,
    PERM_WRITE,
};
use sluice_net::header::{
    GetRouteInfoRequestHeader, KvConfigKeyRequestHeader, PutKvConfigRequestHeader,
    RegisterBrokerRequestHeader,
};
use sluice_net::remoting::request_code;
use sluice_net::RemotingCommand;

/// Cluster every fake broker joins.
pub const CLUSTER: &str = "DefaultCluster";

/// A `REGISTER_BROKER` body announcing `topics` with 4 queues each.
pub fn register_body(topics: &[&str]) -> Vec<u8> {
    let body = RegisterBrokerBody {
        topic_config_serialize_wrapper: TopicConfigSerializeWrapper {
            topic_config_table: topics
                .iter()
                .map(|topic| {
                    let config = TopicConfig {
                        topic_name: (*topic).to_owned(),
                        read_queue_nums: 4,
                        write_queue_nums: 4,
                        perm: PERM_READ | PERM_WRITE,
                        topic_filter_type: "SINGLE_TAG".into(),
                        topic_sys_flag: 0,
                        order: false,
                        attributes: BTreeMap::new(),
                    };
                    ((*topic).to_owned(), config)
                })
                .collect::<BTreeMap<_, _>>(),
            data_version: DataVersion {
                timestamp: 1,
                counter: 1,
                state_version: 0,
            },
        },
        filter_server_list: Vec::new(),
    };
    body::encode(&body, "RegisterBrokerBody").expect("serializable")
}

/// A `REGISTER_BROKER` request from broker `name`/`id` at `addr` with `body`.
pub fn register(name: &str, addr: &str, id: i64, body: Vec<u8>) -> RemotingCommand {
    let header = RegisterBrokerRequestHeader {
        broker_name: name.into(),
        broker_addr: addr.into(),
        cluster_name: CLUSTER.into(),
        ha_server_addr: format!("{addr}-ha"),
        broker_id: id,
        compressed: Some(false),
        body_crc32: Some(0),
        master_epoch: None,
    };
    RemotingCommand::request_with_header(request_code::REGISTER_BROKER, &header).with_body(body)
}

/// A `GET_ROUTEINFO_BY_TOPIC` request sent by a client of `version`.
pub fn route_request(topic: &str, version: i32) -> RemotingCommand {
    let header = GetRouteInfoRequestHeader {
        topic: topic.into(),
        accept_standard_json_only: None,
    };
    let mut request =
        RemotingCommand::request_with_header(request_code::GET_ROUTEINFO_BY_TOPIC, &header);
    request.version = version;
    request
}

/// A `PUT_KV_CONFIG` request.
pub fn put_kv(namespace: &str, key: &str, value: &str) -> RemotingCommand {
    let header = PutKvConfigRequestHeader {
        namespace: namespace.into(),
        key: key.into(),
        value: value.into(),
    };
    RemotingCommand::request_with_header(request_code::PUT_KV_CONFIG, &header)
}

/// A `GET_KV_CONFIG` or `DELETE_KV_CONFIG` request.
pub fn kv_key(code: i32, namespace: &str, key: &str) -> RemotingCommand {
    let header = KvConfigKeyRequestHeader {
        namespace: namespace.into(),
        key: key.into(),
    };
    RemotingCommand::request_with_header(code, &header)
}
