//! Scenario `group_consumption_across_faults`: a clustering push-consumer
//! group of 2–3 members, each on its own host, consumes while producers
//! send; the broker loses power and restarts, and/or one member is
//! partitioned from the broker and healed. After the heal every
//! acknowledged message has been consumed at least once, the group's
//! committed offsets never moved backwards (beyond what a crash may lose)
//! nor past an unconsumed message, and they end at the queue ends with
//! every queue owned by exactly one member.

use scenarios::{Fault, Plan};
use sim::history::Event;
use sim::run::run_judged;
use sim::seeds::for_each_seed;
use sluice_core::FlushMode;

const SEEDS: std::ops::RangeInclusive<u64> = 1..=64;

/// What the sweep exercised, summed over its seeds.
#[derive(Debug, Default)]
struct Coverage {
    consumed: usize,
    power_losses: u64,
    partitions: usize,
    /// Commits that fell back after a crash (redelivery, allowed).
    commits_lost_at_crash: usize,
    /// Runs without a broker crash in which another member took on queues
    /// while one was cut off (the broker expelled it; the group rebalanced).
    rebalanced_around_a_cut: usize,
}

#[test]
fn group_consumes_every_acknowledged_message_and_catches_up_after_faults() {
    let mut seen = Coverage::default();
    for_each_seed(
        "group_consumption_across_faults",
        "group_consumes_every_acknowledged_message_and_catches_up_after_faults",
        SEEDS.clone(),
        |seed| {
            let plan = Plan::group_consumption(seed);
            let report = run_judged(&plan, FlushMode::Sync)?;
            seen.power_losses += report.disk.power_losses;
            seen.partitions += plan
                .faults
                .iter()
                .filter(|f| matches!(f.fault, Fault::PartitionMember { .. }))
                .count();
            let events: Vec<&Event> = report.entries.iter().map(|e| &e.event).collect();
            seen.consumed += events
                .iter()
                .filter(|e| matches!(e, Event::Consumed { .. }))
                .count();
            seen.commits_lost_at_crash += commits_that_fell_back(&events);
            if rebalanced_around_a_cut(&plan, &report.entries) {
                seen.rebalanced_around_a_cut += 1;
            }
            Ok(())
        },
    );
    // The sweep must exercise what it claims to.
    assert!(seen.consumed > 0, "{seen:?}");
    assert!(seen.power_losses > 0, "{seen:?}");
    assert!(seen.partitions > 0, "{seen:?}");
    assert!(seen.commits_lost_at_crash > 0, "{seen:?}");
    assert!(seen.rebalanced_around_a_cut > 0, "{seen:?}");
}

/// Reported committed offsets lower than the one reported before them.
fn commits_that_fell_back(events: &[&Event]) -> usize {
    let mut last = std::collections::BTreeMap::new();
    let mut fell = 0;
    for e in events {
        if let Event::Committed { queue, offset } = e {
            if last
                .insert(*queue, *offset)
                .is_some_and(|before| before > *offset)
            {
                fell += 1;
            }
        }
    }
    fell
}

/// Whether, in a run without a broker crash (which rebalances the group
/// too), another member's assignment grew while one member was partitioned:
/// it took over the cut-off member's queues.
fn rebalanced_around_a_cut(plan: &Plan, entries: &[sim::history::Entry]) -> bool {
    if plan
        .faults
        .iter()
        .any(|f| matches!(f.fault, Fault::CrashBroker { .. }))
    {
        return false;
    }
    let find = |wanted: fn(&Fault) -> Option<u32>| {
        plan.faults
            .iter()
            .find_map(|f| wanted(&f.fault).map(|m| (f.at_ms, m)))
    };
    let (Some((start, cut)), Some((end, _))) = (
        find(|f| match f {
            Fault::PartitionMember { member } => Some(*member),
            _ => None,
        }),
        find(|f| match f {
            Fault::RepairMember { member } => Some(*member),
            _ => None,
        }),
    ) else {
        return false;
    };
    let mut owned = std::collections::BTreeMap::new();
    for e in entries {
        if let Event::Rebalanced { member, queues } = &e.event {
            let before = owned.insert(*member, queues.len()).unwrap_or(0);
            if *member != cut && e.at_ms > start && e.at_ms < end && queues.len() > before {
                return true;
            }
        }
    }
    false
}
