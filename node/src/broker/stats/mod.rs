//! The broker's numbers, in one place: named counters and gauges, a
//! latency histogram per request and response code, per-topic and
//! per-group traffic (bounded by a cap on label sets, see [`series`]), and
//! the store's own figures (`sluice_core::stats`). Handlers and the
//! request table update them on the hot path with relaxed atomics, no
//! locks; everything is read through [`BrokerStats::snapshot`], a plain
//! serialisable struct, and the broker's state figures (lag, storage,
//! replication) are added to it at read time by `gauges`.
//!
//! Adding a metric: a field here (updated where it happens) or in
//! `gauges::Gauges` (read from state), and its line in
//! `crate::http::exposition`; docs/CONTRIBUTING.md walks through it.

mod gauges;
pub mod series;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub use gauges::{Gauges, QueueLag, ReplicationGauges};
use series::{pair_key, split_pair, Series, Traffic};

use serde::Serialize;
use sluice_core::stats::{HistogramSnapshot, LatencyHistogram, StoreStats};
use sluice_net::remoting::response_code;

/// Every figure the broker keeps.
pub struct BrokerStats {
    messages_in_total: AtomicU64,
    bytes_in_total: AtomicU64,
    messages_out_total: AtomicU64,
    bytes_out_total: AtomicU64,
    send_to_dlq_messages_total: AtomicU64,
    requests_total: AtomicU64,
    requests_refused_total: AtomicU64,
    pulls_suspended: AtomicI64,
    /// The codes a handler serves (fixed at start).
    routed: BTreeSet<i32>,
    /// One histogram per (routed request code, response code).
    rpc_latency_us: Series<(i32, i32), LatencyHistogram>,
    /// Codes no handler serves.
    rpc_latency_unrouted_us: LatencyHistogram,
    /// Stored for producers, by topic.
    topic_in: Series<String, Traffic>,
    /// Returned by pulls, by `(topic, group)`, with each queue's next
    /// pull offset.
    pulled: Series<String, Pulled>,
    /// Stored in a dead-letter topic, by consumer group.
    dlq: Series<String, Traffic>,
    /// How late each timer message was delivered (never early).
    timer_lateness_us: LatencyHistogram,
    store: Arc<StoreStats>,
    /// False: the hot path records nothing (`stats = false`, to measure
    /// what recording costs); the figures stay 0.
    recording: bool,
    /// What [`BrokerStats::topic_in`] hands out when not recording.
    sink: Arc<Traffic>,
    /// The serving ports' live connections (set when the broker serves).
    ports: std::sync::Mutex<Vec<sluice_net::LiveConnections>>,
}

/// A `(topic, group)`'s pulls: traffic, and per queue the offset after
/// the last message returned (in flight: pulled, not yet committed).
pub struct Pulled {
    traffic: Traffic,
    next: Series<i32, AtomicI64>,
}

impl Default for Pulled {
    fn default() -> Self {
        Self {
            traffic: Traffic::default(),
            next: Series::new(QUEUES_TRACKED_MAX),
        }
    }
}

/// Queues per `(topic, group)` whose pull position is kept.
const QUEUES_TRACKED_MAX: usize = 1024;

/// Label sets per labelled family unless configured (`metrics_series_cap`).
pub const DEFAULT_SERIES_CAP: usize = 5_000;

impl BrokerStats {
    /// Stats for a broker serving `codes`, reading the store's figures
    /// from `store`.
    pub fn new(codes: impl IntoIterator<Item = i32>, store: Arc<StoreStats>) -> Self {
        Self::with_cap(codes, store, DEFAULT_SERIES_CAP)
    }

    /// As [`BrokerStats::new`], each labelled family admitting `cap`
    /// label sets (past it: `other`).
    pub fn with_cap(
        codes: impl IntoIterator<Item = i32>,
        store: Arc<StoreStats>,
        cap: usize,
    ) -> Self {
        Self {
            messages_in_total: AtomicU64::new(0),
            bytes_in_total: AtomicU64::new(0),
            messages_out_total: AtomicU64::new(0),
            bytes_out_total: AtomicU64::new(0),
            send_to_dlq_messages_total: AtomicU64::new(0),
            requests_total: AtomicU64::new(0),
            requests_refused_total: AtomicU64::new(0),
            pulls_suspended: AtomicI64::new(0),
            routed: codes.into_iter().collect(),
            rpc_latency_us: Series::new(cap),
            rpc_latency_unrouted_us: LatencyHistogram::default(),
            topic_in: Series::new(cap),
            pulled: Series::new(cap),
            dlq: Series::new(cap),
            timer_lateness_us: LatencyHistogram::default(),
            store,
            recording: true,
            sink: Arc::default(),
            ports: std::sync::Mutex::default(),
        }
    }

