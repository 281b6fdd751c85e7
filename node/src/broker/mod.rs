//! The broker: the request handlers over one `MessageStore`, the topic
//! table, consumer offsets, subscription groups, the client registry, pull
//! filters (tags and SQL92) and long polling, plus the background duties
//! (registration with name servers, interval flush, checkpoints, offset and
//! subscription-group persistence, retention, client expiry). Generic over
//! the disk, clock and transport seams, so simulations run this code.

mod clients;
mod config;
pub mod dedupe;
mod delay_levels;
pub mod filter;
mod groups;
pub mod ha;
pub mod handlers;
mod locks;
mod long_poll;
mod offsets;
pub mod pop;
mod ports;
mod register;
pub mod response;
mod schedule;
pub mod stats;
pub mod timer;
mod topics;
pub mod transaction;

pub use clients::{Channel, ClientRegistry, ConsumerGroup, CONSUME_POP};
pub use config::BrokerConfig;
pub use delay_levels::{DelayLevels, DEFAULT_DELAY_LEVELS, DELAY_LEVELS_MAX};
pub use filter::FilterCache;
pub use groups::{SubscriptionGroupTable, SUBSCRIPTION_GROUPS_FILE, SUBSCRIPTION_GROUPS_MAX};
pub use ha::{ReplicaAckError, Replication, ReplicationConfig, ReplicationMode, Role};
pub use locks::LockTable;
pub use long_poll::ArrivalSignals;
pub use offsets::OffsetTable;
pub use schedule::{DelayProgress, DELAY_OFFSETS_FILE};
pub use stats::{BrokerStats, BrokerStatsSnapshot, LatencySummary, QueueLag};
pub use timer::{Timers, TIMER_PROGRESS_FILE, TIMER_TOPIC};
pub use topics::{topic_config, TopicTable, DEFAULT_TOPIC, PERM_INHERIT, PERM_READ, PERM_WRITE};
pub use transaction::{Transactions, TRANSACTIONS_FILE};

use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use sluice_core::disk::Disk;
use sluice_core::{Clock, CommitLogOffset, MessageStore};
use sluice_net::body::SubscriptionGroupConfig;
use sluice_net::{RpcServer, Transport};
use tokio::sync::Semaphore;

use crate::error::{Error, Result};

/// Where the broker keeps its metadata files, relative to the disk root.
pub const TOPICS_FILE: &str = "config/topics.json";
/// Consumer offsets file, relative to the disk root.
pub const OFFSETS_FILE: &str = "config/consumerOffset.json";

/// One broker.
pub struct Broker<D: Disk, C: Clock> {
    config: BrokerConfig,
    disk: D,
    clock: C,
    store: MessageStore<D, C>,
    topics: TopicTable,
    offsets: OffsetTable,
    clients: ClientRegistry,
    arrivals: Arc<ArrivalSignals>,
    store_host: RwLock<SocketAddr>,
    registration: register::Signals,
    send_permits: Semaphore,
    delay_levels: DelayLevels,
    delay_progress: DelayProgress,
    delay_persist: tokio::sync::Mutex<()>,
    timers: Timers<D>,
    locks: LockTable,
    filters: FilterCache,
    groups: SubscriptionGroupTable,
    groups_persist: tokio::sync::Mutex<()>,
    transactions: Transactions,
    ha: Option<Replication>,
    stats: BrokerStats,
    dedupe: dedupe::DedupeWindow,
    pop: pop::Pop,
}

