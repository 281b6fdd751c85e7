//! `Controller`: opens the raft state from the disk, binds the RPC server
//! with the controller handlers, and runs the raft driver and the peer
//! senders until shut down. Generic over disk, clock and transport, so
//! simulations run it as is.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use sluice_core::disk::Disk;
use sluice_core::Clock;
use sluice_net::{RpcServer, Transport};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use super::api::GroupView;
use super::consensus::{self, lock, Shared, SharedRef};
use super::handlers::{routes, Context};
use super::{ControllerConfig, ControllerError};
use crate::peer_auth::{Gate, Guard};

/// The realm controllers and their clients prove the cluster secret in.
pub const REALM: &str = "controller";

/// Driver inputs (peer messages and proposals) queued before senders are
/// refused.
const INPUTS_MAX: usize = 4_096;
/// How long shutdown lets in-flight requests finish.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(1);

/// A running controller. Dropping it stops its tasks and closes its
/// connections; [`Controller::shutdown`] does so gracefully.
pub struct Controller {
    id: u64,
    shared: SharedRef,
    rpc: RpcServer,
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl Controller {
    /// Recovers the raft state under `config.data_dir` on `disk` (or starts
    /// fresh), binds `config.listen` on `transport`, and starts serving.
    pub async fn start<D: Disk, C: Clock, T: Transport>(
        config: ControllerConfig,
        disk: D,
        clock: C,
        transport: &T,
    ) -> Result<Self, ControllerError> {
        config.validate()?;
        let shared = SharedRef::new(std::sync::Mutex::new(Shared::default()));
        let mut driver = consensus::open(&config, disk, clock.clone(), Arc::clone(&shared))?;
        let (inputs, inputs_rx) = mpsc::channel(INPUTS_MAX);
        let context = Arc::new(Context {
            config: config.clone(),
            shared: Arc::clone(&shared),
            inputs,
            clock: clock.clone(),
        });
        let rpc = bind(&config, transport, &context, clock).await?;
        tracing::info!(id = config.id, addr = %rpc.local_addr(), peers = config.peers.len(), "controller listening");
        let (stop, stopped) = watch::channel(false);
        let mut tasks = driver.connect_peers(transport);
        tasks.push(tokio::spawn(driver.run(inputs_rx, stopped)));
        Ok(Self {
            id: config.id,
            shared,
            rpc,
            stop,
            tasks,
        })
    }

    /// The address actually bound (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.rpc.local_addr()
    }

    /// This controller's raft id.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Whether this controller is the raft leader now.
    pub fn is_leader(&self) -> bool {
        lock(&self.shared).is_leader
    }

    /// The raft leader as this controller knows it.
    pub fn leader_id(&self) -> Option<u64> {
        lock(&self.shared).leader_id
    }

    /// A group as applied on this controller (which may lag the leader).
    pub fn group(&self, group: &str) -> Option<GroupView> {
        lock(&self.shared)
            .state
            .groups
            .get(group)
            .map(|state| state.view(group))
    }

    /// Serves until `shutdown` resolves, then shuts down gracefully.
    pub async fn run_until(&self, shutdown: impl std::future::Future<Output = ()>) {
        shutdown.await;
        self.shutdown().await;
    }

    /// Stops the driver, stops accepting, lets in-flight requests finish
    /// briefly, and closes every connection.
    pub async fn shutdown(&self) {
        self.stop.send_replace(true);
        self.rpc.shutdown(SHUTDOWN_GRACE).await;
        for task in &self.tasks {
            task.abort();
        }
        tracing::info!(id = self.id, "controller stopped");
    }
}

/// Binds the controller port: behind the cluster-secret gate when there
/// is a secret, open (with a warning beyond loopback) otherwise.
async fn bind<C: Clock, T: Transport>(
    config: &ControllerConfig,
    transport: &T,
    context: &Arc<Context<C>>,
    clock: C,
) -> Result<RpcServer, ControllerError> {
    let Some(secret) = config.secret.clone() else {
        let rpc = RpcServer::bind(
            transport,
            &config.listen,
            config.rpc.clone(),
            routes(context),
        )
        .await?;
        if !rpc.local_addr().ip().is_loopback() {
            tracing::warn!(addr = %rpc.local_addr(), "the controller port listens beyond loopback without a cluster secret: anyone who reaches it can join raft or steer failover; pass --cluster-secret-file");
        }
        return Ok(rpc);
    };
    let gate = Arc::new(Gate::new(secret, REALM, clock));
    let closed = Arc::clone(&gate);
    Ok(
        RpcServer::builder(config.rpc.clone(), Guard::new(gate, routes(context)))
            .on_connection_closed(move |c| closed.forget(c.id()))
            .bind(transport, &config.listen)
            .await?,
    )
}

impl Drop for Controller {
    fn drop(&mut self) {
        self.stop.send_replace(true);
        for task in &self.tasks {
            task.abort();
        }
    }
}
