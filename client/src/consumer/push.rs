//! The push consumer: rebalance assigns queues, one long-poll loop per
//! assigned queue feeds a bounded process queue, handlers run concurrently
//! (or one at a time per locked queue when orderly), success advances the
//! offset, failure sends the message back for redelivery.
//!
//! The committed offset of a queue is the smallest offset still being
//! processed (or, when none is, the next offset to pull): it never skips a
//! message that has not been handled.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sluice_core::message::{is_retry_topic, keys, retry_topic};
use sluice_core::Clock;
use sluice_net::body::ConsumerData;
use sluice_net::Transport;
use tokio::sync::{Notify, Semaphore};
use tokio::task::JoinHandle;

use super::api::{self, PullOptions, PullStatus};
use super::offset_store::{OffsetFile, OffsetStore};
use super::rebalance::Allocation;
use super::subscription::Subscription;
use crate::error::{Error, Result};
use crate::instance::{lock, ClientInstance};
use crate::message::{MessageExt, MessageQueue};

/// Clustering (each message to one member) or broadcasting (to every member).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MessageModel {
    /// The group shares the queues; offsets live on the brokers.
    Clustering,
    /// Every member reads every queue; offsets live in a local file.
    Broadcasting,
}

/// Where a member starts on a queue the group has no offset for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConsumeFrom {
    /// New messages only (RocketMQ's default).
    LastOffset,
    /// From the oldest stored message.
    FirstOffset,
    /// From the first message stored at or after this wall time (ms).
    Timestamp(i64),
}

/// What a concurrent handler decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConsumeResult {
    /// Handled; the offset may advance.
    Success,
    /// Deliver again later (through the group's retry topic).
    Retry,
}

/// The boxed future a handler returns.
pub type HandlerFuture = Pin<Box<dyn Future<Output = ConsumeResult> + Send>>;
/// A message handler.
pub type Handler = Arc<dyn Fn(Vec<MessageExt>) -> HandlerFuture + Send + Sync>;

