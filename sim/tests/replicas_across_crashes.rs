//! Scenario `replicas_across_crashes`: a master with one or two replicas,
//! SYNC or ASYNC per seed; replicas crash (mostly losing their page cache)
//! and restart, and/or the master crashes and restarts — starting a new
//! epoch, so a replica holding a tail the master lost truncates it before
//! following. The master uses `SYNC_FLUSH` (fixed roles cannot fail over, so
//! the master's own disk is what keeps acknowledged messages). After the
//! heal every replica's CommitLog is byte-identical to the master's and
//! nothing acknowledged is lost.

use scenarios::Plan;
use sim::run::run_judged;
use sim::seeds::for_each_seed;
use sluice_core::FlushMode;

const SEEDS: std::ops::RangeInclusive<u64> = 1..=32;

#[test]
fn replicas_agree_with_the_master_after_crashes() {
    let mut torn = 0;
    for_each_seed(
        "replicas_across_crashes",
        "replicas_agree_with_the_master_after_crashes",
        SEEDS,
        |seed| {
            let plan = Plan::replicas_across_crashes(seed);
            let report = run_judged(&plan, FlushMode::Sync)?;
            torn += report.disk.pages_torn + report.disk.pages_lost;
            Ok(())
        },
    );
    assert!(torn > 0, "no crash ever lost or tore a page");
}
