//! Mutants: the broker broken on purpose must fail the oracle within a
//! bounded number of seeds, or the oracle (or the scenario) is too weak.
//!
//! "Skip the flush wait": producers set `WAIT=false`, so the `SYNC_FLUSH`
//! broker acknowledges from the page cache before the sync — exactly the
//! ack-before-sync bug — while the oracle still demands `SYNC_FLUSH` safety.

use scenarios::Plan;
use sim::oracle::{OracleConfig, Violation};
use sim::run::run_plan;
use sluice_core::FlushMode;

/// The mutant must be caught within this many seeds.
const SEEDS_MAX: u64 = 8;

#[test]
fn oracle_catches_acknowledgement_before_sync() {
    let caught = (0..SEEDS_MAX).find(|&seed| {
        let plan = Plan::broker_crash(seed).without_flush_wait();
        let report = run_plan(
            &plan,
            FlushMode::Sync,
            OracleConfig {
                acked_must_survive: true,
            },
        )
        .expect("simulation runs");
        report.verdict.violations.iter().any(|v| {
            matches!(
                v,
                Violation::LostAck { .. }
                    | Violation::MovedAck { .. }
                    | Violation::InconsistentOffset { .. }
            )
        })
    });
    assert!(
        caught.is_some(),
        "ack-before-sync survived {SEEDS_MAX} seeds of broker crashes"
    );
}
