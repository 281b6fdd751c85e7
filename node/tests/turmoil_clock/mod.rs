//! The host's simulated tokio time as a `Clock`, shared by node's turmoil
//! tests (the `sim` crate has its own, with skew; node cannot depend on it).

use std::time::Duration;

use sluice_core::Clock;

/// Milliseconds since the clock was started, on the host's simulated time.
#[derive(Clone)]
pub struct SimClock {
    origin: tokio::time::Instant,
}

impl SimClock {
    /// A clock reading zero now; call it inside the host it serves.
    pub fn start() -> Self {
        Self {
            origin: tokio::time::Instant::now(),
        }
    }
}

impl Clock for SimClock {
    fn wall_ms(&self) -> u64 {
        u64::try_from(self.monotonic().as_millis()).expect("simulations are short")
    }

    fn monotonic(&self) -> Duration {
        self.origin.elapsed()
    }
}
