//! Scenario `producer_retry_indeterminate`: the network holds requests past
//! the producers' timeout and delivers them late (and sometimes partitions
//! them), so sends end indeterminate and producers re-send the same id.
//! Duplicates may appear, but only for ids with an indeterminate attempt;
//! nothing acknowledged is lost and every queue stays dense. For half the
//! seeds a one-way partition then drops only the broker's answers: the
//! requests still arrive and are stored, so the producers see timeouts for
//! messages that were written.

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
    assert!(
        duplicated > 0,
        "no held request was ever stored late next to its retry"
    );
}
