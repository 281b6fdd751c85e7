//! An in-process broker on a real disk and loopback TCP, and the requests
//! the filter, subscription-group and consume-stats tests send it.

#![allow(dead_code, reason = "each test binary uses a subset")]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use sluice_core::disk::MmapDisk;
use sluice_core::message::{keys, Properties};
use sluice_core::{FlushMode, StoreConfig, SystemClock};
use sluice_net::body::{self, ConsumerData, HeartbeatData, SubscriptionData};
use sluice_net::header::{
    PullMessageRequestHeader, PullMessageResponseHeader, SendMessageRequestHeaderV2,
    SendMessageResponseHeader, PULL_FLAG_SUBSCRIPTION,
};
use sluice_net::remoting::request_code;
use sluice_net::{RemotingCommand, TokioTransport};
use sluice_node::broker::{Broker, BrokerConfig, ReplicationConfig, ReplicationMode};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::support::{split_records, Client, Pulled};

/// A broker serving in this process.
pub struct Running {
    pub addr: String,
    /// The broker itself, for assertions on its state (e.g. its stats).
    pub broker: Arc<Broker<MmapDisk, SystemClock>>,
    stop: oneshot::Sender<()>,
    task: JoinHandle<sluice_node::Result<()>>,
}

/// Test defaults: no name server, no VIP port, a small store, fast
/// background duties.
pub fn config() -> BrokerConfig {
    BrokerConfig {
        listen: "127.0.0.1:0".to_owned(),
        listen_vip: false,
        namesrv_addrs: Vec::new(),
        flush_interval_ms: 50,
        offset_persist_interval_ms: 100,
        store: StoreConfig {
            root: "store".to_owned(),
            flush_mode: FlushMode::Async,
            ..StoreConfig::for_tests()
        },
        ..BrokerConfig::default()
    }
}

/// Opens and serves a broker on `dir`.
pub async fn start(dir: &Path, config: BrokerConfig) -> Running {
    let disk = MmapDisk::new(dir).expect("disk");
    let broker = Broker::open(disk, SystemClock::new(), config)
        .await
        .expect("open broker");
    let (stop, stopped) = oneshot::channel::<()>();
    let (bound_tx, bound) = oneshot::channel();
    let task = tokio::spawn(Arc::clone(&broker).serve(
        TokioTransport,
        async move {
            let _ = stopped.await;
        },
        move |addr| {
            let _ = bound_tx.send(addr);
        },
    ));
    let addr = bound.await.expect("broker bound").to_string();
    Running {
        addr,
        broker,
        stop,
        task,
    }
}

impl Running {
    /// Stops the broker cleanly.
    pub async fn shutdown(self) {
        let _ = self.stop.send(());
        self.task
            .await
            .expect("serve task")
            .expect("clean shutdown");
    }
}

/// Sends `body` to `topic` queue `queue_id` with `props`; the queue offset.
pub async fn send(
    c: &Client,
    topic: &str,
    queue_id: i32,
    body: &[u8],
    props: &[(&str, &str)],
) -> i64 {
    let cmd = send_request(topic, queue_id, body, props);
    let r = c.call(cmd, Duration::from_secs(5)).await.expect("send");
    assert_eq!(r.code, 0, "send: {:?}", r.remark);
    r.header::<SendMessageResponseHeader>()
        .expect("send response")
        .queue_offset
}

/// A `SEND_MESSAGE_V2` request that waits for the store (`WAIT=true`).
pub fn send_request(
    topic: &str,
    queue_id: i32,
    body: &[u8],
    props: &[(&str, &str)],
) -> RemotingCommand {
    let mut p = Properties::new();
    p.insert(keys::WAIT, "true").expect("wait");
    for (k, v) in props {
        p.insert(k, v).expect("property");
    }
    let h = SendMessageRequestHeaderV2 {
        a: "test-producer".into(),
        b: topic.into(),
        c: "TBW102".into(),
        d: 4,
        e: queue_id,
        f: 0,
        g: 1_700_000_000_000,
        h: 0,
        i: Some(String::from_utf8(p.encode()).expect("utf8")),
        j: Some(0),
        k: Some(false),
        l: None,
        m: Some(false),
        n: None,
    };
    RemotingCommand::request_with_header(request_code::SEND_MESSAGE_V2, &h)
        .with_body(Bytes::copy_from_slice(body))
}

