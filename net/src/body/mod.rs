//! JSON bodies exchanged by the name server, brokers and clients, with
//! RocketMQ's camelCase names. Parsing accepts fastjson's unquoted integer
//! keys everywhere.

mod admin;
mod broker;
mod client;
pub mod fastjson;
mod route;

pub use admin::{
    CheckClientRequestBody, ConsumeStats, GroupRetryPolicy, OffsetWrapper, ResetOffsetBody,
    SimpleSubscriptionData, SubscriptionGroupConfig, SubscriptionGroupWrapper,
};
pub use broker::{
    DataVersion, KvTable, RegisterBrokerBody, TopicConfig, TopicConfigSerializeWrapper, TopicList,
};
pub use client::{
    Connection, ConsumerConnection, ConsumerData, ConsumerListBody, HeartbeatData,
    LockBatchRequestBody, LockBatchResponseBody, MessageQueue, ProducerConnection, ProducerData,
    SubscriptionData,
};
pub use fastjson::JsonStyle;
pub use route::{
    BrokerData, ClusterInfo, QueueData, TopicRouteData, MASTER_ID, PERM_INHERIT, PERM_PRIORITY,
    PERM_READ, PERM_WRITE,
};

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::{Error, Result};

/// Parses a body, quoting fastjson-style integer keys first.
pub fn decode<T: DeserializeOwned>(json: &[u8], what: &'static str) -> Result<T> {
    let quoted = fastjson::quote_integer_keys(json);
    serde_json::from_slice(&quoted).map_err(|source| Error::Json { what, source })
}

/// Serializes a body as standard JSON.
pub fn encode<T: Serialize>(value: &T, what: &'static str) -> Result<Vec<u8>> {
    serde_json::to_vec(value).map_err(|source| Error::Json { what, source })
}