    /// Counts the connections of `servers` (the broker's ports) from now on.
    pub fn count_connections<'a>(&self, servers: impl Iterator<Item = &'a sluice_net::RpcServer>) {
        let mut ports = self
            .ports
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        ports.extend(servers.map(sluice_net::RpcServer::live_connections));
    }

    /// Connections open now on the ports given to
    /// [`BrokerStats::count_connections`].
    pub fn connections(&self) -> u64 {
        let ports = self
            .ports
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        ports.iter().map(|p| p.count() as u64).sum()
    }

    /// These stats recording nothing on the hot path when `recording` is
    /// false.
    #[must_use]
    pub fn recording(mut self, recording: bool) -> Self {
        self.recording = recording;
        self
    }

    /// Whether the hot path records (see [`BrokerStats::recording`]).
    pub fn is_recording(&self) -> bool {
        self.recording
    }

    /// The figures of messages stored in `topic`: taken before the put
    /// (whose message may be diverted to a timer or schedule topic) and
    /// given to [`BrokerStats::message_in`] after it.
    pub fn topic_in(&self, topic: &str) -> Arc<Traffic> {
        if !self.recording {
            return Arc::clone(&self.sink);
        }
        self.topic_in.get(topic)
    }

    /// One message stored for a producer in the topic of `to`, `bytes`
    /// as stored.
    pub fn message_in(&self, to: &Traffic, bytes: u64) {
        if !self.recording {
            return;
        }
        self.messages_in_total.fetch_add(1, Ordering::Relaxed);
        self.bytes_in_total.fetch_add(bytes, Ordering::Relaxed);
        to.add(1, bytes);
    }

    /// `messages` of `topic` queue `queue_id` returned to `group`, `bytes`
    /// as stored; `next` is the queue offset after the last of them.
    pub fn messages_out(
        &self,
        topic: &str,
        group: &str,
        queue_id: i32,
        next: i64,
        (messages, bytes): (u64, u64),
    ) {
        if !self.recording {
            return;
        }
        self.messages_out_total
            .fetch_add(messages, Ordering::Relaxed);
        self.bytes_out_total.fetch_add(bytes, Ordering::Relaxed);
        let pulled = self.pulled.get(pair_key(topic, group).as_str());
        pulled.traffic.add(messages, bytes);
        pulled
            .next
            .get(&queue_id)
            .fetch_max(next, Ordering::Relaxed);
    }

    /// One message of `bytes` stored in `group`'s `%DLQ%` topic.
    pub fn sent_to_dlq(&self, group: &str, bytes: u64) {
        if !self.recording {
            return;
        }
        self.send_to_dlq_messages_total
            .fetch_add(1, Ordering::Relaxed);
        self.dlq.get(group).add(1, bytes);
    }

    /// Timer messages due at `due_ms` delivered at `now_ms` (wall ms).
    pub fn timers_delivered(&self, now_ms: u64, due_ms: impl Iterator<Item = u64>) {
        if !self.recording {
            return;
        }
        for due in due_ms {
            let late = Duration::from_millis(now_ms.saturating_sub(due));
            self.timer_lateness_us.record(late);
        }
    }

    /// One answered request (called by the request table only).
    pub fn request(&self, request_code: i32, response_code: i32, elapsed: Duration) {
        self.requests_total.fetch_add(1, Ordering::Relaxed);
        if is_refusal(response_code) {
            self.requests_refused_total.fetch_add(1, Ordering::Relaxed);
        }
        if self.routed.contains(&request_code) {
            self.rpc_latency_us
                .get(&(request_code, response_code))
                .record(elapsed);
        } else {
            self.rpc_latency_unrouted_us.record(elapsed);
        }
    }

    /// Counts a pull held in long polling until the guard drops.
    pub fn pull_suspended(&self) -> GaugeGuard<'_> {
        self.pulls_suspended.fetch_add(1, Ordering::Relaxed);
        GaugeGuard(&self.pulls_suspended)
    }

    /// Every figure at one moment (each read once, relaxed: figures that
    /// race a request may disagree by that request). The broker's state
    /// figures are left default: `Broker::figures` adds them.
    pub fn snapshot(&self) -> BrokerStatsSnapshot {
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let store = self.store.snapshot();
        let (rpc_latency, rpc_latency_us) = self.rpc_snapshot();
        let (topics, topic_other) = self.topic_in.entries();
        let (pulled, pulled_other) = self.pulled.entries();
        let (dlq, dlq_other) = self.dlq.entries();
        let mut pull_positions = Vec::new();
        for (key, p) in &pulled {
            let (topic, group) = split_pair(key);
            for (q, next) in p.next.entries().0 {
                let next = next.load(Ordering::Relaxed);
                pull_positions.push((topic.to_owned(), group.to_owned(), q, next));
            }
        }
        BrokerStatsSnapshot {
            messages_in_total: load(&self.messages_in_total),
            bytes_in_total: load(&self.bytes_in_total),
            messages_out_total: load(&self.messages_out_total),
            bytes_out_total: load(&self.bytes_out_total),
            send_to_dlq_messages_total: load(&self.send_to_dlq_messages_total),
            requests_total: load(&self.requests_total),
            requests_refused_total: load(&self.requests_refused_total),
            pulls_suspended: self.pulls_suspended.load(Ordering::Relaxed),
            rpc_latency_us,
            rpc_latency,
            rpc_latency_unrouted_us: LatencySummary::from(&self.rpc_latency_unrouted_us.snapshot()),
            topics_in: labelled(
                topics.iter().map(|(k, v)| (k.clone(), v.read())),
                &topic_other,
            ),
            groups_out: labelled(
                pulled.iter().map(|(k, v)| (k.clone(), v.traffic.read())),
                &pulled_other.traffic,
            ),
            dlq: labelled(dlq.iter().map(|(k, v)| (k.clone(), v.read())), &dlq_other),
            series_dropped_total: self.topic_in.dropped()
                + self.pulled.dropped()
                + self.dlq.dropped()
                + self.rpc_latency_us.dropped(),
            pull_positions,
            timer_lateness_us: LatencySummary::from(&self.timer_lateness_us.snapshot()),
            store_syncs_total: store.syncs_total,
            store_synced_bytes_total: store.synced_bytes_total,
            store_fsync_latency_us: LatencySummary::from(&store.fsync_latency_us),
            gauges: Gauges::default(),
        }
    }

    /// Latency by (request code, response code), and merged by request
    /// code; label sets with no observation are left out.
    fn rpc_snapshot(&self) -> (Vec<RpcLatency>, BTreeMap<i32, LatencySummary>) {
        let (entries, other) = self.rpc_latency_us.entries();
        let mut by_code: BTreeMap<i32, HistogramSnapshot> = BTreeMap::new();
        let mut pairs = Vec::new();
        let folded = std::iter::once(((OTHER_CODE, OTHER_CODE), other));
        for ((request, response), h) in entries.into_iter().chain(folded) {
            let h = h.snapshot();
            if h.count == 0 {
                continue;
            }
            by_code.entry(request).or_default().merge(&h);
            pairs.push(RpcLatency {
                request_code: request,
                response_code: response,
                latency: LatencySummary::from(&h),
            });
        }
        let by_code = by_code
            .into_iter()
            .map(|(code, h)| (code, LatencySummary::from(&h)))
            .collect();
        (pairs, by_code)
    }
}

