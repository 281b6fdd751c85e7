//! `NameServer`: binds the RPC server with the name-server handlers, drops a
//! broker when its connection closes, and runs the expiry scan until shut
//! down. Generic over the clock and the transport, so simulations run it as is.

use std::collections::BTreeSet;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Weak};
use std::time::Duration;

use sluice_core::Clock;
use sluice_net::body::{ClusterInfo, TopicRouteData};
use sluice_net::{RpcServer, Transport};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;

use super::handlers::routes;
use super::state::State;
use super::NameServerConfig;

/// A bound, running name server. Dropping it stops the scan and closes
/// every connection; [`NameServer::shutdown`] does so gracefully.
pub struct NameServer<C: Clock> {
    state: Arc<State<C>>,
    rpc: Arc<RpcServer>,
    stop: watch::Sender<bool>,
    scan_task: JoinHandle<()>,
}

impl<C: Clock> NameServer<C> {
    /// Binds `config.listen_addr` on `transport` and starts serving and
    /// scanning for silent brokers. Fails only if the address cannot be bound.
    pub async fn start<T: Transport>(
        config: NameServerConfig,
        clock: C,
        transport: &T,
    ) -> sluice_net::Result<Self> {
        let listen_addr = config.listen_addr.clone();
        let rpc_config = config.rpc.clone();
        let state = Arc::new(State::new(config, clock));
        let on_closed = {
            let state = Arc::clone(&state);
            move |connection: &sluice_net::ConnectionHandle| {
                state.routes().remove_connection(connection.id());
            }
        };
        let rpc = RpcServer::builder(rpc_config, routes(&state))
            .on_connection_closed(on_closed)
            .bind(transport, &listen_addr)
            .await?;
        let rpc = Arc::new(rpc);
        tracing::info!(addr = %rpc.local_addr(), "name server listening");
        let (stop, stopped) = watch::channel(false);
        let scan_task = tokio::spawn(scan_loop(Arc::clone(&state), Arc::downgrade(&rpc), stopped));
        Ok(Self {
            state,
            rpc,
            stop,
            scan_task,
        })
    }

    /// The address actually bound (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.rpc.local_addr()
    }

    /// The current route of `topic`, as `GET_ROUTEINFO_BY_TOPIC` would answer.
    pub fn route(&self, topic: &str) -> Option<TopicRouteData> {
        self.state.routes().route(topic)
    }

    /// The current cluster info, as `GET_BROKER_CLUSTER_INFO` would answer.
    pub fn cluster_info(&self) -> ClusterInfo {
        self.state.routes().cluster_info()
    }

    /// Addresses of the brokers currently live.
    pub fn live_brokers(&self) -> Vec<String> {
        self.state.routes().live_brokers()
    }

    /// Serves until `shutdown` resolves, then shuts down gracefully.
    pub async fn run_until(&self, shutdown: impl Future<Output = ()>) {
        shutdown.await;
        self.shutdown().await;
    }

    /// Stops the scan, stops accepting, lets in-flight requests finish for
    /// up to `shutdown_grace_ms`, and closes every connection.
    pub async fn shutdown(&self) {
        self.stop.send_replace(true);
        let grace = Duration::from_millis(self.state.config.shutdown_grace_ms);
        self.rpc.shutdown(grace).await;
        tracing::info!(addr = %self.rpc.local_addr(), "name server stopped");
    }
}

impl<C: Clock> Drop for NameServer<C> {
    fn drop(&mut self) {
        self.stop.send_replace(true);
        self.scan_task.abort();
    }
}

/// Binds a name server, serves until `shutdown` resolves, and shuts down
/// gracefully. `on_bound` learns the bound address first (port 0 in tests).
pub async fn run<C: Clock, T: Transport>(
    config: NameServerConfig,
    clock: C,
    transport: &T,
    on_bound: impl FnOnce(SocketAddr),
    shutdown: impl Future<Output = ()>,
) -> sluice_net::Result<()> {
    let server = NameServer::start(config, clock, transport).await?;
    on_bound(server.local_addr());
    server.run_until(shutdown).await;
    Ok(())
}

/// Every `scan_interval_ms`, drops brokers silent for `broker_expiry_ms` and
/// closes their connections unless another live broker still uses one.
async fn scan_loop<C: Clock>(
    state: Arc<State<C>>,
    rpc: Weak<RpcServer>,
    mut stopped: watch::Receiver<bool>,
) {
    let expiry = Duration::from_millis(state.config.broker_expiry_ms);
    let period = Duration::from_millis(state.config.scan_interval_ms.max(1));
    let mut ticks = tokio::time::interval(period);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            biased;
            _ = stopped.wait_for(|stop| *stop) => return,
            _ = ticks.tick() => {}
        }
        let idle: BTreeSet<u64> = {
            let mut routes = state.routes();
            let removed = routes.remove_expired(expiry);
            removed
                .into_iter()
                .map(|broker| broker.connection)
                .filter(|connection| !routes.connection_in_use(*connection))
                .collect()
        };
        if idle.is_empty() {
            continue;
        }
        let Some(rpc) = rpc.upgrade() else { return };
        for connection in rpc.connections() {
            if idle.contains(&connection.id()) {
                connection.close();
            }
        }
    }
}