impl<D: Disk, C: Clock> Broker<D, C> {
    /// Opens the broker's store (recovering it) and metadata.
    pub async fn open(disk: D, clock: C, mut config: BrokerConfig) -> Result<Arc<Self>> {
        // A replicated store opens as a follower: its role decides later.
        config.store.replicated = config.replication.is_some();
        let read = |path: &str| {
            disk.read_small(path).map_err(|e| Error::Metadata {
                what: "read",
                path: path.to_owned(),
                reason: e.to_string(),
            })
        };
        let meta_err = |path: &str, reason: String| Error::Metadata {
            what: "parse",
            path: path.to_owned(),
            reason,
        };
        let topics = TopicTable::load(
            read(TOPICS_FILE)?.as_deref(),
            config.auto_create_topic,
            config.default_topic_queues,
        )
        .map_err(|r| meta_err(TOPICS_FILE, r))?;
        let offsets = OffsetTable::load(read(OFFSETS_FILE)?.as_deref())
            .map_err(|r| meta_err(OFFSETS_FILE, r))?;
        let delay_levels = DelayLevels::parse(&config.delay_levels)
            .map_err(|r| Error::Config(format!("delay_levels: {r}")))?;
        let delay_progress = DelayProgress::load(read(DELAY_OFFSETS_FILE)?.as_deref())
            .map_err(|r| meta_err(DELAY_OFFSETS_FILE, r))?;
        let groups = SubscriptionGroupTable::load(read(SUBSCRIPTION_GROUPS_FILE)?.as_deref())
            .map_err(|r| meta_err(SUBSCRIPTION_GROUPS_FILE, r))?;
        let transactions = Transactions::load(
            read(TRANSACTIONS_FILE)?.as_deref(),
            config.transaction_timeout_ms,
        );
        let ha = match &config.replication {
            Some(rc) => {
                let epochs = ha::EpochHistory::load(read(ha::EPOCHS_FILE)?.as_deref())
                    .map_err(|r| meta_err(ha::EPOCHS_FILE, r))?;
                Some(ha::replication_of(&config, rc, epochs)?)
            }
            None => None,
        };
        let store = MessageStore::open(disk.clone(), clock.clone(), config.store.clone()).await?;
        let timers = Timers::open(
            disk.clone(),
            &store,
            &config,
            read(TIMER_PROGRESS_FILE)?.as_deref(),
        )
        .map_err(Error::Config)?;
        let arrivals = Arc::new(ArrivalSignals::default());
        let signals = Arc::clone(&arrivals);
        store.set_arrival_listener(Arc::new(move |topic, queue_id, _| {
            signals.notify(topic, queue_id);
        }));
        let store_host = config
            .advertised()
            .parse()
            .unwrap_or_else(|_| SocketAddr::from(([127, 0, 0, 1], 0)));
        let broker = Arc::new(Self {
            stats: handlers::stats(&store, &config),
            dedupe: dedupe::DedupeWindow::of(&config),
            pop: pop::Pop::default(),
            send_permits: Semaphore::new(config.sends_in_flight_max),
            delay_levels,
            delay_progress,
            delay_persist: tokio::sync::Mutex::new(()),
            timers,
            locks: LockTable::new(Duration::from_millis(config.lock_expiry_ms)),
            filters: FilterCache::default(),
            groups,
            groups_persist: tokio::sync::Mutex::new(()),
            transactions,
            config,
            disk,
            clock,
            store,
            topics,
            offsets,
            clients: ClientRegistry::default(),
            arrivals,
            store_host: RwLock::new(store_host),
            registration: register::Signals::default(),
            ha,
        });
        broker.settle_in();
        Ok(broker)
    }

    /// Start-up wiring that needs the broker behind its `Arc`.
    fn settle_in(self: &Arc<Self>) {
        // Disk-pressure retention may delete early only what every group
        // with offsets on a queue has consumed (unless configured "force").
        let weak = Arc::downgrade(self);
        self.store
            .set_consumed_floor(Arc::new(move |topic, queue_id| {
                let floor = weak.upgrade()?.offsets.consumed_floor(topic, queue_id)?;
                u64::try_from(floor).ok().map(sluice_core::QueueOffset::new)
            }));
        // Replies of request-reply go to the cluster's reply topic, which
        // Apache's broker creates at start-up (one queue, read-write):
        // responders' producers route to it without auto-creation.
        let reply = handlers::reply_topic(&self.config.cluster_name);
        self.topics
            .ensure(&reply, 1, PERM_READ | PERM_WRITE, self.now_ms());
        if let Some(ha) = self.replication() {
            ha::listen_appends(self, ha);
        }
        self.open_dedupe();
    }

    /// The configuration in force.
    pub fn config(&self) -> &BrokerConfig {
        &self.config
    }

