//! Scenario `producer_retry_indeterminate`: the network holds requests past
//! the producers' timeout and delivers them late (and sometimes partitions
//! them), so sends end indeterminate and producers re-send the same id.
//! Duplicates may appear, but only for ids with an indeterminate attempt;
//! nothing acknowledged is lost and every queue stays dense.

use scenarios::Plan;
use sim::history::Event;
use sim::oracle::OracleConfig;
use sim::run::run_plan;
use sim::seeds::for_each_seed;
use sluice_core::FlushMode;

const SEEDS: std::ops::RangeInclusive<u64> = 1..=64;

#[test]
fn retried_sends_duplicate_only_after_an_indeterminate_attempt() {
    let mut indeterminate = 0;
    let mut duplicated = 0;
    for_each_seed(
        "producer_retry_indeterminate",
        "retried_sends_duplicate_only_after_an_indeterminate_attempt",
        SEEDS.clone(),
        |seed| {
            let plan = Plan::producer_retry(seed);
            let report = run_plan(
                &plan,
                FlushMode::Sync,
                OracleConfig {
                    acked_must_survive: true,
                },
            )
            .map_err(|e| format!("{e}\n  plan: {plan:?}"))?;
            indeterminate += report
                .entries
                .iter()
                .filter(|e| matches!(e.event, Event::SendInfo { .. }))
                .count();
            duplicated += report.verdict.summary.duplicated;
            report.failure().map_or(Ok(()), Err)
        },
    );
    assert!(indeterminate > 0, "no send ever ended indeterminate");
    assert!(
        duplicated > 0,
        "no held request was ever stored late next to its retry"
    );
}
