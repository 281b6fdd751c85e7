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
mod local;
mod server;

use std::time::Duration;

use crate::remoting::FrameLimits;

pub use client::RpcClient;
pub use connection::{ConnectionHandle, ConnectionId};
pub use handler::{Handler, HandlerFuture, HandlerTable, RequestContext};
pub use local::{local_pair, LocalEnd};
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
    /// Close a connection on which no frame arrives for this long: a peer
    /// that vanished without a FIN (a half-open connection) or never speaks
    /// holds no task or buffer forever. RocketMQ closes a channel idle for
    /// 120 s on both sides (`serverChannelMaxIdleTimeSeconds`,
    /// `clientChannelMaxIdleTimeSeconds`) and its clients heartbeat every
    /// broker every 30 s, so the same default closes no working connection.
    /// `None` never closes.
    pub idle_timeout: Option<Duration>,
    /// Close a connection whose peer began a frame and has not completed it
    /// this long after its first byte (half a frame, then silence; or a
    /// frame dribbled a byte at a time). The deadline is for the whole
    /// frame, however the bytes are paced, so a slow-loris peer cannot
    /// stretch it. At the 30 s default a frame of the largest default size
    /// (16 MiB) needs 4.5 Mbit/s; raise it for slower links. `None` waits
    /// forever.
    pub frame_deadline: Option<Duration>,
    /// Credentials an [`RpcClient`] signs every request it sends with
    /// (RocketMQ ACL 1.0); `None` sends requests unsigned.
    pub credentials: Option<crate::Credentials>,
}

/// The default [`RpcConfig::frame_deadline`].
pub const FRAME_DEADLINE: Duration = Duration::from_secs(30);

/// The default [`RpcConfig::idle_timeout`] (RocketMQ's channel idle time).
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(120);

impl Default for RpcConfig {
    fn default() -> Self {
        Self {
            limits: FrameLimits::default(),
            connect_timeout: Duration::from_secs(3),
            in_flight_max: 16_384,
            handlers_in_flight_max: 16_384,
            outbound_queue_frames: 4_096,
            close_on_timeout: true,
            idle_timeout: Some(IDLE_TIMEOUT),
            frame_deadline: Some(FRAME_DEADLINE),
            credentials: None,
        }
    }
}
