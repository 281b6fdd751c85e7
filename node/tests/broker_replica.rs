//! A master and a replica with fixed roles, in this process on loopback
//! TCP and real disks: SYNC sends are acknowledged once the replica holds
//! them; the replica serves reads of the same messages at the same
//! offsets, refuses writes, and receives the master's consumer offsets and
//! topics; runtime info names the roles and the in-sync set; with the
//! replica gone, SYNC sends stop being acknowledged.

mod in_process;
mod support;

use std::time::Duration;

use bytes::Bytes;
use in_process::replication;
use sluice_net::body::{self, KvTable};
use sluice_net::header::{QueryConsumerOffsetRequestHeader, UpdateConsumerOffsetRequestHeader};
use sluice_net::remoting::{request_code, response_code};
use sluice_net::RemotingCommand;
use support::{free_port, Client};

const TOPIC: &str = "Replicated";

async fn runtime(c: &Client) -> KvTable {
    let r = c
        .call(
            RemotingCommand::request(request_code::GET_BROKER_RUNTIME_INFO),
            Duration::from_secs(5),
        )
        .await
        .expect("runtime info");
    body::decode(&r.body, "KvTable").expect("kv table")
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[expect(clippy::too_many_lines, reason = "one story, told in order")]
async fn a_replica_holds_serves_and_follows_what_the_sync_master_acknowledges() {
    let master_dir = tempfile::tempdir().expect("tempdir");
    let replica_dir = tempfile::tempdir().expect("tempdir");
    let master_ha = free_port();
    let mut mc = in_process::config();
    mc.broker_id = 0;
    mc.replication = Some(replication(master_ha, None));
    let master = in_process::start(master_dir.path(), mc).await;
    let mut rc = in_process::config();
    rc.broker_id = 1;
    rc.replication = Some(replication(
        free_port(),
        Some(format!("127.0.0.1:{master_ha}")),
    ));
    let replica = in_process::start(replica_dir.path(), rc).await;
    let m = Client::new(&master.addr);
    let r = Client::new(&replica.addr);

    // Until the replica has joined the in-sync set, SYNC sends are stored
    // but answered SLAVE_NOT_AVAILABLE; then they are acknowledged.
    let mut acked = Vec::new();
    for n in 0.. {
        assert!(n < 200, "no SYNC send was ever acknowledged");
        let body = format!("m{n}");
        let s = m
            .send(TOPIC, 0, body.as_bytes(), "k", "t")
            .await
            .expect("send");
        assert!(
            s.code == response_code::SUCCESS || s.code == response_code::SLAVE_NOT_AVAILABLE,
            "unexpected answer {} {:?}",
            s.code,
            s.remark
        );
        if s.code == response_code::SUCCESS {
            acked.push((s.queue_offset.expect("offset"), body));
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for i in 0..20 {
        let body = format!("after-{i}");
        let s = m
            .send(TOPIC, 0, body.as_bytes(), "k", "t")
            .await
            .expect("send");
        assert_eq!(s.code, response_code::SUCCESS, "{:?}", s.remark);
        acked.push((s.queue_offset.expect("offset"), body));
    }

    // The replica serves every acknowledged message at its offset (once
    // the master's confirmed offset reached it: a fetch round later).
    let mut on_replica = Vec::new();
    for _ in 0..100 {
        on_replica = r.drain(TOPIC, 0).await;
        let top = acked.iter().map(|(o, _)| *o).max().unwrap_or(0);
        if on_replica.iter().any(|rec| rec.queue_offset == top) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for (offset, body) in &acked {
        let rec = on_replica
            .iter()
            .find(|rec| rec.queue_offset == *offset)
            .unwrap_or_else(|| panic!("offset {offset} missing on the replica"));
        assert_eq!(rec.body, Bytes::from(body.clone()));
    }
    // It refuses writes.
    let refused = r.send(TOPIC, 0, b"no", "k", "t").await.expect("send");
    assert_eq!(refused.code, response_code::SERVICE_NOT_AVAILABLE);

    // Consumer offsets committed on the master reach the replica.
    let commit = UpdateConsumerOffsetRequestHeader {
        consumer_group: "g".into(),
        topic: TOPIC.into(),
        queue_id: 0,
        commit_offset: 7,
    };
    let ok = m
        .call(
            RemotingCommand::request_with_header(request_code::UPDATE_CONSUMER_OFFSET, &commit),
            Duration::from_secs(5),
        )
        .await
        .expect("commit");
    assert_eq!(ok.code, response_code::SUCCESS);
    let query = QueryConsumerOffsetRequestHeader {
        consumer_group: "g".into(),
        topic: TOPIC.into(),
        queue_id: 0,
        set_zero_if_not_found: Some(false),
    };
    eventually("the offset reaching the replica", || {
        let r = &r;
        let query = query.clone();
        async move {
            let a = r
                .call(
                    RemotingCommand::request_with_header(
                        request_code::QUERY_CONSUMER_OFFSET,
                        &query,
                    ),
                    Duration::from_secs(5),
                )
                .await
                .expect("query");
            a.ext_fields.get("offset") == Some("7")
        }
    })
    .await;

    // Roles, epoch and in-sync set as operators see them.
    let mi = runtime(&m).await.table;
    let ri = runtime(&r).await.table;
    assert_eq!(mi["brokerRole"], "SYNC_MASTER");
    assert_eq!(mi["inSyncReplicas"], "0,1");
    assert_eq!(ri["brokerRole"], "SLAVE");
    assert_eq!(ri["masterEpoch"], mi["masterEpoch"]);
    assert!(ri.get("topicCount").is_some_and(|c| c != "0"));

    // Without its replica the SYNC master stops acknowledging: timeouts,
    // then SLAVE_NOT_AVAILABLE once the replica has left the in-sync set.
    replica.shutdown().await;
    let mut codes = Vec::new();
    for i in 0..6 {
        let s = m
            .send(TOPIC, 0, format!("alone-{i}").as_bytes(), "k", "t")
            .await
            .expect("send");
        codes.push(s.code);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        !codes.contains(&response_code::SUCCESS),
        "acknowledged without the replica: {codes:?}"
    );
    assert_eq!(
        codes.last(),
        Some(&response_code::SLAVE_NOT_AVAILABLE),
        "{codes:?}"
    );
    master.shutdown().await;
}
