//! The pull consumer (explicit queue and offset) and the lite pull consumer
//! (subscribe, then poll; offsets commit automatically at the next poll).

use std::sync::Mutex;
use std::time::Duration;

use sluice_core::Clock;
use sluice_net::Transport;
use tokio::sync::{mpsc, oneshot};

use super::api::{self, PullOptions, PullResult};
use super::push::{handler, ConsumeResult, PushConsumer, PushConsumerConfig};
use super::subscription::Subscription;
use crate::error::{Error, Result};
use crate::instance::{lock, ClientInstance};
use crate::message::{MessageExt, MessageQueue};

/// Pulls from queues the caller chooses, at offsets the caller keeps.
pub struct PullConsumer<T: Transport, C: Clock> {
    client: ClientInstance<T, C>,
    group: String,
}

impl<T: Transport, C: Clock> PullConsumer<T, C> {
    /// A pull consumer of `group` on `client`.
    pub fn new(client: ClientInstance<T, C>, group: impl Into<String>) -> Self {
        Self {
            client,
            group: group.into(),
        }
    }

    /// The readable queues of `topic`.
    pub async fn queues(&self, topic: &str) -> Result<Vec<MessageQueue>> {
        self.client.subscribe_queues(topic).await
    }

    /// Reads up to `max` messages of `mq` from `offset`; returns at once.
    pub async fn pull(
        &self,
        mq: &MessageQueue,
        sub: &Subscription,
        offset: i64,
        max: i32,
    ) -> Result<PullResult> {
        let options = PullOptions {
            max,
            ..PullOptions::default()
        };
        api::pull(&self.client, &self.group, mq, sub, offset, &options).await
    }

    /// Like [`PullConsumer::pull`], but the broker holds the request up to
    /// `hold` until a message arrives (long polling).
    pub async fn pull_blocking(
        &self,
        mq: &MessageQueue,
        sub: &Subscription,
        offset: i64,
        max: i32,
        hold: Duration,
    ) -> Result<PullResult> {
        let options = PullOptions {
            max,
            hold: Some(hold),
            ..PullOptions::default()
        };
        api::pull(&self.client, &self.group, mq, sub, offset, &options).await
    }

    /// The group's committed offset of `mq`.
    pub async fn committed_offset(&self, mq: &MessageQueue) -> Result<Option<i64>> {
        api::committed_offset(&self.client, &self.group, mq).await
    }

    /// Commits the group's offset of `mq`.
    pub async fn commit_offset(&self, mq: &MessageQueue, offset: i64) -> Result<()> {
        api::commit_offset(&self.client, &self.group, mq, offset).await
    }

    /// The next offset to be written in `mq`.
    pub async fn max_offset(&self, mq: &MessageQueue) -> Result<i64> {
        api::max_offset(&self.client, mq).await
    }

    /// The smallest offset stored in `mq`.
    pub async fn min_offset(&self, mq: &MessageQueue) -> Result<i64> {
        api::min_offset(&self.client, mq).await
    }

    /// The first offset of `mq` stored at or after `timestamp_ms`.
    pub async fn offset_for_time(&self, mq: &MessageQueue, timestamp_ms: i64) -> Result<i64> {
        api::offset_for_time(&self.client, mq, timestamp_ms).await
    }
}

type Delivery = (Vec<MessageExt>, oneshot::Sender<()>);

/// Subscribe and poll. Queues are assigned by rebalance like a push
/// consumer's; the messages a poll returns are committed by the next poll
/// (or by shutdown), RocketMQ's auto-commit.
pub struct LitePullConsumer<T: Transport, C: Clock> {
    push: PushConsumer<T, C>,
    tx: mpsc::Sender<Delivery>,
    rx: tokio::sync::Mutex<mpsc::Receiver<Delivery>>,
    unacked: Mutex<Vec<oneshot::Sender<()>>>,
    closing: tokio::sync::watch::Sender<bool>,
}

impl<T: Transport, C: Clock> LitePullConsumer<T, C> {
    /// A lite pull consumer; `config` is read as for a push consumer
    /// (model, start position, allocation, batch sizes).
    pub fn new(client: ClientInstance<T, C>, config: PushConsumerConfig) -> Result<Self> {
        let depth = config.consume_concurrency.max(1);
        let (tx, rx) = mpsc::channel(depth);
        Ok(Self {
            push: PushConsumer::new(client, config)?,
            tx,
            rx: tokio::sync::Mutex::new(rx),
            unacked: Mutex::new(Vec::new()),
            closing: tokio::sync::watch::channel(false).0,
        })
    }

    /// Adds a subscription.
    pub fn subscribe(&self, sub: Subscription) {
        self.push.subscribe(sub);
    }

    /// Starts rebalancing and pulling.
    pub async fn start(&self) -> Result<()> {
        let tx = self.tx.clone();
        let closing = self.closing.subscribe();
        self.push
            .start(handler(move |msgs| {
                let tx = tx.clone();
                let mut closing = closing.clone();
                async move {
                    // Messages never handed to `poll` stay uncommitted when
                    // the consumer closes, so they are delivered again.
                    let (ack, acked) = oneshot::channel();
                    tokio::select! {
                        biased;
                        sent = tx.send((msgs, ack)) => if sent.is_err() {
                            return ConsumeResult::Retry;
                        },
                        _ = closing.wait_for(|c| *c) => return ConsumeResult::Retry,
                    }
                    tokio::select! {
                        biased;
                        r = acked => if r.is_ok() { ConsumeResult::Success } else { ConsumeResult::Retry },
                        _ = closing.wait_for(|c| *c) => ConsumeResult::Retry,
                    }
                }
            }))
            .await
    }

    /// Commits what earlier polls returned, then waits up to `timeout` for
    /// messages and returns up to `max` of them.
    pub async fn poll(&self, max: usize, timeout: Duration) -> Result<Vec<MessageExt>> {
        self.commit();
        let mut rx = self.rx.lock().await;
        let mut out = Vec::new();
        let first = match tokio::time::timeout(timeout, rx.recv()).await {
            Ok(Some(d)) => d,
            Ok(None) => return Err(Error::NotRunning),
            Err(_) => return Ok(out),
        };
        let take = |(msgs, ack): Delivery, out: &mut Vec<MessageExt>| {
            out.extend(msgs);
            lock(&self.unacked).push(ack);
        };
        take(first, &mut out);
        while out.len() < max {
            match rx.try_recv() {
                Ok(d) => take(d, &mut out),
                Err(_) => break,
            }
        }
        Ok(out)
    }

    /// Commits everything returned so far.
    pub fn commit(&self) {
        for ack in lock(&self.unacked).drain(..) {
            let _ = ack.send(());
        }
    }

    /// The queues this member owns.
    pub fn assigned(&self) -> Vec<MessageQueue> {
        self.push.assigned()
    }

    /// Commits, then stops like [`PushConsumer::shutdown`].
    pub async fn shutdown(&self) {
        self.commit();
        tokio::task::yield_now().await;
        self.closing.send_replace(true);
        self.push.shutdown().await;
    }
}
