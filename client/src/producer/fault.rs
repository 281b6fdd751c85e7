//! Latency-based fault avoidance (RocketMQ's `MQFaultStrategy`): a broker
//! that failed or answered slowly is skipped by queue selection for a while,
//! longer the slower it was.

use std::collections::BTreeMap;
use std::time::Duration;

/// Latency thresholds (ms) and how long (ms) a broker at or above each is
/// avoided — RocketMQ's defaults.
const LATENCY_MAX_MS: [u64; 7] = [50, 100, 550, 1_000, 2_000, 3_000, 15_000];
const NOT_AVAILABLE_MS: [u64; 7] = [0, 0, 30_000, 60_000, 120_000, 180_000, 600_000];
/// How long a broker that failed outright is avoided.
pub(crate) const ISOLATION: Duration = Duration::from_secs(30);

/// Per broker: monotonic time before which it is avoided.
#[derive(Debug, Default)]
pub(crate) struct FaultTable {
    until: BTreeMap<String, Duration>,
}

impl FaultTable {
    /// Records a send to `broker` that took `latency` (or failed, when
    /// `failed`) at monotonic time `now`.
    pub(crate) fn record(&mut self, broker: &str, latency: Duration, failed: bool, now: Duration) {
        let avoid = if failed {
            ISOLATION
        } else {
            let ms = u64::try_from(latency.as_millis()).unwrap_or(u64::MAX);
            let bucket = LATENCY_MAX_MS.iter().rposition(|max| ms >= *max);
            Duration::from_millis(bucket.map_or(0, |i| NOT_AVAILABLE_MS[i]))
        };
        if avoid.is_zero() {
            self.until.remove(broker);
        } else {
            self.until.insert(broker.to_owned(), now + avoid);
        }
    }

    /// Whether `broker` may be chosen at `now`.
    pub(crate) fn is_available(&self, broker: &str, now: Duration) -> bool {
        self.until.get(broker).is_none_or(|until| now >= *until)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_and_slow_answers_isolate_for_a_while() {
        let mut t = FaultTable::default();
        let now = Duration::from_secs(100);
        t.record("fast", Duration::from_millis(3), false, now);
        t.record("slow", Duration::from_millis(600), false, now);
        t.record("dead", Duration::from_millis(1), true, now);
        assert!(t.is_available("fast", now));
        // 600 ms is past the 550 ms step: avoided for 30 s.
        assert!(!t.is_available("slow", now + Duration::from_secs(29)));
        assert!(t.is_available("slow", now + Duration::from_secs(30)));
        assert!(!t.is_available("dead", now + Duration::from_secs(29)));
        assert!(t.is_available("dead", now + ISOLATION));
        t.record("dead", Duration::from_millis(1), false, now);
        assert!(
            t.is_available("dead", now),
            "a good answer clears the isolation"
        );
    }
}
