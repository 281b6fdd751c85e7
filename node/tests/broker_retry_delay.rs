//! Delay levels and consumer send-back (retry and dead letters) against an
//! in-process broker on a real disk and loopback TCP, driven through
//! `RpcClient`. (Queue locks are checked against a real process in
//! `broker_process_locks.rs`.)

mod support;

use std::path::Path;
use std::time::Duration;

use sluice_core::disk::MmapDisk;
use sluice_core::message::topic::SCHEDULE_TOPIC;
use sluice_core::message::{keys, offset_msg_id, StoredRecord};
use sluice_core::{FlushMode, StoreConfig, SystemClock};
use sluice_net::header::ConsumerSendMsgBackRequestHeader;
use sluice_net::remoting::{request_code, response_code};
use sluice_net::{RemotingCommand, TokioTransport};
use sluice_node::broker::{Broker, BrokerConfig};
use support::Client;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// A broker serving in this process.
struct Running {
    addr: String,
    stop: oneshot::Sender<()>,
    task: JoinHandle<sluice_node::Result<()>>,
}

fn config() -> BrokerConfig {
    BrokerConfig {
        listen: "127.0.0.1:0".to_owned(),
        listen_vip: false,
        namesrv_addrs: Vec::new(),
        delay_levels: "1s 2s 3s".to_owned(),
        max_reconsume_times: 1,
        lock_expiry_ms: 1_000,
        flush_interval_ms: 50,
        store: StoreConfig {
            root: "store".to_owned(),
            flush_mode: FlushMode::Async,
            ..StoreConfig::for_tests()
        },
        ..BrokerConfig::default()
    }
}

async fn start(dir: &Path) -> Running {
    let disk = MmapDisk::new(dir).expect("disk");
    let broker = Broker::open(disk, SystemClock::new(), config())
        .await
        .expect("open broker");
    let (stop, stopped) = oneshot::channel::<()>();
    let (bound_tx, bound) = oneshot::channel();
    let task = tokio::spawn(broker.serve(
        TokioTransport,
        async move {
            let _ = stopped.await;
        },
        move |addr| {
            let _ = bound_tx.send(addr);
        },
    ));
    let addr = bound.await.expect("broker bound").to_string();
    Running { addr, stop, task }
}

impl Running {
    async fn shutdown(self) {
        let _ = self.stop.send(());
        self.task
            .await
            .expect("serve task")
            .expect("clean shutdown");
    }
}

/// Sends one message (key `k1`) with extra properties; returns the response code.
async fn send_with(c: &Client, topic: &str, body: &[u8], extra: &[(&str, &str)]) -> i32 {
    let mut props = vec![(keys::KEYS, "k1")];
    props.extend_from_slice(extra);
    c.send_with_properties(topic, 0, body, &props)
        .await
        .expect("send")
        .code
}

