//! The name server: brokers register here, clients ask here for topic routes
//! and cluster membership. Stateless peers: all state is rebuilt from broker
//! registrations, and a broker silent for 120 s or whose connection closed
//! is dropped.
//!
//! - [`route_table`]: brokers, clusters, topic queues, liveness ([`RouteTable`]).
//! - [`kv_config`]: the in-memory KV config ([`KvConfig`]).
//! - `handlers`: one file per request family.
//! - [`NameServer`] / [`run`]: serving and the expiry scan; [`NameServerConfig`].

mod config;
mod handlers;
pub mod kv_config;
pub mod route_table;
mod server;
mod state;

pub use config::{
    NameServerConfig, DEFAULT_BROKER_EXPIRY_MS, DEFAULT_IDLE_TIMEOUT_MS, DEFAULT_LISTEN_ADDR,
    DEFAULT_SCAN_INTERVAL_MS, DEFAULT_SHUTDOWN_GRACE_MS,
};
pub use kv_config::{KvConfig, ORDER_TOPIC_CONFIG_NAMESPACE};
pub use route_table::{RegisterOutcome, Registration, RemovedBroker, RouteTable};
pub use server::{run, NameServer};
