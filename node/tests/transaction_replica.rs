//! Transactions on a replicated broker group (fixed roles, in this
//! process): a replica derives the same open halves as its master from the
//! replicated half and op queues, refuses `END_TRANSACTION`, and the
//! committed message reaches it once.

mod in_process;
mod support;

use std::time::Duration;

use bytes::Bytes;
use in_process::replication;
use sluice_core::message::{decode_offset_msg_id, keys, sys_flag, Properties};
use sluice_net::body::{self, KvTable};
use sluice_net::header::{
    EndTransactionRequestHeader, SendMessageRequestHeaderV2, SendMessageResponseHeader,
    TRANSACTION_COMMIT_TYPE,
};
use sluice_net::remoting::{request_code, response_code};
use sluice_net::RemotingCommand;
use support::{free_port, Client};

const TOPIC: &str = "TxReplicated";

async fn pending(c: &Client) -> Option<String> {
    let r = c
        .call(
            RemotingCommand::request(request_code::GET_BROKER_RUNTIME_INFO),
            Duration::from_secs(5),
        )
        .await
        .expect("runtime info");
    let kv: KvTable = body::decode(&r.body, "KvTable").expect("kv table");
    kv.table.get("sluicePendingHalfMessages").cloned()
}

async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..200 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{what} never happened");
}

/// Sends a half; the response code and (half-queue offset, commit-log offset).
async fn send_half(c: &Client, body: &str) -> (i32, (i64, i64)) {
    let mut p = Properties::new();
    for (k, v) in [
        (keys::WAIT, "true"),
        (keys::UNIQ_KEY, body),
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
    let Ok(h) = r.header::<SendMessageResponseHeader>() else {
        return (r.code, (-1, -1));
    };
    let (_, clog) = decode_offset_msg_id(&h.msg_id).expect("offset id");
    (r.code, (h.queue_offset, clog))
}

async fn end(c: &Client, (queue_offset, clog): (i64, i64)) -> RemotingCommand {
    let h = EndTransactionRequestHeader {
        producer_group: "pg".into(),
        tran_state_table_offset: queue_offset,
        commit_log_offset: clog,
        commit_or_rollback: TRANSACTION_COMMIT_TYPE,
        from_transaction_check: Some(false),
        msg_id: "id".into(),
        transaction_id: None,
    };
    let cmd = RemotingCommand::request_with_header(request_code::END_TRANSACTION, &h);
    c.call(cmd, Duration::from_secs(10)).await.expect("end")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_tracks_the_masters_transactions_and_refuses_to_end_them() {
    let master_dir = tempfile::tempdir().expect("tempdir");
    let replica_dir = tempfile::tempdir().expect("tempdir");
    let master_ha = free_port();
    let mut mc = in_process::config();
    mc.broker_id = 0;
    mc.transaction_check_interval_ms = 100;
    mc.replication = Some(replication(master_ha, None));
    let master = in_process::start(master_dir.path(), mc).await;
    let mut rc = in_process::config();
    rc.broker_id = 1;
    rc.transaction_check_interval_ms = 100;
    rc.replication = Some(replication(
        free_port(),
        Some(format!("127.0.0.1:{master_ha}")),
    ));
    let replica = in_process::start(replica_dir.path(), rc).await;
    let m = Client::new(&master.addr);
    let r = Client::new(&replica.addr);

    // The first half acknowledged by the in-sync set.
    let mut first = None;
    for n in 0..200 {
        let (code, half) = send_half(&m, &format!("h{n}")).await;
        if code == response_code::SUCCESS {
            first = Some(half);
            break;
        }
        assert_eq!(code, response_code::SLAVE_NOT_AVAILABLE);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let first = first.expect("a SYNC half send was acknowledged");
    let (code, second) = send_half(&m, "second").await;
    assert_eq!(code, response_code::SUCCESS);

    // The replica refuses to end a transaction.
    let refused = end(&r, second).await;
    assert_eq!(refused.code, response_code::SERVICE_NOT_AVAILABLE);
    assert!(refused
        .remark
        .as_deref()
        .is_some_and(|m| m.contains("not the master")));

    // Commit `second` on the master: acknowledged once replicated.
    let done = end(&m, second).await;
    assert_eq!(done.code, response_code::SUCCESS, "{:?}", done.remark);

    // Both brokers agree: every earlier half open, `second` resolved.
    let master_pending = pending(&m).await.expect("pending on the master");
    let opened = usize::try_from(first.0).expect("offset") + 1;
    assert_eq!(master_pending, format!(r#"{{"{TOPIC}":{opened}}}"#));
    eventually("the replica's tracker matches its master's", || async {
        pending(&r).await.as_deref() == Some(master_pending.as_str())
    })
    .await;
    eventually("the commit reaches the replica once", || async {
        let got = r.drain(TOPIC, 0).await;
        got.len() == 1 && got[0].body == Bytes::from_static(b"second")
    })
    .await;
    replica.shutdown().await;
    master.shutdown().await;
}
