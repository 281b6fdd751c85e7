//! Scenario `fsync_eio_fences_the_broker`: one sync of the broker's disk
//! fails with EIO (fsyncgate semantics). From then on the broker must
//! refuse every send until it restarts, and nothing acknowledged may be
//! lost; after a crash and a restart it serves again.

use scenarios::{Fault, Plan};
use sim::history::Event;
use sim::oracle::{acks_after_fence, OracleConfig};
use sim::run::{run_plan, RunReport};
use sim::seeds::for_each_seed;
use sluice_core::FlushMode;

const SEEDS: std::ops::RangeInclusive<u64> = 1..=64;
/// Regressions: seeds where a restart that kept the page cache trusted
/// never-persisted pages and a later power loss left a hole mid-log (fixed
/// by recovery rewriting the records it trusts before syncing them).
const PAGE_CACHE_SEEDS: &[u64] = &[3, 105, 135, 151, 239];

fn fenced(e: &Event) -> bool {
    matches!(e, Event::SendInfo { reason, .. } if reason.starts_with("SERVICE_NOT_AVAILABLE"))
}

/// Runs `plan`, then checks the fence (no ack for a send made after a
/// producer saw the broker refuse, until the first crash) and the oracle.
fn run_fenced(plan: &Plan) -> Result<RunReport, String> {
    let crash_ms = plan
        .faults
        .iter()
        .find(|f| matches!(f.fault, Fault::CrashBroker { .. }))
        .map_or(u64::MAX, |f| f.at_ms);
    let report = run_plan(
        plan,
        FlushMode::Sync,
        OracleConfig {
            acked_must_survive: true,
        },
    )
    .map_err(|e| format!("{e}\n  plan: {plan:?}"))?;
    let late = acks_after_fence(&report.entries, fenced, crash_ms);
    if !late.is_empty() {
        return Err(report.describe(&format!("acknowledged while fenced: {late:?}")));
    }
    match report.failure() {
        Some(failure) => Err(failure),
        None => Ok(report),
    }
}

#[test]
fn failed_sync_fences_the_broker_and_loses_nothing_acknowledged() {
    let mut fences_seen = 0;
    let mut eio_fired = 0;
    for_each_seed(
        "fsync_eio_fences_the_broker",
        "failed_sync_fences_the_broker_and_loses_nothing_acknowledged",
        SEEDS.clone(),
        |seed| {
            let report = run_fenced(&Plan::fsync_eio(seed))?;
            eio_fired += report.disk.eio_injected;
            if report.entries.iter().any(|e| fenced(&e.event)) {
                fences_seen += 1;
            }
            Ok(())
        },
    );
    assert!(eio_fired > 0, "the injected EIO never fired");
    assert!(
        fences_seen > 0,
        "no producer ever saw the fenced broker refuse a send"
    );
}

#[test]
fn restart_after_failed_sync_does_not_trust_the_page_cache() {
    for_each_seed(
        "fsync_eio_fences_the_broker",
        "restart_after_failed_sync_does_not_trust_the_page_cache",
        PAGE_CACHE_SEEDS.iter().copied().chain(SEEDS.clone()),
        |seed| run_fenced(&Plan::fsync_eio_page_cache_survives(seed)).map(drop),
    );
}
