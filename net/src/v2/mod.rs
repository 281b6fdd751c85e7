//! The messages of `apache.rocketmq.v2` (RocketMQ 5's gRPC protocol,
//! `definition.proto` and `service.proto`) as prost structs: what the
//! broker's 5.x endpoint (`sluice_node::grpc`, whose server trait
//! `node/build.rs` generates) and `sluice bench --protocol grpc` speak.
//!
//! `definition.rs` and `service.rs` were emitted by a script from the
//! descriptors the official 5.x Python client ships
//! (`rocketmq.grpc_protocol`, client 5.1.2): one struct per message, enum
//! variants without their enum's prefix, `map<,>` as `BTreeMap`,
//! `proto3 optional` as `Option`. Regenerate rather than hand-edit when
//! the protocol grows.

#![allow(
    missing_docs,
    clippy::all,
    clippy::pedantic,
    clippy::derive_partial_eq_without_eq
)]

mod definition;
mod service;

pub use definition::*;
pub use service::*;

/// `google.protobuf.Timestamp`.
#[derive(Clone, Copy, PartialEq, Eq, ::prost::Message)]
pub struct Timestamp {
    #[prost(int64, tag = "1")]
    pub seconds: i64,
    #[prost(int32, tag = "2")]
    pub nanos: i32,
}

/// `google.protobuf.Duration`.
#[derive(Clone, Copy, PartialEq, Eq, ::prost::Message)]
pub struct Duration {
    #[prost(int64, tag = "1")]
    pub seconds: i64,
    #[prost(int32, tag = "2")]
    pub nanos: i32,
}

impl Timestamp {
    /// The instant `ms` milliseconds after the Unix epoch.
    pub fn from_millis(ms: i64) -> Self {
        Self {
            seconds: ms.div_euclid(1000),
            nanos: i32::try_from(ms.rem_euclid(1000) * 1_000_000).unwrap_or(0),
        }
    }

    /// Milliseconds since the Unix epoch.
    pub fn as_millis(&self) -> i64 {
        self.seconds
            .saturating_mul(1000)
            .saturating_add(i64::from(self.nanos / 1_000_000))
    }
}

impl Duration {
    /// A duration of `ms` milliseconds.
    pub fn from_millis(ms: i64) -> Self {
        Timestamp::from_millis(ms).into()
    }

    /// The duration in milliseconds (negative stays negative).
    pub fn as_millis(&self) -> i64 {
        Timestamp::from(*self).as_millis()
    }
}

impl From<Timestamp> for Duration {
    fn from(t: Timestamp) -> Self {
        Self {
            seconds: t.seconds,
            nanos: t.nanos,
        }
    }
}

impl From<Duration> for Timestamp {
    fn from(d: Duration) -> Self {
        Self {
            seconds: d.seconds,
            nanos: d.nanos,
        }
    }
}