    /// Replication, when the broker belongs to a replicated group.
    pub fn replication(&self) -> Option<&Replication> {
        self.ha.as_ref()
    }

    /// True when this broker takes writes: a lone broker, or its group's
    /// master.
    pub fn is_writer(&self) -> bool {
        self.ha
            .as_ref()
            .is_none_or(|ha| matches!(ha.role(), Role::Master { .. }))
    }

    /// The broker id to register with name servers: 0 for the master (and
    /// a lone broker), this broker's own id for a replica.
    pub fn route_broker_id(&self) -> i64 {
        if self.ha.is_some() && !self.is_writer() {
            self.config.broker_id.max(1)
        } else if self.ha.is_some() {
            0
        } else {
            self.config.broker_id
        }
    }

    /// The master epoch to register with name servers: a
    /// controller-managed master's, so a deposed one cannot take the route
    /// back.
    pub(crate) fn registered_master_epoch(&self) -> Option<i64> {
        let ha = self.ha.as_ref()?;
        if ha.config().controller_addrs.is_empty() {
            return None;
        }
        match ha.role() {
            Role::Master { epoch } => Some(i64::from(epoch)),
            _ => None,
        }
    }

    /// Takes the master role at `epoch`: the store becomes the writer and
    /// the epoch starts where its log ends (recorded before any write).
    pub async fn become_master(&self, epoch: u32) -> Result<()> {
        let Some(ha) = &self.ha else {
            return Ok(());
        };
        self.rebuild_dedupe(); // before the store takes writes (see dedupe)
        self.pop.reset();
        let start = self.store.become_writer().await?.get();
        let mut epochs = ha.epochs();
        epochs
            .begin(epoch, start)
            .map_err(|r| Error::Config(format!("cannot start master epoch: {r}")))?;
        self.disk
            .replace_atomically(ha::EPOCHS_FILE, &epochs.to_json())
            .await
            .map_err(|e| Error::Metadata {
                what: "write",
                path: ha::EPOCHS_FILE.to_owned(),
                reason: e.to_string(),
            })?;
        ha.lock().epochs = epochs;
        // What it gated as a replica no longer applies.
        self.store.set_confirmed(CommitLogOffset::UNGATED);
        ha.set_role(Role::Master { epoch });
        ha::publish_gate(self, ha);
        tracing::info!(epoch, start, "master of the broker group");
        self.registration.topics_changed.notify_one();
        Ok(())
    }

    /// Follows the master at `master_ha` (a deposed master stops writing
    /// first).
    pub fn become_replica(&self, master_ha: Option<String>) {
        let Some(ha) = &self.ha else {
            return;
        };
        self.store.become_follower();
        self.dedupe.clear(); // it may name records the new master never got
        self.pop.reset();
        ha.set_role(Role::Replica { master_ha });
        self.registration.topics_changed.notify_one();
    }

    /// POP consumption's state (see [`pop`]).
    pub fn pop(&self) -> &pop::Pop {
        &self.pop
    }

    /// The store.
    pub fn store(&self) -> &MessageStore<D, C> {
        &self.store
    }

    /// The topic table.
    pub fn topics(&self) -> &TopicTable {
        &self.topics
    }

    /// Consumer offsets.
    pub fn offsets(&self) -> &OffsetTable {
        &self.offsets
    }

    /// Known clients.
    pub fn clients(&self) -> &ClientRegistry {
        &self.clients
    }

    /// The address stored in records and message ids.
    pub fn store_host(&self) -> SocketAddr {
        *self
            .store_host
            .read()
            .expect("invariant: lock not poisoned")
    }

    /// The delay levels in force.
    pub fn delay_levels(&self) -> &DelayLevels {
        &self.delay_levels
    }

    /// Delivery progress of the delay levels.
    pub fn delay_progress(&self) -> &DelayProgress {
        &self.delay_progress
    }

    /// Orderly-consumption queue locks.
    pub fn locks(&self) -> &LockTable {
        &self.locks
    }

    /// Compiled SQL92 subscriptions.
    pub fn filters(&self) -> &FilterCache {
        &self.filters
    }

    /// Subscription groups.
    pub fn subscription_groups(&self) -> &SubscriptionGroupTable {
        &self.groups
    }

