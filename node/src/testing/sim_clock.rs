//! `SimClock`, the one simulated `Clock` (the `sim` harness and node's
//! turmoil tests): wall time is turmoil's logical epoch plus a per-host skew
//! that the harness may step during a run (an NTP jump); monotonic time is
//! the host's paused tokio clock since the clock was made (one process
//! life), so it never goes backwards.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sluice_core::Clock;

/// A host's wall-clock skew, kept outside the host so it survives crashes
/// and the harness can step it while the host runs.
#[derive(Clone, Debug, Default)]
pub struct Skew(Arc<AtomicI64>);

impl Skew {
    /// A skew of `ms` (positive: ahead of the simulation's epoch clock).
    pub fn new(ms: i64) -> Self {
        Self(Arc::new(AtomicI64::new(ms)))
    }

    /// The current skew.
    pub fn ms(&self) -> i64 {
        self.0.load(Ordering::Relaxed)
    }

    /// Steps the clock by `by_ms` (negative: back).
    pub fn step(&self, by_ms: i64) {
        self.0.fetch_add(by_ms, Ordering::Relaxed);
    }
}

/// A per-host simulated clock. Make it inside the host: its monotonic
/// origin is the host runtime's current instant.
#[derive(Clone, Debug)]
pub struct SimClock {
    skew: Skew,
    origin: tokio::time::Instant,
}

impl SimClock {
    /// A clock whose wall time runs `skew_ms` ahead (negative: behind) of
    /// the simulation's epoch clock.
    pub fn new(skew_ms: i64) -> Self {
        Self::with_skew(Skew::new(skew_ms))
    }

    /// A clock whose wall time follows `skew`, which may be stepped.
    pub fn with_skew(skew: Skew) -> Self {
        Self {
            skew,
            origin: tokio::time::Instant::now(),
        }
    }
}

impl Clock for SimClock {
    fn wall_ms(&self) -> u64 {
        let base = turmoil::since_epoch().unwrap_or_default();
        u64::try_from(base.as_millis())
            .unwrap_or(u64::MAX)
            .saturating_add_signed(self.skew.ms())
    }

    fn monotonic(&self) -> Duration {
        self.origin.elapsed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_moves_every_clock_sharing_the_skew() {
        let skew = Skew::new(-5);
        let other = skew.clone();
        skew.step(1_000);
        assert_eq!(other.ms(), 995);
        other.step(-2_000);
        assert_eq!(skew.ms(), -1_005);
    }
}
