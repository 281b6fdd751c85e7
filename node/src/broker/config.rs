//! Broker configuration, with RocketMQ's defaults and units last.

use std::sync::Arc;

use sluice_core::{FlushMode, StoreConfig};
use sluice_net::Credentials;

use crate::acl::Acl;

/// Configuration of one broker.
#[derive(Clone, Debug)]
#[expect(
    clippy::struct_excessive_bools,
    reason = "independent on/off settings, each named as in RocketMQ's broker config"
)]
pub struct BrokerConfig {
    /// Cluster the broker belongs to.
    pub cluster_name: String,
    /// Broker group name (master and slaves share it).
    pub broker_name: String,
    /// 0 for the master.
    pub broker_id: i64,
    /// Address to listen on, `host:port`.
    pub listen: String,
    /// Also listen on port − 2 (the "VIP channel" older clients use).
    pub listen_vip: bool,
    /// Address clients are told to use (defaults to the listen address).
    pub advertised_addr: Option<String>,
    /// Name servers to register with.
    pub namesrv_addrs: Vec<String>,
    /// Create unknown topics on first send (inheriting from `TBW102`).
    pub auto_create_topic: bool,
    /// Queues of the default topic (caps auto-created topics).
    pub default_topic_queues: i32,
    /// Re-registration period with the name servers (RocketMQ: 30 s).
    pub register_interval_ms: u64,
    /// Interval flush period in ASYNC flush mode (RocketMQ: 500 ms).
    pub flush_interval_ms: u64,
    /// Store checkpoint period.
    pub checkpoint_interval_ms: u64,
    /// Consumer offset persistence period (RocketMQ: 5 s).
    pub offset_persist_interval_ms: u64,
    /// Retention pass period (RocketMQ: 10 s).
    pub retention_interval_ms: u64,
    /// A client silent this long is dropped (RocketMQ: 120 s).
    pub client_idle_ms: u64,
    /// Longest a pull is held waiting for messages.
    pub long_poll_max_ms: u64,
    /// Sends being processed at once before new ones get `SYSTEM_BUSY`.
    pub sends_in_flight_max: usize,
    /// RocketMQ's rule for a group with no committed offset: answer 0 when
    /// the queue still starts at 0 (so `CONSUME_FROM_LAST_OFFSET` reads
    /// from the start). `false` always answers "not found" and lets the
    /// client's `ConsumeFromWhere` decide.
    pub query_offset_zero_for_new_group: bool,
    /// Retries before a message goes to the DLQ (RocketMQ: 16). This is
    /// the `retryMaxTimes` of auto-created subscription groups; a group's
    /// own setting (and a client's `maxReconsumeTimes`) take precedence.
    pub max_reconsume_times: i32,
    /// Serve SQL92 property filters on pulls. Sluice enables them by
    /// default; RocketMQ's `enablePropertyFilter` defaults to `false`.
    pub enable_property_filter: bool,
    /// Create a consumer group's subscription-group config on its first
    /// heartbeat, pull or send-back (RocketMQ's
    /// `autoCreateSubscriptionGroup`, default `true`). Off, unknown groups'
    /// pulls answer `SUBSCRIPTION_GROUP_NOT_EXIST`.
    pub auto_create_subscription_group: bool,
    /// Delay levels, `messageDelayLevel` style: durations with units
    /// `s`/`m`/`h`/`d`, level 1 first (RocketMQ: the 18 levels of
    /// [`DEFAULT_DELAY_LEVELS`](super::DEFAULT_DELAY_LEVELS)).
    pub delay_levels: String,
    /// An orderly-consumption queue lock not renewed this long is free
    /// (RocketMQ: 60 s, `rocketmq.broker.rebalance.lockMaxLiveTime`).
    pub lock_expiry_ms: u64,
    /// A half open this long is checked back with its producer group
    /// (RocketMQ's `transactionTimeOut`, 6 s); a half's
    /// `CHECK_IMMUNITY_TIME_IN_SECONDS` lengthens its first wait.
    pub transaction_timeout_ms: u64,
    /// How often open halves are looked at (RocketMQ 4.9.8's
    /// `transactionCheckInterval`, 60 s).
    pub transaction_check_interval_ms: u64,
    /// Checks before an unanswered half is parked in
    /// `TRANS_CHECK_MAX_TIME_TOPIC` (RocketMQ's `transactionCheckMax`, 15).
    pub transaction_check_max: u32,
    /// Width of a timer-wheel slot: timer messages are delivered at the
    /// end of the slot holding their due time, so up to this much late and
    /// never early (RocketMQ: `timerPrecisionMs`, 1 s). 1..=60000.
    pub timer_precision_ms: u64,
    /// Farthest ahead a timer message may be due (RocketMQ:
    /// `timerMaxDelaySec`, 3 days). Must not exceed the CommitLog
    /// retention (`store.file_reserved_ms`): the parked message has to
    /// outlive its wait.
    pub timer_max_delay_ms: u64,
    /// Size of a timer log file, a multiple of the 56-byte unit (default
    /// one million units, 56 MB).
    pub timer_log_segment_bytes: u64,
    /// Replication with the rest of the broker group (`None`: a lone
    /// broker, no HA port).
    pub replication: Option<super::ReplicationConfig>,
    /// The store.
    pub store: StoreConfig,
    /// Access control before every request (`None`: open); shared with a
    /// name server in the same process and reloaded in place.
    pub acl: Option<Arc<Acl>>,
    /// What the broker signs its own calls to name servers with (an
    /// account with `broker = true` where they enforce ACL).
    pub credentials: Option<Credentials>,
    /// The RocketMQ 5 gRPC endpoint (`None`: none). Served by the
    /// `sluice-node` binary (see `crate::grpc`), not by `Broker::serve`.
    pub grpc_listen: Option<String>,
    /// `grpc_listen` is the default, not configured: a port already in
    /// use there leaves the endpoint closed with a warning instead of
    /// failing the start.
    pub grpc_listen_defaulted: bool,
    /// The HTTP port for `/metrics` and the dashboard (`None`: none).
    /// Served by the `sluice-node` binary, not by `Broker::serve`.
    pub metrics_listen: Option<String>,
    /// Label sets per labelled metric family (topics, groups, queues,
    /// code pairs); past it, `other` and a count of the dropped.
    pub metrics_series_cap: usize,
    /// Record figures on the hot path (`false` only to measure what
    /// recording costs: every counter and histogram stays 0).
    pub stats: bool,
    /// How long a stored `UNIQ_KEY` answers a retried send with the
    /// original's position instead of storing it again (0: no dedupe);
    /// see `broker::dedupe` and docs/dedupe.md.
    pub dedupe_window_ms: u64,
    /// The dedupe window remembers at least the newest this many keys (the
    /// broker's, over all topics) and at most twice as many (two
    /// generations, the older dropped whole); 0: no dedupe.
    pub dedupe_window_keys: usize,
    /// Producer lanes (topic, producer id, first queue) whose stamped
    /// sequence numbers are remembered, exact beyond the window (least
    /// recently used dropped first); 0: stamps ignored.
    pub dedupe_producer_lanes: usize,
    /// How far back the CommitLog is read on open (and on promotion) to
    /// rebuild the lanes, when longer than the window.
    pub dedupe_sequences_rebuild_ms: u64,
    /// A lone broker saves its dedupe window this often while sends arrive,
    /// as soon as they pause, and on shutdown, so a restart reads back only
    /// the log written since (0: never saved, always rebuilt from the log).
    pub dedupe_save_interval_ms: u64,
    /// Close a connection whose peer began a frame and has not finished it
    /// this long after (0: never); see `RpcConfig::frame_deadline`.
    pub frame_deadline_ms: u64,
    /// Close a connection on which nothing arrived for this long (0:
    /// never); see `RpcConfig::idle_timeout`.
    pub idle_timeout_ms: u64,
    /// The simulation's mutant, never set in production: the dedupe window
    /// is not rebuilt from the CommitLog on open or promotion.
    pub mutant_dedupe_not_rebuilt: bool,
    /// The simulation's mutant, never set in production: a saved dedupe
    /// window is read back without replaying the log written since.
    pub mutant_dedupe_saved_not_replayed: bool,
    /// The simulation's mutant, never set in production: the "already
    /// committed?" lookup of a transaction (`transaction/committed.rs`)
    /// always misses, so a transaction whose commit survived a crash
    /// without its op record is committed again by a late END or a
    /// check-back (apache/rocketmq #5574).
    pub mutant_commit_lookup_misses: bool,
    /// The simulation's mutant, never set in production: a POP ack is
    /// answered once appended, before it is durable.
    pub mutant_pop_ack_not_durable: bool,
    /// The simulation's mutant, never set in production: POP leases never
    /// expire, so an unacknowledged message is never received again.
    pub mutant_pop_never_revives: bool,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        Self {
            cluster_name: "DefaultCluster".to_owned(),
            broker_name: "broker-a".to_owned(),
            broker_id: 0,
            listen: "127.0.0.1:10911".to_owned(),
            listen_vip: true,
            advertised_addr: None,
            namesrv_addrs: vec!["127.0.0.1:9876".to_owned()],
            auto_create_topic: true,
            default_topic_queues: 8,
            register_interval_ms: 30_000,
            flush_interval_ms: 500,
            checkpoint_interval_ms: 1_000,
            offset_persist_interval_ms: 5_000,
            retention_interval_ms: 10_000,
            client_idle_ms: 120_000,
            long_poll_max_ms: 30_000,
            sends_in_flight_max: 10_000,
            query_offset_zero_for_new_group: true,
            max_reconsume_times: 16,
            enable_property_filter: true,
            auto_create_subscription_group: true,
            delay_levels: super::DEFAULT_DELAY_LEVELS.to_owned(),
            lock_expiry_ms: 60_000,
            transaction_timeout_ms: 6_000,
            transaction_check_interval_ms: 60_000,
            transaction_check_max: 15,
            timer_precision_ms: 1_000,
            timer_max_delay_ms: 3 * 24 * 3_600_000,
            timer_log_segment_bytes: 56 * 1_000_000,
            replication: None,
            store: StoreConfig {
                root: "store".to_owned(),
                flush_mode: FlushMode::Async,
                ..StoreConfig::default()
            },
            acl: None,
            credentials: None,
            grpc_listen: None,
            grpc_listen_defaulted: false,
            metrics_listen: None,
            metrics_series_cap: super::stats::DEFAULT_SERIES_CAP,
            stats: true,
            dedupe_window_ms: 600_000,
            dedupe_window_keys: 100_000,
            dedupe_producer_lanes: 10_000,
            dedupe_sequences_rebuild_ms: 600_000,
            dedupe_save_interval_ms: 10_000,
            frame_deadline_ms: millis(sluice_net::rpc::FRAME_DEADLINE),
            idle_timeout_ms: millis(sluice_net::rpc::IDLE_TIMEOUT),
            mutant_dedupe_not_rebuilt: false,
            mutant_dedupe_saved_not_replayed: false,
            mutant_commit_lookup_misses: false,
            mutant_pop_ack_not_durable: false,
            mutant_pop_never_revives: false,
        }
    }
}

fn millis(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl BrokerConfig {
    /// The RPC settings of the broker's port: the defaults with this
    /// config's frame deadline and idle timeout (0: none).
    pub fn rpc(&self) -> sluice_net::RpcConfig {
        let ms = |v: u64| (v > 0).then(|| std::time::Duration::from_millis(v));
        sluice_net::RpcConfig {
            frame_deadline: ms(self.frame_deadline_ms),
            idle_timeout: ms(self.idle_timeout_ms),
            ..sluice_net::RpcConfig::default()
        }
    }

    /// The address registered with name servers and put in message ids.
    pub fn advertised(&self) -> &str {
        self.advertised_addr.as_deref().unwrap_or(&self.listen)
    }
}
