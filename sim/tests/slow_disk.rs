//! Scenario `slow_disk`: the broker's disk turns slow for a while (every
//! sync 20 ms to 4 s longer) while producers send with `SYNC_FLUSH`, and
//! for half the seeds the broker loses power with slow syncs in flight.
//! Sends whose sync outlasts the producers' 2 s timeout end indeterminate
//! and are retried; nothing acknowledged is lost, nothing is read that
//! was never sent, duplicates appear only after an indeterminate attempt.

use scenarios::{Fault, Plan};
use sim::history::Event;
use sim::run::run_judged;
use sim::seeds::for_each_seed;
use sluice_core::FlushMode;

const SEEDS: std::ops::RangeInclusive<u64> = 1..=16;

#[test]
fn a_slow_disk_loses_no_acknowledged_message() {
    let mut timed_out = 0;
    let mut slowed = 0;
    let mut crashed_while_slow = 0;
    for_each_seed(
        "slow_disk",
        "a_slow_disk_loses_no_acknowledged_message",
        SEEDS.clone(),
        |seed| {
            let plan = Plan::slow_disk(seed);
            let report = run_judged(&plan, FlushMode::Sync)?;
            let slowed_disk = report
                .entries
                .iter()
                .any(|e| matches!(e.event.planned_fault(), Some(Fault::SlowBrokerDisk { .. })));
            if slowed_disk {
                slowed += 1;
                if plan
                    .faults
                    .iter()
                    .any(|f| matches!(f.fault, Fault::CrashBroker { .. }))
                {
                    crashed_while_slow += 1;
                }
            }
            timed_out += report
                .entries
                .iter()
                .filter(|e| matches!(&e.event, Event::SendInfo { reason, .. } if reason.contains("timed out")))
                .count();
            Ok(())
        },
    );
    assert!(slowed >= 12, "the disk was slowed in only {slowed} runs");
    assert!(
        crashed_while_slow > 0,
        "no power loss while the disk was slow"
    );
    assert!(timed_out > 0, "no sync ever outlasted a producer's timeout");
}
