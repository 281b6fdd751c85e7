//! Simulation doubles of node's seams, compiled only with the `testing`
//! feature (which also turns on `sluice-core/testing` and
//! `sluice-net/testing`, so one feature brings every double): `SimClock`,
//! a turmoil-driven `Clock` with per-host skew.

mod sim_clock;

pub use sim_clock::{SimClock, Skew};
