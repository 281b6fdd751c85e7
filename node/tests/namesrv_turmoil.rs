//! The name server under turmoil's simulated time: the expiry scan drops a
//! broker that went silent (and closes its connection) while a broker that
//! re-registers every 30 s stays routed.

mod namesrv_support;

use std::time::Duration;

use namesrv_support::{register, register_body, route_request};
use sluice_net::remoting::response_code;
use sluice_net::{RemotingCommand, RpcClient, RpcConfig, TurmoilTransport};
use sluice_node::namesrv::{NameServer, NameServerConfig};
use sluice_node::testing::SimClock;

const NAMESRV: &str = "namesrv";
const NAMESRV_ADDR: &str = "namesrv:9876";
const TIMEOUT: Duration = Duration::from_secs(3);
const CLIENT_VERSION: i32 = 409;

fn simulation(seed: u64) -> turmoil::Sim<'static> {
    let mut sim = turmoil::Builder::new()
        .epoch(std::time::UNIX_EPOCH)
        .rng_seed(seed)
        .simulation_duration(Duration::from_secs(400))
        .build();
    sim.host(NAMESRV, || async {
        let config = NameServerConfig {
            listen_addr: "0.0.0.0:9876".into(),
            ..NameServerConfig::default()
        };
        let clock = SimClock::new(0);
        let _server = NameServer::start(config, clock, &TurmoilTransport).await?;
        std::future::pending::<()>().await;
        Ok(())
    });
    sim
}

async fn route_code(client: &RpcClient<TurmoilTransport>, topic: &str) -> i32 {
    let response: RemotingCommand = client
        .invoke(NAMESRV_ADDR, route_request(topic, CLIENT_VERSION), TIMEOUT)
        .await
        .expect("answered");
    response.code
}

#[test]
fn silent_broker_expires_while_a_heartbeating_one_stays() {
    for seed in [1, 2, 3] {
        let mut sim = simulation(seed);
        sim.client("brokers", async {
            let silent = RpcClient::new(TurmoilTransport, RpcConfig::default());
            let live = RpcClient::new(TurmoilTransport, RpcConfig::default());
            let request = register("silent", "silent:10911", 0, register_body(&["S"]));
            let answer = silent.invoke(NAMESRV_ADDR, request, TIMEOUT).await?;
            assert_eq!(answer.code, response_code::SUCCESS);
            let silent_connection = silent.connection(NAMESRV_ADDR).await?;

            let heartbeat = tokio::spawn(async move {
                loop {
                    let request = register("live", "live:10911", 0, register_body(&["L"]));
                    let answer = live.invoke(NAMESRV_ADDR, request, TIMEOUT).await;
                    assert_eq!(answer.expect("answered").code, response_code::SUCCESS);
                    tokio::time::sleep(Duration::from_secs(30)).await;
                }
            });

            let reader = RpcClient::new(TurmoilTransport, RpcConfig::default());
            tokio::time::sleep(Duration::from_secs(110)).await;
            assert_eq!(
                route_code(&reader, "S").await,
                response_code::SUCCESS,
                "silent for 110 s"
            );
            assert!(!silent_connection.is_closed());

            // Expired after 120 s, found by a scan at most 10 s later.
            tokio::time::sleep(Duration::from_secs(25)).await;
            assert_eq!(
                route_code(&reader, "S").await,
                response_code::TOPIC_NOT_EXIST
            );
            assert!(
                silent_connection.is_closed(),
                "the silent broker's connection is closed"
            );

            tokio::time::sleep(Duration::from_secs(100)).await;
            assert_eq!(
                route_code(&reader, "L").await,
                response_code::SUCCESS,
                "heartbeats keep it live"
            );
            heartbeat.abort();
            Ok(())
        });
        sim.run().expect("simulation succeeds");
    }
}

#[test]
fn shorter_configured_expiry_applies() {
    let mut sim = turmoil::Builder::new()
        .epoch(std::time::UNIX_EPOCH)
        .simulation_duration(Duration::from_secs(60))
        .build();
    sim.host(NAMESRV, || async {
        let config = NameServerConfig {
            listen_addr: "0.0.0.0:9876".into(),
            broker_expiry_ms: 5_000,
            scan_interval_ms: 1_000,
            ..NameServerConfig::default()
        };
        let clock = SimClock::new(0);
        let _server = NameServer::start(config, clock, &TurmoilTransport).await?;
        std::future::pending::<()>().await;
        Ok(())
    });
    sim.client("broker", async {
        let broker = RpcClient::new(TurmoilTransport, RpcConfig::default());
        let request = register("b", "b:10911", 0, register_body(&["T"]));
        assert_eq!(
            broker.invoke(NAMESRV_ADDR, request, TIMEOUT).await?.code,
            response_code::SUCCESS
        );
        let reader = RpcClient::new(TurmoilTransport, RpcConfig::default());
        tokio::time::sleep(Duration::from_secs(4)).await;
        assert_eq!(route_code(&reader, "T").await, response_code::SUCCESS);
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(
            route_code(&reader, "T").await,
            response_code::TOPIC_NOT_EXIST
        );
        Ok(())
    });
    sim.run().expect("simulation succeeds");
}
