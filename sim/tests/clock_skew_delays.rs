//! Scenario `clock_skew_delays`: about half the messages ask for a delay
//! level (1 s, 5 s or 10 s) while long-polling consumers read every queue
//! and the broker's wall clock is stepped forward or back (an NTP jump),
//! sometimes around a power loss and restart. No delayed message may be
//! lost, none may be read before its delay has passed less the forward
//! steps of the broker's clock, and the plain messages keep every promise
//! of `SYNC_FLUSH`. A crash may repeat a delivery made after the last
//! persisted schedule progress (at-least-once; the oracle allows it then).

use scenarios::{Fault, Plan};
use sim::oracle::Violation;
use sim::run::{run_judged, run_verdict};
use sim::seeds::for_each_seed;
use sluice_core::FlushMode;

const SEEDS: std::ops::RangeInclusive<u64> = 1..=24;

#[test]
fn delayed_messages_are_never_lost_nor_early_across_clock_steps() {
    for_each_seed(
        "clock_skew_delays",
        "delayed_messages_are_never_lost_nor_early_across_clock_steps",
        SEEDS.clone(),
        |seed| {
            let plan = Plan::clock_skew(seed);
            let report = run_judged(&plan, FlushMode::Sync)?;
            // The scenario exercised what it names.
            let deferred = report
                .entries
                .iter()
                .filter(|e| matches!(e.event, sim::history::Event::Deferred { .. }))
                .count();
            if deferred == 0 {
                return Err(report.describe("no delayed message was sent"));
            }
            Ok(())
        },
    );
}

#[test]
fn the_plans_step_the_clock_both_ways_and_sometimes_crash() {
    let plans: Vec<Plan> = SEEDS.map(Plan::clock_skew).collect();
    let steps = |pred: fn(i64) -> bool| {
        plans
            .iter()
            .flat_map(|p| &p.faults)
            .any(|f| matches!(f.fault, Fault::StepBrokerClock { by_ms } if pred(by_ms)))
    };
    assert!(steps(|by| by > 0), "no forward step in the seed list");
    assert!(steps(|by| by < 0), "no backward step in the seed list");
    assert!(plans.iter().any(|p| p
        .faults
        .iter()
        .any(|f| matches!(f.fault, Fault::CrashBroker { .. }))));
}

/// The oracle catches a broker that delivers delayed messages early.
#[test]
fn oracle_catches_early_delayed_delivery() {
    let caught = (1..=6_u64).find(|&seed| {
        run_verdict(&Plan::clock_skew(seed).with_early_delays(), FlushMode::Sync)
            .expect("simulation runs")
            .violations
            .iter()
            .any(|v| matches!(v, Violation::EarlyDelivery { .. }))
    });
    assert!(caught.is_some(), "early delivery survived 6 seeds");
}
