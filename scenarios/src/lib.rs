//! scenarios: workloads, fault plans and the swarm generator used by `sim`
//! and by seeded sweeps. Pure: no IO.
//!
//! Nothing is implemented yet; see the simulation issue.
