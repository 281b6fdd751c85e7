//! Scenario `producer_retry_indeterminate`: the network holds requests past
//! the producers' timeout and delivers them late (and sometimes partitions
//! them), so sends end indeterminate and producers re-send the same
//! message (same `UNIQ_KEY`). The broker's dedupe window stores each
//! message once (the oracle's `StoredTwice`, judged in every run, and no
//! duplicate read at all); nothing acknowledged is lost and every queue
//! stays dense. For half the seeds a one-way partition then drops only the
//! broker's answers: the requests still arrive and are stored, so the
//! producers see timeouts for messages that were written.
//!
//! Scenario `producer_retry_across_restart`: the answers are cut while the
//! broker crashes and restarts, so messages stored before the crash are
//! retried after it — stored once, because the window is rebuilt from the
//! CommitLog on open.

use std::collections::BTreeSet;

use scenarios::{Fault, Plan};
use sim::history::Event;
use sim::run::run_judged;
use sim::seeds::for_each_seed;
use sluice_core::FlushMode;

const SEEDS: std::ops::RangeInclusive<u64> = 1..=64;

#[test]
fn retried_sends_duplicate_only_after_an_indeterminate_attempt() {
    let mut indeterminate = 0;
    let mut duplicated = 0;
    let mut one_way = 0;
    let mut stored_unanswered = 0;
    for_each_seed(
        "producer_retry_indeterminate",
        "retried_sends_duplicate_only_after_an_indeterminate_attempt",
        SEEDS.clone(),
        |seed| {
            let plan = Plan::producer_retry(seed);
            let report = run_judged(&plan, FlushMode::Sync)?;
            indeterminate += report
                .entries
                .iter()
                .filter(|e| matches!(e.event, Event::SendInfo { .. }))
                .count();
            duplicated += report.verdict.summary.duplicated;
            let cut = report
                .entries
                .iter()
                .any(|e| e.event.planned_fault() == Some(Fault::CutResponsesToProducers));
            if cut {
                one_way += 1;
                stored_unanswered +=
                    report.verdict.summary.recovered + report.verdict.summary.duplicated;
            }
            Ok(())
        },
    );
    assert!(indeterminate > 0, "no send ever ended indeterminate");
    assert!(one_way > 0, "no run cut the broker's answers one way");
    assert!(
        stored_unanswered > 0,
        "no request that lost its answer one way was ever stored"
    );
    assert_eq!(
        duplicated, 0,
        "a retried message was stored twice within the dedupe window"
    );
}

/// Ids sent before the broker's crash and sent again after its restart
/// (their earlier attempt was not acknowledged).
fn retried_across_restart(entries: &[sim::history::Entry]) -> usize {
    let at = |fault: fn(Fault) -> bool| {
        entries
            .iter()
            .position(|e| e.event.planned_fault().is_some_and(fault))
            .unwrap_or(entries.len())
    };
    let crash = at(|f| matches!(f, Fault::CrashBroker { .. }));
    let restart = at(|f| f == Fault::RestartBroker);
    let invoked = |range: &[sim::history::Entry]| -> BTreeSet<String> {
        range
            .iter()
            .filter_map(|e| match &e.event {
                Event::SendInvoke { id, .. } => Some(id.clone()),
                _ => None,
            })
            .collect()
    };
    let before = invoked(&entries[..crash]);
    let after = invoked(&entries[restart.min(entries.len())..]);
    before.intersection(&after).count()
}

#[test]
fn retries_across_a_broker_restart_are_stored_once() {
    let mut crossing = 0;
    let mut duplicated = 0;
    for_each_seed(
        "producer_retry_across_restart",
        "retries_across_a_broker_restart_are_stored_once",
        1..=24,
        |seed| {
            let plan = Plan::producer_retry_across_restart(seed);
            let report = run_judged(&plan, FlushMode::Sync)?;
            crossing += retried_across_restart(&report.entries);
            duplicated += report.verdict.summary.duplicated;
            Ok(())
        },
    );
    assert!(crossing > 0, "no retry ever crossed the restart");
    assert_eq!(duplicated, 0, "a retry across the restart was stored again");
}
