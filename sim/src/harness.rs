//! The cluster inside turmoil: `builder(seed)` pins every knob of the
//! simulator; `add_namesrv` and `add_broker` start the production name
//! server and broker on the turmoil transport. A broker's `SimDisk` is made
//! by the caller, outside the host factory, so it survives crash and bounce.

use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use sluice_core::testing::SimDisk;
use sluice_core::{FlushMode, StoreConfig};
use sluice_net::TurmoilTransport;
use sluice_node::broker::{Broker, BrokerConfig, ReplicationConfig, ReplicationMode};
use sluice_node::controller::{Controller, ControllerConfig};
use sluice_node::namesrv::{NameServer, NameServerConfig};
use sluice_node::peer_auth::SharedSecret;

use sluice_node::testing::{SimClock, Skew};

/// Host name of the name server.
pub const NAMESRV: &str = "namesrv";
/// Where brokers and clients reach the name server.
pub const NAMESRV_ADDR: &str = "namesrv:9876";
/// Host name of the broker.
pub const BROKER: &str = "broker";
/// The broker's port.
const BROKER_PORT: u16 = 10911;
/// The broker's name (its broker group); clients learn its address from
/// the name server.
pub const BROKER_NAME: &str = "broker-a";
/// Sim-time budget of one run; exceeding it fails the run.
pub const SIM_DURATION_MAX: Duration = Duration::from_secs(120);
/// How long a broker's supervisor waits before starting a broker whose
/// start failed again.
const SUPERVISOR_RESTART: Duration = Duration::from_secs(1);
/// The logical wall clock starts here (2024-01-01T00:00:00Z), so wall
/// times are the same in every run.
const EPOCH_MS: u64 = 1_704_067_200_000;

/// A turmoil builder with the seed, epoch, tick and latencies pinned.
pub fn builder(seed: u64) -> turmoil::Builder {
    let mut b = turmoil::Builder::new();
    b.rng_seed(seed)
        .epoch(UNIX_EPOCH + Duration::from_millis(EPOCH_MS))
        .tick_duration(Duration::from_millis(1))
        .min_message_latency(Duration::from_micros(100))
        .max_message_latency(Duration::from_millis(5))
        .simulation_duration(SIM_DURATION_MAX);
    b
}

/// The broker configuration the scenarios use: small segments so rollover
/// happens, no VIP port, registration with [`NAMESRV_ADDR`].
pub fn broker_config(flush_mode: FlushMode) -> BrokerConfig {
    BrokerConfig {
        broker_name: BROKER_NAME.to_owned(),
        listen: format!("0.0.0.0:{BROKER_PORT}"),
        listen_vip: false,
        namesrv_addrs: vec![NAMESRV_ADDR.to_owned()],
        store: StoreConfig {
            root: "store".to_owned(),
            flush_mode,
            ..StoreConfig::for_tests()
        },
        ..BrokerConfig::default()
    }
}

/// The name servers' port.
const NAMESRV_PORT: u16 = 9876;

/// Host name of name server `i` (the first is [`NAMESRV`]).
pub fn namesrv_host(i: u32) -> String {
    if i == 0 {
        NAMESRV.to_owned()
    } else {
        format!("{NAMESRV}{}", i + 1)
    }
}

/// Where brokers and clients reach the first `count` name servers (one:
/// just [`NAMESRV_ADDR`]).
pub fn namesrv_addrs(count: u32) -> Vec<String> {
    (0..count.max(1))
        .map(|i| format!("{}:{NAMESRV_PORT}", namesrv_host(i)))
        .collect()
}

/// The address broker host `host` registers (and clients dial).
pub fn broker_addr(host: &str) -> String {
    format!("{}:{BROKER_PORT}", turmoil::lookup(host))
}

