//! sim: the deterministic simulation harness (turmoil + the simulated disk),
//! the history oracle and the failure scenarios (`cargo test -p sim`).
//!
//! Module map:
//! - [`history`]: the recorded events of a run and its trace hash.
//! - [`oracle`]: pure checks over a history (lost acks, unexpected values,
//!   one value per offset, dense offsets, FIFO, duplicates); in
//!   `oracle::timing`, the fence and long-poll wake-up bounds; in
//!   `oracle::group`, consumer-group consumption, commits and assignment.
//! - [`harness`]: `builder(seed)` and the name server / broker hosts.
//! - [`client`]: the production `sluice-client` on turmoil, and how its
//!   results read as acknowledged / failed / indeterminate sends and pulls.
//! - [`workload`]: producers, long-polling consumers and the final drain,
//!   recording the history.
//! - [`group`]: a clustering push-consumer group (one member per host) and
//!   the monitor of its committed offsets.
//! - [`routes`]: several name servers and the watcher of their routes.
//! - [`member_crash`]: group members that join late or crash, and the
//!   check that every repeated consumption has a cause.
//! - `nemesis`: applies each `scenarios::Fault` to the running cluster
//!   (one exhaustive match) and records it in the history.
//! - `replica_group`: a run's controllers and replicas, and the checks of
//!   their logs after it.
//! - [`run`]: one run of a `scenarios::Plan`: safety phase, drain, verdict.
//! - [`seeds`]: committed seed lists, `SIM_SEED`/`SIM_SEEDS`, replay commands.
//! - [`real`]: real chaos: `sluice-node` processes in network namespaces
//!   under real faults, their history judged by the same oracle.
//! - [`sweep`]: the seeded swarm sweep: one swarm seed judged as its
//!   scenario test would, fault classes that fired, summaries, shrinking.

// Without tokio_unstable turmoil cannot seed tokio's RNG and panics in
// simulated hosts are swallowed, so every result would be meaningless.
#[cfg(not(tokio_unstable))]
compile_error!(
    "build with --cfg tokio_unstable (set in .cargo/config.toml; a RUSTFLAGS env var replaces it)"
);

pub mod client;
pub mod group;
pub mod harness;
pub mod history;
pub mod member_crash;
mod nemesis;
pub mod oracle;
pub mod pop;
pub mod real;
mod replica_group;
pub mod routes;
pub mod run;
pub mod seeds;
pub mod stats_check;
pub mod sweep;
pub mod transactions;
pub mod workload;
