//! The controller: automatic master failover for broker groups, RocketMQ
//! 5's controller mode. A few controllers replicate, with raft-rs, per
//! broker group the members, the master, the master epoch and the in-sync
//! set; the raft leader tracks broker heartbeats and elects a new master
//! only from the in-sync set when the master goes silent.
//!
//! - [`api`]: request/response codes, requests, [`GroupView`] and metadata bodies.
//! - [`state`]: the replicated state machine and the election choice.
//! - [`Controller`] (`server`), `handlers`, `consensus` (the raft driver),
//!   `log_store` (raft storage on the disk seam), `liveness`.
//! - [`ControllerClient`] (`client`): what brokers use.
//!
//! With a cluster secret ([`ControllerConfig::secret`]) the controller
//! port serves only connections that proved it (`crate::peer_auth`): raft
//! messages between controllers and brokers' requests alike; a peer
//! controller and a broker prove it on each connection they open.

pub mod api;
mod client;
mod config;
mod consensus;
mod error;
mod handlers;
mod liveness;
mod log_store;
mod logger;
mod server;
pub mod state;

pub use api::{AlterInSync, BrokerHeartbeat, ClusterMetadata, GroupView, MemberView, PeerView};
pub use client::ControllerClient;
pub use config::{
    parse_peers, ControllerConfig, DEFAULT_APPLY_TIMEOUT_MS, DEFAULT_BROKER_TIMEOUT_MS,
    DEFAULT_ELECTION_TICKS, DEFAULT_HEARTBEAT_TICKS, DEFAULT_LISTEN_ADDR, DEFAULT_TICK_MS,
};
pub use error::ControllerError;
pub use server::{Controller, REALM as CONTROLLER_REALM};
