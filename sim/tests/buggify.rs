//! BUGGIFY: with the production code's fault points enabled, runs stay
//! reproducible from their seed, the points really fire (rare legal paths:
//! a busy broker, an early long-poll answer, late timer ticks, an early
//! rebalance, one-unit replication fetches…), and the oracle still finds
//! nothing wrong — those paths are legal, and the code must handle them.

use std::collections::BTreeSet;

use scenarios::Plan;
use sim::oracle::OracleConfig;
use sim::run::{run_plan, RunReport};
use sluice_core::FlushMode;

const ORACLE: OracleConfig = OracleConfig {
    acked_must_survive: true,
};

fn run(plan: &Plan) -> RunReport {
    let report = run_plan(plan, FlushMode::Sync, ORACLE).expect("simulation runs");
    if let Some(failure) = report.failure() {
        panic!("seed {} with BUGGIFY: {failure}", plan.seed);
    }
    report
}

fn fired(report: &RunReport) -> BTreeSet<&'static str> {
    report
        .buggify
        .iter()
        .filter(|s| s.fired > 0)
        .map(|s| s.site)
        .collect()
}

#[test]
fn buggified_runs_replay_exactly_and_points_fire_without_violations() {
    let mut sites = BTreeSet::new();
    for seed in 0..6 {
        let plan = Plan::group_consumption(seed).with_buggify(true);
        let first = run(&plan);
        let again = run(&plan);
        assert_eq!(first.trace_hash, again.trace_hash, "seed {seed} diverged");
        assert_eq!(first.buggify, again.buggify, "seed {seed}: other decisions");
        sites.extend(fired(&first));
    }
    assert!(
        sites.len() >= 3,
        "only {sites:?} fired over six group runs with BUGGIFY"
    );
}

#[test]
fn points_stay_inert_unless_the_plan_enables_them() {
    let report = run(&Plan::group_consumption(1));
    assert!(report.buggify.is_empty(), "{:?}", report.buggify);
    assert!(!sluice_core::buggify::is_enabled());
}

#[test]
fn transactions_and_delays_survive_buggified_brokers() {
    let mut sites = BTreeSet::new();
    for seed in 0..4 {
        sites.extend(fired(&run(&Plan::transactions(seed).with_buggify(true))));
        sites.extend(fired(&run(&Plan::clock_skew(seed).with_buggify(true))));
    }
    assert!(!sites.is_empty(), "no point fired in eight runs");
}