/// The request and response code of the `other` latency series (label
/// sets past the cap).
pub const OTHER_CODE: i32 = -1;

/// The label value figures past the cap are reported under.
pub const OTHER_LABEL: &str = "other";

/// Admitted label sets and their `(messages, bytes)`, then `other` when
/// anything was folded into it.
fn labelled(
    admitted: impl Iterator<Item = (String, (u64, u64))>,
    other: &Traffic,
) -> Vec<(String, u64, u64)> {
    let mut out: Vec<_> = admitted.map(|(k, (m, b))| (k, m, b)).collect();
    let (m, b) = other.read();
    if m > 0 {
        out.push((OTHER_LABEL.to_owned(), m, b));
    }
    out
}

/// Decrements a gauge when dropped (also when its future is cancelled).
pub struct GaugeGuard<'a>(&'a AtomicI64);

impl Drop for GaugeGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// True for answers that refuse the request: anything but success and
/// the normal "nothing there" answers of pulls and offset queries.
fn is_refusal(code: i32) -> bool {
    !matches!(
        code,
        response_code::SUCCESS
            | response_code::PULL_NOT_FOUND
            | response_code::PULL_RETRY_IMMEDIATELY
            | response_code::PULL_OFFSET_MOVED
            | response_code::QUERY_NOT_FOUND
    )
}

