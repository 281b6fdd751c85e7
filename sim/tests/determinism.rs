//! Determinism: one seed always gives the same trace hash (history and sim
//! time), and different seeds give different ones. If this fails, some
//! randomness or time escaped the seams.

use scenarios::Plan;
use sim::oracle::OracleConfig;
use sim::run::run_plan;
use sluice_core::FlushMode;

const ORACLE: OracleConfig = OracleConfig {
    acked_must_survive: true,
};

fn hash(seed: u64) -> u64 {
    run_plan(&Plan::broker_crash(seed), FlushMode::Sync, ORACLE)
        .expect("simulation runs")
        .trace_hash
}

#[test]
fn same_seed_gives_the_same_trace_hash_and_different_seeds_differ() {
    for seed in [3, 21] {
        assert_eq!(
            hash(seed),
            hash(seed),
            "seed {seed} diverged between two runs"
        );
    }
    let hashes: std::collections::BTreeSet<u64> = (100..104).map(hash).collect();
    assert_eq!(hashes.len(), 4, "four seeds, fewer distinct traces");
}

/// The consumer group runs the most client code (rebalance, long polls,
/// handlers, offset commits, heartbeats) across a crash and a partition.
#[test]
fn group_consumption_runs_are_deterministic() {
    let hash = |seed| {
        run_plan(&Plan::group_consumption(seed), FlushMode::Sync, ORACLE)
            .expect("simulation runs")
            .trace_hash
    };
    for seed in [5, 22] {
        assert_eq!(
            hash(seed),
            hash(seed),
            "seed {seed} diverged between two runs"
        );
    }
}

/// tokio's task ids are process-global and decide the order tasks drop at
/// a crash; the harness aligns them at the start of every run.
#[test]
fn a_run_does_not_depend_on_the_runs_before_it() {
    let alone = hash(3);
    for seed in [100, 3, 3, 101] {
        let _ = hash(seed);
    }
    assert_eq!(hash(3), alone);
}
