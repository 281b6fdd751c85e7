//! `RpcClient`: one pooled connection per address, dialled on first use and
//! re-dialled after it closes (a timeout closes it). Requests the peer sends
//! on these connections go to the client's handler.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use super::handler::{Handler, HandlerTable};
use super::{ConnectionHandle, RpcConfig};
use crate::transport::Transport;
use crate::{Error, RemotingCommand, Result};

#[derive(Default)]
struct Slot {
    handle: Option<ConnectionHandle>,
    /// Serializes dialling so concurrent callers share one new connection.
    dialling: Arc<tokio::sync::Mutex<()>>,
}

struct Inner<T> {
    transport: T,
    config: RpcConfig,
    handler: Arc<dyn Handler>,
    slots: Mutex<BTreeMap<String, Slot>>,
    shut_down: AtomicBool,
}

/// An RPC client over transport `T`. Cheap to clone; clones share connections.
pub struct RpcClient<T: Transport> {
    inner: Arc<Inner<T>>,
}

impl<T: Transport> Clone for RpcClient<T> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<T: Transport> RpcClient<T> {
    /// A client that answers every server-initiated request as not supported.
    pub fn new(transport: T, config: RpcConfig) -> Self {
        Self::with_handler(transport, config, HandlerTable::new())
    }

    /// A client whose connections serve server-initiated requests
    /// (`CHECK_TRANSACTION_STATE`, `NOTIFY_CONSUMER_IDS_CHANGED`, ...) with `handler`.
    pub fn with_handler(transport: T, config: RpcConfig, handler: impl Handler) -> Self {
        Self {
            inner: Arc::new(Inner {
                transport,
                config,
                handler: Arc::new(handler),
                slots: Mutex::new(BTreeMap::new()),
                shut_down: AtomicBool::new(false),
            }),
        }
    }

    /// Sends `request` to `addr` and waits for the response. `timeout` covers
    /// dialling too.
    pub async fn invoke(
        &self,
        addr: &str,
        mut request: RemotingCommand,
        timeout: Duration,
    ) -> Result<RemotingCommand> {
        self.sign(&mut request);
        let deadline = Instant::now() + timeout;
        let connection = self.connection_until(addr, deadline).await?;
        connection
            .invoke(request, deadline.saturating_duration_since(Instant::now()))
            .await
    }

    /// Sends `request` to `addr` as oneway; `timeout` covers dialling and
    /// queueing.
    pub async fn invoke_oneway(
        &self,
        addr: &str,
        mut request: RemotingCommand,
        timeout: Duration,
    ) -> Result<()> {
        self.sign(&mut request);
        let deadline = Instant::now() + timeout;
        let connection = self.connection_until(addr, deadline).await?;
        connection
            .invoke_oneway(request, deadline.saturating_duration_since(Instant::now()))
            .await
    }

    /// Signs `request` with the configured credentials, if any.
    fn sign(&self, request: &mut RemotingCommand) {
        if let Some(credentials) = &self.inner.config.credentials {
            credentials.sign(request);
        }
    }

    /// The open connection to `addr`, dialling if there is none.
    pub async fn connection(&self, addr: &str) -> Result<ConnectionHandle> {
        self.connection_until(addr, Instant::now() + self.inner.config.connect_timeout)
            .await
    }

    fn cached(&self, addr: &str) -> (Option<ConnectionHandle>, Arc<tokio::sync::Mutex<()>>) {
        let mut slots = self
            .inner
            .slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let slot = slots.entry(addr.to_owned()).or_default();
        let open = slot.handle.clone().filter(|h| !h.is_closed());
        (open, Arc::clone(&slot.dialling))
    }

    async fn connection_until(&self, addr: &str, deadline: Instant) -> Result<ConnectionHandle> {
        if self.inner.shut_down.load(Ordering::Acquire) {
            return Err(Error::Shutdown);
        }
        let (open, dialling) = self.cached(addr);
        if let Some(handle) = open {
            return Ok(handle);
        }
        let timeout_error = || Error::Connect {
            addr: addr.to_owned(),
            source: std::io::Error::new(std::io::ErrorKind::TimedOut, "connect timed out"),
        };
        let _dialling = tokio::time::timeout_at(deadline, dialling.lock())
            .await
            .map_err(|_| timeout_error())?;
        // Another caller may have dialled while we waited.
        if let (Some(handle), _) = self.cached(addr) {
            return Ok(handle);
        }
        let connect_deadline = deadline.min(Instant::now() + self.inner.config.connect_timeout);
        let socket = tokio::time::timeout_at(connect_deadline, self.inner.transport.connect(addr))
            .await
            .map_err(|_| timeout_error())?
            .map_err(|source| Error::Connect {
                addr: addr.to_owned(),
                source,
            })?;
        let handle = ConnectionHandle::spawn(
            socket,
            Arc::clone(&self.inner.handler),
            &self.inner.config,
            None,
        );
        let mut slots = self
            .inner
            .slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // A shutdown that raced with this dial must not leave a live connection.
        if self.inner.shut_down.load(Ordering::Acquire) {
            drop(slots);
            handle.close();
            return Err(Error::Shutdown);
        }
        slots.entry(addr.to_owned()).or_default().handle = Some(handle.clone());
        Ok(handle)
    }

    /// Closes the connection to `addr`, if any; the next call re-dials.
    pub fn close_connection(&self, addr: &str) {
        let handle = self
            .inner
            .slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_mut(addr)
            .and_then(|slot| slot.handle.take());
        if let Some(handle) = handle {
            handle.close();
        }
    }

    /// Closes every connection; pending calls fail with `ConnectionClosed`
    /// and later calls with `Shutdown`.
    pub fn shutdown(&self) {
        self.inner.shut_down.store(true, Ordering::Release);
        let handles: Vec<ConnectionHandle> = self
            .inner
            .slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values_mut()
            .filter_map(|slot| slot.handle.take())
            .collect();
        for handle in handles {
            handle.close();
        }
    }
}

impl<T> Drop for Inner<T> {
    fn drop(&mut self) {
        let slots = self.slots.get_mut().unwrap_or_else(PoisonError::into_inner);
        for slot in slots.values_mut() {
            if let Some(handle) = slot.handle.take() {
                handle.close();
            }
        }
    }
}
