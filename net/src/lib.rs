//! sluice-net: the RocketMQ 4.x remoting protocol, the RPC layer and the
//! transport seam (tokio in production, turmoil in simulation).
//!
//! Module map:
//! - [`remoting`]: frames, [`RemotingCommand`], JSON and ROCKETMQ binary
//!   headers, request and response code tables, frame limits.
//! - [`header`]: typed request/response headers and their `extFields` mapping.
//! - [`body`]: JSON bodies (routes and cluster info with fastjson integer
//!   keys, heartbeat, lock batch, broker registration, consumer list).
//! - [`transport`]: the [`Transport`] seam with tokio, tokio + TLS
//!   ([`TlsTransport`]) and (feature `testing`) turmoil implementations,
//!   and the framed reader/writer.
//! - [`auth`]: RocketMQ ACL 1.0 request signatures ([`Credentials`]).
//! - [`rpc`]: [`RpcClient`], [`RpcServer`], the [`Handler`] trait and
//!   [`ConnectionHandle`] for server-initiated requests.

pub mod auth;
pub mod body;
mod error;
pub mod header;
pub mod remoting;
pub mod rpc;
pub mod transport;
pub mod v2;

pub use auth::Credentials;
pub use error::{Error, FrameError, Result};
pub use remoting::{ExtFields, RemotingCommand};
pub use rpc::{
    ConnectionHandle, Handler, HandlerTable, LiveConnections, RequestContext, RpcClient, RpcConfig,
    RpcServer,
};
#[cfg(feature = "testing")]
pub use transport::TurmoilTransport;
pub use transport::{TlsMode, TlsSettings, TlsTransport, TokioTransport, Transport};
