//! sluice-client: the producer, the consumers, the admin API and the
//! `sluice` CLI, generic over the transport seam (tokio in production,
//! turmoil in simulation) and the clock seam. For TLS, build a
//! [`TlsTransport`] from [`TlsSettings`] (a CA to trust, optionally a client
//! certificate) and pass it where [`TokioTransport`] would go.
//!
//! Module map:
//! - [`instance`]: [`ClientInstance`], shared by everything below: the
//!   connection pool, routes, heartbeats, broker-to-client requests.
//! - [`producer`]: [`Producer`] (sync, async, oneway, batch, ordered) and
//!   [`TransactionProducer`] (half messages with check-back).
//! - [`consumer`]: [`PullConsumer`], [`LitePullConsumer`], [`PushConsumer`],
//!   rebalance strategies, offset stores, subscriptions.
//! - [`admin`]: topics, cluster, group progress, message lookup, offset reset.
//! - [`message`]: [`Message`] and [`MessageExt`].
//! - `cli` (binary only): the `sluice` command-line tool and `sluice bench`.

pub mod admin;
pub mod config;
pub mod consumer;
mod error;
pub mod instance;
pub mod message;
pub mod producer;

pub use admin::Admin;
pub use config::ClientConfig;
pub use consumer::{
    ConsumeFrom, ConsumeResult, LitePullConsumer, MessageModel, PullConsumer, PushConsumer,
    PushConsumerConfig, Subscription,
};
pub use error::{Error, Result};
pub use instance::ClientInstance;
pub use message::{Message, MessageExt, MessageQueue};
pub use producer::transaction::{
    HalfMessage, LocalTransactionState, TransactionListener, TransactionProducer,
};
pub use producer::{Producer, ProducerConfig, SendResult, SendStatus};
pub use sluice_core::{CommitLogOffset, NegativeOffset, QueueOffset};
#[cfg(feature = "testing")]
pub use sluice_net::TurmoilTransport;
pub use sluice_net::{TlsMode, TlsSettings, TlsTransport, TokioTransport, Transport};