/// Starts name server `i` on its host with `config`'s expiry settings.
pub fn add_namesrv_host(sim: &mut turmoil::Sim<'_>, i: u32, config: &NameServerConfig) {
    let config = NameServerConfig {
        listen_addr: format!("0.0.0.0:{NAMESRV_PORT}"),
        ..config.clone()
    };
    sim.host(namesrv_host(i), move || {
        let config = config.clone();
        async move {
            let _server = NameServer::start(config, SimClock::new(0), &TurmoilTransport).await?;
            std::future::pending::<()>().await;
            Ok(())
        }
    });
}

/// Starts the name server host.
pub fn add_namesrv(sim: &mut turmoil::Sim<'_>) {
    sim.host(NAMESRV, || async {
        let config = NameServerConfig {
            listen_addr: "0.0.0.0:9876".to_owned(),
            ..NameServerConfig::default()
        };
        let _server = NameServer::start(config, SimClock::new(0), &TurmoilTransport).await?;
        std::future::pending::<()>().await;
        Ok(())
    });
}

/// Gives every sync of `disk` a simulated latency that grows with its size,
/// so concurrent puts share group commits and crashes land mid-sync.
pub fn slow_syncs(disk: &SimDisk) {
    slower_syncs(disk, 0);
}

/// Like [`slow_syncs`], with `extra_ms` more latency on every sync (the
/// slow-disk fault; 0 restores the normal speed).
pub fn slower_syncs(disk: &SimDisk, extra_ms: u64) {
    let extra = Duration::from_millis(extra_ms);
    disk.set_sync_delay(Some(Arc::new(move |bytes: u64| {
        Box::pin(tokio::time::sleep(
            extra + Duration::from_micros(300 + bytes / 8),
        ))
    })));
}

/// Starts the broker host on `disk`; every (re)start opens the store from
/// what the disk holds, recovering it.
pub fn add_broker(sim: &mut turmoil::Sim<'_>, disk: &SimDisk, config: &BrokerConfig, skew: &Skew) {
    add_broker_host(sim, BROKER, disk, config, skew);
}

/// Starts a broker on host `host` (the first broker or a replica).
pub fn add_broker_host(
    sim: &mut turmoil::Sim<'_>,
    host: &str,
    disk: &SimDisk,
    config: &BrokerConfig,
    skew: &Skew,
) {
    add_broker_host_after(sim, host, disk, config, skew, Duration::ZERO);
}

/// Like [`add_broker_host`], the broker's first start `delay` late (so,
/// with controllers, the first broker is the first master).
pub fn add_broker_host_after(
    sim: &mut turmoil::Sim<'_>,
    host: &str,
    disk: &SimDisk,
    config: &BrokerConfig,
    skew: &Skew,
    delay: Duration,
) {
    let disk = disk.clone();
    let skew = skew.clone();
    let config = config.clone();
    let name = host.to_owned();
    let first_start = std::rc::Rc::new(std::cell::Cell::new(true));
    sim.host(host, move || {
        let disk = disk.clone();
        let skew = skew.clone();
        let mut config = config.clone();
        let wait = if first_start.replace(false) {
            delay
        } else {
            Duration::ZERO
        };
        // turmoil reports a listener bound to 0.0.0.0 as 0.0.0.0, so the
        // broker is told the address to register (and clients to dial).
        config.advertised_addr = Some(broker_addr(name.as_str()));
        let name = name.clone();
        async move {
            tokio::time::sleep(wait).await;
            loop {
                let opened = Broker::open(
                    disk.clone(),
                    SimClock::with_skew(skew.clone()),
                    config.clone(),
                )
                .await;
                if let Ok(broker) = opened {
                    crate::stats_check::register(&name, &broker);
                    broker
                        .serve(TurmoilTransport, std::future::pending(), |_| {})
                        .await?;
                    return Ok(());
                }
                // A broker that cannot open its store (say, a sync of its
                // recovery fails with EIO) exits with an error, as it
                // should; its supervisor starts it again, as systemd's
                // Restart=on-failure would. The exited process's file
                // handles die with it.
                disk.process_crash();
                tokio::time::sleep(SUPERVISOR_RESTART).await;
            }
        }
    });
}

