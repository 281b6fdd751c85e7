//! Consumer-group checks over timed history entries: every acknowledged
//! message reached a member's handler; the committed offsets the broker
//! reported never move backwards within one broker life, fall back across a
//! crash no lower than what the broker must have persisted, never pass a
//! message the group had not consumed, and end at the queue ends; the final
//! assignment gives every queue to exactly one member.

use std::collections::{BTreeMap, BTreeSet};

use super::Violation;
use crate::history::{Entry, Event};

/// What the group checks need to know about the run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupBounds {
    /// Queues of the topic (`0..queues`).
    pub queues: i32,
    /// Broker outages as (crash, restart) simulated ms, in time order. A
    /// committed offset reported after a restart belongs to the new life.
    pub outages_ms: Vec<(u64, u64)>,
    /// A committed offset reported at least this long before a crash had
    /// been persisted by the broker, so it survives the crash.
    pub persisted_after_ms: u64,
}

/// Every group violation in `entries` (the whole history of a run with a
/// consumer group, drain included).
pub fn check_group(entries: &[Entry], bounds: &GroupBounds) -> Vec<Violation> {
    let consumed = first_consumed(entries);
    let mut out = not_consumed(entries);
    let ends = queue_ends(entries);
    for queue in 0..bounds.queues {
        let commits: Vec<(u64, u64)> = entries
            .iter()
            .filter_map(|e| match e.event {
                Event::Committed { queue: q, offset } if q == queue => Some((e.at_ms, offset)),
                _ => None,
            })
            .collect();
        out.extend(regressions(queue, &commits, bounds));
        out.extend(skips(queue, &commits, &consumed));
        let end = ends.get(&queue).copied().unwrap_or(0);
        let last = commits.last().map(|&(_, offset)| offset);
        if last.unwrap_or(0) != end {
            out.push(Violation::GroupLag {
                queue,
                committed: last,
                end,
            });
        }
    }
    out.extend(unconverged(entries, bounds.queues));
    out
}

/// When each `(queue, offset)` first reached a member's handler.
fn first_consumed(entries: &[Entry]) -> BTreeMap<(i32, u64), u64> {
    let mut at = BTreeMap::new();
    for e in entries {
        if let Event::Consumed { queue, records, .. } = &e.event {
            for (offset, _) in records {
                at.entry((*queue, *offset)).or_insert(e.at_ms);
            }
        }
    }
    at
}

/// Acknowledged messages no member consumed (by id: a message the group
/// got at another position is reported by the version-order checks).
fn not_consumed(entries: &[Entry]) -> Vec<Violation> {
    let mut consumed_ids = BTreeSet::new();
    for e in entries {
        if let Event::Consumed { records, .. } = &e.event {
            consumed_ids.extend(records.iter().map(|(_, id)| id));
        }
    }
    entries
        .iter()
        .filter_map(|e| match &e.event {
            Event::SendOk {
                id,
                queue,
                queue_offset,
            } if !consumed_ids.contains(id) => Some(Violation::NotConsumed {
                id: id.clone(),
                acked: (*queue, *queue_offset),
            }),
            _ => None,
        })
        .collect()
}

/// One past the highest offset read of each queue (the drain reads all).
fn queue_ends(entries: &[Entry]) -> BTreeMap<i32, u64> {
    let mut ends = BTreeMap::new();
    for e in entries {
        if let Event::Poll { queue, records }
        | Event::Delivered { queue, records }
        | Event::Consumed { queue, records, .. } = &e.event
        {
            for (offset, _) in records {
                let end = ends.entry(*queue).or_insert(0);
                *end = (*end).max(offset + 1);
            }
        }
    }
    ends
}

/// Commits `(at ms, offset)` of `queue` that went backwards: below an
/// earlier one of the same broker life, or — first in a new life — below
/// the highest one reported long enough before the crash to be persisted.
fn regressions(queue: i32, commits: &[(u64, u64)], bounds: &GroupBounds) -> Vec<Violation> {
    let life = |at_ms: u64| {
        bounds
            .outages_ms
            .iter()
            .filter(|(_, restart)| *restart <= at_ms)
            .count()
    };
    let mut out = Vec::new();
    let mut previous: Option<(usize, u64)> = None;
    for &(at_ms, offset) in commits {
        let now = life(at_ms);
        let floor = match previous {
            Some((then, high)) if then == now => Some(high),
            _ if now > 0 => {
                let (crash_ms, _) = bounds.outages_ms[now - 1];
                crash_ms
                    .checked_sub(bounds.persisted_after_ms)
                    .and_then(|durable_by| {
                        commits
                            .iter()
                            .filter(|(t, _)| *t <= durable_by)
                            .map(|&(_, o)| o)
                            .max()
                    })
            }
            _ => None,
        };
        if let Some(from) = floor.filter(|from| offset < *from) {
            out.push(Violation::CommitRegressed {
                queue,
                from,
                to: offset,
                at_ms,
            });
        }
        let high = match previous {
            Some((then, high)) if then == now => high.max(offset),
            _ => offset,
        };
        previous = Some((now, high));
    }
    out
}

