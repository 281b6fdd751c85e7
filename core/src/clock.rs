//! The clock seam: wall-clock milliseconds (stored in records, compared for
//! retention and delays) and a monotonic reading (timeouts). Logic never
//! reads the OS clock directly; production uses `SystemClock`, tests
//! `testing::ManualClock`, simulations a clock driven by turmoil with
//! per-host skew (`sluice_node::testing::SimClock`).

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_clock_is_after_2020_and_monotonic() {
        let clock = SystemClock::new();
        assert!(clock.wall_ms() > 1_577_836_800_000);
        let a = clock.monotonic();
        let b = clock.monotonic();
        assert!(b >= a);
    }
}
