//! Scenario `broker_crash_torn_tail_sync_flush`: a `SYNC_FLUSH` broker is
//! crashed with power loss (dirty pages persisted, lost or torn) while
//! producers send, then restarted; after a full drain nothing acknowledged
//! is missing or moved.

use scenarios::Plan;
use sim::oracle::OracleConfig;
use sim::run::run_plan;
use sim::seeds::for_each_seed;
use sluice_core::FlushMode;

const SEEDS: &[u64] = &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12];

#[test]
fn acknowledged_messages_survive_power_loss_with_torn_tail() {
    let mut torn_or_lost_pages = 0;
    let mut acked = 0;
    for_each_seed(
        "broker_crash_torn_tail_sync_flush",
        "acknowledged_messages_survive_power_loss_with_torn_tail",
        SEEDS,
        |seed| {
            let plan = Plan::broker_crash(seed);
            let report = run_plan(
                &plan,
                FlushMode::Sync,
                OracleConfig {
                    acked_must_survive: true,
                },
            )
            .map_err(|e| format!("{e}\n  plan: {plan:?}"))?;
            torn_or_lost_pages += report.disk.pages_torn + report.disk.pages_lost;
            acked += report.verdict.summary.acked;
            if report.disk.power_losses == 0 {
                return Err(report.describe("no power loss happened"));
            }
            report.failure().map_or(Ok(()), Err)
        },
    );
    // The scenario must exercise what it claims to (checked over the list).
    assert!(acked > 0, "no send was ever acknowledged");
    assert!(
        torn_or_lost_pages > 0,
        "no crash ever tore or lost a dirty page"
    );
}
