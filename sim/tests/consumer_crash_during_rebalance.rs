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
//! with every queue owned by exactly one live member. A victim that
//! restarts (half the plans) rejoins and resumes from the committed offsets,
//! never below what the group had committed by its crash.

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
    /// Runs whose victim restarted, rejoined and consumed again.
    restarted_and_consumed: usize,
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
            if let Some(restart_ms) = restart(&plan) {
                let resumed = resumed(entries, crash_ms, restart_ms, victim)
                    .map_err(|why| report.describe(&why))?;
                seen.restarted_and_consumed += usize::from(resumed);
            }
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
    assert!(seen.restarted_and_consumed > 0, "{seen:?}");
}

/// The plan's restart of its victim, if it has one.
fn restart(plan: &Plan) -> Option<u64> {
    plan.faults.iter().find_map(|f| match f.fault {
        Fault::RestartMember { .. } => Some(f.at_ms),
        _ => None,
    })
}

/// Whether `victim`, restarted at `restart_ms`, consumed again; an error if
/// it consumed an offset below what the group had committed for that queue
/// by its crash (a restart resumes from the committed offsets).
fn resumed(entries: &[Entry], crash_ms: u64, restart_ms: u64, victim: u32) -> Result<bool, String> {
    let mut committed = std::collections::BTreeMap::new();
    for e in entries.iter().take_while(|e| e.at_ms <= crash_ms) {
        if let Event::Committed { queue, offset } = e.event {
            committed.insert(queue, offset);
        }
    }
    let mut consumed = false;
    for e in entries.iter().filter(|e| e.at_ms >= restart_ms) {
        if let Event::Consumed {
            member,
            queue,
            records,
        } = &e.event
        {
            if *member != victim {
                continue;
            }
            consumed = true;
            let floor = committed.get(queue).copied().unwrap_or(0);
            if let Some((offset, id)) = records.iter().find(|(o, _)| *o < floor) {
                return Err(format!(
                    "restarted member {victim} consumed {id} at {queue}:{offset} at {} ms, \
                     below the offset {floor} the group had committed by its crash",
                    e.at_ms
                ));
            }
        }
    }
    Ok(consumed)
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
/// that consumed first, or by either member losing the queue in between
/// (or just after); two members consuming one queue at once and keeping
/// it is not.
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
    let second_gives_up = [
        consumed(other, 1),
        consumed(victim, 9),
        owns(victim, 30, vec![1]),
    ];
    assert_eq!(
        sim::member_crash::unexplained_duplicates(&plan, &second_gives_up),
        vec![]
    );
    // A crash explains repeats only of what was consumed before it: after
    // a restart the victim is held to the rule like anyone else.
    let after_restart = [
        consumed(victim, crash_ms + 5),
        consumed(other, crash_ms + 50),
    ];
    assert_eq!(
        sim::member_crash::unexplained_duplicates(&plan, &after_restart),
        vec![Violation::UnexplainedDuplicate {
            id: "p0-0".into(),
            first: (victim, crash_ms + 5),
            again: (other, crash_ms + 50),
        }]
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