/// Commits of `queue` past an offset no member had consumed by then.
fn skips(
    queue: i32,
    commits: &[(u64, u64)],
    consumed_at: &BTreeMap<(i32, u64), u64>,
) -> Vec<Violation> {
    commits
        .iter()
        .filter_map(|&(at_ms, committed)| {
            let unconsumed = (0..committed)
                .find(|o| consumed_at.get(&(queue, *o)).is_none_or(|t| *t > at_ms))?;
            Some(Violation::CommitSkipped {
                queue,
                committed,
                unconsumed,
                at_ms,
            })
        })
        .collect()
}

/// Queues that, by each member's last recorded assignment, have no owner
/// or several.
fn unconverged(entries: &[Entry], queues: i32) -> Vec<Violation> {
    let mut last: BTreeMap<u32, &Vec<i32>> = BTreeMap::new();
    for e in entries {
        match &e.event {
            Event::Rebalanced { member, queues } => {
                last.insert(*member, queues);
            }
            Event::GroupSettled => break,
            _ => {}
        }
    }
    (0..queues)
        .filter_map(|queue| {
            let owners: Vec<u32> = last
                .iter()
                .filter(|(_, qs)| qs.contains(&queue))
                .map(|(m, _)| *m)
                .collect();
            (owners.len() != 1).then_some(Violation::AssignmentNotConverged { queue, owners })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(at_ms: u64, event: Event) -> Entry {
        Entry { at_ms, event }
    }

    fn ok(id: &str, queue_offset: u64) -> Event {
        Event::SendOk {
            id: id.into(),
            queue: 0,
            queue_offset,
        }
    }

    fn records(rs: &[(u64, &str)]) -> Vec<(u64, String)> {
        rs.iter().map(|(o, id)| (*o, (*id).to_owned())).collect()
    }

    fn consumed(member: u32, rs: &[(u64, &str)]) -> Event {
        Event::Consumed {
            member,
            queue: 0,
            records: records(rs),
        }
    }

    fn committed(offset: u64) -> Event {
        Event::Committed { queue: 0, offset }
    }

    fn owns(member: u32, queues: &[i32]) -> Event {
        Event::Rebalanced {
            member,
            queues: queues.to_vec(),
        }
    }

    fn drained(rs: &[(u64, &str)]) -> Event {
        Event::Poll {
            queue: 0,
            records: records(rs),
        }
    }

    fn one_queue() -> GroupBounds {
        GroupBounds {
            queues: 1,
            outages_ms: vec![],
            persisted_after_ms: 500,
        }
    }

    /// Two acked messages consumed by member 0, committed after, drained;
    /// member 1 owns nothing in the end.
    fn valid() -> Vec<Entry> {
        vec![
            at(1, owns(0, &[0])),
            at(1, owns(1, &[0])),
            at(2, owns(1, &[])),
            at(3, ok("a", 0)),
            at(4, ok("b", 1)),
            at(5, committed(0)),
            at(10, consumed(0, &[(0, "a"), (1, "b")])),
            at(20, committed(2)),
            at(30, drained(&[(0, "a"), (1, "b")])),
        ]
    }

    #[test]
    fn a_group_that_consumed_and_committed_everything_passes() {
        assert_eq!(check_group(&valid(), &one_queue()), vec![]);
    }

    #[test]
    fn an_acked_message_no_member_consumed_is_reported() {
        let mut h = valid();
        h[6] = at(10, consumed(0, &[(0, "a")]));
        h[7] = at(20, committed(1));
        assert_eq!(
            check_group(&h, &one_queue()),
            vec![
                Violation::NotConsumed {
                    id: "b".into(),
                    acked: (0, 1)
                },
                Violation::GroupLag {
                    queue: 0,
                    committed: Some(1),
                    end: 2
                }
            ]
        );
    }

    #[test]
    fn committing_past_an_unconsumed_message_is_a_skip() {
        let mut h = valid();
        h[5] = at(5, committed(1));
        assert_eq!(
            check_group(&h, &one_queue()),
            vec![Violation::CommitSkipped {
                queue: 0,
                committed: 1,
                unconsumed: 0,
                at_ms: 5
            }]
        );
        let mut beyond_the_end = valid();
        beyond_the_end.insert(8, at(25, committed(3)));
        assert!(
            check_group(&beyond_the_end, &one_queue()).contains(&Violation::CommitSkipped {
                queue: 0,
                committed: 3,
                unconsumed: 2,
                at_ms: 25
            })
        );
    }

    #[test]
    fn a_commit_moving_back_within_one_broker_life_is_a_regression() {
        let mut h = valid();
        h.insert(8, at(25, committed(1)));
        h.insert(9, at(26, committed(2)));
        assert_eq!(
            check_group(&h, &one_queue()),
            vec![Violation::CommitRegressed {
                queue: 0,
                from: 2,
                to: 1,
                at_ms: 25
            }]
        );
    }

    /// Commits 2 at `committed_at`, the broker crashes at 1 000 and
    /// restarts at 1 100, then reports 1 (and 2 again at the end).
    fn regressed_across_a_crash(committed_at: u64) -> Vec<Violation> {
        let h = vec![
            at(1, owns(0, &[0])),
            at(3, ok("a", 0)),
            at(4, ok("b", 1)),
            at(10, consumed(0, &[(0, "a"), (1, "b")])),
            at(committed_at, committed(2)),
            at(1_200, committed(1)),
            at(1_300, committed(2)),
            at(1_400, drained(&[(0, "a"), (1, "b")])),
        ];
        let bounds = GroupBounds {
            outages_ms: vec![(1_000, 1_100)],
            ..one_queue()
        };
        check_group(&h, &bounds)
    }

    #[test]
    fn a_crash_may_lose_recent_commits_but_not_persisted_ones() {
        assert_eq!(regressed_across_a_crash(800), vec![], "not yet persisted");
        assert_eq!(
            regressed_across_a_crash(1_050),
            vec![],
            "an answer arriving between crash and restart is the old life's"
        );
        assert_eq!(
            regressed_across_a_crash(400),
            vec![Violation::CommitRegressed {
                queue: 0,
                from: 2,
                to: 1,
                at_ms: 1_200
            }]
        );
    }

    #[test]
    fn lag_left_after_the_liveness_phase_is_reported() {
        let mut h = valid();
        h.remove(7);
        assert_eq!(
            check_group(&h, &one_queue()),
            vec![Violation::GroupLag {
                queue: 0,
                committed: Some(0),
                end: 2
            }]
        );
        let no_commit_at_all: Vec<Entry> = valid()
            .into_iter()
            .filter(|e| !matches!(e.event, Event::Committed { .. }))
            .collect();
        assert_eq!(
            check_group(&no_commit_at_all, &one_queue()),
            vec![Violation::GroupLag {
                queue: 0,
                committed: None,
                end: 2
            }]
        );
    }

    #[test]
    fn every_queue_needs_exactly_one_owner_in_the_end() {
        let mut h = valid();
        h[2] = at(2, owns(1, &[0, 1]));
        let bounds = GroupBounds {
            queues: 3,
            ..one_queue()
        };
        assert_eq!(
            check_group(&h, &bounds),
            vec![
                Violation::AssignmentNotConverged {
                    queue: 0,
                    owners: vec![0, 1]
                },
                Violation::AssignmentNotConverged {
                    queue: 2,
                    owners: vec![]
                }
            ]
        );
    }

    #[test]
    fn the_assignment_is_judged_when_the_group_settled_not_during_shutdown() {
        let settled = valid();
        // A late membership change racing the members' shutdown.
        let mut late = settled.clone();
        late.push(at(90, Event::GroupSettled));
        late.push(at(91, owns(1, &[0])));
        assert!(check_group(&late, &one_queue()).is_empty());
        // Without the settled mark the same change counts.
        let mut unsettled = settled;
        unsettled.push(at(91, owns(1, &[0])));
        assert!(!check_group(&unsettled, &one_queue()).is_empty());
    }
}