/// [`BrokerStats`] at one moment.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct BrokerStatsSnapshot {
    /// Messages stored for producers (each message of a batch counts).
    pub messages_in_total: u64,
    /// Their stored bytes.
    pub bytes_in_total: u64,
    /// Messages returned by pulls.
    pub messages_out_total: u64,
    /// Their stored bytes.
    pub bytes_out_total: u64,
    /// Messages stored in a dead-letter topic.
    pub send_to_dlq_messages_total: u64,
    /// Requests answered.
    pub requests_total: u64,
    /// Requests answered with a refusal (see `is_refusal`).
    pub requests_refused_total: u64,
    /// Pulls held in long polling now.
    pub pulls_suspended: i64,
    /// Request latency by request code (codes seen at least once).
    pub rpc_latency_us: BTreeMap<i32, LatencySummary>,
    /// Request latency by request and response code (label sets past the
    /// cap under [`OTHER_CODE`]).
    #[serde(skip)]
    pub rpc_latency: Vec<RpcLatency>,
    /// Latency of requests with a code no handler serves.
    pub rpc_latency_unrouted_us: LatencySummary,
    /// Group-commit fsyncs that wrote something.
    pub store_syncs_total: u64,
    /// Bytes those fsyncs made durable.
    pub store_synced_bytes_total: u64,
    /// How long each fsync took.
    pub store_fsync_latency_us: LatencySummary,
    /// Stored for producers by topic: `(topic, messages, bytes)`; topics
    /// past the cap under [`OTHER_LABEL`].
    pub topics_in: Vec<(String, u64, u64)>,
    /// Returned by pulls by `(topic, group)` pair key (see
    /// [`series::split_pair`]): `(key, messages, bytes)`.
    pub groups_out: Vec<(String, u64, u64)>,
    /// Stored in dead-letter topics by group: `(group, messages, bytes)`.
    pub dlq: Vec<(String, u64, u64)>,
    /// Label sets folded into `other` because their family was full.
    pub series_dropped_total: u64,
    /// `(topic, group, queue, offset after the last message pulled)`.
    #[serde(skip)]
    pub pull_positions: Vec<(String, String, i32, i64)>,
    /// How late timer messages were delivered.
    pub timer_lateness_us: LatencySummary,
    /// Figures read from the broker's state (`Broker::figures`).
    pub gauges: Gauges,
}

/// One (request code, response code) latency series.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RpcLatency {
    /// The request code.
    pub request_code: i32,
    /// The response code.
    pub response_code: i32,
    /// Its latency.
    pub latency: LatencySummary,
}

/// A latency histogram summarised: count, sum, maximum, percentiles and
/// the non-empty buckets as (highest value held, observations).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LatencySummary {
    /// Observations.
    pub count: u64,
    /// Their sum, microseconds.
    pub sum_us: u64,
    /// The largest, microseconds.
    pub max_us: u64,
    /// Median, microseconds.
    pub p50_us: u64,
    /// 99th percentile, microseconds.
    pub p99_us: u64,
    /// 99.9th percentile, microseconds.
    pub p999_us: u64,
    /// Non-empty buckets, ascending.
    pub buckets: Vec<(u64, u64)>,
}

