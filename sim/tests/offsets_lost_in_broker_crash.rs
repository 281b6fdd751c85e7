//! Scenario `offsets_lost_in_broker_crash`: a consumer group commits its
//! offsets to the broker (every 0.5 s), which keeps them in memory and
//! persists them every second; the broker loses power between two
//! persistences, after later commits, and restarts with the older
//! persisted offsets. The group may then consume messages again (the
//! crash explains the duplicates), but every acknowledged message is
//! consumed, no committed offset skips a message the group had not
//! consumed, and none falls below what the broker had persisted.

use std::collections::BTreeMap;

use scenarios::{Fault, Plan};
use sim::history::{Entry, Event};
use sim::run::run_judged;
use sim::seeds::for_each_seed;
use sluice_core::FlushMode;

const SEEDS: std::ops::RangeInclusive<u64> = 1..=10;

/// Whether the monitor saw a queue's committed offset fall across the
/// outage `(crash, restart)`: commits made after the last persistence
/// were lost with the broker's memory.
fn commits_lost_in_crash(entries: &[Entry], crash_ms: u64, restart_ms: u64) -> bool {
    let mut before: BTreeMap<i32, u64> = BTreeMap::new();
    let mut first_after: BTreeMap<i32, u64> = BTreeMap::new();
    for e in entries {
        if let Event::Committed { queue, offset } = e.event {
            if e.at_ms < crash_ms {
                before.insert(queue, offset);
            } else if e.at_ms > restart_ms {
                first_after.entry(queue).or_insert(offset);
            }
        }
    }
    first_after
        .iter()
        .any(|(q, after)| before.get(q).is_some_and(|b| after < b))
}

/// Records the group's handlers were given more than once.
fn consumed_again(entries: &[Entry]) -> usize {
    let mut seen: BTreeMap<(i32, u64), u32> = BTreeMap::new();
    for e in entries {
        if let Event::Consumed { queue, records, .. } = &e.event {
            for (offset, _) in records {
                *seen.entry((*queue, *offset)).or_default() += 1;
            }
        }
    }
    seen.values().filter(|n| **n > 1).count()
}

#[test]
fn group_resumes_from_persisted_offsets_and_loses_nothing() {
    let (mut lost_commits, mut reconsumed) = (0, 0);
    for_each_seed(
        "offsets_lost_in_broker_crash",
        "group_resumes_from_persisted_offsets_and_loses_nothing",
        SEEDS,
        |seed| {
            let plan = Plan::offsets_lost_in_crash(seed);
            let report = run_judged(&plan, FlushMode::Sync)?;
            let at = |wanted: fn(&Fault) -> bool| {
                plan.faults
                    .iter()
                    .find(|f| wanted(&f.fault))
                    .map_or(u64::MAX, |f| f.at_ms)
            };
            let crash_ms = at(|f| matches!(f, Fault::CrashBroker { .. }));
            let restart_ms = at(|f| *f == Fault::RestartBroker);
            if commits_lost_in_crash(&report.entries, crash_ms, restart_ms) {
                lost_commits += 1;
            }
            reconsumed += consumed_again(&report.entries);
            Ok(())
        },
    );
    assert!(
        lost_commits > 0,
        "no crash ever landed between a commit and its persistence"
    );
    assert!(reconsumed > 0, "the group never consumed a message again");
}
