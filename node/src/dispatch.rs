//! One shape for every request the broker, the name server and the
//! controller serve.
//!
//! A handler is `async fn(&S, &RequestContext, &RemotingCommand) -> Reply`,
//! where `S` is the server's state and [`Reply`] is
//! `Result<RemotingCommand, Refusal>`. Each server registers its handlers
//! once per request code in one [`Routes`] table (with [`route!`]); the
//! table answers unknown codes `REQUEST_CODE_NOT_SUPPORTED` and turns a
//! [`Refusal`] into its response in one place, so handlers use `?` on a
//! header that cannot be read or a store that refused.
//!
//! A table may carry a [`Guard`] (access control: the broker's and the
//! name server's ACL) that sees every request before any handler, unknown
//! codes included, and may refuse it; a refused request reaches no handler.
//!
//! A table may carry an [`Observer`] (the broker's does): it reads the
//! server's clock before and after every answer and records the request
//! code, response code and latency, so no handler times itself.
//!
//! Adding a request code: its header (if any) in `sluice-net`, one handler
//! function in the family's file, one `route!` line in the server's table,
//! one test (docs/CONTRIBUTING.md walks through it).

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use sluice_net::remoting::response_code;
use sluice_net::rpc::HandlerFuture;
use sluice_net::{Handler, RemotingCommand, RequestContext};

/// A handler's answer: the response, or a refusal that becomes one.
pub type Reply = Result<RemotingCommand, Refusal>;

/// The future a handler returns, borrowing the state and the request.
pub type ReplyFuture<'a> = Pin<Box<dyn Future<Output = Reply> + Send + 'a>>;

/// One request code's handler over the server state `S`.
pub type Route<S> = for<'a> fn(&'a S, &'a RequestContext, &'a RemotingCommand) -> ReplyFuture<'a>;

/// A check a table runs on every request before routing it: `Err` answers
/// the refusal and no handler runs.
pub type Guard<S> = fn(&S, &RequestContext, &RemotingCommand) -> Result<(), Refusal>;

/// Run before a connection writes answers (see
/// [`Handler::before_answers`]): false withholds them.
pub type Barrier<S> = fn(&S) -> bool;

/// Hooks a table calls around every request it answers, over the server
/// state: `now` reads the server's monotonic clock seam, `record` is told
/// each answer's request code, response code and latency.
pub struct Observer<S> {
    /// The monotonic time now, from the server's clock.
    pub now: fn(&S) -> Duration,
    /// Records one answered request: `(state, request code, response
    /// code, elapsed)`.
    pub record: fn(&S, i32, i32, Duration),
}

/// A request answered with an error: its response code and remark (and,
/// rarely, a header, as when a controller names its leader).
#[derive(Debug)]
pub struct Refusal(Box<RemotingCommand>);

impl Refusal {
    /// A refusal with `code` and `remark`.
    pub fn new(code: i32, remark: impl Into<String>) -> Self {
        Self(Box::new(RemotingCommand::response(code, remark)))
    }

    /// A `SYSTEM_ERROR` refusal, as Java answers a request it cannot serve.
    pub fn system_error(remark: impl Into<String>) -> Self {
        Self::new(response_code::SYSTEM_ERROR, remark)
    }

    /// A refusal answered with a response built by the handler.
    pub fn with_response(response: RemotingCommand) -> Self {
        Self(Box::new(response))
    }

    /// The refusal's response code.
    pub fn code(&self) -> i32 {
        self.0.code
    }

    /// The response sent for this refusal.
    pub fn into_response(self) -> RemotingCommand {
        *self.0
    }
}

/// A header or body that cannot be read, or a body that cannot be
/// encoded: `SYSTEM_ERROR`, naming what was wrong.
impl From<sluice_net::Error> for Refusal {
    fn from(e: sluice_net::Error) -> Self {
        Self::system_error(format!("[sluice] bad request: {e}"))
    }
}

/// A wire offset no log position can be (a negative one): `SYSTEM_ERROR`
/// naming the field.
impl From<sluice_core::NegativeOffset> for Refusal {
    fn from(e: sluice_core::NegativeOffset) -> Self {
        Self::system_error(format!("[sluice] bad request: {e}"))
    }
}

/// A store that refused a put or a read: the code RocketMQ answers for it
/// (see `broker::response::store_error_response`).
impl From<sluice_core::Error> for Refusal {
    fn from(e: sluice_core::Error) -> Self {
        Self::with_response(crate::broker::response::store_error_response(&e))
    }
}

