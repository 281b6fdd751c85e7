//! `Broker::first_registration`, which `sluice-node` waits on before it
//! prints its "listening" line: it holds while no name server has taken the
//! broker's registration and returns once one has, so a client started on
//! that line is routed to the broker's topics.

mod in_process;
mod support;

use std::time::Duration;

use in_process::{config, start};
use sluice_core::SystemClock;
use sluice_net::TokioTransport;
use sluice_node::namesrv::{NameServer, NameServerConfig};

fn free_addr() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").to_string()
}

#[tokio::test]
async fn first_registration_waits_for_a_name_server_and_returns_once_one_accepts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ns_addr = free_addr();
    let broker = start(
        dir.path(),
        sluice_node::broker::BrokerConfig {
            namesrv_addrs: vec![ns_addr.clone()],
            register_interval_ms: 1_000,
            ..config()
        },
    )
    .await;
    // Nobody listens at the name server's address yet.
    let early = tokio::time::timeout(
        Duration::from_millis(700),
        broker.broker.first_registration(),
    )
    .await;
    assert!(early.is_err(), "returned before any name server accepted");

    let ns = NameServer::start(
        NameServerConfig {
            listen_addr: ns_addr,
            ..NameServerConfig::default()
        },
        SystemClock::new(),
        &TokioTransport,
    )
    .await
    .expect("name server binds");
    tokio::time::timeout(Duration::from_secs(10), broker.broker.first_registration())
        .await
        .expect("returns once the name server took the registration");
    ns.shutdown().await;
}

#[tokio::test]
async fn first_registration_returns_at_once_without_name_servers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = start(dir.path(), config()).await;
    tokio::time::timeout(
        Duration::from_millis(100),
        broker.broker.first_registration(),
    )
    .await
    .expect("no name server to wait for");
}
