//! The simulation's `Clock`: wall time is turmoil's logical epoch plus a
//! per-host skew; monotonic time is the host's paused tokio clock since the
//! clock was made (one process life), so it never goes backwards.

use std::time::Duration;

use sluice_core::Clock;

/// A per-host simulated clock. Make it inside the host: its monotonic
/// origin is the host runtime's current instant.
#[derive(Clone, Debug)]
pub struct SimClock {
    skew_ms: i64,
    origin: tokio::time::Instant,
}

impl SimClock {
    /// A clock whose wall time runs `skew_ms` ahead (negative: behind) of
    /// the simulation's epoch clock.
    pub fn new(skew_ms: i64) -> Self {
        Self {
            skew_ms,
            origin: tokio::time::Instant::now(),
        }
    }
}

impl Clock for SimClock {
    fn wall_ms(&self) -> u64 {
        let base = turmoil::since_epoch().unwrap_or_default();
        u64::try_from(base.as_millis())
            .unwrap_or(u64::MAX)
            .saturating_add_signed(self.skew_ms)
    }

    fn monotonic(&self) -> Duration {
        self.origin.elapsed()
    }
}
