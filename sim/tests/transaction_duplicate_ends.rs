//! Scenario `transaction_duplicate_ends`: transactional producers end
//! their halves once, twice, seconds late (to the group's current master)
//! or not at all, and re-send an END that failed; meanwhile the broker's
//! syncs turn slow — ENDs pile up in a group commit — and it crashes,
//! mostly losing power, so a commit can survive without its op record and
//! late ENDs and check-backs race each other after the restart. Its
//! failover variant crashes the master of a SYNC-replicated group with
//! ENDs in flight. Every committed transaction whose half was acknowledged
//! is stored exactly once in its real topic (`CommittedTwice`, `LostAck`);
//! no rolled-back one is ever read (`RolledBackVisible`).

use scenarios::{Fault, Plan};
use sim::run::run_judged;
use sim::seeds::for_each_seed;
use sluice_core::FlushMode;

const SEEDS: std::ops::RangeInclusive<u64> = 1..=16;
const FAILOVER_SEEDS: std::ops::RangeInclusive<u64> = 1..=6;

/// Runs `plan` in `flush_mode`; `Err` unless it passes the oracle and
/// some committed transaction was read.
fn judged(plan: &Plan, flush_mode: FlushMode) -> Result<(), String> {
    let report = run_judged(plan, flush_mode)?;
    if report.verdict.summary.read == 0 {
        return Err(report.describe("no committed transaction was read"));
    }
    Ok(())
}

#[test]
fn committed_transactions_are_stored_once_despite_duplicate_and_late_ends() {
    for_each_seed(
        "transaction_duplicate_ends",
        "committed_transactions_are_stored_once_despite_duplicate_and_late_ends",
        SEEDS,
        |seed| judged(&Plan::transaction_ends(seed), FlushMode::Sync),
    );
}

#[test]
fn committed_transactions_are_stored_once_across_a_failover() {
    for_each_seed(
        "transaction_duplicate_ends",
        "committed_transactions_are_stored_once_across_a_failover",
        FAILOVER_SEEDS,
        |seed| judged(&Plan::transaction_ends_failover(seed), FlushMode::Async),
    );
}

#[test]
fn every_plan_crashes_with_slow_syncs_and_most_lose_power() {
    let plans: Vec<Plan> = SEEDS.map(Plan::transaction_ends).collect();
    assert!(plans.iter().all(|p| p.workload.late_ends));
    for plan in &plans {
        let slow = plan
            .faults
            .iter()
            .position(|f| matches!(f.fault, Fault::SlowBrokerDisk { .. }));
        let crash = plan
            .faults
            .iter()
            .position(|f| matches!(f.fault, Fault::CrashBroker { .. }));
        assert!(slow < crash && slow.is_some(), "{plan:?}");
    }
    let power_losses = plans
        .iter()
        .flat_map(|p| &p.faults)
        .filter(|f| f.fault == Fault::CrashBroker { power_loss: true })
        .count();
    assert!(power_losses > SEEDS.count(), "{power_losses} power losses");
}
