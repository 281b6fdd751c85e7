//! The broker's stats count what it did, exactly: messages and bytes in at
//! the send handlers, out at the pull handler, every request timed by code
//! in the request table, refusals counted, group-commit fsyncs read from
//! the store; and `GET_BROKER_RUNTIME_INFO` serialises the same snapshot
//! under RocketMQ's keys next to the ones it already wrote.

mod in_process;
mod support;

use std::time::Duration;

use in_process::{config, send, send_request, start};
use sluice_core::FlushMode;
use sluice_net::body::{self, KvTable};
use sluice_net::header::SendMessageRequestHeaderV2;
use sluice_net::remoting::frame::{self, FrameLimits};
use sluice_net::remoting::request_code;
use sluice_net::transport::FrameReader;
use sluice_net::RemotingCommand;
use support::Client;
use tokio::io::AsyncWriteExt;

const TOPIC: &str = "StatsT";
const MESSAGES: u64 = 7;

async fn runtime_info(c: &Client) -> KvTable {
    let r = c
        .call(
            RemotingCommand::request(request_code::GET_BROKER_RUNTIME_INFO),
            Duration::from_secs(5),
        )
        .await
        .expect("runtime info");
    assert_eq!(r.code, 0, "{:?}", r.remark);
    body::decode(&r.body, "KvTable").expect("kv table")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_count_sent_and_pulled_messages_exactly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = config();
    cfg.store.flush_mode = FlushMode::Sync;
    let running = start(dir.path(), cfg).await;
    let c = Client::new(&running.addr);
    for i in 0..MESSAGES {
        send(&c, TOPIC, 0, format!("stats-{i}").as_bytes(), &[]).await;
    }
    let pulled = c.drain(TOPIC, 0).await;
    assert_eq!(pulled.len() as u64, MESSAGES);
    let stored_bytes: u64 = pulled.iter().map(|r| u64::from(r.total_size)).sum();

    let snap = running.broker.stats().snapshot();
    assert_eq!(snap.messages_in_total, MESSAGES);
    assert_eq!(snap.bytes_in_total, stored_bytes);
    assert_eq!(snap.messages_out_total, MESSAGES);
    assert_eq!(snap.bytes_out_total, stored_bytes);
    assert_eq!(snap.send_to_dlq_messages_total, 0);
    assert_eq!(snap.requests_refused_total, 0);
    let sends = &snap.rpc_latency_us[&request_code::SEND_MESSAGE_V2];
    assert_eq!(sends.count, MESSAGES);
    let pulls = snap.rpc_latency_us[&request_code::PULL_MESSAGE].count;
    // Every pull that found messages, plus the one that found none.
    assert!(pulls >= 2, "{pulls} pulls timed");
    assert_eq!(snap.requests_total, MESSAGES + pulls);
    // SYNC flush: every send waited on a group-commit fsync.
    assert!(snap.store_syncs_total >= 1);
    assert!(snap.store_syncs_total <= MESSAGES);
    assert_eq!(snap.store_fsync_latency_us.count, snap.store_syncs_total);
    assert!(snap.store_synced_bytes_total >= stored_bytes);
    running.shutdown().await;
}

/// One connection's pipelined `SYNC_FLUSH` sends share group-commit syncs:
/// every RocketMQ client sends all its producer threads' messages over one
/// connection per broker. (A regression synced each alone while the rest
/// waited unread in the socket: one sync per message.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_sync_sends_on_one_connection_share_syncs() {
    const PIPELINED: usize = 32;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = config();
    cfg.store.flush_mode = FlushMode::Sync;
    let running = start(dir.path(), cfg).await;
    // Create the topic first, so every pipelined send takes the same path.
    send(&Client::new(&running.addr), TOPIC, 0, b"first", &[]).await;
    let before = running.broker.stats().snapshot().store_syncs_total;
    let mut bytes = Vec::new();
    for opaque in 1..=PIPELINED {
        let mut request = send_request(TOPIC, 0, &[b'p'; 1024], &[]);
        request.opaque = i32::try_from(opaque).expect("small");
        let limits = FrameLimits::default();
        bytes.extend_from_slice(&frame::encode_to_bytes(&request, &limits).expect("encodable"));
    }
    let stream = tokio::net::TcpStream::connect(&running.addr)
        .await
        .expect("connect");
    let (reader, mut writer) = stream.into_split();
    writer.write_all(&bytes).await.expect("write");
    let mut answers = FrameReader::new(reader, FrameLimits::default());
    for _ in 0..PIPELINED {
        let answer = answers.next().await.expect("read").expect("an answer");
        assert_eq!(answer.code, 0, "{:?}", answer.remark);
    }
    let syncs = running.broker.stats().snapshot().store_syncs_total - before;
    assert!(
        syncs <= PIPELINED as u64 / 4,
        "{syncs} syncs for {PIPELINED} sends written at once"
    );
    running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_requests_are_counted_once_each() {
    let dir = tempfile::tempdir().expect("tempdir");
    let running = start(dir.path(), config()).await;
    let c = Client::new(&running.addr);
    // A code no handler serves is refused and timed as unrouted.
    let r = c
        .call(RemotingCommand::request(9_999), Duration::from_secs(5))
        .await
        .expect("answer");
    assert_ne!(r.code, 0);
    let snap = running.broker.stats().snapshot();
    assert_eq!(snap.requests_total, 1);
    assert_eq!(snap.requests_refused_total, 1);
    assert_eq!(snap.rpc_latency_unrouted_us.count, 1);
    assert_eq!(snap.messages_in_total, 0);
    running.shutdown().await;
}

