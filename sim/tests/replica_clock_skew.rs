//! Scenario `replica_clock_skew`: a SYNC-replicated group with a
//! controller fails over (the master crashes, a replica is elected, the
//! old master rejoins) while about half the messages are delayed (delay
//! levels and timers); the replicas' wall clocks are stepped forward or
//! back by up to 5 s, and per seed one clock (the first broker's or a
//! replica's) drifts in 10–20 small steps. Whichever broker is master when
//! a delayed message falls due delivers it. No acknowledged message is
//! lost, none is read earlier than its delay less how far the steps can
//! put one broker's clock ahead of another's, and the logs agree.

use scenarios::{Fault, Plan};
use sim::history::Event;
use sim::run::{run_judged, run_verdict};
use sim::seeds::for_each_seed;
use sluice_core::FlushMode;

const SEEDS: std::ops::RangeInclusive<u64> = 1..=8;

#[test]
fn delayed_messages_survive_replica_clock_steps_and_drift_across_a_failover() {
    let mut replica_steps = 0;
    let mut acked_after_crash = 0;
    for_each_seed(
        "replica_clock_skew",
        "delayed_messages_survive_replica_clock_steps_and_drift_across_a_failover",
        SEEDS,
        |seed| {
            let plan = Plan::replica_clock_skew(seed);
            let report = run_judged(&plan, FlushMode::Async)?;
            replica_steps += report
                .entries
                .iter()
                .filter(|e| {
                    matches!(
                        e.event.planned_fault(),
                        Some(Fault::StepReplicaClock { .. })
                    )
                })
                .count();
            let crash_ms = report
                .entries
                .iter()
                .find(|e| matches!(e.event.planned_fault(), Some(Fault::CrashBroker { .. })))
                .map_or(u64::MAX, |e| e.at_ms);
            acked_after_crash += report
                .entries
                .iter()
                .filter(|e| e.at_ms > crash_ms && matches!(e.event, Event::SendOk { .. }))
                .count();
            if !report
                .entries
                .iter()
                .any(|e| matches!(e.event, Event::Deferred { .. }))
            {
                return Err(report.describe("no delayed message was sent"));
            }
            Ok(())
        },
    );
    assert!(replica_steps > 0, "no replica clock was stepped");
    assert!(
        acked_after_crash > 0,
        "no failover: nothing acknowledged after the crash"
    );
}

#[test]
fn the_plans_step_replicas_both_ways_and_drift() {
    let plans: Vec<Plan> = SEEDS.map(Plan::replica_clock_skew).collect();
    let steps = |pred: fn(i64) -> bool| {
        plans
            .iter()
            .flat_map(|p| &p.faults)
            .any(|f| matches!(f.fault, Fault::StepReplicaClock { by_ms, .. } if pred(by_ms)))
    };
    assert!(steps(|by| by > 0) && steps(|by| by < 0));
    assert!(
        plans.iter().any(|p| p.faults.len() > 10),
        "no drifting clock"
    );
}

/// The oracle still catches early delivery with the looser bound that
/// stepped replica clocks call for.
#[test]
fn oracle_catches_early_delivery_across_replica_clock_steps() {
    let caught = (1..=4_u64).any(|seed| {
        run_verdict(
            &Plan::replica_clock_skew(seed).with_early_delays(),
            FlushMode::Async,
        )
        .expect("simulation runs")
        .violations
        .iter()
        .any(|v| matches!(v, sim::oracle::Violation::EarlyDelivery { .. }))
    });
    assert!(caught, "early delivery survived 4 seeds");
}