/// Registers a handler in a [`Routes`] table: `route!(send::handle)` for an
/// `async fn(&S, &RequestContext, &RemotingCommand) -> Reply`.
macro_rules! route {
    ($handler:path) => {
        |state, ctx, request| ::std::boxed::Box::pin($handler(state, ctx, request))
    };
}
pub(crate) use route;

/// A server's request table: one handler per code over the shared state.
/// Cloning it is cheap (one `Arc`).
pub struct Routes<S>(Arc<Table<S>>);

struct Table<S> {
    state: Arc<S>,
    routes: BTreeMap<i32, Route<S>>,
    server: &'static str,
    observer: Option<Observer<S>>,
    guard: Option<Guard<S>>,
    barrier: Option<Barrier<S>>,
}

impl<S> Clone for Routes<S> {
    fn clone(&self) -> Self {
        Self(Arc::clone(&self.0))
    }
}

impl<S: Send + Sync + 'static> Routes<S> {
    /// A table serving `state` with each listed code routed to its
    /// handler; `server` names it in logs. A code listed twice is a
    /// programming error, caught by the servers' table tests.
    pub fn new(server: &'static str, state: Arc<S>, routes: &[(i32, Route<S>)]) -> Self {
        Self::build(server, state, routes, None)
    }

    /// As [`Routes::new`], with every answer reported to `observer`.
    pub fn observed(
        server: &'static str,
        state: Arc<S>,
        routes: &[(i32, Route<S>)],
        observer: Observer<S>,
    ) -> Self {
        Self::build(server, state, routes, Some(observer))
    }

    fn build(
        server: &'static str,
        state: Arc<S>,
        routes: &[(i32, Route<S>)],
        observer: Option<Observer<S>>,
    ) -> Self {
        let mut table = BTreeMap::new();
        for (code, route) in routes {
            let previous = table.insert(*code, *route);
            debug_assert!(previous.is_none(), "request code {code} routed twice");
        }
        Self(Arc::new(Table {
            state,
            routes: table,
            server,
            observer,
            guard: None,
            barrier: None,
        }))
    }

    /// This table with `guard` run before every request.
    #[must_use]
    pub fn guarded(mut self, guard: Guard<S>) -> Self {
        let table =
            Arc::get_mut(&mut self.0).expect("invariant: a table is guarded before it is shared");
        table.guard = Some(guard);
        self
    }

    /// This table with `barrier` run before a connection writes answers.
    #[must_use]
    pub fn with_barrier(mut self, barrier: Barrier<S>) -> Self {
        let table = Arc::get_mut(&mut self.0)
            .expect("invariant: a table gets its barrier before it is shared");
        table.barrier = Some(barrier);
        self
    }

    /// Whether answers may leave now (see [`Handler::before_answers`]).
    pub fn answers_may_leave(&self) -> bool {
        self.0.barrier.is_none_or(|b| b(&self.0.state))
    }

    /// The codes this table serves, ascending.
    pub fn codes(&self) -> impl Iterator<Item = i32> + '_ {
        self.0.routes.keys().copied()
    }

    /// Answers one request: its handler's response, its refusal's
    /// response, or `REQUEST_CODE_NOT_SUPPORTED` (Java's remark verbatim).
    pub async fn answer(&self, ctx: &RequestContext, request: &RemotingCommand) -> RemotingCommand {
        let table = &self.0;
        let start = table.observer.as_ref().map(|o| (o.now)(&table.state));
        let allowed = table
            .guard
            .map_or(Ok(()), |guard| guard(&table.state, ctx, request));
        let reply = match (allowed, table.routes.get(&request.code)) {
            (Err(refusal), _) => Err(refusal),
            (Ok(()), Some(route)) => route(&table.state, ctx, request).await,
            (Ok(()), None) => Err(Refusal::new(
                response_code::REQUEST_CODE_NOT_SUPPORTED,
                format!(" request type {} not supported", request.code),
            )),
        };
        let response = reply.unwrap_or_else(Refusal::into_response);
        if let (Some(o), Some(start)) = (&table.observer, start) {
            let elapsed = (o.now)(&table.state).saturating_sub(start);
            (o.record)(&table.state, request.code, response.code, elapsed);
        }
        if response.code != response_code::SUCCESS {
            tracing::debug!(
                server = table.server,
                request = request.code,
                code = response.code,
                remark = response.remark.as_deref().unwrap_or(""),
                "request not successful"
            );
        }
        response
    }
}

impl<S: Send + Sync + 'static> Handler for Routes<S> {
    fn handle(&self, ctx: RequestContext, request: RemotingCommand) -> HandlerFuture {
        let routes = self.clone();
        Box::pin(async move { Some(routes.answer(&ctx, &request).await) })
    }

    fn before_answers(&self) -> bool {
        self.answers_may_leave()
    }
}
