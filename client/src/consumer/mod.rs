//! Consumers: pull, lite pull and push (concurrent or orderly; clustering
//! or broadcasting), with rebalance, offset stores and subscriptions.

pub mod api;
mod offset_store;
mod pull;
mod push;
mod rebalance;
mod subscription;

pub use api::{PullOptions, PullResult, PullStatus};
pub use offset_store::{DiskOffsetFile, OffsetFile};
pub use pull::{LitePullConsumer, PullConsumer};
pub use push::{
    handler, ConsumeFrom, ConsumeResult, Handler, HandlerFuture, MessageModel, PushConsumer,
    PushConsumerConfig,
};
pub use rebalance::Allocation;
pub use subscription::{ExpressionType, Subscription};
