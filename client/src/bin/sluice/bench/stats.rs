//! What a run counts: HDR latency histograms (nanoseconds, three
//! significant digits, 1 ns to 60 s) and message/byte counters, with a
//! measured part (after the warm-up) and a running total for the progress
//! line.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use anyhow::Context;
use hdrhistogram::Histogram;
use serde::Serialize;

/// Largest latency a histogram holds; larger ones are clamped to it.
const LATENCY_NS_MAX: u64 = 60_000_000_000;

/// A latency histogram shared by the tasks recording into it.
pub struct Recorder {
    hist: Mutex<Histogram<u64>>,
}

impl Recorder {
    /// An empty histogram.
    pub fn new() -> anyhow::Result<Self> {
        let hist = Histogram::new_with_bounds(1, LATENCY_NS_MAX, 3)
            .context("cannot build a latency histogram")?;
        Ok(Self {
            hist: Mutex::new(hist),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Histogram<u64>> {
        self.hist.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records one latency.
    pub fn record(&self, latency: Duration) {
        let ns = u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX);
        self.lock().saturating_record(ns.clamp(1, LATENCY_NS_MAX));
    }

    /// Percentiles so far.
    pub fn summary(&self) -> Percentiles {
        Percentiles::of(&self.lock())
    }

    /// The latency curve so far; see [`curve`].
    pub fn curve(&self) -> Vec<(f64, f64)> {
        curve(&self.lock())
    }
}

/// Most nines a latency curve reaches (99.9999 %).
const NINES_MAX: u32 = 6;
/// Points per nine of a latency curve.
const STEPS_PER_NINE: u32 = 20;

/// Latency in microseconds against percentile on a "nines" scale: points
/// `(x, µs)` with `x = -log10(1 - q)`, so 0 is the minimum, 1 is p90, 2 is
/// p99 and so on, up to the nines the sample count resolves (at least one,
/// at most [`NINES_MAX`]); the last point is the maximum. Empty for an
/// empty histogram.
fn curve(h: &Histogram<u64>) -> Vec<(f64, f64)> {
    if h.is_empty() {
        return Vec::new();
    }
    let mut top = 1;
    while top < NINES_MAX && 10_u64.pow(top) < h.len() {
        top += 1;
    }
    let steps = top * STEPS_PER_NINE;
    (0..=steps)
        .map(|i| {
            let x = f64::from(i) / f64::from(STEPS_PER_NINE);
            let q = if i == steps {
                1.0
            } else {
                1.0 - 10_f64.powf(-x)
            };
            (x, us(h.value_at_quantile(q)))
        })
        .collect()
}

/// A latency distribution in microseconds.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Percentiles {
    pub count: u64,
    pub min: f64,
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

#[expect(clippy::cast_precision_loss, reason = "nanoseconds ≤ 60 s as f64 µs")]
fn us(ns: u64) -> f64 {
    (ns as f64 / 100.0).round() / 10.0
}

impl Percentiles {
    fn of(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return Self::default();
        }
        Self {
            count: h.len(),
            min: us(h.min()),
            mean: (h.mean() / 100.0).round() / 10.0,
            p50: us(h.value_at_quantile(0.5)),
            p90: us(h.value_at_quantile(0.9)),
            p99: us(h.value_at_quantile(0.99)),
            p999: us(h.value_at_quantile(0.999)),
            max: us(h.max()),
        }
    }

    /// `p50 / p99 / p99.9 / max` for a human line.
    pub fn line(&self) -> String {
        if self.count == 0 {
            return "no samples".to_owned();
        }
        format!(
            "p50 {} · p99 {} · p99.9 {} · max {} (mean {}, n {})",
            fmt_us(self.p50),
            fmt_us(self.p99),
            fmt_us(self.p999),
            fmt_us(self.max),
            fmt_us(self.mean),
            self.count
        )
    }
}

/// `12.3 µs`, `4.56 ms`, `1.20 s`.
pub fn fmt_us(us: f64) -> String {
    if us < 1_000.0 {
        format!("{us:.1} µs")
    } else if us < 1_000_000.0 {
        format!("{:.2} ms", us / 1_000.0)
    } else {
        format!("{:.2} s", us / 1_000_000.0)
    }
}

/// `950`, `12.3k`, `4.56M` (messages per second on a live line or an axis).
pub fn fmt_rate(r: f64) -> String {
    if !r.is_finite() {
        "?".to_owned()
    } else if r.abs() < 999.5 {
        format!("{r:.0}")
    } else if r.abs() < 999_950.0 {
        format!("{:.1}k", r / 1_000.0)
    } else {
        format!("{:.2}M", r / 1_000_000.0)
    }
}

/// Messages, bytes and requests: measured (after the warm-up) and total.
#[derive(Default)]
pub struct Meter {
    msgs: AtomicU64,
    bytes: AtomicU64,
    requests: AtomicU64,
    errors: AtomicU64,
    total_msgs: AtomicU64,
    first_error: Mutex<Option<String>>,
}

impl Meter {
    /// Counts a request of `msgs` messages and `bytes` body bytes;
    /// `measured` says whether it falls after the warm-up.
    pub fn add(&self, msgs: u64, bytes: u64, measured: bool) {
        self.total_msgs.fetch_add(msgs, Ordering::Relaxed);
        if measured {
            self.msgs.fetch_add(msgs, Ordering::Relaxed);
            self.bytes.fetch_add(bytes, Ordering::Relaxed);
            self.requests.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Counts a failed request, keeping the first error's text.
    pub fn fail(&self, error: &dyn std::fmt::Display) {
        if self.errors.fetch_add(1, Ordering::Relaxed) == 0 {
            *self
                .first_error
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = Some(error.to_string());
        }
    }

    /// Messages so far, warm-up included (for the progress line).
    pub fn total_msgs(&self) -> u64 {
        self.total_msgs.load(Ordering::Relaxed)
    }

    /// Measured messages.
    pub fn msgs(&self) -> u64 {
        self.msgs.load(Ordering::Relaxed)
    }

    /// The measured counts over `elapsed`.
    pub fn flow(&self, elapsed: Duration) -> Flow {
        let msgs = self.msgs.load(Ordering::Relaxed);
        let bytes = self.bytes.load(Ordering::Relaxed);
        let secs = elapsed.as_secs_f64().max(1e-9);
        #[expect(clippy::cast_precision_loss, reason = "counts far below 2^52")]
        let (msgs_f, bytes_f) = (msgs as f64, bytes as f64);
        Flow {
            msgs,
            bytes,
            requests: self.requests.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
            first_error: self
                .first_error
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
            seconds: (secs * 1000.0).round() / 1000.0,
            msgs_per_s: msgs_f / secs,
            mb_per_s: bytes_f / secs / 1e6,
        }
    }
}

/// Counts of one direction of a run.
#[derive(Clone, Debug, Serialize)]
pub struct Flow {
    pub msgs: u64,
    pub bytes: u64,
    pub requests: u64,
    pub errors: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_error: Option<String>,
    /// Seconds the rates are over.
    pub seconds: f64,
    pub msgs_per_s: f64,
    /// Body megabytes (10^6) per second.
    pub mb_per_s: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_ordered_and_in_microseconds() {
        let r = Recorder::new().expect("histogram");
        for i in 1..=1000_u64 {
            r.record(Duration::from_micros(i));
        }
        r.record(Duration::from_secs(3600));
        let p = r.summary();
        assert_eq!(p.count, 1001);
        assert!((p.p50 - 501.0).abs() < 1.0, "{p:?}");
        assert!(p.min <= p.p50 && p.p50 <= p.p99 && p.p99 <= p.p999 && p.p999 <= p.max);
        // An hour clamps to the 60 s bound.
        assert!(p.max <= 60.1e6, "{p:?}");
    }

    #[test]
    fn curve_runs_from_min_to_max_over_the_resolved_nines() {
        let r = Recorder::new().expect("histogram");
        assert!(r.curve().is_empty());
        for i in 1..=1000_u64 {
            r.record(Duration::from_micros(i));
        }
        let c = r.curve();
        // 1,000 samples resolve three nines (p99.9), 20 points per nine.
        assert_eq!(c.len(), 61);
        assert_eq!(c[0], (0.0, 1.0));
        let (x_last, max) = c[c.len() - 1];
        assert!(
            (x_last - 3.0).abs() < 1e-9 && (max - 1000.0).abs() < 1.0,
            "{c:?}"
        );
        // p90 sits at x = 1.
        assert!((c[20].1 - 900.0).abs() < 2.0, "{c:?}");
        assert!(c.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1));
    }

    #[test]
    fn rates_are_compact() {
        assert_eq!(fmt_rate(950.0), "950");
        assert_eq!(fmt_rate(999.7), "1.0k");
        assert_eq!(fmt_rate(12_345.0), "12.3k");
        assert_eq!(fmt_rate(4_560_000.0), "4.56M");
        assert_eq!(fmt_rate(f64::NAN), "?");
    }

    #[test]
    fn warm_up_counts_only_towards_the_total() {
        let m = Meter::default();
        m.add(64, 65_536, false);
        m.add(1, 1024, true);
        m.fail(&"boom");
        m.fail(&"second");
        let f = m.flow(Duration::from_secs(1));
        assert_eq!((f.msgs, f.bytes, f.requests, f.errors), (1, 1024, 1, 2));
        assert_eq!(f.first_error.as_deref(), Some("boom"));
        assert_eq!(m.total_msgs(), 65);
    }
}