    /// The group's subscription-group config, auto-created (with the
    /// broker's `max_reconsume_times` as its `retryMaxTimes`) when allowed;
    /// `None` when the group does not exist and may not be created.
    pub fn subscription_group(&self, group: &str) -> Option<SubscriptionGroupConfig> {
        self.groups.find_or_create(
            group,
            self.config.auto_create_subscription_group,
            |name| SubscriptionGroupConfig {
                group_name: name.to_owned(),
                retry_max_times: self.config.max_reconsume_times,
                ..SubscriptionGroupConfig::default()
            },
            self.now_ms(),
        )
    }

    /// Transactional (half) messages: the tracker and claims.
    pub fn transactions(&self) -> &Transactions {
        &self.transactions
    }

    pub(crate) fn delay_persist_lock(&self) -> &tokio::sync::Mutex<()> {
        &self.delay_persist
    }

    pub(crate) fn disk(&self) -> &D {
        &self.disk
    }

    /// The broker's figures: counters, gauges and latency histograms.
    pub fn stats(&self) -> &BrokerStats {
        &self.stats
    }

    pub(crate) fn clock(&self) -> &C {
        &self.clock
    }

    pub(crate) fn arrivals(&self) -> &ArrivalSignals {
        &self.arrivals
    }

    pub(crate) fn send_permits(&self) -> &Semaphore {
        &self.send_permits
    }

    pub(crate) fn now_ms(&self) -> i64 {
        i64::try_from(self.clock.wall_ms()).unwrap_or(i64::MAX)
    }

    /// Persists the topic table and asks for a prompt re-registration.
    pub(crate) async fn topics_updated(&self) {
        if let Err(e) = self
            .disk
            .replace_atomically(TOPICS_FILE, &self.topics.to_json())
            .await
        {
            tracing::warn!(error = %e, "could not persist topics.json");
        }
        self.registration.topics_changed.notify_one();
    }

    /// Writes consumer offsets if they changed.
    pub async fn persist_offsets(&self) {
        if let Some(json) = self.offsets.take_dirty_json() {
            if let Err(e) = self.disk.replace_atomically(OFFSETS_FILE, &json).await {
                self.offsets.mark_dirty();
                tracing::warn!(error = %e, "could not persist consumer offsets");
            }
        }
    }

    /// Writes subscription groups if they changed; false when the write
    /// failed (the table stays dirty and is retried by the next call).
    pub async fn persist_subscription_groups(&self) -> bool {
        // One writer at a time, so an older snapshot never lands last.
        let _writer = self.groups_persist.lock().await;
        let Some(json) = self.groups.take_dirty_json() else {
            return true;
        };
        match self
            .disk
            .replace_atomically(SUBSCRIPTION_GROUPS_FILE, &json)
            .await
        {
            Ok(()) => true,
            Err(e) => {
                self.groups.mark_dirty();
                tracing::warn!(error = %e, "could not persist subscription groups");
                false
            }
        }
    }

