//! The crash window of a commit: the real message is stored but its op
//! record is not (a torn tail between the two, or a replica promoted with
//! only the first). Simulated by storing the committed message directly;
//! neither a later END nor the check-back may deliver it again.

mod support;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use sluice_core::disk::MmapDisk;
use sluice_core::message::{decode_offset_msg_id, keys, sys_flag, Properties, StoredRecord};
use sluice_core::{CommitLogOffset, FlushMode, StoreConfig, SystemClock};
use sluice_net::header::{
    EndTransactionRequestHeader, SendMessageRequestHeaderV2, SendMessageResponseHeader,
    TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE,
};
use sluice_net::remoting::{request_code, response_code};
use sluice_net::{RemotingCommand, TokioTransport};
use sluice_node::broker::transaction::records;
use sluice_node::broker::{Broker, BrokerConfig};
use support::Client;
use tokio::sync::oneshot;

const TOPIC: &str = "CrashWindow";

type TestBroker = Arc<Broker<MmapDisk, SystemClock>>;

async fn start(dir: &std::path::Path) -> (TestBroker, String, oneshot::Sender<()>) {
    let config = BrokerConfig {
        listen: "127.0.0.1:0".to_owned(),
        listen_vip: false,
        namesrv_addrs: Vec::new(),
        flush_interval_ms: 50,
        transaction_timeout_ms: 200,
        transaction_check_interval_ms: 50,
        store: StoreConfig {
            root: "store".to_owned(),
            flush_mode: FlushMode::Async,
            ..StoreConfig::for_tests()
        },
        ..BrokerConfig::default()
    };
    let disk = MmapDisk::new(dir).expect("disk");
    let broker = Broker::open(disk, SystemClock::new(), config)
        .await
        .expect("open broker");
    let (stop, stopped) = oneshot::channel::<()>();
    let (bound_tx, bound) = oneshot::channel();
    tokio::spawn(Arc::clone(&broker).serve(
        TokioTransport,
        async move {
            let _ = stopped.await;
        },
        move |addr| {
            let _ = bound_tx.send(addr);
        },
    ));
    let addr = bound.await.expect("broker bound").to_string();
    (broker, addr, stop)
}

/// Sends a half; its half-queue offset and commit-log offset.
async fn send_half(c: &Client, body: &str, uniq: &str) -> (i64, i64) {
    let mut p = Properties::new();
    for (k, v) in [
        (keys::WAIT, "true"),
        (keys::UNIQ_KEY, uniq),
        (keys::TRAN_MSG, "true"),
        (keys::PGROUP, "pg"),
    ] {
        p.insert(k, v).expect("property");
    }
    let h = SendMessageRequestHeaderV2 {
        a: "pg".into(),
        b: TOPIC.into(),
        c: "TBW102".into(),
        d: 1,
        e: 0,
        f: sys_flag::TRANSACTION_PREPARED,
        g: 1_700_000_000_000,
        h: 0,
        i: Some(String::from_utf8(p.encode()).expect("utf8")),
        j: Some(0),
        k: Some(false),
        l: None,
        m: Some(false),
        n: None,
    };
    let cmd = RemotingCommand::request_with_header(request_code::SEND_MESSAGE_V2, &h)
        .with_body(Bytes::copy_from_slice(body.as_bytes()));
    let r = c.call(cmd, Duration::from_secs(5)).await.expect("send");
    assert_eq!(r.code, 0, "half send: {:?}", r.remark);
    let h: SendMessageResponseHeader = r.header().expect("send response");
    assert_eq!(h.transaction_id.as_deref(), Some(uniq));
    let (_, clog) = decode_offset_msg_id(&h.msg_id).expect("offset id");
    (h.queue_offset, clog)
}

async fn end(c: &Client, (queue_offset, clog): (i64, i64), kind: i32) -> RemotingCommand {
    let h = EndTransactionRequestHeader {
        producer_group: "pg".into(),
        tran_state_table_offset: queue_offset,
        commit_log_offset: clog,
        commit_or_rollback: kind,
        from_transaction_check: Some(false),
        msg_id: "id".into(),
        transaction_id: None,
    };
    let cmd = RemotingCommand::request_with_header(request_code::END_TRANSACTION, &h);
    c.call(cmd, Duration::from_secs(10)).await.expect("end")
}

/// Stores the committed real message of the half at `clog` and nothing
/// else: the state a crash between the commit and its op record leaves.
async fn store_commit_only(b: &TestBroker, clog: i64) {
    let at = CommitLogOffset::new(u64::try_from(clog).expect("offset"));
    let raw = b.store().read_at(at).expect("read").expect("half stored");
    let rec = StoredRecord::decode(&raw).expect("decode");
    let real = records::committed(&rec, b.store_host()).expect("a half");
    b.store().put(real, true).await.expect("store commit");
}

fn bodies(records: &[StoredRecord]) -> Vec<String> {
    records
        .iter()
        .map(|r| String::from_utf8_lossy(&r.body).into_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_whose_op_record_was_lost_is_never_delivered_twice() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (b, addr, stop) = start(dir.path()).await;
    let c = Client::new(&addr);

    // A later END (the producer retrying after the crash) stores only the
    // missing op record.
    let first = send_half(&c, "first", "U-FIRST").await;
    store_commit_only(&b, first.1).await;
    let r = end(&c, first, TRANSACTION_COMMIT_TYPE).await;
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    assert!(r
        .remark
        .as_deref()
        .is_some_and(|m| m.contains("already committed")));
    let r = end(&c, first, TRANSACTION_ROLLBACK_TYPE).await;
    assert_eq!(r.code, response_code::TRANSACTION_FAILED, "{:?}", r.remark);
    assert_eq!(bodies(&c.drain(TOPIC, 0).await), ["first"]);

    // The check-back finds the commit itself (no producer needs to be
    // connected) and closes the transaction without asking anyone.
    let second = send_half(&c, "second", "U-SECOND").await;
    store_commit_only(&b, second.1).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !b.transactions().pending_by_topic(b.store()).is_empty() {
        assert!(tokio::time::Instant::now() < deadline, "still pending");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let r = end(&c, second, TRANSACTION_ROLLBACK_TYPE).await;
    assert_eq!(r.code, response_code::TRANSACTION_FAILED, "{:?}", r.remark);
    assert!(r
        .remark
        .as_deref()
        .is_some_and(|m| m.contains("already committed")));
    assert_eq!(bodies(&c.drain(TOPIC, 0).await), ["first", "second"]);

    // An open half with no commit stays open when nobody can be asked.
    let third = send_half(&c, "third", "U-THIRD").await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(
        b.transactions().pending_by_topic(b.store()).get(TOPIC),
        Some(&1)
    );
    let r = end(&c, third, TRANSACTION_COMMIT_TYPE).await;
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    assert_eq!(
        bodies(&c.drain(TOPIC, 0).await),
        ["first", "second", "third"]
    );
    let _ = stop.send(());
}
