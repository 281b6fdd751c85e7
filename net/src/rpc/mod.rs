//! The RPC layer over the remoting protocol: requests correlated by
//! `opaque`, per-request timeouts, oneway sends, bounded in-flight work, and
//! requests in both directions on one connection.
//!
//! ```no_run
//! # async fn demo() -> sluice_net::Result<()> {
//! use std::time::Duration;
//! use sluice_net::remoting::{request_code, response_code};
//! use sluice_net::header::GetRouteInfoRequestHeader;
//! use sluice_net::{HandlerTable, RemotingCommand, RequestContext, RpcClient, RpcConfig, RpcServer, TokioTransport};
//!
//! let table = HandlerTable::new().with(
//!     request_code::GET_ROUTEINFO_BY_TOPIC,
//!     |ctx: RequestContext, req: RemotingCommand| async move {
//!         let header: GetRouteInfoRequestHeader = match req.header() {
//!             Ok(h) => h,
//!             Err(e) => return Some(RemotingCommand::response(response_code::SYSTEM_ERROR, e.to_string())),
//!         };
//!         // `ctx.connection` can call the peer back or key per-connection state.
//!         let _ = (ctx.connection.id(), header.topic);
//!         Some(RemotingCommand::response(response_code::TOPIC_NOT_EXIST, "no route"))
//!     },
//! );
//! let server = RpcServer::builder(RpcConfig::default(), table)
//!     .on_connection_closed(|conn| println!("closed {}", conn.peer_addr()))
//!     .bind(&TokioTransport, "127.0.0.1:9876")
//!     .await?;
//!
//! let client = RpcClient::new(TokioTransport, RpcConfig::default());
//! let request = RemotingCommand::request_with_header(
//!     request_code::GET_ROUTEINFO_BY_TOPIC,
//!     &GetRouteInfoRequestHeader { topic: "TopicTest".into(), accept_standard_json_only: None },
//! );
//! let response = client.invoke("127.0.0.1:9876", request, Duration::from_secs(3)).await?;
//! assert_eq!(response.code, response_code::TOPIC_NOT_EXIST);
//! server.shutdown(Duration::from_secs(1)).await;
//! # Ok(())
//! # }
//! ```

mod client;
mod connection;
mod handler;
mod server;

use std::time::Duration;

use crate::remoting::FrameLimits;

pub use client::RpcClient;
pub use connection::{ConnectionHandle, ConnectionId};
pub use handler::{Handler, HandlerFuture, HandlerTable, RequestContext};
pub use server::{LiveConnections, RpcServer, RpcServerBuilder};

/// Tuning shared by clients and servers.
#[derive(Debug, Clone)]
pub struct RpcConfig {
    /// Frame limits for both directions.
    pub limits: FrameLimits,
    /// Longest wait for a TCP connect.
    pub connect_timeout: Duration,
    /// Most requests one connection may await responses for; beyond it a
    /// call fails at once with `TooManyInFlight`.
    pub in_flight_max: usize,
    /// Most inbound requests one connection may have in its handlers; beyond
    /// it requests are answered `SYSTEM_BUSY`.
    pub handlers_in_flight_max: usize,
    /// Outbound frames queued per connection before senders wait.
    pub outbound_queue_frames: usize,
    /// Close a connection when a request on it times out. A stream that lost
    /// a segment never recovers (turmoil has no retransmit, and a real peer
    /// may have vanished), so the next call should dial afresh.
    pub close_on_timeout: bool,
    /// Close a connection on which nothing arrives for this long. RocketMQ
    /// servers use 120 s (clients heartbeat every 30 s); `None` never closes.
    pub idle_timeout: Option<Duration>,
    /// Close a connection whose peer began a frame and sent nothing more of
    /// it for this long (half a frame, then silence: a slow-loris or a
    /// half-open peer would otherwise hold its buffer and task forever).
    /// A whole frame of the largest size arrives in well under this on any
    /// working link.
    pub partial_frame_timeout: Option<Duration>,
    /// Credentials an [`RpcClient`] signs every request it sends with
    /// (RocketMQ ACL 1.0); `None` sends requests unsigned.
    pub credentials: Option<crate::Credentials>,
}

/// The default [`RpcConfig::partial_frame_timeout`].
pub const PARTIAL_FRAME_TIMEOUT: Duration = Duration::from_secs(30);

impl Default for RpcConfig {
    fn default() -> Self {
        Self {
            limits: FrameLimits::default(),
            connect_timeout: Duration::from_secs(3),
            in_flight_max: 16_384,
            handlers_in_flight_max: 16_384,
            outbound_queue_frames: 4_096,
            close_on_timeout: true,
            idle_timeout: None,
            partial_frame_timeout: Some(PARTIAL_FRAME_TIMEOUT),
            credentials: None,
        }
    }
}