/// A retry send whose attempts are used up (3 of at most 2).
fn exhausted_retry() -> RemotingCommand {
    let h = SendMessageRequestHeaderV2 {
        a: "test-producer".into(),
        b: "%RETRY%stats-group".into(),
        c: "TBW102".into(),
        d: 4,
        e: 0,
        f: 0,
        g: 1_700_000_000_000,
        h: 0,
        i: Some(String::new()),
        j: Some(3),
        k: Some(false),
        l: Some(2),
        m: Some(false),
        n: None,
    };
    RemotingCommand::request_with_header(request_code::SEND_MESSAGE_V2, &h)
        .with_body(bytes::Bytes::from_static(b"dead"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exhausted_retry_send_counts_one_dead_letter() {
    let dir = tempfile::tempdir().expect("tempdir");
    let running = start(dir.path(), config()).await;
    let c = Client::new(&running.addr);
    let r = c
        .call(exhausted_retry(), Duration::from_secs(5))
        .await
        .expect("send");
    assert_eq!(r.code, 0, "{:?}", r.remark);
    send(&c, TOPIC, 0, b"alive", &[]).await;
    let snap = running.broker.stats().snapshot();
    assert_eq!(snap.send_to_dlq_messages_total, 1);
    assert_eq!(snap.messages_in_total, 2);
    let dead = c.drain("%DLQ%stats-group", 0).await;
    assert_eq!(dead.len(), 1, "the dead letter is in the DLQ");
    running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runtime_info_serialises_the_snapshot_under_rocketmq_keys() {
    let dir = tempfile::tempdir().expect("tempdir");
    let running = start(dir.path(), config()).await;
    let c = Client::new(&running.addr);
    for i in 0..MESSAGES {
        send(&c, TOPIC, 0, format!("info-{i}").as_bytes(), &[]).await;
    }
    let pulled = c.drain(TOPIC, 0).await;
    let stored_bytes: u64 = pulled.iter().map(|r| u64::from(r.total_size)).sum();
    let kv = runtime_info(&c).await.table;
    let get = |k: &str| kv.get(k).unwrap_or_else(|| panic!("{k} missing")).clone();
    assert_eq!(get("msgPutTotalTodayNow"), MESSAGES.to_string());
    assert_eq!(get("msgGetTotalTodayNow"), MESSAGES.to_string());
    assert_eq!(get("putMessageTimesTotal"), MESSAGES.to_string());
    assert_eq!(get("putMessageSizeTotal"), stored_bytes.to_string());
    let average: f64 = get("putMessageAverageSize").parse().expect("a number");
    #[expect(clippy::cast_precision_loss, reason = "small test figures")]
    let expected = stored_bytes as f64 / MESSAGES as f64;
    assert!((average - expected).abs() < 1e-9, "{average} != {expected}");
    let json: serde_json::Value = serde_json::from_str(&get("sluiceStats")).expect("json");
    assert_eq!(json["messages_in_total"], MESSAGES);
    assert_eq!(json["bytes_out_total"], stored_bytes);
    assert_eq!(json["topics_in"][0][0], TOPIC);
    assert_eq!(json["topics_in"][0][1], MESSAGES);
    let retained = json["gauges"]["storage_size_bytes"].as_u64();
    assert!(retained >= Some(stored_bytes), "{retained:?}");
    // The keys written before the stats existed are all still there.
    for key in [
        "brokerVersionDesc",
        "commitLogMinOffset",
        "commitLogMaxOffset",
        "commitLogDurableOffset",
        "groupCommitSyncs",
        "topicCount",
        "consumerGroupCount",
        "sluicePendingHalfMessages",
        "sluicePendingTimers",
        "brokerRole",
    ] {
        assert!(kv.contains_key(key), "{key} missing");
    }
    running.shutdown().await;
}
