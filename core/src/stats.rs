//! The store's figures and the latency histogram every Sluice process
//! shares: log-bucketed (HDR-style, four sub-buckets per power of two, so
//! a reported percentile is at most 25 % above the true value and never
//! below it), updated with relaxed atomics and read through `snapshot()`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Sub-buckets per power of two (a power of two itself).
const SUB_BUCKETS: u64 = 4;
/// log2 of [`SUB_BUCKETS`].
const SUB_BITS: u32 = 2;
/// Buckets covering every `u64` microsecond value.
pub const HISTOGRAM_BUCKETS: usize = 252;

/// A lock-free latency histogram in microseconds.
pub struct LatencyHistogram {
    buckets: [AtomicU64; HISTOGRAM_BUCKETS],
    count: AtomicU64,
    sum_us: AtomicU64,
    max_us: AtomicU64,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            count: AtomicU64::new(0),
            sum_us: AtomicU64::new(0),
            max_us: AtomicU64::new(0),
        }
    }
}

/// The bucket holding `value`: values below 8 have a bucket each; above,
/// each power of two splits into [`SUB_BUCKETS`] equal ranges.
pub fn bucket_index(value: u64) -> usize {
    if value < 2 * SUB_BUCKETS {
        return usize::try_from(value).expect("invariant: below 8");
    }
    let msb = value.ilog2();
    let sub = (value >> (msb - SUB_BITS)) & (SUB_BUCKETS - 1);
    let index = u64::from(msb - SUB_BITS + 1) * SUB_BUCKETS + sub;
    usize::try_from(index).expect("invariant: below 252")
}

/// The highest value bucket `index` holds (inclusive).
pub fn bucket_upper(index: usize) -> u64 {
    assert!(index < HISTOGRAM_BUCKETS, "bucket {index} out of range");
    let index = index as u64;
    if index < 2 * SUB_BUCKETS {
        return index;
    }
    let shift = index / SUB_BUCKETS - 1;
    let sub = index % SUB_BUCKETS;
    // The top bucket ends at u64::MAX, one past which would overflow.
    ((SUB_BUCKETS + sub + 1) << shift).wrapping_sub(1)
}

impl LatencyHistogram {
    /// Records one observation.
    pub fn record(&self, elapsed: Duration) {
        let us = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        self.buckets[bucket_index(us)].fetch_add(1, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_us.fetch_add(us, Ordering::Relaxed);
        self.max_us.fetch_max(us, Ordering::Relaxed);
    }

    /// A copy of the counts (not one atomic instant: each field is read
    /// once, so a racing record may show in one and not another).
    pub fn snapshot(&self) -> HistogramSnapshot {
        let buckets = self
            .buckets
            .iter()
            .enumerate()
            .filter_map(|(i, b)| {
                let n = b.load(Ordering::Relaxed);
                (n > 0).then(|| (bucket_upper(i), n))
            })
            .collect();
        HistogramSnapshot {
            count: self.count.load(Ordering::Relaxed),
            sum_us: self.sum_us.load(Ordering::Relaxed),
            max_us: self.max_us.load(Ordering::Relaxed),
            buckets,
        }
    }
}

/// A histogram's counts at one moment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HistogramSnapshot {
    /// Observations recorded.
    pub count: u64,
    /// Sum of all observations, microseconds.
    pub sum_us: u64,
    /// Largest observation, microseconds.
    pub max_us: u64,
    /// Non-empty buckets as (highest value held, observations), ascending.
    pub buckets: Vec<(u64, u64)>,
}

impl HistogramSnapshot {
    /// Adds `other`'s observations to these (buckets are merged by their
    /// highest value, so two snapshots of one bucket layout add exactly).
    pub fn merge(&mut self, other: &HistogramSnapshot) {
        self.count += other.count;
        self.sum_us = self.sum_us.saturating_add(other.sum_us);
        self.max_us = self.max_us.max(other.max_us);
        let mut buckets: std::collections::BTreeMap<u64, u64> =
            self.buckets.iter().copied().collect();
        for (upper, n) in &other.buckets {
            *buckets.entry(*upper).or_default() += n;
        }
        self.buckets = buckets.into_iter().collect();
    }

    /// The value at quantile `q` (0.0..=1.0): the highest value of the
    /// bucket holding that rank, capped at the maximum; 0 when empty.
    pub fn quantile_us(&self, q: f64) -> u64 {
        let total: u64 = self.buckets.iter().map(|(_, n)| n).sum();
        if total == 0 {
            return 0;
        }
        #[expect(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            clippy::cast_precision_loss,
            reason = "a rank within 1..=total, rounded up"
        )]
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (upper, n) in &self.buckets {
            seen += n;
            if seen >= rank {
                return (*upper).min(self.max_us);
            }
        }
        self.max_us
    }
}

/// The store's own figures: group-commit fsyncs, bytes each made durable
/// and how long each took.
#[derive(Default)]
pub struct StoreStats {
    syncs_total: AtomicU64,
    synced_bytes_total: AtomicU64,
    fsync_latency_us: LatencyHistogram,
}

