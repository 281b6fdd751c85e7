//! The broker's numbers, in one place: named counters and gauges, a
//! latency histogram per routed request code, and the store's own figures
//! (`sluice_core::stats`). Handlers and the request table update them on
//! the hot path with relaxed atomics, no locks; everything is read through
//! [`BrokerStats::snapshot`], a plain serialisable struct.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

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
    /// One histogram per routed code, fixed at start, so recording is a
    /// lookup in an immutable map plus atomic adds.
    rpc_latency_us: BTreeMap<i32, LatencyHistogram>,
    /// Codes no handler serves.
    rpc_latency_unrouted_us: LatencyHistogram,
    store: Arc<StoreStats>,
}

impl BrokerStats {
    /// Stats for a broker serving `codes`, reading the store's figures
    /// from `store`.
    pub fn new(codes: impl IntoIterator<Item = i32>, store: Arc<StoreStats>) -> Self {
        Self {
            messages_in_total: AtomicU64::new(0),
            bytes_in_total: AtomicU64::new(0),
            messages_out_total: AtomicU64::new(0),
            bytes_out_total: AtomicU64::new(0),
            send_to_dlq_messages_total: AtomicU64::new(0),
            requests_total: AtomicU64::new(0),
            requests_refused_total: AtomicU64::new(0),
            pulls_suspended: AtomicI64::new(0),
            rpc_latency_us: codes
                .into_iter()
                .map(|c| (c, LatencyHistogram::default()))
                .collect(),
            rpc_latency_unrouted_us: LatencyHistogram::default(),
            store,
        }
    }

    /// One message stored for a producer, `bytes` as stored.
    pub fn message_in(&self, bytes: u64) {
        self.messages_in_total.fetch_add(1, Ordering::Relaxed);
        self.bytes_in_total.fetch_add(bytes, Ordering::Relaxed);
    }

    /// `messages` returned to a consumer, `bytes` as stored.
    pub fn messages_out(&self, messages: u64, bytes: u64) {
        self.messages_out_total
            .fetch_add(messages, Ordering::Relaxed);
        self.bytes_out_total.fetch_add(bytes, Ordering::Relaxed);
    }

    /// One message stored in a `%DLQ%` topic.
    pub fn sent_to_dlq(&self) {
        self.send_to_dlq_messages_total
            .fetch_add(1, Ordering::Relaxed);
    }

    /// One answered request (called by the request table only).
    pub fn request(&self, request_code: i32, response_code: i32, elapsed: Duration) {
        self.requests_total.fetch_add(1, Ordering::Relaxed);
        if is_refusal(response_code) {
            self.requests_refused_total.fetch_add(1, Ordering::Relaxed);
        }
        self.rpc_latency_us
            .get(&request_code)
            .unwrap_or(&self.rpc_latency_unrouted_us)
            .record(elapsed);
    }

    /// Counts a pull held in long polling until the guard drops.
    pub fn pull_suspended(&self) -> GaugeGuard<'_> {
        self.pulls_suspended.fetch_add(1, Ordering::Relaxed);
        GaugeGuard(&self.pulls_suspended)
    }

    /// Every figure at one moment (each read once, relaxed: figures that
    /// race a request may disagree by that request).
    pub fn snapshot(&self) -> BrokerStatsSnapshot {
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let store = self.store.snapshot();
        BrokerStatsSnapshot {
            messages_in_total: load(&self.messages_in_total),
            bytes_in_total: load(&self.bytes_in_total),
            messages_out_total: load(&self.messages_out_total),
            bytes_out_total: load(&self.bytes_out_total),
            send_to_dlq_messages_total: load(&self.send_to_dlq_messages_total),
            requests_total: load(&self.requests_total),
            requests_refused_total: load(&self.requests_refused_total),
            pulls_suspended: self.pulls_suspended.load(Ordering::Relaxed),
            rpc_latency_us: self
                .rpc_latency_us
                .iter()
                .map(|(code, h)| (*code, h.snapshot()))
                .filter(|(_, h)| h.count > 0)
                .map(|(code, h)| (code, LatencySummary::from(&h)))
                .collect(),
            rpc_latency_unrouted_us: LatencySummary::from(&self.rpc_latency_unrouted_us.snapshot()),
            store_syncs_total: store.syncs_total,
            store_synced_bytes_total: store.synced_bytes_total,
            store_fsync_latency_us: LatencySummary::from(&store.fsync_latency_us),
        }
    }
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
    /// Latency of requests with a code no handler serves.
    pub rpc_latency_unrouted_us: LatencySummary,
    /// Group-commit fsyncs that wrote something.
    pub store_syncs_total: u64,
    /// Bytes those fsyncs made durable.
    pub store_synced_bytes_total: u64,
    /// How long each fsync took.
    pub store_fsync_latency_us: LatencySummary,
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
        s.message_in(100);
        s.message_in(50);
        s.messages_out(3, 400);
        s.sent_to_dlq();
        let snap = s.snapshot();
        assert_eq!((snap.messages_in_total, snap.bytes_in_total), (2, 150));
        assert_eq!((snap.messages_out_total, snap.bytes_out_total), (3, 400));
        assert_eq!(snap.send_to_dlq_messages_total, 1);
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
