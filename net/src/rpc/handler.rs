//! Request handlers: the [`Handler`] trait, a code-indexed [`HandlerTable`]
//! that answers `REQUEST_CODE_NOT_SUPPORTED` for unknown codes, and the
//! per-request [`RequestContext`].

use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;

use super::ConnectionHandle;
use crate::remoting::response_code;
use crate::RemotingCommand;

/// The future a handler returns: the response, or `None` for no response.
pub type HandlerFuture = Pin<Box<dyn Future<Output = Option<RemotingCommand>> + Send>>;

/// What a handler knows about the request beyond the command itself.
#[derive(Clone)]
pub struct RequestContext {
    /// The connection the request arrived on; use it to call the peer back
    /// (`CHECK_TRANSACTION_STATE`, `NOTIFY_CONSUMER_IDS_CHANGED`) or to key
    /// per-connection state.
    pub connection: ConnectionHandle,
    /// More requests of this connection were already read (or begun) when
    /// this one was handed over, or are still being served: a handler that
    /// waits for something many requests share (a group commit's sync) does
    /// better to let them join than to finish this one alone.
    pub queued_behind: bool,
}

impl RequestContext {
    /// The peer's address.
    pub fn peer_addr(&self) -> SocketAddr {
        self.connection.peer_addr()
    }
}

/// Serves requests. The returned response's `opaque`, response flag and
/// serialize type are set by the RPC layer; responses to oneway requests are
/// dropped.
pub trait Handler: Send + Sync + 'static {
    /// Handles one request.
    fn handle(&self, ctx: RequestContext, request: RemotingCommand) -> HandlerFuture;

    /// Runs before a connection writes answers this handler produced:
    /// whatever they acknowledge that the handler left to do (a store's
    /// deferred write) is done here, once for all the answers one read
    /// brought. `false`: the answers must not leave (what they acknowledge
    /// was lost), and the connection closes without them.
    fn before_answers(&self) -> bool {
        true
    }
}

impl<F, Fut> Handler for F
where
    F: Fn(RequestContext, RemotingCommand) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Option<RemotingCommand>> + Send + 'static,
{
    fn handle(&self, ctx: RequestContext, request: RemotingCommand) -> HandlerFuture {
        Box::pin(self(ctx, request))
    }
}

/// Dispatches by request code; unknown codes get `REQUEST_CODE_NOT_SUPPORTED`.
#[derive(Clone, Default)]
pub struct HandlerTable {
    handlers: BTreeMap<i32, Arc<dyn Handler>>,
}

impl HandlerTable {
    /// An empty table: every request is answered as not supported.
    pub fn new() -> Self {
        Self::default()
    }

    /// Routes `code` to `handler`, replacing any previous one.
    #[must_use]
    pub fn with(mut self, code: i32, handler: impl Handler) -> Self {
        self.register(code, handler);
        self
    }

    /// Routes `code` to `handler`, replacing any previous one.
    pub fn register(&mut self, code: i32, handler: impl Handler) {
        self.handlers.insert(code, Arc::new(handler));
    }

    /// Routes several codes to one shared handler.
    pub fn register_shared(&mut self, codes: &[i32], handler: &Arc<dyn Handler>) {
        for code in codes {
            self.handlers.insert(*code, Arc::clone(handler));
        }
    }
}

/// Java's remark for an unknown code, kept verbatim for client log parity.
pub(crate) fn not_supported(code: i32) -> RemotingCommand {
    RemotingCommand::response(
        response_code::REQUEST_CODE_NOT_SUPPORTED,
        format!(" request type {code} not supported"),
    )
}

impl Handler for HandlerTable {
    fn handle(&self, ctx: RequestContext, request: RemotingCommand) -> HandlerFuture {
        if let Some(handler) = self.handlers.get(&request.code) {
            return handler.handle(ctx, request);
        }
        let response = not_supported(request.code);
        Box::pin(async move { Some(response) })
    }
}