impl From<&HistogramSnapshot> for LatencySummary {
    fn from(h: &HistogramSnapshot) -> Self {
        Self {
            count: h.count,
            sum_us: h.sum_us,
            max_us: h.max_us,
            p50_us: h.quantile_us(0.5),
            p99_us: h.quantile_us(0.99),
            p999_us: h.quantile_us(0.999),
            buckets: h.buckets.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats() -> BrokerStats {
        BrokerStats::new([10, 11], Arc::default())
    }

    #[test]
    fn counters_add_messages_and_bytes() {
        let s = stats();
        s.message_in(&s.topic_in("T"), 100);
        s.message_in(&s.topic_in("U"), 50);
        s.messages_out("T", "g", 0, 3, (3, 400));
        s.sent_to_dlq("g", 70);
        let snap = s.snapshot();
        assert_eq!((snap.messages_in_total, snap.bytes_in_total), (2, 150));
        assert_eq!((snap.messages_out_total, snap.bytes_out_total), (3, 400));
        assert_eq!(snap.send_to_dlq_messages_total, 1);
        assert_eq!(
            snap.topics_in,
            vec![("T".to_owned(), 1, 100), ("U".to_owned(), 1, 50)]
        );
        assert_eq!(snap.groups_out, vec![(pair_key("T", "g"), 3, 400)]);
        assert_eq!(snap.dlq, vec![("g".to_owned(), 1, 70)]);
        assert_eq!(snap.pull_positions, vec![("T".into(), "g".into(), 0, 3)]);
    }

    #[test]
    fn a_full_family_reports_other_and_counts_what_it_dropped() {
        let s = BrokerStats::with_cap([], Arc::default(), 1);
        for (topic, bytes) in [("A", 1), ("B", 2), ("C", 3)] {
            s.message_in(&s.topic_in(topic), bytes);
        }
        let snap = s.snapshot();
        assert_eq!(
            snap.topics_in,
            vec![("A".to_owned(), 1, 1), (OTHER_LABEL.to_owned(), 2, 5)]
        );
        assert_eq!(snap.series_dropped_total, 2);
    }

    #[test]
    fn stats_not_recording_stay_zero() {
        let s = stats().recording(false);
        s.message_in(&s.topic_in("T"), 100);
        s.messages_out("T", "g", 0, 3, (3, 400));
        s.sent_to_dlq("g", 70);
        s.timers_delivered(10, [5].into_iter());
        let snap = s.snapshot();
        assert_eq!(snap.messages_in_total + snap.messages_out_total, 0);
        assert!(snap.topics_in.is_empty() && snap.groups_out.is_empty() && snap.dlq.is_empty());
        assert_eq!(snap.timer_lateness_us.count, 0);
        assert!(stats().is_recording());
    }

    #[test]
    fn the_pull_position_is_the_furthest_seen() {
        let s = stats();
        s.messages_out("T", "g", 1, 10, (10, 10));
        s.messages_out("T", "g", 1, 4, (1, 1));
        assert_eq!(s.snapshot().pull_positions[0].3, 10);
    }

    #[test]
    fn requests_are_timed_by_code_and_refusals_counted() {
        let s = stats();
        s.request(10, response_code::SUCCESS, Duration::from_micros(5));
        s.request(10, response_code::SYSTEM_BUSY, Duration::from_micros(7));
        s.request(11, response_code::PULL_NOT_FOUND, Duration::from_micros(3));
        s.request(
            99,
            response_code::REQUEST_CODE_NOT_SUPPORTED,
            Duration::ZERO,
        );
        let snap = s.snapshot();
        assert_eq!(snap.requests_total, 4);
        assert_eq!(snap.requests_refused_total, 2);
        assert_eq!(snap.rpc_latency_us[&10].count, 2);
        assert_eq!(snap.rpc_latency_us[&10].max_us, 7);
        assert_eq!(snap.rpc_latency_us[&11].p50_us, 3);
        assert!(!snap.rpc_latency_us.contains_key(&99));
        assert_eq!(snap.rpc_latency_unrouted_us.count, 1);
        let pairs: Vec<_> = snap
            .rpc_latency
            .iter()
            .map(|r| (r.request_code, r.response_code, r.latency.count))
            .collect();
        assert_eq!(
            pairs,
            vec![
                (10, response_code::SUCCESS, 1),
                (10, response_code::SYSTEM_BUSY, 1),
                (11, response_code::PULL_NOT_FOUND, 1)
            ]
        );
    }

    #[test]
    fn the_suspended_pull_gauge_falls_when_the_guard_drops() {
        let s = stats();
        let a = s.pull_suspended();
        let b = s.pull_suspended();
        assert_eq!(s.snapshot().pulls_suspended, 2);
        drop(a);
        assert_eq!(s.snapshot().pulls_suspended, 1);
        drop(b);
        assert_eq!(s.snapshot().pulls_suspended, 0);
    }

    #[test]
    fn store_figures_are_read_through_the_snapshot() {
        let store = Arc::new(StoreStats::default());
        let s = BrokerStats::new([], Arc::clone(&store));
        store.record_sync(512, Duration::from_micros(40));
        let snap = s.snapshot();
        assert_eq!(snap.store_syncs_total, 1);
        assert_eq!(snap.store_synced_bytes_total, 512);
        assert_eq!(snap.store_fsync_latency_us.max_us, 40);
    }
}
