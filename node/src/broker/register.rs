//! Registration with the name servers: every `register_interval_ms` and
//! promptly after a topic change, the broker sends `REGISTER_BROKER` with
//! its topic table to every name server; at shutdown it unregisters.

use std::sync::Arc;
use std::time::Duration;

use sluice_core::disk::Disk;
use sluice_core::Clock;
use sluice_net::body::{self, RegisterBrokerBody};
use sluice_net::header::{BrokerIdentityRequestHeader, RegisterBrokerRequestHeader};
use sluice_net::remoting::{request_code, response_code};
use sluice_net::{RemotingCommand, RpcClient, RpcConfig, Transport};

use super::Broker;

/// RocketMQ's registration timeout.
const REGISTER_TIMEOUT: Duration = Duration::from_secs(6);

/// Registers now and then periodically, until aborted.
pub(super) async fn run<D: Disk, C: Clock, T: Transport>(broker: Arc<Broker<D, C>>, transport: T) {
    let client = RpcClient::new(transport, RpcConfig::default());
    let period = Duration::from_millis(broker.config.register_interval_ms.clamp(1_000, 60_000));
    let mut first = true;
    loop {
        // A legal rare path: a periodic round of registration is skipped
        // (as if every name server missed it); the next round repairs it
        // long before the name servers expire the broker.
        if first || !sluice_core::buggify!() {
            register_all(&broker, &client).await;
        }
        first = false;
        tokio::select! {
            () = tokio::time::sleep(period) => {}
            () = broker.topics_changed.notified() => {}
        }
    }
}

async fn register_all<D: Disk, C: Clock, T: Transport>(
    broker: &Broker<D, C>,
    client: &RpcClient<T>,
) {
    let body = RegisterBrokerBody {
        topic_config_serialize_wrapper: broker.topics.snapshot(),
        filter_server_list: Vec::new(),
    };
    let Ok(json) = body::encode(&body, "RegisterBrokerBody") else {
        tracing::error!("could not encode the registration body");
        return;
    };
    // Java's name server compares against CRC32 with the top bit cleared.
    let crc = i32::try_from(crc32fast::hash(&json) & 0x7FFF_FFFF).expect("invariant: 31-bit value");
    let addr = broker.store_host().to_string();
    let header = RegisterBrokerRequestHeader {
        broker_name: broker.config.broker_name.clone(),
        broker_addr: addr.clone(),
        cluster_name: broker.config.cluster_name.clone(),
        ha_server_addr: broker
            .replication()
            .map(super::Replication::ha_addr)
            .unwrap_or_default(),
        broker_id: broker.route_broker_id(),
        compressed: Some(false),
        body_crc32: Some(crc),
        master_epoch: broker.registered_master_epoch(),
    };
    for ns in &broker.config.namesrv_addrs {
        let cmd = RemotingCommand::request_with_header(request_code::REGISTER_BROKER, &header)
            .with_body(json.clone());
        match client.invoke(ns, cmd, REGISTER_TIMEOUT).await {
            Ok(r) if r.code == response_code::SUCCESS => {
                tracing::debug!(namesrv = %ns, "registered");
            }
            Ok(r) => {
                tracing::warn!(namesrv = %ns, code = r.code, remark = ?r.remark, "registration refused");
            }
            Err(e) => tracing::warn!(namesrv = %ns, error = %e, "registration failed"),
        }
    }
}

/// Tells every name server the broker is leaving (best effort).
pub(super) async fn unregister<D: Disk, C: Clock, T: Transport>(
    broker: &Broker<D, C>,
    transport: &T,
) {
    let client = RpcClient::new(transport.clone(), RpcConfig::default());
    let header = BrokerIdentityRequestHeader {
        broker_name: broker.config.broker_name.clone(),
        broker_addr: broker.store_host().to_string(),
        cluster_name: broker.config.cluster_name.clone(),
        broker_id: broker.route_broker_id(),
    };
    for ns in &broker.config.namesrv_addrs {
        let cmd = RemotingCommand::request_with_header(request_code::UNREGISTER_BROKER, &header);
        if let Err(e) = client.invoke(ns, cmd, Duration::from_secs(2)).await {
            tracing::debug!(namesrv = %ns, error = %e, "unregister failed");
        }
    }
    client.shutdown();
}