/// Host name of replica `i` (broker id `i + 1`).
pub fn replica_host(i: u32) -> String {
    format!("replica{}", i + 1)
}

/// The HA port of every broker.
pub const HA_PORT: u16 = 10912;
/// The controllers' port.
pub const CONTROLLER_PORT: u16 = 9878;
/// A broker silent this long is replaced by the controllers.
pub const CONTROLLER_BROKER_TIMEOUT_MS: u64 = 3_000;

/// The replication group's secret and the controllers' cluster secret:
/// every replicated run proves them on every connection (salt 0, so the
/// nonces stay deterministic), exercising the exchange under faults.
pub fn secrets() -> (SharedSecret, SharedSecret) {
    let secret = |s: &str| SharedSecret::new(s).expect("invariant: a long enough secret");
    (
        secret("sim-group-secret-0123456789"),
        secret("sim-cluster-secret-0123456789"),
    )
}

/// Host name of controller `i` (raft id `i + 1`).
pub fn controller_host(i: u32) -> String {
    format!("ctl{}", i + 1)
}

/// The controllers' addresses, `host:port`.
pub fn controller_addrs(count: u32) -> Vec<String> {
    (0..count)
        .map(|i| format!("{}:{CONTROLLER_PORT}", controller_host(i)))
        .collect()
}

/// Starts controller `i` of `count` on `disk`, which outlives its host.
pub fn add_controller(sim: &mut turmoil::Sim<'_>, i: u32, count: u32, disk: &SimDisk) {
    let disk = disk.clone();
    let peers: std::collections::BTreeMap<u64, String> = (0..count)
        .map(|j| {
            (
                u64::from(j) + 1,
                format!("{}:{CONTROLLER_PORT}", controller_host(j)),
            )
        })
        .collect();
    sim.host(controller_host(i), move || {
        let disk = disk.clone();
        let mut config = ControllerConfig::new(
            u64::from(i) + 1,
            peers.clone(),
            format!("0.0.0.0:{CONTROLLER_PORT}"),
        );
        config.broker_timeout_ms = CONTROLLER_BROKER_TIMEOUT_MS;
        config.secret = Some(secrets().1);
        async move {
            let _controller =
                Controller::start(config, disk, SimClock::new(0), &TurmoilTransport).await?;
            std::future::pending::<()>().await;
            Ok(())
        }
    });
}

/// Replication settings for the simulation: RocketMQ's semantics with
/// timers scaled down so a run sees sessions drop, replicas leave and
/// rejoin the in-sync set, and SYNC sends time out.
pub fn replication_config(
    sync: bool,
    master_ha: Option<String>,
    controllers: u32,
) -> ReplicationConfig {
    ReplicationConfig {
        mode: if sync {
            ReplicationMode::Sync
        } else {
            ReplicationMode::Async
        },
        ha_listen: Some(format!("0.0.0.0:{HA_PORT}")),
        master_ha_addr: master_ha,
        controller_addrs: controller_addrs(controllers),
        controller_heartbeat_ms: 300,
        ack_timeout_ms: 1_000,
        not_caught_up_ms: 3_000,
        fetch_wait_ms: 500,
        session_idle_ms: 2_000,
        metadata_sync_ms: 1_000,
        fetch_bytes_max: 32 * 1024,
        group_secret: Some(secrets().0),
        controller_secret: Some(secrets().1),
        ..ReplicationConfig::default()
    }
}

/// Crashes the broker host. turmoil drops the host's tasks and runs their
/// destructors outside any runtime: dropping the broker's RPC server closes
/// its connections, whose closed hook would notify consumer groups; the
/// broker sends nothing when there is no runtime (this used to panic with
/// two or more group members connected — `group_consumption_across_faults`
/// crashes the broker in exactly that state).
pub fn crash_broker(sim: &mut turmoil::Sim<'_>) {
    sim.crash(BROKER);
}
