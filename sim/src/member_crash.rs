//! Consumer-group members that join late, crash or restart: a member the
//! plan crashes runs as a turmoil host (only hosts can crash), one that
//! joins late starts when its `JoinMember` fault fires (the nemesis applies
//! these faults). A crashed member owns nothing until a `RestartMember`
//! starts its host again. The duplicate check: a message the group
//! consumed twice must be explained — the member that consumed it first
//! crashed between the two, or lost the message's queue in a rebalance in
//! between (or just after: members rebalance independently); anything else
//! (two owners consuming one queue at once, a member repeating what it had
//! committed) is a violation.

use std::collections::BTreeMap;
use std::rc::Rc;

use scenarios::{Fault, Plan};

use crate::group::{member, member_host, GroupProgress};
use crate::history::{Entry, Event, History, MessageId};
use crate::oracle::Violation;

/// Starts member `m` of the plan's group — as a host when the plan crashes
/// it, else as a client — unless it joins later and `joining` (its
/// `JoinMember` fault firing now) is false.
pub fn start_member(
    sim: &mut turmoil::Sim<'_>,
    plan: &Plan,
    m: u32,
    progress: &Rc<GroupProgress>,
    history: &History,
    joining: bool,
) {
    let joins_late = plan
        .faults
        .iter()
        .any(|f| f.fault == Fault::JoinMember { member: m });
    if joins_late && !joining {
        return;
    }
    let lossy = plan.workload.lossy_group_handler;
    let crashes = plan
        .faults
        .iter()
        .any(|f| f.fault == Fault::CrashMember { member: m });
    if crashes {
        let (progress, history) = (Rc::clone(progress), history.clone());
        sim.host(member_host(m), move || {
            member(m, Rc::clone(&progress), history.clone(), lossy)
        });
    } else {
        sim.client(
            member_host(m),
            member(m, Rc::clone(progress), history.clone(), lossy),
        );
    }
}

/// Members rebalance independently (on the broker's notification, or at
/// their 1 s rebalance interval), so a new owner may start consuming a
/// queue before the old owner lets it go — and the member records its
/// assignment every 20 ms. A repeat is explained by either consumer
/// losing the queue no later than this long after the repeat (at start-up
/// every member that sees itself alone in the consumer list takes all
/// queues, and the later one to rebalance may be either).
const REBALANCE_LAG_MS: u64 = 1_000;

/// One consumption of a message: when, by whom, from which queue.
struct Consumption {
    at_ms: u64,
    member: u32,
    queue: i32,
}

/// Messages the group consumed more than once without a crash or a
/// rebalance to explain it. Judged only in plans that crash a member:
/// other group plans have causes this check does not model (a broker
/// crash losing commits, a cut-off member consuming what it had fetched).
pub fn unexplained_duplicates(plan: &Plan, entries: &[Entry]) -> Vec<Violation> {
    let mut crashed: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
    for f in &plan.faults {
        if let Fault::CrashMember { member } = f.fault {
            crashed.entry(member).or_default().push(f.at_ms);
        }
    }
    if crashed.is_empty() {
        return Vec::new();
    }
    let mut consumed: BTreeMap<&MessageId, Vec<Consumption>> = BTreeMap::new();
    for e in entries {
        if let Event::Consumed {
            member,
            queue,
            records,
        } = &e.event
        {
            for (_, id) in records {
                consumed.entry(id).or_default().push(Consumption {
                    at_ms: e.at_ms,
                    member: *member,
                    queue: *queue,
                });
            }
        }
    }
    let lost_queue = |member: u32, queue: i32, from_ms: u64, to_ms: u64| {
        entries.iter().any(|e| {
            matches!(&e.event, Event::Rebalanced { member: m, queues }
                if *m == member && !queues.contains(&queue))
                && e.at_ms >= from_ms
                && e.at_ms <= to_ms + REBALANCE_LAG_MS
        })
    };
    let mut found = Vec::new();
    for (id, times) in consumed {
        for pair in times.windows(2) {
            let (first, again) = (&pair[0], &pair[1]);
            // A restarted member's crash explains only repeats of what it
            // consumed before that crash.
            let crash_explains = crashed
                .get(&first.member)
                .is_some_and(|cs| cs.iter().any(|c| (first.at_ms..=again.at_ms).contains(c)));
            // Either may be the one that gives the queue up: a member that
            // starts (or restarts) alone in the consumer list takes every
            // queue until its next rebalance.
            let moved = [first.member, again.member]
                .into_iter()
                .any(|m| lost_queue(m, first.queue, first.at_ms, again.at_ms));
            if !crash_explains && !moved {
                found.push(Violation::UnexplainedDuplicate {
                    id: id.clone(),
                    first: (first.member, first.at_ms),
                    again: (again.member, again.at_ms),
                });
            }
        }
    }
    found
}
