//! The replication port with a group secret: a replica holding the secret
//! replicates; a connection without it — a raw client, or a replica with
//! another secret — receives no byte of the log, and the master logs the
//! refusal naming the peer (`peer_auth_process.rs`, with a real process
//! and its log); a connection proven as one replica cannot handshake as
//! another.

mod in_process;
mod support;

use std::time::Duration;

use in_process::replication;
use sluice_net::remoting::response_code;
use sluice_net::{RemotingCommand, RpcClient, RpcConfig, TokioTransport};
use sluice_node::broker::ha::{EpochHistory, HA_FETCH, HA_HANDSHAKE, HA_METADATA};
use sluice_node::broker::ReplicationConfig;
use sluice_node::peer_auth::{Prover, SharedSecret};
use support::{free_port, Client};

const TOPIC: &str = "Guarded";
const SECRET: &str = "group-secret-0123456789";
const T: Duration = Duration::from_secs(5);

fn secret(s: &str) -> SharedSecret {
    SharedSecret::new(s).expect("secret")
}

fn with_secret(mut rc: ReplicationConfig, secret: &str) -> ReplicationConfig {
    rc.group_secret = Some(self::secret(secret));
    rc
}

/// A valid handshake of replica `id` with an empty log.
fn handshake_of(id: u64) -> RemotingCommand {
    let handshake = serde_json::json!({
        "group": "broker-a", "replicaId": id, "epochs": EpochHistory::default(),
        "end": 0, "segmentBytes": in_process::config().store.commit_log_segment_bytes,
    });
    RemotingCommand::request(HA_HANDSHAKE).with_body(handshake.to_string().into_bytes())
}

/// What a replica would send, had it the right to: a valid handshake of
/// replica 1, a fetch from 0, a metadata copy.
fn replica_requests() -> Vec<RemotingCommand> {
    let fetch = serde_json::json!({
        "session": 1, "replicaId": 1, "epoch": 1, "from": 0, "held": 0,
    });
    vec![
        handshake_of(1),
        RemotingCommand::request(HA_FETCH).with_body(fetch.to_string().into_bytes()),
        RemotingCommand::request(HA_METADATA),
    ]
}

/// Sends SYNC messages until one is acknowledged (the replica holds it),
/// for at most `tries` × 50 ms; whether one was.
async fn sync_acknowledged(m: &Client, tries: u32) -> bool {
    for n in 0..tries {
        let s = m
            .send(TOPIC, 0, format!("m{n}").as_bytes(), "k", "t")
            .await
            .expect("send");
        if s.code == response_code::SUCCESS {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_with_the_group_secret_replicates_and_one_without_it_gets_nothing() {
    let master_dir = tempfile::tempdir().expect("tempdir");
    let master_ha = free_port();
    let mut mc = in_process::config();
    mc.broker_id = 0;
    mc.replication = Some(with_secret(replication(master_ha, None), SECRET));
    let master = in_process::start(master_dir.path(), mc).await;
    let m = Client::new(&master.addr);
    let master_ha_addr = format!("127.0.0.1:{master_ha}");

    // Raw requests on the HA port: refused, no log bytes, no session.
    let raw = RpcClient::new(TokioTransport, RpcConfig::default());
    for req in replica_requests() {
        let code = req.code;
        let answer = raw
            .invoke(&master_ha_addr, req, Duration::from_secs(5))
            .await
            .expect("answered");
        assert_eq!(answer.code, response_code::NO_PERMISSION, "request {code}");
        assert!(
            answer.body.is_empty(),
            "request {code} got {} bytes",
            answer.body.len()
        );
    }
    let ha = master.broker.replication().expect("replicated");
    assert!(ha.replica_acks().is_empty(), "no session from a raw client");

    // A replica with another secret: never joins, SYNC sends never acked.
    let wrong_dir = tempfile::tempdir().expect("tempdir");
    let mut wc = in_process::config();
    wc.broker_id = 1;
    let wrong_rc = replication(free_port(), Some(master_ha_addr.clone()));
    wc.replication = Some(with_secret(wrong_rc, "another-secret-987654321"));
    let wrong = in_process::start(wrong_dir.path(), wc).await;
    assert!(
        !sync_acknowledged(&m, 30).await,
        "a replica with the wrong secret acknowledged"
    );
    assert!(
        ha.replica_acks().is_empty(),
        "the wrong replica got a session"
    );
    assert!(Client::new(&wrong.addr).drain(TOPIC, 0).await.is_empty());
    wrong.shutdown().await;

    // The right secret: SYNC sends are acknowledged, the replica serves them.
    let replica_dir = tempfile::tempdir().expect("tempdir");
    let mut rc = in_process::config();
    rc.broker_id = 1;
    rc.replication = Some(with_secret(
        replication(free_port(), Some(master_ha_addr.clone())),
        SECRET,
    ));
    let replica = in_process::start(replica_dir.path(), rc).await;
    assert!(
        sync_acknowledged(&m, 200).await,
        "the replica with the secret never acknowledged"
    );
    let r = Client::new(&replica.addr);
    let mut held = Vec::new();
    for _ in 0..100 {
        held = r.drain(TOPIC, 0).await;
        if !held.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!held.is_empty(), "the replica holds nothing");
    replica.shutdown().await;

    // A connection proven as replica 2 may handshake as 2, never as 1.
    let rpc = RpcClient::new(TokioTransport, RpcConfig::default());
    let prover = Prover::new(secret(SECRET), "ha/broker-a", "2");
    let conn = prover
        .connection(&rpc, &master_ha_addr, T)
        .await
        .expect("proven");
    let as_1 = conn
        .invoke(replica_requests().remove(0), T)
        .await
        .expect("answered");
    assert_eq!(as_1.code, response_code::NO_PERMISSION, "{:?}", as_1.remark);
    assert!(as_1.body.is_empty());
    let as_2 = conn.invoke(handshake_of(2), T).await.expect("answered");
    assert_eq!(as_2.code, response_code::SUCCESS, "{:?}", as_2.remark);
    master.shutdown().await;
}