/// Wraps an async closure as a [`Handler`].
pub fn handler<F, Fut>(f: F) -> Handler
where
    F: Fn(Vec<MessageExt>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ConsumeResult> + Send + 'static,
{
    Arc::new(move |msgs| Box::pin(f(msgs)))
}

/// Push consumer settings (RocketMQ's defaults where it has one).
#[derive(Clone)]
pub struct PushConsumerConfig {
    /// Consumer group.
    pub group: String,
    /// Clustering or broadcasting.
    pub model: MessageModel,
    /// Start position for queues without an offset.
    pub consume_from: ConsumeFrom,
    /// Queue allocation among members.
    pub allocation: Allocation,
    /// One handler at a time per queue, in offset order, under a broker lock.
    pub orderly: bool,
    /// Handlers running at once (RocketMQ: 20 threads).
    pub consume_concurrency: usize,
    /// Messages per handler call (RocketMQ: 1).
    pub consume_batch_max: usize,
    /// Messages per pull (RocketMQ: 32).
    pub pull_batch: i32,
    /// Most messages held per queue before pulls pause (RocketMQ: 1000).
    pub pull_threshold_per_queue: usize,
    /// Long-poll hold (RocketMQ: 15 s).
    pub hold: Duration,
    /// Pause after a failed pull.
    pub pull_retry_delay: Duration,
    /// Redeliveries before the dead-letter queue (RocketMQ: 16).
    pub max_reconsume_times: i32,
    /// Orderly: pause before retrying a queue whose handler failed (RocketMQ: 1 s).
    pub suspend_on_failure: Duration,
    /// Broadcasting: the local offset file. Required in that model.
    pub offset_file: Option<Arc<dyn OffsetFile>>,
}

impl PushConsumerConfig {
    /// Defaults for `group`.
    pub fn new(group: impl Into<String>) -> Self {
        Self {
            group: group.into(),
            model: MessageModel::Clustering,
            consume_from: ConsumeFrom::LastOffset,
            allocation: Allocation::Averagely,
            orderly: false,
            consume_concurrency: 20,
            consume_batch_max: 1,
            pull_batch: api::PULL_BATCH_DEFAULT,
            pull_threshold_per_queue: 1000,
            hold: Duration::from_secs(15),
            pull_retry_delay: Duration::from_secs(1),
            max_reconsume_times: 16,
            suspend_on_failure: Duration::from_secs(1),
            offset_file: None,
        }
    }
}

/// One assigned queue.
struct QueueState {
    mq: MessageQueue,
    sub: Subscription,
    dropped: AtomicBool,
    /// Orderly: the broker lock is held.
    locked: AtomicBool,
    /// Messages pulled and not yet handled, by offset.
    pending: Mutex<BTreeMap<i64, MessageExt>>,
    /// The next offset to pull; everything below it is pending or done.
    pulled_until: AtomicI64,
    /// Wakes the pull loop when space frees up, the orderly loop when
    /// messages arrive.
    space: Notify,
    arrived: Notify,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

impl QueueState {
    /// The offset to commit: the smallest pending one, else the next to pull.
    fn commit_point(&self) -> i64 {
        let pending = lock(&self.pending);
        pending
            .keys()
            .next()
            .copied()
            .unwrap_or_else(|| self.pulled_until.load(Ordering::SeqCst))
    }
}

struct Inner<T: Transport, C: Clock> {
    client: ClientInstance<T, C>,
    config: PushConsumerConfig,
    subs: Mutex<Vec<Subscription>>,
    handler: Mutex<Option<Handler>>,
    queues: Mutex<BTreeMap<MessageQueue, Arc<QueueState>>>,
    offsets: OffsetStore,
    permits: Arc<Semaphore>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    running: AtomicBool,
    rebalance_now: Mutex<Option<Arc<Notify>>>,
    queues_changed: Mutex<Option<QueuesListener>>,
}

/// Told the member's queues (every topic) after a rebalance changed them.
type QueuesListener = Arc<dyn Fn(&[MessageQueue]) + Send + Sync>;

/// A push consumer. Cheap to clone; clones share state.
pub struct PushConsumer<T: Transport, C: Clock> {
    inner: Arc<Inner<T, C>>,
}

impl<T: Transport, C: Clock> Clone for PushConsumer<T, C> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<T: Transport, C: Clock> PushConsumer<T, C> {
    /// A consumer on `client`; subscribe, then [`PushConsumer::start`].
    pub fn new(client: ClientInstance<T, C>, config: PushConsumerConfig) -> Result<Self> {
        let offsets = match (config.model, &config.offset_file) {
            (MessageModel::Clustering, _) => OffsetStore::remote(),
            (MessageModel::Broadcasting, Some(file)) => OffsetStore::local(Arc::clone(file))?,
            (MessageModel::Broadcasting, None) => {
                return Err(Error::InvalidArgument(
                    "a broadcasting consumer needs an offset file".to_owned(),
                ))
            }
        };
        let permits = Arc::new(Semaphore::new(config.consume_concurrency.max(1)));
        Ok(Self {
            inner: Arc::new(Inner {
                client,
                config,
                subs: Mutex::new(Vec::new()),
                handler: Mutex::new(None),
                queues: Mutex::new(BTreeMap::new()),
                offsets,
                permits,
                tasks: Mutex::new(Vec::new()),
                running: AtomicBool::new(false),
                rebalance_now: Mutex::new(None),
                queues_changed: Mutex::new(None),
            }),
        })
    }

    /// Adds a subscription (before or after start).
    pub fn subscribe(&self, sub: Subscription) {
        let mut subs = lock(&self.inner.subs);
        subs.retain(|s| s.topic != sub.topic);
        subs.push(sub);
        drop(subs);
        self.register();
        if let Some(n) = lock(&self.inner.rebalance_now).as_ref() {
            n.notify_one();
        }
    }

    /// The queues this member currently owns.
    pub fn assigned(&self) -> Vec<MessageQueue> {
        lock(&self.inner.queues).keys().cloned().collect()
    }

    /// Calls `listener` with the queues this member owns (as
    /// [`PushConsumer::assigned`]) each time a rebalance changes them, as
    /// RocketMQ's `MessageQueueListener`: every change, however briefly
    /// it holds, where polling `assigned` can miss one. Replaces any
    /// earlier listener.
    pub fn on_queues_changed(&self, listener: impl Fn(&[MessageQueue]) + Send + Sync + 'static) {
        *lock(&self.inner.queues_changed) = Some(Arc::new(listener));
    }

    /// The configuration.
    pub fn config(&self) -> &PushConsumerConfig {
        &self.inner.config
    }

    fn all_subscriptions(&self) -> Vec<Subscription> {
        let mut subs = lock(&self.inner.subs).clone();
        if self.inner.config.model == MessageModel::Clustering {
            subs.push(Subscription::all(retry_topic(&self.inner.config.group)));
        }
        subs
    }

    fn register(&self) -> Arc<Notify> {
        let c = &self.inner.config;
        let data = ConsumerData {
            group_name: c.group.clone(),
            consume_type: "CONSUME_PASSIVELY".to_owned(),
            message_model: match c.model {
                MessageModel::Clustering => "CLUSTERING",
                MessageModel::Broadcasting => "BROADCASTING",
            }
            .to_owned(),
            consume_from_where: match c.consume_from {
                ConsumeFrom::LastOffset => "CONSUME_FROM_LAST_OFFSET",
                ConsumeFrom::FirstOffset => "CONSUME_FROM_FIRST_OFFSET",
                ConsumeFrom::Timestamp(_) => "CONSUME_FROM_TIMESTAMP",
            }
            .to_owned(),
            subscription_data_set: self.all_subscriptions().iter().map(|s| s.data(0)).collect(),
            unit_mode: false,
        };
        self.inner.client.register_consumer(data)
    }

    /// Starts consuming with `handler`: heartbeats to the topics' brokers,
    /// rebalances at once and then on every membership change and every
    /// `rebalance_interval`, and persists offsets every
    /// `persist_offset_interval`.
    pub async fn start(&self, handler: Handler) -> Result<()> {
        if self.inner.running.swap(true, Ordering::SeqCst) {
            return Err(Error::InvalidArgument(
                "the consumer is already started".to_owned(),
            ));
        }
        *lock(&self.inner.handler) = Some(handler);
        let notify = self.register();
        *lock(&self.inner.rebalance_now) = Some(Arc::clone(&notify));
        self.inner.client.start();
        for sub in self.all_subscriptions() {
            // A topic without a route yet is retried by the rebalance loop.
            if let Err(e) = self.inner.client.send_heartbeat_for_topic(&sub.topic).await {
                tracing::debug!(topic = %sub.topic, error = %e, "first heartbeat failed");
            }
        }
        self.rebalance().await;
        let me = self.clone();
        let rebalance = tokio::spawn(async move {
            let every = me.inner.client.config().rebalance_interval;
            loop {
                // A legal rare path: a rebalance comes early.
                let pause = if sluice_core::buggify!() {
                    let every_ms = u64::try_from(every.as_millis()).unwrap_or(u64::MAX);
                    Duration::from_millis(sluice_core::buggify::amount(every_ms))
                } else {
                    every
                };
                tokio::select! {
                    () = notify.notified() => {}
                    () = tokio::time::sleep(pause) => {}
                }
                me.rebalance().await;
            }
        });
        let mut resets = self.inner.client.offset_resets(&self.inner.config.group);
        let me = self.clone();
        let reset = tokio::spawn(async move {
            while let Some(table) = resets.recv().await {
                me.apply_reset(table).await;
            }
        });
        let me = self.clone();
        let persist = tokio::spawn(async move {
            let every = me.inner.client.config().persist_offset_interval;
            loop {
                tokio::time::sleep(every).await;
                me.persist_offsets().await;
            }
        });
        lock(&self.inner.tasks).extend([rebalance, reset, persist]);
        Ok(())
    }

    /// Stops pulling, waits (up to 5 s) for running handlers, persists
    /// offsets, releases orderly locks and leaves the group. The client
    /// instance stays up (it may serve other producers and consumers).
    pub async fn shutdown(&self) {
        if !self.inner.running.swap(false, Ordering::SeqCst) {
            return;
        }
        for t in lock(&self.inner.tasks).drain(..) {
            t.abort();
        }
        let queues: Vec<Arc<QueueState>> = lock(&self.inner.queues).values().cloned().collect();
        for q in &queues {
            for t in lock(&q.tasks).drain(..) {
                t.abort();
            }
        }
        // Handlers already running finish and record their progress before
        // the final offsets are written.
        let all = u32::try_from(self.inner.config.consume_concurrency.max(1)).unwrap_or(u32::MAX);
        let _ = tokio::time::timeout(Duration::from_secs(5), self.inner.permits.acquire_many(all))
            .await;
        self.persist_offsets().await;
        for q in &queues {
            q.dropped.store(true, Ordering::SeqCst);
        }
        if self.inner.config.orderly {
            for q in &queues {
                self.unlock(&q.mq).await;
            }
        }
        lock(&self.inner.queues).clear();
        self.inner
            .client
            .unregister_consumer(&self.inner.config.group)
            .await;
    }

    /// An operator moved the group's offsets: stop the affected queues
    /// without committing their old position, take the new offsets, and
    /// let the rebalance restart them there.
    async fn apply_reset(&self, table: std::collections::BTreeMap<MessageQueue, i64>) {
        tracing::info!(group = %self.inner.config.group, queues = table.len(), "offsets reset by an operator");
        for (mq, offset) in &table {
            let removed = lock(&self.inner.queues).remove(mq);
            if let Some(q) = removed {
                q.dropped.store(true, Ordering::SeqCst);
                for t in lock(&q.tasks).drain(..) {
                    t.abort();
                }
            }
            self.inner.offsets.update(mq, *offset, false);
        }
        let mqs: Vec<MessageQueue> = table.keys().cloned().collect();
        if let Err(e) = self
            .inner
            .offsets
            .persist(&self.inner.client, &self.inner.config.group, &mqs)
            .await
        {
            tracing::warn!(error = %e, "persisting reset offsets failed");
        }
        for mq in &mqs {
            self.inner.offsets.remove(mq);
        }
        self.rebalance().await;
    }

    async fn persist_offsets(&self) {
        let queues: Vec<Arc<QueueState>> = lock(&self.inner.queues).values().cloned().collect();
        for q in &queues {
            if !q.dropped.load(Ordering::SeqCst) {
                self.inner.offsets.update(&q.mq, q.commit_point(), true);
            }
        }
        let mqs: Vec<MessageQueue> = queues.iter().map(|q| q.mq.clone()).collect();
        if let Err(e) = self
            .inner
            .offsets
            .persist(&self.inner.client, &self.inner.config.group, &mqs)
            .await
        {
            tracing::warn!(group = %self.inner.config.group, error = %e, "persisting offsets failed");
        }
    }

    /// Recomputes this member's queues for every subscription and starts
    /// or stops queue loops accordingly.
    pub async fn rebalance(&self) {
        if !self.inner.running.load(Ordering::SeqCst) {
            return;
        }
        for sub in self.all_subscriptions() {
            if let Err(e) = self.rebalance_topic(&sub).await {
                tracing::debug!(topic = %sub.topic, error = %e, "rebalance failed");
            }
        }
        if self.inner.config.orderly {
            self.relock_all().await;
        }
    }

    async fn rebalance_topic(&self, sub: &Subscription) -> Result<()> {
        let client = &self.inner.client;
        let all = client.subscribe_queues(&sub.topic).await?;
        let mine: BTreeSet<MessageQueue> = match self.inner.config.model {
            MessageModel::Broadcasting => all.into_iter().collect(),
            MessageModel::Clustering => {
                let route = client.route(&sub.topic).await?;
                let addr = route
                    .broker_datas
                    .iter()
                    .find_map(|b| {
                        b.broker_addrs
                            .get(&0)
                            .or_else(|| b.broker_addrs.values().next())
                    })
                    .cloned()
                    .ok_or_else(|| Error::NoRoute(sub.topic.clone()))?;
                let members = api::consumer_ids(client, &addr, &self.inner.config.group).await?;
                self.inner
                    .config
                    .allocation
                    .allocate(&all, &members, client.client_id())
                    .into_iter()
                    .collect()
            }
        };
        let current: Vec<MessageQueue> = lock(&self.inner.queues)
            .keys()
            .filter(|q| q.topic == sub.topic)
            .cloned()
            .collect();
        let mut changed = false;
        for mq in current.iter().filter(|q| !mine.contains(*q)) {
            self.drop_queue(mq).await;
            changed = true;
        }
        for mq in mine.into_iter().filter(|q| !current.contains(q)) {
            match self.add_queue(mq.clone(), sub.clone()).await {
                Ok(()) => changed = true,
                Err(e) => tracing::debug!(queue = ?mq, error = %e, "cannot start queue"),
            }
        }
        if changed {
            let listener = lock(&self.inner.queues_changed).clone();
            if let Some(listener) = listener {
                listener(&self.assigned());
            }
        }
        Ok(())
    }

    async fn drop_queue(&self, mq: &MessageQueue) {
        let Some(q) = lock(&self.inner.queues).remove(mq) else {
            return;
        };
        q.dropped.store(true, Ordering::SeqCst);
        for t in lock(&q.tasks).drain(..) {
            t.abort();
        }
        self.inner.offsets.update(mq, q.commit_point(), true);
        let _ = self
            .inner
            .offsets
            .persist(
                &self.inner.client,
                &self.inner.config.group,
                std::slice::from_ref(mq),
            )
            .await;
        self.inner.offsets.remove(mq);
        if self.inner.config.orderly {
            self.unlock(mq).await;
        }
    }

    async fn start_offset(&self, mq: &MessageQueue) -> Result<i64> {
        let client = &self.inner.client;
        if let Some(o) = self
            .inner
            .offsets
            .read(client, &self.inner.config.group, mq)
            .await?
        {
            if o >= 0 {
                return Ok(o);
            }
        }
        if is_retry_topic(&mq.topic) {
            return Ok(0);
        }
        match self.inner.config.consume_from {
            ConsumeFrom::LastOffset => api::max_offset(client, mq).await,
            ConsumeFrom::FirstOffset => api::min_offset(client, mq).await,
            ConsumeFrom::Timestamp(ts) => api::offset_for_time(client, mq, ts).await,
        }
    }

    async fn add_queue(&self, mq: MessageQueue, sub: Subscription) -> Result<()> {
        let offset = self.start_offset(&mq).await?;
        self.inner.offsets.update(&mq, offset, false);
        let state = Arc::new(QueueState {
            mq: mq.clone(),
            sub,
            dropped: AtomicBool::new(false),
            locked: AtomicBool::new(false),
            pending: Mutex::new(BTreeMap::new()),
            pulled_until: AtomicI64::new(offset),
            space: Notify::new(),
            arrived: Notify::new(),
            tasks: Mutex::new(Vec::new()),
        });
        if self.inner.config.orderly {
            self.lock_queue(&state).await;
        }
        {
            let mut queues = lock(&self.inner.queues);
            if queues.contains_key(&mq) {
                return Ok(());
            }
            queues.insert(mq.clone(), Arc::clone(&state));
        }
        let me = self.clone();
        let s = Arc::clone(&state);
        let pull = tokio::spawn(async move { me.pull_loop(s).await });
        lock(&state.tasks).push(pull);
        if self.inner.config.orderly {
            let me = self.clone();
            let s = Arc::clone(&state);
            let orderly = tokio::spawn(async move { me.orderly_loop(s).await });
            lock(&state.tasks).push(orderly);
        }
        tracing::debug!(queue = ?mq, offset, "queue assigned");
        Ok(())
    }

    async fn lock_queue(&self, q: &QueueState) -> bool {
        let locked = api::lock_queues(
            &self.inner.client,
            &self.inner.config.group,
            &q.mq.broker_name,
            &q.mq.topic,
            vec![q.mq.clone()],
            false,
        )
        .await
        .is_ok_and(|held| held.contains(&q.mq));
        q.locked.store(locked, Ordering::SeqCst);
        if locked {
            q.arrived.notify_one();
        }
        locked
    }

    async fn unlock(&self, mq: &MessageQueue) {
        let _ = api::lock_queues(
            &self.inner.client,
            &self.inner.config.group,
            &mq.broker_name,
            &mq.topic,
            vec![mq.clone()],
            true,
        )
        .await;
    }

    async fn relock_all(&self) {
        let queues: Vec<Arc<QueueState>> = lock(&self.inner.queues).values().cloned().collect();
        for q in queues {
            self.lock_queue(&q).await;
        }
    }

    async fn pull_loop(&self, q: Arc<QueueState>) {
        let c = &self.inner.config;
        let orderly_relock = Duration::from_millis(500);
        loop {
            if q.dropped.load(Ordering::SeqCst) {
                return;
            }
            if c.orderly && !q.locked.load(Ordering::SeqCst) {
                // Not ours yet (another member may still hold it): try again.
                tokio::time::sleep(orderly_relock).await;
                self.lock_queue(&q).await;
                continue;
            }
            let waiting = lock(&q.pending).len();
            if waiting >= c.pull_threshold_per_queue {
                // Flow control: wait until handlers free space.
                let _ = tokio::time::timeout(Duration::from_millis(50), q.space.notified()).await;
                continue;
            }
            let offset = q.pulled_until.load(Ordering::SeqCst);
            let commit = (c.model == MessageModel::Clustering).then(|| q.commit_point());
            let options = PullOptions {
                max: c.pull_batch,
                hold: Some(c.hold),
                commit_offset: commit,
                broker_id: 0,
            };
            let result = api::pull(
                &self.inner.client,
                &c.group,
                &q.mq,
                &q.sub,
                offset,
                &options,
            )
            .await;
            if q.dropped.load(Ordering::SeqCst) {
                return;
            }
            match result {
                Ok(r) => match r.status {
                    PullStatus::Found => {
                        let msgs = Self::accept(&q, r.messages, r.next_begin_offset);
                        if !msgs.is_empty() {
                            self.dispatch(&q, &msgs);
                        }
                        if sluice_core::buggify!() {
                            // A legal rare path: the next pull comes late
                            // (a slow consumer host).
                            let ms = sluice_core::buggify::amount(500);
                            tokio::time::sleep(Duration::from_millis(ms)).await;
                        }
                    }
                    PullStatus::NoNewMessage | PullStatus::NoMatchedMessage => {
                        q.pulled_until.store(r.next_begin_offset, Ordering::SeqCst);
                    }
                    PullStatus::OffsetIllegal => {
                        tracing::warn!(queue = ?q.mq, offset, next = r.next_begin_offset, "offset illegal; moving");
                        q.pulled_until.store(r.next_begin_offset, Ordering::SeqCst);
                        self.inner.offsets.update(&q.mq, r.next_begin_offset, false);
                    }
                },
                Err(e) => {
                    tracing::debug!(queue = ?q.mq, error = %e, "pull failed");
                    tokio::time::sleep(c.pull_retry_delay).await;
                }
            }
        }
    }

    /// Records pulled messages as pending and moves the pull position.
    fn accept(q: &QueueState, msgs: Vec<MessageExt>, next_begin_offset: i64) -> Vec<MessageExt> {
        let mut pending = lock(&q.pending);
        let mut fresh = Vec::with_capacity(msgs.len());
        for mut m in msgs {
            if pending.contains_key(&m.queue_offset) {
                continue;
            }
            restore_retry_topic(&mut m);
            pending.insert(m.queue_offset, m.clone());
            fresh.push(m);
        }
        q.pulled_until.store(next_begin_offset, Ordering::SeqCst);
        fresh
    }

    fn dispatch(&self, q: &Arc<QueueState>, msgs: &[MessageExt]) {
        if self.inner.config.orderly {
            q.arrived.notify_one();
            return;
        }
        for chunk in msgs.chunks(self.inner.config.consume_batch_max.max(1)) {
            self.submit(Arc::clone(q), chunk.to_vec(), Duration::ZERO);
        }
    }

    fn submit(&self, q: Arc<QueueState>, msgs: Vec<MessageExt>, after: Duration) {
        let me = self.clone();
        let task = tokio::spawn(async move {
            if !after.is_zero() {
                tokio::time::sleep(after).await;
            }
            me.consume_concurrently(q, msgs).await;
        });
        // Consume tasks are not tracked per queue: a dropped queue's
        // handlers finish, and their offsets are simply not committed.
        drop(task);
    }

    async fn consume_concurrently(&self, q: Arc<QueueState>, msgs: Vec<MessageExt>) {
        let Ok(_permit) = Arc::clone(&self.inner.permits).acquire_owned().await else {
            return;
        };
        if q.dropped.load(Ordering::SeqCst) {
            return;
        }
        let Some(handler) = lock(&self.inner.handler).clone() else {
            return;
        };
        let result = handler(msgs.clone()).await;
        if q.dropped.load(Ordering::SeqCst) {
            return;
        }
        if result == ConsumeResult::Retry && !self.inner.running.load(Ordering::SeqCst) {
            // Shutting down: leave the messages pending, so the committed
            // offset stays before them and they are delivered again later.
            return;
        }
        let mut retry_locally = Vec::new();
        if result == ConsumeResult::Retry && self.inner.config.model == MessageModel::Clustering {
            for m in &msgs {
                let sent = api::send_back(
                    &self.inner.client,
                    &self.inner.config.group,
                    m,
                    0,
                    self.inner.config.max_reconsume_times,
                )
                .await;
                if let Err(e) = sent {
                    tracing::debug!(msg_id = m.msg_id(), error = %e, "send-back failed; retrying locally");
                    let mut again = m.clone();
                    again.reconsume_times += 1;
                    retry_locally.push(again);
                }
            }
        } else if result == ConsumeResult::Retry {
            tracing::warn!(
                group = %self.inner.config.group,
                "broadcasting consumers do not redeliver; message dropped after a failed handler"
            );
        }
        self.finish(
            &q,
            msgs.iter().filter(|m| {
                !retry_locally
                    .iter()
                    .any(|r| r.queue_offset == m.queue_offset)
            }),
        );
        if !retry_locally.is_empty() {
            self.submit(q, retry_locally, Duration::from_secs(5));
        }
    }

    /// Marks `done` handled and advances the in-memory offset.
    fn finish<'m>(&self, q: &QueueState, done: impl Iterator<Item = &'m MessageExt>) {
        {
            let mut pending = lock(&q.pending);
            for m in done {
                pending.remove(&m.queue_offset);
            }
        }
        self.inner.offsets.update(&q.mq, q.commit_point(), true);
        q.space.notify_one();
    }

    async fn orderly_loop(&self, q: Arc<QueueState>) {
        let c = &self.inner.config;
        let mut failures: i32 = 0;
        loop {
            if q.dropped.load(Ordering::SeqCst) {
                return;
            }
            let batch: Vec<MessageExt> = if q.locked.load(Ordering::SeqCst) {
                lock(&q.pending)
                    .values()
                    .take(c.consume_batch_max.max(1))
                    .cloned()
                    .collect()
            } else {
                Vec::new()
            };
            if batch.is_empty() {
                q.arrived.notified().await;
                continue;
            }
            let Some(handler) = lock(&self.inner.handler).clone() else {
                return;
            };
            let permit = Arc::clone(&self.inner.permits).acquire_owned().await;
            let mut msgs = batch.clone();
            for m in &mut msgs {
                m.reconsume_times += failures;
            }
            let result = handler(msgs).await;
            drop(permit);
            if q.dropped.load(Ordering::SeqCst) {
                return;
            }
            match result {
                ConsumeResult::Success => {
                    failures = 0;
                    self.finish(&q, batch.iter());
                }
                ConsumeResult::Retry
                    if failures + 1 >= c.max_reconsume_times
                        && c.model == MessageModel::Clustering =>
                {
                    // Give up on this batch: dead-letter it (delay level -1)
                    // so the queue can move on.
                    let mut all_sent = true;
                    for m in &batch {
                        if api::send_back(
                            &self.inner.client,
                            &c.group,
                            m,
                            -1,
                            c.max_reconsume_times,
                        )
                        .await
                        .is_err()
                        {
                            all_sent = false;
                        }
                    }
                    if all_sent {
                        failures = 0;
                        self.finish(&q, batch.iter());
                    } else {
                        tokio::time::sleep(c.suspend_on_failure).await;
                    }
                }
                ConsumeResult::Retry => {
                    failures += 1;
                    tokio::time::sleep(c.suspend_on_failure).await;
                }
            }
        }
    }
}

/// A redelivered message comes from `%RETRY%group`; handlers see the
/// original topic, as RocketMQ clients show it.
fn restore_retry_topic(m: &mut MessageExt) {
    if is_retry_topic(&m.topic) {
        if let Some(original) = m.property(keys::RETRY_TOPIC) {
            m.topic = original.to_owned();
        }
    }
}
