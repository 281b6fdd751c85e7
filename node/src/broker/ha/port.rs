//! The HA port itself: bound behind the group-secret gate when the group
//! has a secret (a replica proves it belongs to the group before it
//! receives one byte of the log, see `crate::peer_auth`), open otherwise —
//! with a warning when it then listens beyond loopback.

use std::net::SocketAddr;
use std::sync::Arc;

use sluice_core::disk::Disk;
use sluice_core::Clock;
use sluice_net::{RpcConfig, RpcServer, Transport};

use super::master::handler;
use crate::broker::Broker;
use crate::peer_auth::{Gate, Guard};

/// The realm replicas of `group` prove themselves in: a proof for one
/// group's master is worthless at another's, even under the same secret.
pub(crate) fn realm(group: &str) -> String {
    format!("ha/{group}")
}

/// The identity a replica proves: its id in the group.
pub(crate) fn identity(replica_id: u64) -> String {
    replica_id.to_string()
}

/// Binds the HA port of `broker` at `listen`.
pub(crate) async fn bind<D: Disk, C: Clock, T: Transport>(
    broker: &Arc<Broker<D, C>>,
    transport: &T,
    listen: &str,
) -> crate::Result<RpcServer> {
    let secret = broker
        .replication()
        .and_then(|ha| ha.config().group_secret.clone());
    let Some(secret) = secret else {
        let server = RpcServer::bind(
            transport,
            listen,
            RpcConfig::default(),
            handler(Arc::clone(broker), None),
        )
        .await?;
        if !server.local_addr().ip().is_loopback() {
            tracing::warn!(
                addr = %server.local_addr(),
                "the replication port listens beyond loopback without a group_secret: \
                 anyone who reaches it can read the whole log; set [replication] group_secret"
            );
        }
        return Ok(server);
    };
    let gate = Arc::new(Gate::new(
        secret,
        realm(&broker.config().broker_name),
        broker.clock().clone(),
    ));
    let closed = Arc::clone(&gate);
    let guarded = Guard::new(Arc::clone(&gate), handler(Arc::clone(broker), Some(gate)));
    let server = RpcServer::builder(RpcConfig::default(), guarded)
        .on_connection_closed(move |c| closed.forget(c.id()))
        .bind(transport, listen)
        .await?;
    let addr: SocketAddr = server.local_addr();
    tracing::info!(%addr, "replication port requires the group secret");
    Ok(server)
}
