//! Scenario `consume_queue_lost_rebuilt`: while long-polling consumers
//! read, the broker crashes (mostly with power loss); while it is down
//! every ConsumeQueue and index file is deleted; on restart the store
//! rebuilds them from the CommitLog. The oracle's one value per
//! `(queue, offset)` compares what consumers read before the crash with
//! what they and the drain read after it: a wrong rebuild shows as two
//! values at one offset, a hole, or a moved or lost acknowledged message
//! — as the mutant of a rebuild one record off shows.

use std::collections::BTreeSet;

use scenarios::{Fault, Plan};
use sim::history::{Entry, Event};
use sim::oracle::{skipped_deliveries, Violation};
use sim::run::{run_judged, run_verdict};
use sim::seeds::for_each_seed;
use sluice_core::FlushMode;

const SEEDS: std::ops::RangeInclusive<u64> = 1..=12;

/// Positions a long-polling consumer read before `crash_ms` that were read
/// again after the restart (by the drain or the consumers).
fn reread_after_rebuild(entries: &[Entry], crash_ms: u64) -> usize {
    let positions = |e: &Entry| match &e.event {
        Event::Delivered { queue, records } | Event::Poll { queue, records } => records
            .iter()
            .map(|(offset, _)| (*queue, *offset))
            .collect::<Vec<_>>(),
        _ => Vec::new(),
    };
    let before: BTreeSet<(i32, u64)> = entries
        .iter()
        .filter(|e| e.at_ms < crash_ms)
        .flat_map(positions)
        .collect();
    let after: BTreeSet<(i32, u64)> = entries
        .iter()
        .filter(|e| e.at_ms > crash_ms)
        .flat_map(positions)
        .collect();
    before.intersection(&after).count()
}

#[test]
fn consume_queues_deleted_while_down_are_rebuilt_identical() {
    let (mut files_lost, mut reread) = (0, 0);
    for_each_seed(
        "consume_queue_lost_rebuilt",
        "consume_queues_deleted_while_down_are_rebuilt_identical",
        SEEDS,
        |seed| {
            let plan = Plan::consume_queue_lost(seed);
            let report = run_judged(&plan, FlushMode::Sync)?;
            let skipped = skipped_deliveries(&report.entries);
            if !skipped.is_empty() {
                return Err(report.describe(&format!("consumers skipped {skipped:?}")));
            }
            let crash_ms = plan
                .faults
                .iter()
                .find(|f| matches!(f.fault, Fault::CrashBroker { .. }))
                .map_or(u64::MAX, |f| f.at_ms);
            files_lost += report.disk.files_lost;
            reread += reread_after_rebuild(&report.entries, crash_ms);
            Ok(())
        },
    );
    assert!(files_lost > 0, "no ConsumeQueue file was ever deleted");
    assert!(
        reread > 0,
        "no offset read before a crash was read again after the rebuild"
    );
}

/// The mutant: a rebuild that points each entry at the record before. The
/// scenario's oracle must catch it within a few seeds.
#[test]
fn oracle_catches_a_consume_queue_rebuilt_one_record_off() {
    let caught = (1..=8).find(|&seed| {
        let plan = Plan::consume_queue_lost(seed).with_shifted_rebuild();
        run_verdict(&plan, FlushMode::Sync)
            .expect("simulation runs")
            .violations
            .iter()
            .any(|v| {
                matches!(
                    v,
                    Violation::LostAck { .. }
                        | Violation::MovedAck { .. }
                        | Violation::InconsistentOffset { .. }
                        | Violation::Gap { .. }
                )
            })
    });
    assert!(
        caught.is_some(),
        "a ConsumeQueue rebuilt one record off survived 8 seeds"
    );
}
