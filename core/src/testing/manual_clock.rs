//! `ManualClock`: a `Clock` that moves only when a test tells it to, for
//! unit tests of timeouts, retention and timers.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::clock::Clock;

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
}
