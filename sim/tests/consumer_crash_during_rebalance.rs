//! Scenario `consumer_crash_during_rebalance`: a clustering push-consumer
//! group of 2–3 members consumes while producers send; the last member
//! joins late and one member's host crashes (a turmoil crash: its process
//! dies with whatever it consumed but had not committed) right around the
//! rebalance that join starts — sometimes cut off from the broker just
//! before, so its connection's close never arrives. The broker drops the
//! dead member (its connection closes, or it expires for silence) and the
//! survivors take its queues. Every acknowledged message is consumed; a message consumed
//! twice is explained by the crash or a queue moving in a rebalance;
//! committed offsets never skip an unconsumed message; lag reaches zero
//! with every queue owned by exactly one live member.

use scenarios::{Fault, Plan};
use sim::history::{Entry, Event};
use sim::oracle::Violation;
use sim::run::{run_judged, run_verdict};
use sim::seeds::for_each_seed;
use sluice_core::FlushMode;

/// Seeds 1–12, and two whose victim is cut off before it crashes (the
/// broker must expire it: no seed of 1–12 draws that).
const SEEDS: [u64; 14] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 22, 28];

/// What the seeds exercised, summed.
#[derive(Debug, Default)]
struct Coverage {
    /// Runs in which a surviving member took on more queues after the crash.
    survivors_took_over: usize,
    /// Runs in which the crashed member had consumed something.
    victim_consumed: usize,
    /// Messages consumed again after the crash of the member that had
    /// consumed them first (redelivery the crash caused).
    redelivered_after_crash: usize,
    /// Runs whose victim was cut off before its crash (the broker had to
    /// expire it) in which the survivors took over.
    took_over_after_expiry: usize,
}

#[test]
fn survivors_take_over_a_crashed_members_queues_and_lose_nothing() {
    let mut seen = Coverage::default();
    for_each_seed(
        "consumer_crash_during_rebalance",
        "survivors_take_over_a_crashed_members_queues_and_lose_nothing",
        SEEDS,
        |seed| {
            let plan = Plan::consumer_crash(seed);
            let report = run_judged(&plan, FlushMode::Sync)?;
            let (crash_ms, victim) = crash(&plan);
            let entries = &report.entries;
            if took_over(entries, crash_ms, victim) {
                seen.survivors_took_over += 1;
                let cut = plan
                    .faults
                    .iter()
                    .any(|f| matches!(f.fault, Fault::PartitionMember { .. }));
                seen.took_over_after_expiry += usize::from(cut);
            }
            if entries
                .iter()
                .any(|e| matches!(&e.event, Event::Consumed { member, .. } if *member == victim))
            {
                seen.victim_consumed += 1;
            }
            seen.redelivered_after_crash += redelivered(entries, crash_ms, victim);
            if !entries
                .iter()
                .any(|e| matches!(e.event, Event::GroupSettled))
            {
                return Err(report.describe("the group never settled"));
            }
            Ok(())
        },
    );
    assert!(seen.survivors_took_over > 0, "{seen:?}");
    assert!(seen.took_over_after_expiry > 0, "{seen:?}");
    assert!(seen.victim_consumed > 0, "{seen:?}");
}

/// The plan's crash: when, and which member.
fn crash(plan: &Plan) -> (u64, u32) {
    plan.faults
        .iter()
        .find_map(|f| match f.fault {
            Fault::CrashMember { member } => Some((f.at_ms, member)),
            _ => None,
        })
        .expect("every consumer_crash plan crashes a member")
}

/// Whether a member other than `victim` owned more queues after the crash
/// than just before it.
fn took_over(entries: &[Entry], crash_ms: u64, victim: u32) -> bool {
    let mut owned = std::collections::BTreeMap::new();
    for e in entries {
        if let Event::Rebalanced { member, queues } = &e.event {
            let before = owned.insert(*member, queues.len()).unwrap_or(0);
            if *member != victim && e.at_ms > crash_ms && queues.len() > before {
                return true;
            }
        }
    }
    false
}

/// Messages `victim` consumed that another member consumed again after
/// the crash.
fn redelivered(entries: &[Entry], crash_ms: u64, victim: u32) -> usize {
    let mut by_victim = std::collections::BTreeSet::new();
    let mut again = std::collections::BTreeSet::new();
    for e in entries {
        if let Event::Consumed {
            member, records, ..
        } = &e.event
        {
            for (_, id) in records {
                if *member == victim {
                    by_victim.insert(id.clone());
                } else if e.at_ms > crash_ms && by_victim.contains(id) {
                    again.insert(id.clone());
                }
            }
        }
    }
    again.len()
}

/// The duplicate check: a repeat is explained by a crash of the member
/// that consumed first, or by that member losing the queue in between;
/// two members consuming one queue at once is not.
#[test]
fn an_unexplained_repeated_consumption_is_a_violation() {
    let plan = Plan::consumer_crash(1);
    let (crash_ms, victim) = crash(&plan);
    let other = (victim + 1) % plan.workload.group_members;
    let at = |at_ms, event| Entry { at_ms, event };
    let consumed = |member, at_ms| {
        at(
            at_ms,
            Event::Consumed {
                member,
                queue: 0,
                records: vec![(0, "p0-0".into())],
            },
        )
    };
    let owns = |member, at_ms, queues: Vec<i32>| at(at_ms, Event::Rebalanced { member, queues });
    let after_crash = [consumed(victim, 1), consumed(other, crash_ms + 10)];
    assert_eq!(
        sim::member_crash::unexplained_duplicates(&plan, &after_crash),
        vec![]
    );
    let after_rebalance = [
        consumed(other, 1),
        owns(other, 5, vec![1]),
        consumed(victim, 9),
    ];
    assert_eq!(
        sim::member_crash::unexplained_duplicates(&plan, &after_rebalance),
        vec![]
    );
    let two_owners = [consumed(other, 1), consumed(victim, 9)];
    assert_eq!(
        sim::member_crash::unexplained_duplicates(&plan, &two_owners),
        vec![Violation::UnexplainedDuplicate {
            id: "p0-0".into(),
            first: (other, 1),
            again: (victim, 9),
        }]
    );
}

/// The oracle catches a member that reports messages consumed but loses
/// them, in this scenario too.
#[test]
fn oracle_catches_a_lossy_member_across_the_crash() {
    let caught = (1..=4_u64).any(|seed| {
        run_verdict(
            &Plan::consumer_crash(seed).with_lossy_group_handler(),
            FlushMode::Sync,
        )
        .expect("simulation runs")
        .violations
        .iter()
        .any(|v| matches!(v, Violation::NotConsumed { .. }))
    });
    assert!(caught, "a lossy member survived 4 seeds");
}