    /// Serves until `shutdown` completes: binds the broker port (and the
    /// VIP port − 2), runs the background duties, then stops accepting,
    /// persists offsets and shuts the store down cleanly. Calls `bound`
    /// with the listening address once serving.
    pub async fn serve<T: Transport>(
        self: Arc<Self>,
        transport: T,
        shutdown: impl Future<Output = ()>,
        bound: impl FnOnce(SocketAddr),
    ) -> Result<()> {
        let handler = handlers::routes(Arc::clone(&self));
        let me = Arc::clone(&self);
        let server = RpcServer::builder(self.config.rpc(), handler.clone())
            .on_connection_closed(move |id| {
                for group in me.clients.remove_connection(id.id()) {
                    handlers::notify_ids_changed(&me, &group);
                }
            })
            .bind(&transport, &self.config.listen)
            .await?;
        let addr = server.local_addr();
        if self.config.advertised_addr.is_none() && addr.ip().is_unspecified() {
            tracing::warn!(
                listen = %self.config.listen,
                "listening on a wildcard address without advertised_addr: name servers will \
                 give clients {} as this broker's address, which only this machine can reach; \
                 set advertised_addr in broker.toml",
                self.config.advertised()
            );
        }
        if self.config.advertised_addr.is_none() {
            *self
                .store_host
                .write()
                .expect("invariant: lock not poisoned") = addr;
        }
        let vip = self.bind_vip(&transport, addr, handler).await;
        self.stats
            .count_connections(std::iter::once(&server).chain(&vip));
        let ha_server = self.start_replication(&transport, addr).await?;
        tracing::info!(%addr, broker = %self.config.broker_name, "broker serving");
        bound(addr);
        let mut duties = vec![
            tokio::spawn(register::run(Arc::clone(&self), transport.clone())),
            tokio::spawn(Arc::clone(&self).maintenance()),
        ];
        if let Some(ha) = &self.ha {
            duties.push(tokio::spawn(ha::run_follower(
                Arc::clone(&self),
                transport.clone(),
            )));
            duties.push(if ha.config().controller_addrs.is_empty() {
                tokio::spawn(ha::maintain_in_sync(Arc::clone(&self)))
            } else {
                tokio::spawn(ha::run_controlled(Arc::clone(&self), transport.clone()))
            });
        }
        duties.extend(schedule::spawn(&self));
        duties.push(transaction::check::spawn(&self));
        duties.extend(timer::spawn(&self));
        shutdown.await;
        for d in &duties {
            d.abort();
        }
        for d in duties {
            // Wait for the abort so no delayed delivery races the shutdown.
            let _ = d.await;
        }
        server.shutdown(Duration::from_secs(3)).await;
        if let Some(h) = ha_server {
            h.shutdown(Duration::from_secs(1)).await;
        }
        if let Some(v) = vip {
            v.shutdown(Duration::from_secs(1)).await;
        }
        register::unregister(&self, &transport).await;
        self.persist_on_stop().await;
        self.store.shutdown().await?;
        tracing::info!("broker stopped cleanly");
        Ok(())
    }

    /// Writes what the broker keeps beside its store, once it serves no
    /// more requests.
    async fn persist_on_stop(&self) {
        self.persist_offsets().await;
        self.persist_subscription_groups().await;
        self.persist_delay_offsets().await;
        self.persist_transactions().await;
        self.persist_timer_progress().await;
        // No send is in flight now: the saved window is exact.
        self.save_dedupe(true).await;
    }

    /// Periodic duties: interval flush and checkpoint, offset persistence,
    /// retention and client expiry, each on its own period.
    async fn maintenance(self: Arc<Self>) {
        let tick_ms = self.config.flush_interval_ms.clamp(10, 1_000);
        let mut elapsed_ms: u64 = 0;
        loop {
            tokio::time::sleep(Duration::from_millis(tick_ms)).await;
            elapsed_ms += tick_ms;
            if let Err(e) = self.store.flush().await {
                if self.store.commit_log().check_writable().is_err() {
                    tracing::error!(error = %e, "interval flush failed; the store is fenced");
                } else {
                    // ENOSPC or EIO while dispatching: the records are
                    // stored; the next tick dispatches them.
                    tracing::warn!(error = %e, "interval flush incomplete; retried next tick");
                }
            }
            let due = |period: u64| period > 0 && elapsed_ms % period.max(tick_ms) < tick_ms;
            if due(self.config.checkpoint_interval_ms) {
                if let Err(e) = self.store.checkpoint().await {
                    tracing::warn!(error = %e, "checkpoint failed");
                }
            }
            if due(self.config.offset_persist_interval_ms) {
                self.persist_offsets().await;
                // Auto-created groups are written here, off the pull path.
                self.persist_subscription_groups().await;
            }
            self.save_dedupe(false).await;
            if due(self.config.retention_interval_ms) {
                if let Err(e) = self.store.clean_expired() {
                    tracing::warn!(error = %e, "retention pass failed");
                }
            }
            if due(10_000) {
                let idle = Duration::from_millis(self.config.client_idle_ms);
                let cutoff = self.clock.monotonic().saturating_sub(idle);
                for group in self.clients.expire(cutoff) {
                    handlers::notify_ids_changed(&self, &group);
                }
            }
        }
    }
}