/// A pull by `group` with an explicit subscription (`kind` `TAG` or
/// `SQL92`), or with the group's registered one when `subscription` is None.
pub async fn pull_as(
    c: &Client,
    group: &str,
    topic: &str,
    offset: i64,
    subscription: Option<(&str, &str)>,
) -> (Pulled, Option<String>) {
    let h = PullMessageRequestHeader {
        consumer_group: group.into(),
        topic: topic.into(),
        queue_id: 0,
        queue_offset: offset,
        max_msg_nums: 32,
        sys_flag: if subscription.is_some() {
            PULL_FLAG_SUBSCRIPTION
        } else {
            0
        },
        commit_offset: 0,
        suspend_timeout_millis: 0,
        subscription: subscription.map(|(e, _)| e.to_owned()),
        sub_version: 0,
        expression_type: subscription.map(|(_, k)| k.to_owned()),
        max_msg_bytes: None,
    };
    let cmd = RemotingCommand::request_with_header(request_code::PULL_MESSAGE, &h);
    let r = c.call(cmd, Duration::from_secs(10)).await.expect("pull");
    let next = r
        .header::<PullMessageResponseHeader>()
        .map_or(offset, |h| h.next_begin_offset);
    let pulled = Pulled {
        code: r.code,
        next,
        records: split_records(&r.body),
    };
    (pulled, r.remark)
}

/// A heartbeat registering `group` as a consumer of `topic` with
/// `expression` of `kind`, plus the group's retry topic.
pub async fn heartbeat(c: &Client, group: &str, topic: &str, expression: &str, kind: &str) -> i32 {
    let sub = |topic: &str, expression: &str, kind: &str| SubscriptionData {
        topic: topic.into(),
        sub_string: expression.into(),
        expression_type: Some(kind.into()),
        sub_version: 1,
        ..SubscriptionData::default()
    };
    let hb = HeartbeatData {
        client_id: "127.0.0.1@test".into(),
        producer_data_set: Vec::new(),
        consumer_data_set: vec![ConsumerData {
            group_name: group.into(),
            consume_type: "CONSUME_PASSIVELY".into(),
            message_model: "CLUSTERING".into(),
            consume_from_where: "CONSUME_FROM_FIRST_OFFSET".into(),
            subscription_data_set: vec![
                sub(topic, expression, kind),
                sub(&format!("%RETRY%{group}"), "*", "TAG"),
            ],
            unit_mode: false,
        }],
    };
    let json = body::encode(&hb, "HeartbeatData").expect("encode");
    let cmd = RemotingCommand::request(request_code::HEART_BEAT).with_body(Bytes::from(json));
    c.call(cmd, Duration::from_secs(5))
        .await
        .expect("heartbeat")
        .code
}

/// Bodies of `records` as text.
pub fn bodies(records: &[sluice_core::message::StoredRecord]) -> Vec<String> {
    records
        .iter()
        .map(|r| String::from_utf8_lossy(&r.body).into_owned())
        .collect()
}

/// `GET_CONSUME_STATS` for `group` (all its topics when `topic` is None):
/// the parsed stats and the raw body.
pub async fn consume_stats(
    c: &Client,
    group: &str,
    topic: Option<&str>,
) -> (sluice_net::body::ConsumeStats, String) {
    let h = sluice_net::header::GetConsumeStatsRequestHeader {
        consumer_group: group.into(),
        topic: topic.map(str::to_owned),
    };
    let cmd = RemotingCommand::request_with_header(request_code::GET_CONSUME_STATS, &h);
    let r = c.call(cmd, Duration::from_secs(5)).await.expect("stats");
    assert_eq!(r.code, 0, "consume stats: {:?}", r.remark);
    let stats = sluice_net::body::ConsumeStats::parse(&r.body).expect("parse stats");
    (stats, String::from_utf8_lossy(&r.body).into_owned())
}

/// SYNC replication on loopback with short timers, for a master (HA port
/// `ha_port`) or a replica of the master at `master_ha`.
pub fn replication(ha_port: u16, master_ha: Option<String>) -> ReplicationConfig {
    ReplicationConfig {
        mode: ReplicationMode::Sync,
        ha_listen: Some(format!("127.0.0.1:{ha_port}")),
        master_ha_addr: master_ha,
        ack_timeout_ms: 1_000,
        not_caught_up_ms: 500,
        session_idle_ms: 500,
        fetch_wait_ms: 200,
        metadata_sync_ms: 100,
        ..ReplicationConfig::default()
    }
}
