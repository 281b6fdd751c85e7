//! Scenario `fsync_eio_fences_the_broker`: one sync of the broker's disk
//! fails with EIO (fsyncgate semantics). From then on the broker must
//! refuse every send until it restarts, and nothing acknowledged may be
//! lost; after a crash with power loss and a restart it serves again.

use scenarios::{Fault, Plan};
use sim::history::Event;
use sim::oracle::{acks_after_fence, OracleConfig};
use sim::run::run_plan;
use sim::seeds::for_each_seed;
use sluice_core::FlushMode;

const SEEDS: &[u64] = &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10];

fn fenced(e: &Event) -> bool {
    matches!(e, Event::SendInfo { reason, .. } if reason.starts_with("SERVICE_NOT_AVAILABLE"))
}

#[test]
fn failed_sync_fences_the_broker_and_loses_nothing_acknowledged() {
    let mut fences_seen = 0;
    let mut eio_fired = 0;
    for_each_seed(
        "fsync_eio_fences_the_broker",
        "failed_sync_fences_the_broker_and_loses_nothing_acknowledged",
        SEEDS,
        |seed| {
            let plan = Plan::fsync_eio(seed);
            let crash_ms = plan
                .faults
                .iter()
                .find(|f| matches!(f.fault, Fault::CrashBroker { .. }))
                .map_or(u64::MAX, |f| f.at_ms);
            let report = run_plan(
                &plan,
                FlushMode::Sync,
                OracleConfig {
                    acked_must_survive: true,
                },
            )
            .map_err(|e| format!("{e}\n  plan: {plan:?}"))?;
            eio_fired += report.disk.eio_injected;
            if report.entries.iter().any(|e| fenced(&e.event)) {
                fences_seen += 1;
            }
            let late = acks_after_fence(&report.entries, fenced, crash_ms);
            if !late.is_empty() {
                return Err(report.describe(&format!("acknowledged while fenced: {late:?}")));
            }
            report.failure().map_or(Ok(()), Err)
        },
    );
    assert!(eio_fired > 0, "the injected EIO never fired");
    assert!(
        fences_seen > 0,
        "no producer ever saw the fenced broker refuse a send"
    );
}
