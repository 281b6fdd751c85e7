//! Fuzz target: arbitrary bytes through every JSON body decoder (standard
//! JSON and fastjson's integer keys). Nothing may panic; a body that
//! decodes must re-encode, and the re-encoded bytes must decode again.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde::de::DeserializeOwned;
use serde::Serialize;
use sluice_net::body::*;

fn round_trip<T: DeserializeOwned + Serialize>(data: &[u8], what: &'static str) {
    if let Ok(value) = decode::<T>(data, what) {
        let bytes = encode(&value, what).expect("a decoded body encodes");
        decode::<T>(&bytes, what).expect("a re-encoded body decodes");
    }
}

macro_rules! every_body {
    ($data:expr; $($t:ident),* $(,)?) => { $( round_trip::<$t>($data, stringify!($t)); )* };
}

fuzz_target!(|data: &[u8]| {
    every_body!(data;
        OffsetWrapper, SubscriptionGroupConfig, SimpleSubscriptionData, GroupRetryPolicy,
        SubscriptionGroupWrapper, CheckClientRequestBody, TopicConfig, DataVersion,
        TopicConfigSerializeWrapper, RegisterBrokerBody, TopicList, KvTable, MessageQueue,
        HeartbeatData, ProducerData, ConsumerData, SubscriptionData, LockBatchRequestBody,
        LockBatchResponseBody, ConsumerListBody, Connection, ConsumerConnection,
        ProducerConnection, QueueData, BrokerData, TopicRouteData,
    );
    if let Ok(route) = TopicRouteData::from_json(data) {
        for style in [JsonStyle::Standard, JsonStyle::Fastjson] {
            let bytes = route.to_json(style).expect("a decoded route encodes");
            let again = TopicRouteData::from_json(&bytes).expect("a re-encoded route decodes");
            assert_eq!(again, route);
        }
    }
    let _ = ClusterInfo::from_json(data);
    let _ = fastjson::quote_integer_keys(data);
    let _ = fastjson::unquote_integer_keys_under(data, "offsetTable");
});
