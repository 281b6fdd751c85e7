//! Broker registration under turmoil: a name server that accepts the
//! connection but never answers (partitioned on an established stream, or
//! hung) must not keep the broker from registering with the other name
//! servers — else they expire a broker they can reach. Found by the sim's
//! `namesrv_partition_stale_routes` scenario: registrations went to the
//! name servers one after another, each waiting out its timeout.

mod namesrv_support;

use std::time::Duration;

use namesrv_support::route_request;
use sluice_core::message::DEFAULT_TOPIC;
use sluice_core::testing::SimDisk;
use sluice_core::StoreConfig;
use sluice_net::remoting::response_code;
use sluice_net::{RpcClient, RpcConfig, TurmoilTransport};
use sluice_node::broker::{Broker, BrokerConfig};
use sluice_node::namesrv::{NameServer, NameServerConfig};
use sluice_node::testing::SimClock;

const CLIENT_VERSION: i32 = 409;
/// The live name server drops a broker silent this long.
const EXPIRY_MS: u64 = 3_000;

#[test]
fn a_hung_name_server_does_not_delay_registration_with_the_others() {
    let mut sim = turmoil::Builder::new()
        .epoch(std::time::UNIX_EPOCH)
        .rng_seed(7)
        .simulation_duration(Duration::from_secs(60))
        .build();
    // Accepts connections and reads nothing: every request times out.
    sim.host("hung", || async {
        let listener = turmoil::net::TcpListener::bind("0.0.0.0:9876").await?;
        let mut held = Vec::new();
        loop {
            let (stream, _) = listener.accept().await?;
            held.push(stream);
        }
    });
    sim.host("namesrv", || async {
        let config = NameServerConfig {
            listen_addr: "0.0.0.0:9876".into(),
            broker_expiry_ms: EXPIRY_MS,
            scan_interval_ms: 500,
            ..NameServerConfig::default()
        };
        let _server = NameServer::start(config, SimClock::new(0), &TurmoilTransport).await?;
        std::future::pending::<()>().await;
        Ok(())
    });
    let disk = SimDisk::new(1);
    sim.host("broker", move || {
        let disk = disk.clone();
        async move {
            let config = BrokerConfig {
                listen: "0.0.0.0:10911".into(),
                advertised_addr: Some(format!("{}:10911", turmoil::lookup("broker"))),
                listen_vip: false,
                // The hung one first: registering in turn would wait out
                // its timeout before the live one heard anything.
                namesrv_addrs: vec!["hung:9876".into(), "namesrv:9876".into()],
                register_interval_ms: 1_000,
                store: StoreConfig {
                    root: "store".into(),
                    ..StoreConfig::for_tests()
                },
                ..BrokerConfig::default()
            };
            let broker = Broker::open(disk, SimClock::new(0), config).await?;
            broker
                .serve(TurmoilTransport, std::future::pending(), |_| {})
                .await?;
            Ok(())
        }
    });
    sim.client("client", async {
        let client = RpcClient::new(TurmoilTransport, RpcConfig::default());
        tokio::time::sleep(Duration::from_secs(2)).await;
        for poll in 0..80 {
            let response = client
                .invoke(
                    "namesrv:9876",
                    route_request(DEFAULT_TOPIC, CLIENT_VERSION),
                    Duration::from_secs(1),
                )
                .await?;
            assert_eq!(
                response.code,
                response_code::SUCCESS,
                "poll {poll}: the live name server lost the broker's route"
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        Ok(())
    });
    sim.run()
        .expect("the live name server routes the broker throughout");
}
