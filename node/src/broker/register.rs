//! Registration with the name servers: every `register_interval_ms` and
//! promptly after a topic change, the broker sends `REGISTER_BROKER` with
//! its topic table to every name server, each on its own schedule; at
//! shutdown it unregisters.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sluice_core::disk::Disk;
use sluice_core::Clock;
use sluice_net::body::{self, RegisterBrokerBody};
use sluice_net::header::{BrokerIdentityRequestHeader, RegisterBrokerRequestHeader};
use sluice_net::remoting::{request_code, response_code};
use sluice_net::{RemotingCommand, RpcClient, RpcConfig, Transport};
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::Broker;

/// What registration listens to and tells: topic changes (register now)
/// and whether some name server has accepted a registration yet.
pub(super) struct Signals {
    pub(super) topics_changed: tokio::sync::Notify,
    registered: watch::Sender<bool>,
    /// Topic table changes so far (bumped after the table changed).
    changes: AtomicU64,
    /// Per name server (in configuration order): the change count its
    /// loop had seen when its last registration attempt took the table.
    covered: watch::Sender<Vec<u64>>,
}

impl Default for Signals {
    fn default() -> Self {
        Self {
            topics_changed: tokio::sync::Notify::new(),
            registered: watch::channel(false).0,
            changes: AtomicU64::new(0),
            covered: watch::channel(Vec::new()).0,
        }
    }
}

impl<D: Disk, C: Clock> Broker<D, C> {
    /// Returns once some name server has accepted this broker's
    /// registration (at once without name servers), so a client routed
    /// by a name server finds the broker's topics. A process prints its
    /// "listening" line after this, or after a bounded wait.
    pub async fn first_registration(&self) {
        if self.config.namesrv_addrs.is_empty() {
            return;
        }
        let mut rx = self.registration.registered.subscribe();
        // An error means the broker is gone: nothing to wait for.
        let _ = rx.wait_for(|done| *done).await;
    }

    /// Asks for a prompt registration of the changed topic table and
    /// waits (at most [`REGISTER_TIMEOUT`]) until every name server's
    /// registration attempt has carried it, as RocketMQ's broker registers
    /// a created topic before it answers: a route asked for right after
    /// `updateTopic` finds it.
    pub(crate) async fn register_topics_now(&self) {
        let change = self.registration.changes.fetch_add(1, Ordering::SeqCst) + 1;
        self.registration.topics_changed.notify_one();
        let mut rx = self.registration.covered.subscribe();
        // Empty: registration is not running (no name servers), nothing
        // to wait for.
        let carried = rx.wait_for(|seen| seen.iter().all(|c| *c >= change));
        let _ = tokio::time::timeout(REGISTER_TIMEOUT, carried).await;
    }
}

/// RocketMQ's registration timeout.
const REGISTER_TIMEOUT: Duration = Duration::from_secs(6);

/// Registers with every name server now and then periodically, until
/// aborted. Each name server has its own loop (and connection), so one that
/// hangs — partitioned on an established connection, each registration
/// waiting out [`REGISTER_TIMEOUT`] — delays only its own registrations:
/// the others keep hearing from the broker and do not expire it.
pub(super) async fn run<D: Disk, C: Clock, T: Transport>(broker: Arc<Broker<D, C>>, transport: T) {
    let period = Duration::from_millis(broker.config.register_interval_ms.clamp(1_000, 60_000));
    let (changed, _) = watch::channel(());
    let servers = broker.config.namesrv_addrs.clone();
    broker
        .registration
        .covered
        .send_replace(vec![0; servers.len()]);
    // Dropped when this task is aborted, aborting every loop.
    let mut loops = JoinSet::new();
    for (index, ns) in servers.into_iter().enumerate() {
        let registering = register_loop(
            Arc::clone(&broker),
            transport.clone(),
            (index, ns),
            period,
            changed.subscribe(),
        );
        loops.spawn(registering);
    }
    loop {
        broker.registration.topics_changed.notified().await;
        changed.send_replace(());
    }
}

/// Registers with name server `ns` now, then every `period` and promptly
/// after a topic change.
async fn register_loop<D: Disk, C: Clock, T: Transport>(
    broker: Arc<Broker<D, C>>,
    transport: T,
    (index, ns): (usize, String),
    period: Duration,
    mut topics_changed: watch::Receiver<()>,
) {
    let client = RpcClient::new(transport, signed_rpc(&broker));
    let mut periodic = false;
    let mut skipped = false;
    loop {
        // A legal rare path: a periodic round is skipped, as if the name
        // server missed it. Never the first round, one a change asked for
        // (a new topic, a new role), or two in a row, so the next round
        // repairs it long before the name server expires the broker.
        skipped = periodic && !skipped && sluice_core::buggify!();
        if !skipped {
            // Read before the table is: the attempt carries this change.
            let change = broker.registration.changes.load(Ordering::SeqCst);
            register_with(&broker, &client, &ns).await;
            broker.registration.covered.send_modify(|seen| {
                if let Some(seen) = seen.get_mut(index) {
                    *seen = (*seen).max(change);
                }
            });
        }
        periodic = tokio::select! {
            () = tokio::time::sleep(period) => true,
            changed = topics_changed.changed() => {
                if changed.is_err() {
                    return;
                }
                false
            }
        };
    }
}

/// RPC settings for calls to name servers: signed with the broker's
/// credentials, when it has some.
fn signed_rpc<D: Disk, C: Clock>(broker: &Broker<D, C>) -> RpcConfig {
    RpcConfig {
        credentials: broker.config.credentials.clone(),
        ..RpcConfig::default()
    }
}

/// Sends one `REGISTER_BROKER` with the current topic table to `ns`.
async fn register_with<D: Disk, C: Clock, T: Transport>(
    broker: &Broker<D, C>,
    client: &RpcClient<T>,
    ns: &str,
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
    let header = RegisterBrokerRequestHeader {
        broker_name: broker.config.broker_name.clone(),
        broker_addr: broker.store_host().to_string(),
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
    let cmd = RemotingCommand::request_with_header(request_code::REGISTER_BROKER, &header)
        .with_body(json);
    match client.invoke(ns, cmd, REGISTER_TIMEOUT).await {
        Ok(r) if r.code == response_code::SUCCESS => {
            tracing::debug!(namesrv = %ns, "registered");
            broker.registration.registered.send_replace(true);
        }
        Ok(r) => {
            tracing::warn!(namesrv = %ns, code = r.code, remark = ?r.remark, "registration refused");
        }
        Err(e) => tracing::warn!(namesrv = %ns, error = %e, "registration failed"),
    }
}

/// Tells every name server the broker is leaving (best effort).
pub(super) async fn unregister<D: Disk, C: Clock, T: Transport>(
    broker: &Broker<D, C>,
    transport: &T,
) {
    let client = RpcClient::new(transport.clone(), signed_rpc(broker));
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
