//! sluice-net: the RocketMQ 4.x remoting protocol, the RPC layer and the
//! transport seam (tokio in production, turmoil in simulation).
//!
//! Nothing is implemented yet; see the wire issue.