/// Drains `topic` queue 0 every 50 ms until it holds a record or `limit` passes.
async fn wait_for(c: &Client, topic: &str, limit: Duration) -> Vec<StoredRecord> {
    let deadline = Instant::now() + limit;
    loop {
        let got = c.drain(topic, 0).await;
        if !got.is_empty() || Instant::now() >= deadline {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn prop(r: &StoredRecord, key: &str) -> Option<String> {
    r.parsed_properties()
        .expect("properties")
        .get(key)
        .map(str::to_owned)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delayed_message_is_invisible_until_its_level_elapses() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = start(dir.path()).await;
    let c = Client::new(&broker.addr);
    let sent_at = Instant::now();
    assert_eq!(
        send_with(&c, "DelayT", b"later", &[(keys::DELAY, "1")]).await,
        0
    );
    assert!(c.drain("DelayT", 0).await.is_empty(), "visible at once");
    let parked = c.drain(SCHEDULE_TOPIC, 0).await;
    assert_eq!(parked.len(), 1, "parked in level 1's queue");
    assert_eq!(
        prop(&parked[0], keys::REAL_TOPIC).as_deref(),
        Some("DelayT")
    );
    assert_eq!(prop(&parked[0], keys::REAL_QID).as_deref(), Some("0"));

    let got = wait_for(&c, "DelayT", Duration::from_secs(5)).await;
    assert_eq!(got.len(), 1, "delivered after its delay");
    assert!(sent_at.elapsed() >= Duration::from_millis(950));
    assert!(
        got[0].store_timestamp_ms >= parked[0].store_timestamp_ms + 1_000,
        "delivered early"
    );
    assert_eq!(got[0].body.as_ref(), b"later");
    assert_eq!(prop(&got[0], keys::DELAY), None);
    assert_eq!(prop(&got[0], keys::KEYS).as_deref(), Some("k1"));
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delayed_message_is_delivered_once_across_restarts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = start(dir.path()).await;
    let c = Client::new(&broker.addr);
    assert_eq!(
        send_with(&c, "DelayR", b"survives", &[(keys::DELAY, "2")]).await,
        0
    );
    assert!(c.drain("DelayR", 0).await.is_empty());
    broker.shutdown().await;

    let broker = start(dir.path()).await;
    let c = Client::new(&broker.addr);
    let got = wait_for(&c, "DelayR", Duration::from_secs(8)).await;
    assert_eq!(got.len(), 1, "delivered after the restart");
    assert_eq!(got[0].body.as_ref(), b"survives");
    broker.shutdown().await;

    // Progress was persisted: another restart does not deliver it again.
    let broker = start(dir.path()).await;
    let c = Client::new(&broker.addr);
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert_eq!(c.drain("DelayR", 0).await.len(), 1, "delivered twice");
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delay_above_the_highest_level_clamps_and_zero_means_now() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = start(dir.path()).await;
    let c = Client::new(&broker.addr);
    assert_eq!(
        send_with(&c, "DelayC", b"max", &[(keys::DELAY, "99")]).await,
        0
    );
    let parked = c.drain(SCHEDULE_TOPIC, 2).await;
    assert_eq!(parked.len(), 1, "clamped to level 3");
    assert_eq!(prop(&parked[0], keys::DELAY).as_deref(), Some("3"));
    assert_eq!(
        send_with(&c, "DelayZ", b"now", &[(keys::DELAY, "0")]).await,
        0
    );
    assert_eq!(c.drain("DelayZ", 0).await.len(), 1);
    broker.shutdown().await;
}

async fn send_back(c: &Client, offset: i64, group: &str, delay_level: i32) -> RemotingCommand {
    let h = ConsumerSendMsgBackRequestHeader {
        offset,
        group: group.to_owned(),
        delay_level,
        origin_msg_id: None,
        origin_topic: None,
        unit_mode: Some(false),
        max_reconsume_times: None,
    };
    let cmd = RemotingCommand::request_with_header(request_code::CONSUMER_SEND_MSG_BACK, &h);
    c.call(cmd, Duration::from_secs(5))
        .await
        .expect("send back")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sent_back_message_is_retried_after_its_delay_then_dead_lettered() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = start(dir.path()).await;
    let c = Client::new(&broker.addr);
    assert_eq!(send_with(&c, "RetryT", b"fails", &[]).await, 0);
    let original = c.drain("RetryT", 0).await;
    assert_eq!(original.len(), 1);
    let original = &original[0];

    // First failure: level 0 means 3 + reconsumeTimes = 3 (the highest here, 3 s).
    let r = send_back(&c, original.phys_offset, "g1", 0).await;
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    assert!(
        c.drain("%RETRY%g1", 0).await.is_empty(),
        "retried without delay"
    );
    let parked = c.drain(SCHEDULE_TOPIC, 2).await;
    assert_eq!(parked.len(), 1, "waits in level 3's queue");
    let retried = wait_for(&c, "%RETRY%g1", Duration::from_secs(8)).await;
    assert_eq!(retried.len(), 1, "retried after the delay");
    let retried = &retried[0];
    assert!(retried.store_timestamp_ms >= parked[0].store_timestamp_ms + 3_000);
    assert_eq!(retried.reconsume_times, 1);
    assert_eq!(retried.body.as_ref(), b"fails");
    assert_eq!(prop(retried, keys::RETRY_TOPIC).as_deref(), Some("RetryT"));
    let origin_id = offset_msg_id(original.store_host, original.phys_offset);
    assert_eq!(prop(retried, keys::ORIGIN_MESSAGE_ID), Some(origin_id));
    assert!(c.drain("%DLQ%g1", 0).await.is_empty());

    // The retried message has been reconsumed once = max_reconsume_times:
    // its next failure is a dead letter, at once (RocketMQ's rule).
    let r = send_back(&c, retried.phys_offset, "g1", 0).await;
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    let dead = c.drain("%DLQ%g1", 0).await;
    assert_eq!(dead.len(), 1, "dead-lettered");
    assert_eq!(dead[0].reconsume_times, 2);
    assert_eq!(dead[0].body.as_ref(), b"fails");
    assert_eq!(prop(&dead[0], keys::RETRY_TOPIC).as_deref(), Some("RetryT"));
    assert_eq!(prop(&dead[0], keys::DELAY), None);
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    assert_eq!(c.drain("%RETRY%g1", 0).await.len(), 1, "retried again");
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_back_of_an_unknown_offset_is_a_clear_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = start(dir.path()).await;
    let c = Client::new(&broker.addr);
    let r = send_back(&c, 1 << 40, "g1", 0).await;
    assert_eq!(r.code, response_code::SYSTEM_ERROR);
    assert!(r
        .remark
        .as_deref()
        .is_some_and(|m| m.contains("no message")));
    broker.shutdown().await;
}
