//! sluice-node: name server, broker and controller, generic over the disk,
//! clock and transport seams, and the `sluice-node` binary.
//!
//! Module map:
//! - [`namesrv`]: the name server (broker registration, topic routes,
//!   cluster info, KV config, broker expiry).
//! - [`broker`]: the broker: request handlers over the store, topics,
//!   consumer offsets, client registry, long polling, registration.
//! - [`controller`]: the raft-replicated controller that elects broker
//!   masters from the in-sync set (RocketMQ 5 controller mode), and its client.
//! - [`dispatch`]: one request shape for all three servers: a handler per
//!   code in one [`dispatch::Routes`] table, refusals answered in one place.
//! - [`acl`]: access control (RocketMQ ACL 1.0 signatures, accounts and
//!   permissions) guarding the broker's and the name server's tables.
//! - [`config_file`]: the broker's TOML configuration file.
//! - [`http`]: the HTTP port: Prometheus `/metrics` and the dashboard.
//! - [`peer_auth`]: the shared-secret challenge-response that guards the
//!   replication and controller ports.
//! - [`error`]: the crate's `Error`.
//! - `testing` (feature `testing` only): `SimClock`, the simulated clock.

pub mod acl;
pub mod broker;
pub mod config_file;
pub mod controller;
pub mod dashboard;
pub mod dispatch;
pub mod error;
pub mod grpc;
pub mod http;
pub mod namesrv;
pub mod peer_auth;
#[cfg(feature = "testing")]
pub mod testing;

pub use error::{Error, Result};
