//! Shared fixtures for the store integration tests: message builders and a
//! runtime-free executor.

#![allow(dead_code)]

use std::net::SocketAddr;

use bytes::Bytes;
use sluice_core::message::{keys, MessageInput, Properties, StoredRecord};

/// Runs a future to completion on the current thread (core has no runtime).
pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    pollster::block_on(f)
}

/// A message for `topic`/`queue_id` with optional KEYS and TAGS.
pub fn msg(
    topic: &str,
    queue_id: i32,
    body: &[u8],
    key: Option<&str>,
    tags: Option<&str>,
) -> MessageInput {
    let mut props = Properties::new();
    if let Some(k) = key {
        props.insert(keys::KEYS, k).expect("valid property");
    }
    if let Some(t) = tags {
        props.insert(keys::TAGS, t).expect("valid property");
    }
    props.insert(keys::WAIT, "true").expect("valid property");
    let host: SocketAddr = "127.0.0.1:10911".parse().expect("addr");
    MessageInput {
        topic: topic.to_owned(),
        queue_id,
        flag: 0,
        sys_flag: 0,
        born_timestamp_ms: 1_700_000_000_000,
        born_host: "10.0.0.1:50000".parse().expect("addr"),
        store_host: host,
        reconsume_times: 0,
        prepared_transaction_offset: 0,
        body: Bytes::copy_from_slice(body),
        properties: Bytes::from(props.encode()),
    }
}

/// Decodes a stored record returned by the store.
pub fn decode(raw: &Bytes) -> StoredRecord {
    StoredRecord::decode(raw).expect("store returns valid records")
}

/// Every record of `topic`/`queue_id` from its first offset, decoded, read
/// with `get` in pages of 32.
pub fn queue_records<D, C>(
    store: &sluice_core::MessageStore<D, C>,
    topic: &str,
    queue_id: i32,
) -> Vec<StoredRecord>
where
    D: sluice_core::disk::Disk,
    C: sluice_core::Clock,
{
    let mut out = Vec::new();
    let mut next = store.min_offset(topic, queue_id);
    loop {
        let r = store
            .get(
                topic,
                queue_id,
                next,
                32,
                1 << 20,
                &sluice_core::store::TagsFilter::default(),
            )
            .expect("get");
        if r.status != sluice_core::store::GetStatus::Found {
            return out;
        }
        out.extend(r.messages.iter().map(decode));
        next = r.next_begin_offset;
    }
}

/// The bodies of [`queue_records`], in queue order.
pub fn queue_bodies<D, C>(
    store: &sluice_core::MessageStore<D, C>,
    topic: &str,
    queue_id: i32,
) -> Vec<Vec<u8>>
where
    D: sluice_core::disk::Disk,
    C: sluice_core::Clock,
{
    queue_records(store, topic, queue_id)
        .into_iter()
        .map(|r| r.body.to_vec())
        .collect()
}
