//! scenarios: workloads and fault plans derived from one seed, used by `sim`
//! (and later by seeded sweeps). Pure: no IO, no clocks, no OS randomness.
//!
//! Module map:
//! - [`rng`]: named RNG sub-streams of the run seed.
//! - [`plan`]: a seed → workload + timed fault plan, per scenario.

pub mod plan;
pub mod rng;

pub use plan::{Fault, Plan, TimedFault, Workload};
pub use rng::{substream, Salt};
