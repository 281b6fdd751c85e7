//! A single-peer controller over real TCP and mapped files: it leads on its
//! own, answers heartbeats and metadata, and a restart on the same data dir
//! keeps the elected master and its epoch.

use std::collections::BTreeMap;
use std::time::Duration;

use sluice_core::disk::MmapDisk;
use sluice_core::SystemClock;
use sluice_net::TokioTransport;
use sluice_node::controller::{
    BrokerHeartbeat, Controller, ControllerClient, ControllerConfig, GroupView,
};

const TIMEOUT: Duration = Duration::from_secs(3);

fn config() -> ControllerConfig {
    // The one peer never dials itself, so its address may be port 0.
    let peers = BTreeMap::from([(1, "127.0.0.1:0".to_owned())]);
    ControllerConfig::new(1, peers, "127.0.0.1:0")
}

fn heartbeat(replica_id: u64) -> BrokerHeartbeat {
    BrokerHeartbeat {
        group: "broker-a".into(),
        replica_id,
        broker_addr: format!("127.0.0.1:{}", 10_911 + replica_id),
        ha_addr: format!("127.0.0.1:{}", 20_911 + replica_id),
        epoch: 0,
        max_offset: 42 * replica_id,
        restarted: false,
    }
}

async fn heartbeat_when_leading(
    client: &ControllerClient<TokioTransport>,
    replica_id: u64,
) -> GroupView {
    // The lone controller campaigns at once, but its first term's entry
    // must apply before it answers.
    for _ in 0..50 {
        if let Ok(view) = client.heartbeat(&heartbeat(replica_id)).await {
            return view;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the single controller never answered");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_controller_answers_heartbeat_and_metadata_over_tcp() {
    let dir = tempfile::tempdir().expect("tempdir");
    let disk = MmapDisk::new(dir.path()).expect("disk");
    let controller = Controller::start(config(), disk, SystemClock::new(), &TokioTransport)
        .await
        .expect("starts");
    let addr = controller.local_addr().to_string();
    let client = ControllerClient::new(TokioTransport, vec![addr.clone()], TIMEOUT);

    let master = heartbeat_when_leading(&client, 1).await;
    assert_eq!((master.master_id, master.master_epoch), (Some(1), 1));
    assert_eq!(master.master_addr.as_deref(), Some("127.0.0.1:10912"));
    assert_eq!(master.master_ha_addr.as_deref(), Some("127.0.0.1:20912"));
    let slave = client.heartbeat(&heartbeat(2)).await.expect("answered");
    assert_eq!(slave.master_id, Some(1), "the second broker is not master");
    assert_eq!(slave.in_sync, vec![1]);

    let metadata = client.metadata().await.expect("answered");
    assert_eq!(metadata.leader_id, Some(1));
    assert_eq!(metadata.controllers.len(), 1);
    assert!(metadata.controllers[0].leader);
    assert_eq!(metadata.groups, vec![slave]);
    let offsets: Vec<(u64, Option<u64>, bool)> = metadata
        .members
        .iter()
        .map(|m| (m.replica_id, m.max_offset, m.alive))
        .collect();
    assert_eq!(offsets, vec![(1, Some(42), true), (2, Some(84), true)]);
    controller.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarted_single_controller_keeps_master_and_epoch() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let disk = MmapDisk::new(dir.path()).expect("disk");
        let controller = Controller::start(config(), disk, SystemClock::new(), &TokioTransport)
            .await
            .expect("starts");
        let client = ControllerClient::new(
            TokioTransport,
            vec![controller.local_addr().to_string()],
            TIMEOUT,
        );
        let view = heartbeat_when_leading(&client, 7).await;
        assert_eq!((view.master_id, view.master_epoch), (Some(7), 1));
        controller.shutdown().await;
    }
    let disk = MmapDisk::new(dir.path()).expect("disk");
    let controller = Controller::start(config(), disk, SystemClock::new(), &TokioTransport)
        .await
        .expect("restarts");
    let client = ControllerClient::new(
        TokioTransport,
        vec![controller.local_addr().to_string()],
        TIMEOUT,
    );
    // Were the state lost, broker 8 would become master at epoch 1.
    let view = heartbeat_when_leading(&client, 8).await;
    assert_eq!((view.master_id, view.master_epoch), (Some(7), 1));
    assert_eq!(controller.group("broker-a"), Some(view));
    controller.shutdown().await;
}
