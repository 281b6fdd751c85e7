//! The controller port with a cluster secret, over real TCP: raft messages,
//! heartbeats and metadata requests from a connection that proved nothing
//! are refused; a broker client with the secret is served and one with
//! another secret is not; three controllers whose third holds another
//! secret elect a leader among the two that agree, and the third never
//! hears of it.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use sluice_core::disk::MmapDisk;
use sluice_core::SystemClock;
use sluice_net::remoting::response_code;
use sluice_net::{RemotingCommand, RpcClient, RpcConfig, TokioTransport};
use sluice_node::controller::api::{GET_METADATA, RAFT_MESSAGE};
use sluice_node::controller::{BrokerHeartbeat, Controller, ControllerClient, ControllerConfig};
use sluice_node::peer_auth::SharedSecret;

const TIMEOUT: Duration = Duration::from_secs(3);
const SECRET: &str = "cluster-secret-0123456789";

fn secret(s: &str) -> SharedSecret {
    SharedSecret::new(s).expect("long enough")
}

async fn single(dir: &std::path::Path, key: Option<SharedSecret>) -> Controller {
    let peers = BTreeMap::from([(1, "127.0.0.1:0".to_owned())]);
    let mut config = ControllerConfig::new(1, peers, "127.0.0.1:0");
    config.secret = key;
    let disk = MmapDisk::new(dir).expect("disk");
    Controller::start(config, disk, SystemClock::new(), &TokioTransport)
        .await
        .expect("starts")
}

fn heartbeat() -> BrokerHeartbeat {
    BrokerHeartbeat {
        group: "broker-a".into(),
        replica_id: 1,
        broker_addr: "127.0.0.1:10911".into(),
        ha_addr: "127.0.0.1:10912".into(),
        epoch: 0,
        max_offset: 0,
        restarted: false,
    }
}

/// The raw answers to a raft message (sent as a request, so it is
/// answered), a heartbeat and a metadata request.
async fn raw_answers(addr: &str) -> Vec<RemotingCommand> {
    let raw = RpcClient::new(TokioTransport, RpcConfig::default());
    let mut answers = Vec::new();
    for req in [
        RemotingCommand::request(RAFT_MESSAGE).with_body(vec![8, 3]),
        heartbeat().to_request(),
        RemotingCommand::request(GET_METADATA),
    ] {
        answers.push(raw.invoke(addr, req, TIMEOUT).await.expect("answered"));
    }
    answers
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unproven_raft_messages_heartbeats_and_metadata_requests_are_refused() {
    let open_dir = tempfile::tempdir().expect("tempdir");
    let open = single(open_dir.path(), None).await;
    let answers = raw_answers(&open.local_addr().to_string()).await;
    assert_eq!(
        answers[0].code,
        response_code::SUCCESS,
        "an open controller takes raft messages"
    );
    open.shutdown().await;

    let dir = tempfile::tempdir().expect("tempdir");
    let guarded = single(dir.path(), Some(secret(SECRET))).await;
    for answer in raw_answers(&guarded.local_addr().to_string()).await {
        assert_eq!(
            answer.code,
            response_code::NO_PERMISSION,
            "{:?}",
            answer.remark
        );
        assert!(answer.body.is_empty());
    }
    guarded.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_with_the_cluster_secret_is_served_and_one_with_another_is_not() {
    let dir = tempfile::tempdir().expect("tempdir");
    let controller = single(dir.path(), Some(secret(SECRET))).await;
    let addr = controller.local_addr().to_string();
    let right = ControllerClient::new(TokioTransport, vec![addr.clone()], TIMEOUT)
        .with_secret(secret(SECRET), "broker/broker-a/1");
    let mut view = None;
    for _ in 0..50 {
        if let Ok(v) = right.heartbeat(&heartbeat()).await {
            view = Some(v);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(view.and_then(|v| v.master_id), Some(1), "never served");
    let wrong = ControllerClient::new(TokioTransport, vec![addr], TIMEOUT)
        .with_secret(secret("another-secret-987654321"), "broker/broker-a/2");
    let refused = wrong.metadata().await;
    assert!(refused.is_err(), "served with another secret");
    assert!(
        refused
            .err()
            .is_some_and(|e| e.to_string().contains("did not prove")),
        "the controller's own proof fails under another secret"
    );
    controller.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_with_another_secret_is_kept_out_of_raft() {
    let ports: Vec<u16> = (0..3).map(|_| support::free_port()).collect();
    let peers: BTreeMap<u64, String> = (1..=3)
        .zip(&ports)
        .map(|(id, port)| (id, format!("127.0.0.1:{port}")))
        .collect();
    let dirs: Vec<_> = (0..3)
        .map(|_| tempfile::tempdir().expect("tempdir"))
        .collect();
    let mut controllers = Vec::new();
    for (id, dir) in (1..=3).zip(&dirs) {
        let mut config = ControllerConfig::new(id, peers.clone(), peers[&id].clone());
        config.tick_ms = 50;
        config.secret = Some(secret(if id == 3 {
            "another-secret-987654321"
        } else {
            SECRET
        }));
        let disk = MmapDisk::new(dir.path()).expect("disk");
        let c = Controller::start(config, disk, SystemClock::new(), &TokioTransport)
            .await
            .expect("starts");
        controllers.push(c);
    }
    let mut leader = None;
    for _ in 0..100 {
        leader = controllers
            .iter()
            .find(|c| c.is_leader())
            .map(Controller::id);
        if leader.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        matches!(leader, Some(1 | 2)),
        "no leader among the agreeing pair: {leader:?}"
    );
    // Long enough for several elections of the outsider.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        controllers[2].leader_id(),
        None,
        "the outsider heard of a leader"
    );
    assert!(!controllers[2].is_leader());
    assert!(
        controllers[..2].iter().any(Controller::is_leader),
        "the pair lost its leader"
    );
    for c in &controllers {
        c.shutdown().await;
    }
}
