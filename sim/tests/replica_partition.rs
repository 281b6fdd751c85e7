//! Scenario `replica_partition`: a master and one replica; the replica is
//! cut off from the master for 1–6 s while producers send, then healed.
//! Under SYNC replication nothing sent during the cut is acknowledged (the
//! sends answer `FLUSH_SLAVE_TIMEOUT`, then `SLAVE_NOT_AVAILABLE` once the
//! replica leaves the in-sync set), nothing acknowledged is lost, and after
//! the heal the replica's CommitLog is byte-identical to the master's.
//! Under ASYNC replication sends go on being acknowledged during the cut
//! and the replica catches up after it.

use scenarios::{Fault, Plan};
use sim::history::Event;
use sim::run::run_judged;
use sim::seeds::for_each_seed;
use sluice_core::FlushMode;

const SEEDS: std::ops::RangeInclusive<u64> = 1..=24;

fn cut_window(plan: &Plan) -> (u64, u64) {
    let at = |want: fn(&Fault) -> bool| {
        plan.faults
            .iter()
            .find(|f| want(&f.fault))
            .map(|f| f.at_ms)
            .expect("the plan cuts and heals")
    };
    (
        at(|f| matches!(f, Fault::PartitionReplica { .. })),
        at(|f| matches!(f, Fault::RepairReplica { .. })),
    )
}

/// Runs the scenario (`sync` or ASYNC replication) over the seed list as
/// test `name`; returns how many events matching `during_cut` happened
/// while the replica was cut off, summed over the seeds.
fn run_seeds(name: &str, sync: bool, during_cut: fn(&Event) -> bool) -> usize {
    let mut count = 0;
    for_each_seed("replica_partition", name, SEEDS, |seed| {
        let plan = Plan::replica_partition(seed, sync);
        let report = run_judged(&plan, FlushMode::Async)?;
        let (cut, heal) = cut_window(&plan);
        count += report
            .entries
            .iter()
            .filter(|e| e.at_ms >= cut && e.at_ms < heal && during_cut(&e.event))
            .count();
        Ok(())
    });
    count
}

#[test]
fn sync_replication_acknowledges_nothing_the_replica_lacks() {
    let refused_during_cut = run_seeds(
        "sync_replication_acknowledges_nothing_the_replica_lacks",
        true,
        |e| matches!(e, Event::SendInfo { reason, .. } if reason.contains("SLAVE")),
    );
    assert!(
        refused_during_cut > 0,
        "no send was ever answered FLUSH_SLAVE_TIMEOUT or SLAVE_NOT_AVAILABLE during a cut"
    );
}

#[test]
fn async_replication_goes_on_and_the_replica_catches_up() {
    let acked_during_cut = run_seeds(
        "async_replication_goes_on_and_the_replica_catches_up",
        false,
        |e| matches!(e, Event::SendOk { .. }),
    );
    assert!(
        acked_during_cut > 0,
        "ASYNC replication stopped acknowledging during a cut"
    );
}
