//! The clock seam: wall-clock milliseconds (stored in records, compared for
//! retention and delays) and a monotonic reading (timeouts). Logic never
//! reads the OS clock directly; production uses `SystemClock`, tests a
//! `ManualClock`, simulations a clock driven by turmoil with per-host skew.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Source of time for the store, broker and clients.
pub trait Clock: Clone + Send + Sync + 'static {
    /// Milliseconds since the Unix epoch. May jump (NTP, skew); never use
    /// it to measure intervals.
    fn wall_ms(&self) -> u64;

    /// Time since an arbitrary fixed origin; never goes backwards.
    fn monotonic(&self) -> Duration;
}

/// The operating system's clocks; the one audited place that reads them.
#[derive(Clone, Debug)]
pub struct SystemClock {
    origin: std::time::Instant,
}

impl SystemClock {
    /// A clock whose monotonic origin is now.
    #[expect(clippy::disallowed_methods, reason = "the production clock seam")]
    pub fn new() -> Self {
        Self {
            origin: std::time::Instant::now(),
        }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for SystemClock {
    #[expect(clippy::disallowed_methods, reason = "the production clock seam")]
    fn wall_ms(&self) -> u64 {
        let since = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or(Duration::ZERO);
        u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
    }

    fn monotonic(&self) -> Duration {
        self.origin.elapsed()
    }
}

/// A clock that moves only when told to: for unit tests.
#[derive(Clone, Debug, Default)]
pub struct ManualClock {
    wall_ms: Arc<AtomicU64>,
    mono_ns: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock reading `wall_ms` on the wall and zero on the monotonic clock.
    pub fn new(wall_ms: u64) -> Self {
        Self {
            wall_ms: Arc::new(AtomicU64::new(wall_ms)),
            mono_ns: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Moves both clocks forward by `by`.
    pub fn advance(&self, by: Duration) {
        let ms = u64::try_from(by.as_millis()).unwrap_or(u64::MAX);
        let ns = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        self.wall_ms.fetch_add(ms, Ordering::SeqCst);
        self.mono_ns.fetch_add(ns, Ordering::SeqCst);
    }

    /// Sets the wall clock (it may go backwards); the monotonic clock is
    /// untouched.
    pub fn set_wall_ms(&self, wall_ms: u64) {
        self.wall_ms.store(wall_ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn wall_ms(&self) -> u64 {
        self.wall_ms.load(Ordering::SeqCst)
    }

    fn monotonic(&self) -> Duration {
        Duration::from_nanos(self.mono_ns.load(Ordering::SeqCst))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_when_told() {
        let clock = ManualClock::new(1_000);
        assert_eq!(clock.wall_ms(), 1_000);
        assert_eq!(clock.monotonic(), Duration::ZERO);
        clock.advance(Duration::from_millis(250));
        assert_eq!(clock.wall_ms(), 1_250);
        assert_eq!(clock.monotonic(), Duration::from_millis(250));
        clock.set_wall_ms(10);
        assert_eq!(clock.wall_ms(), 10, "wall clock may step backwards");
        assert_eq!(clock.monotonic(), Duration::from_millis(250));
    }

    #[test]
    fn system_clock_is_after_2020_and_monotonic() {
        let clock = SystemClock::new();
        assert!(clock.wall_ms() > 1_577_836_800_000);
        let a = clock.monotonic();
        let b = clock.monotonic();
        assert!(b >= a);
    }
}
