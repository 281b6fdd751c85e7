//! Scenario `commit_log_read_eio`: now and then the broker's next few
//! reads of its CommitLog fail with EIO while producers send and
//! long-polling consumers read. A pull that hits one must get an error
//! (the consumer retries at the same offset) — never an answer that moves
//! past a message it did not return — and dispatch, which reads the log
//! too, must retry rather than fence the broker. In half the seeds the
//! broker also crashes and the first reads of its restart fail: the start
//! fails and is retried, and never cuts the log at an unreadable record.
//! Nothing acknowledged is lost and no consumer skips an offset.

use scenarios::Plan;
use sim::history::Event;
use sim::oracle::skipped_deliveries;
use sim::run::run_judged;
use sim::seeds::for_each_seed;
use sluice_core::FlushMode;

const SEEDS: std::ops::RangeInclusive<u64> = 1..=12;

#[test]
fn commit_log_read_errors_are_retried_and_nothing_is_skipped() {
    let mut read_eio = 0;
    for_each_seed(
        "commit_log_read_eio",
        "commit_log_read_errors_are_retried_and_nothing_is_skipped",
        SEEDS,
        |seed| {
            let plan = Plan::read_eio(seed);
            let report = run_judged(&plan, FlushMode::Sync)?;
            let skipped = skipped_deliveries(&report.entries);
            if !skipped.is_empty() {
                return Err(report.describe(&format!("consumers skipped {skipped:?}")));
            }
            // A read error is no reason to fence: sends keep succeeding.
            let refused = report.entries.iter().find(|e| {
                matches!(&e.event, Event::SendInfo { reason, .. } | Event::SendFail { reason, .. }
                    if reason.contains("fenced"))
            });
            if let Some(e) = refused {
                return Err(report.describe(&format!("fenced over a read error: {e:?}")));
            }
            read_eio += report.disk.read_eio_injected;
            Ok(())
        },
    );
    assert!(read_eio > 0, "no CommitLog read ever failed");
}
