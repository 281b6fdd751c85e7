//! scenarios: workloads and fault plans derived from one seed, used by `sim`
//! (and later by seeded sweeps). Pure: no IO, no clocks, no OS randomness.
//!
//! Module map:
//! - [`rng`]: named RNG sub-streams of the run seed.
//! - [`fault`]: every fault a plan can inject, its heal and its sweep
//!   class (the registry's definitions; `sim`'s nemesis applies them).
//! - [`plan`]: a seed → workload + timed fault plan, per scenario.
//! - [`swarm`]: a seed → one scenario family's plan with its flush mode and
//!   oracle setting, families weighted (the seeded sweep's generator).

pub mod fault;
pub mod plan;
pub mod rng;
pub mod swarm;

pub use fault::{Fault, FaultClass};
pub use plan::{BrokerTuning, Deferral, Plan, TimedFault, Workload};
pub use rng::{substream, Salt};
pub use swarm::{Family, Flush, SwarmRun};
