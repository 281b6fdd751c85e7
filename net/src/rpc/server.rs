//! `RpcServer`: an accept loop that gives every connection the server's
//! handler, tracks live connections, reports closes through a hook, and
//! shuts down gracefully (stop accepting, drain in-flight requests, close).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::connection::CloseHook;
use super::handler::Handler;
use super::{ConnectionHandle, ConnectionId, RpcConfig};
use crate::transport::{Listener, Transport};
use crate::Result;

type Registry = Arc<Mutex<BTreeMap<ConnectionId, ConnectionHandle>>>;

/// Configures and binds an [`RpcServer`].
pub struct RpcServerBuilder {
    config: RpcConfig,
    handler: Arc<dyn Handler>,
    on_closed: Option<CloseHook>,
}

impl RpcServerBuilder {
    /// Calls `hook` once whenever an accepted connection closes (the name
    /// server drops a broker whose connection closed).
    #[must_use]
    pub fn on_connection_closed(
        mut self,
        hook: impl Fn(&ConnectionHandle) + Send + Sync + 'static,
    ) -> Self {
        self.on_closed = Some(Arc::new(hook));
        self
    }

    /// Binds `addr` on `transport` and starts accepting.
    pub async fn bind<T: Transport>(self, transport: &T, addr: &str) -> Result<RpcServer> {
        let mut listener = transport.bind(addr).await?;
        let local_addr = listener.local_addr()?;
        let registry: Registry = Arc::default();
        let (stop, mut stopped) = watch::channel(false);
        let on_close: CloseHook = {
            let registry = Arc::clone(&registry);
            let user = self.on_closed;
            Arc::new(move |handle: &ConnectionHandle| {
                registry
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(&handle.id());
                if let Some(user) = &user {
                    user(handle);
                }
            })
        };
        let accept_registry = Arc::clone(&registry);
        let accept_task = tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    biased;
                    _ = stopped.wait_for(|s| *s) => break,
                    accepted = listener.accept() => accepted,
                };
                match accepted {
                    Ok(socket) => {
                        let handle = ConnectionHandle::spawn(
                            socket,
                            Arc::clone(&self.handler),
                            &self.config,
                            Some(Arc::clone(&on_close)),
                        );
                        let mut live = accept_registry
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner);
                        // The connection may already have closed (and run the hook).
                        if !handle.is_closed() {
                            live.insert(handle.id(), handle);
                        }
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "accept failed");
                        // Avoid a hot loop while out of file descriptors.
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                }
            }
        });
        Ok(RpcServer {
            local_addr,
            registry,
            stop,
            accept_task: Mutex::new(Some(accept_task)),
        })
    }
}

/// How many connections a server has open now (see
/// [`RpcServer::live_connections`]); cheap to clone.
#[derive(Clone)]
pub struct LiveConnections(Registry);

impl LiveConnections {
    /// Connections open now.
    pub fn count(&self) -> usize {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).len()
    }
}

/// A running RPC server.
pub struct RpcServer {
    local_addr: SocketAddr,
    registry: Registry,
    stop: watch::Sender<bool>,
    accept_task: Mutex<Option<JoinHandle<()>>>,
}

impl RpcServer {
    /// Starts configuring a server that serves every request with `handler`
    /// (usually a [`super::HandlerTable`]).
    pub fn builder(config: RpcConfig, handler: impl Handler) -> RpcServerBuilder {
        RpcServerBuilder {
            config,
            handler: Arc::new(handler),
            on_closed: None,
        }
    }

    /// Binds with no hooks.
    pub async fn bind<T: Transport>(
        transport: &T,
        addr: &str,
        config: RpcConfig,
        handler: impl Handler,
    ) -> Result<Self> {
        Self::builder(config, handler).bind(transport, addr).await
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// A count of this server's live connections that can be kept (and
    /// read) apart from the server.
    pub fn live_connections(&self) -> LiveConnections {
        LiveConnections(Arc::clone(&self.registry))
    }

    /// Live connections, in accept order.
    pub fn connections(&self) -> Vec<ConnectionHandle> {
        self.registry
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect()
    }

    /// Stops accepting, lets in-flight requests finish and their responses
    /// flush for up to `grace`, then closes every connection (requests still
    /// running then fail on the client with `ConnectionClosed`).
    pub async fn shutdown(&self, grace: Duration) {
        let deadline = Instant::now() + grace;
        self.stop.send_replace(true);
        let task = self
            .accept_task
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(task) = task {
            // The accept loop ends promptly once stopped; it drops the listener.
            let _ = task.await;
        }
        let connections = self.connections();
        for connection in &connections {
            connection.drain();
        }
        let idle = async {
            for connection in &connections {
                connection.handlers_idle().await;
            }
        };
        let _ = tokio::time::timeout_at(deadline, idle).await;
        for connection in &connections {
            connection
                .close_gracefully(deadline.saturating_duration_since(Instant::now()))
                .await;
        }
    }
}

impl Drop for RpcServer {
    fn drop(&mut self) {
        self.stop.send_replace(true);
        for connection in self.connections() {
            connection.close();
        }
    }
}