impl StoreStats {
    /// Records one group-commit fsync of `bytes` that took `elapsed`.
    pub fn record_sync(&self, bytes: u64, elapsed: Duration) {
        self.syncs_total.fetch_add(1, Ordering::Relaxed);
        self.synced_bytes_total.fetch_add(bytes, Ordering::Relaxed);
        self.fsync_latency_us.record(elapsed);
    }

    /// The figures at one moment.
    pub fn snapshot(&self) -> StoreStatsSnapshot {
        StoreStatsSnapshot {
            syncs_total: self.syncs_total.load(Ordering::Relaxed),
            synced_bytes_total: self.synced_bytes_total.load(Ordering::Relaxed),
            fsync_latency_us: self.fsync_latency_us.snapshot(),
        }
    }
}

/// [`StoreStats`] at one moment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StoreStatsSnapshot {
    /// Group-commit fsyncs that wrote something.
    pub syncs_total: u64,
    /// Bytes those fsyncs made durable.
    pub synced_bytes_total: u64,
    /// How long each fsync took.
    pub fsync_latency_us: HistogramSnapshot,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    #[test]
    fn small_values_have_exact_buckets_and_larger_ones_quarter_octaves() {
        for v in 0..8 {
            assert_eq!(bucket_index(v), usize::try_from(v).expect("small"));
            assert_eq!(bucket_upper(bucket_index(v)), v);
        }
        // 8..=9, 10..=11, 12..=13, 14..=15, then 16..=19.
        assert_eq!(bucket_index(8), bucket_index(9));
        assert_ne!(bucket_index(9), bucket_index(10));
        assert_eq!(bucket_upper(bucket_index(8)), 9);
        assert_eq!(bucket_upper(bucket_index(15)), 15);
        assert_eq!(bucket_upper(bucket_index(16)), 19);
        assert_eq!(bucket_index(u64::MAX), HISTOGRAM_BUCKETS - 1);
        assert_eq!(bucket_upper(HISTOGRAM_BUCKETS - 1), u64::MAX);
    }

    #[test]
    fn every_value_lies_in_its_bucket_within_a_quarter() {
        for v in (0..20u32).flat_map(|s| [1u64 << s, (1u64 << s) + 1, (3u64 << s) - 1]) {
            let i = bucket_index(v);
            let lower = if i == 0 { 0 } else { bucket_upper(i - 1) + 1 };
            assert!(lower <= v && v <= bucket_upper(i), "{v} outside bucket {i}");
            assert!(bucket_upper(i) - lower <= lower / 4, "bucket {i} too wide");
        }
    }

    #[test]
    fn percentiles_come_from_the_bucket_holding_the_rank() {
        let h = LatencyHistogram::default();
        for v in 1..=100 {
            h.record(us(v));
        }
        h.record(us(10_000));
        let s = h.snapshot();
        assert_eq!(s.count, 101);
        assert_eq!(s.sum_us, 5_050 + 10_000);
        assert_eq!(s.max_us, 10_000);
        // Rank 51 is 51 µs, in bucket 48..=55.
        assert_eq!(s.quantile_us(0.5), 55);
        // Rank 100 is 100 µs, in bucket 96..=111.
        assert_eq!(s.quantile_us(0.99), 111);
        assert_eq!(s.quantile_us(1.0), 10_000);
        assert_eq!(s.quantile_us(0.0), 1);
        assert_eq!(HistogramSnapshot::default().quantile_us(0.5), 0);
    }

    #[test]
    fn a_quantile_never_exceeds_the_maximum_seen() {
        let h = LatencyHistogram::default();
        h.record(us(1_000));
        assert_eq!(h.snapshot().quantile_us(0.5), 1_000);
    }

    #[test]
    fn merged_snapshots_add_counts_bucket_by_bucket() {
        let (a, b) = (LatencyHistogram::default(), LatencyHistogram::default());
        a.record(us(3));
        a.record(us(900));
        b.record(us(3));
        b.record(us(40));
        let mut m = a.snapshot();
        m.merge(&b.snapshot());
        assert_eq!((m.count, m.sum_us, m.max_us), (4, 946, 900));
        let threes = m.buckets.iter().find(|(u, _)| *u == 3).map(|(_, n)| *n);
        assert_eq!(threes, Some(2));
        assert_eq!(m.buckets.iter().map(|(_, n)| n).sum::<u64>(), 4);
    }

    #[test]
    fn store_stats_count_syncs_bytes_and_latency() {
        let s = StoreStats::default();
        s.record_sync(4_096, us(300));
        s.record_sync(1_024, us(700));
        let snap = s.snapshot();
        assert_eq!(snap.syncs_total, 2);
        assert_eq!(snap.synced_bytes_total, 5_120);
        assert_eq!(snap.fsync_latency_us.count, 2);
        assert_eq!(snap.fsync_latency_us.max_us, 700);
    }
}
