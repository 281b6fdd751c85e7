//! Queue allocation among the members of a consumer group: pure functions
//! of (queues, member IDs, me), so every member computes the same split.

use std::collections::BTreeMap;

use crate::message::MessageQueue;

/// How a group splits its queues.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Allocation {
    /// Contiguous, near-equal ranges in member order (RocketMQ's default).
    Averagely,
    /// A hash ring with this many virtual nodes per member: a member
    /// joining or leaving moves only about 1/N of the queues.
    ConsistentHash {
        /// Virtual nodes per member (RocketMQ: 10).
        virtual_nodes: u32,
    },
}

impl Allocation {
    /// The queues `me` owns. `queues` and `members` may come in any order;
    /// both are sorted first so that every member agrees. A `me` that is not
    /// a member owns nothing.
    pub fn allocate(
        self,
        queues: &[MessageQueue],
        members: &[String],
        me: &str,
    ) -> Vec<MessageQueue> {
        let mut queues = queues.to_vec();
        queues.sort();
        queues.dedup();
        let mut members = members.to_vec();
        members.sort();
        members.dedup();
        let Some(index) = members.iter().position(|m| m == me) else {
            return Vec::new();
        };
        if queues.is_empty() {
            return Vec::new();
        }
        match self {
            Allocation::Averagely => averagely(&queues, members.len(), index),
            Allocation::ConsistentHash { virtual_nodes } => {
                consistent_hash(&queues, &members, me, virtual_nodes.max(1))
            }
        }
    }
}

fn averagely(queues: &[MessageQueue], members: usize, index: usize) -> Vec<MessageQueue> {
    let n = queues.len();
    let rem = n % members;
    let size = if n <= members {
        1
    } else if rem > 0 && index < rem {
        n / members + 1
    } else {
        n / members
    };
    let start = if rem > 0 && index < rem {
        index * size
    } else {
        index * size + rem
    };
    let range = size.min(n.saturating_sub(start));
    (0..range)
        .map(|i| queues[(start + i) % n].clone())
        .collect()
}

/// 64-bit FNV-1a: stable across platforms and releases, unlike std's hasher.
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

fn consistent_hash(
    queues: &[MessageQueue],
    members: &[String],
    me: &str,
    virtual_nodes: u32,
) -> Vec<MessageQueue> {
    let mut ring: BTreeMap<u64, &str> = BTreeMap::new();
    for m in members {
        for v in 0..virtual_nodes {
            ring.insert(fnv1a(format!("{m}-{v}").as_bytes()), m.as_str());
        }
    }
    queues
        .iter()
        .filter(|q| {
            let key = fnv1a(format!("{}@{}@{}", q.topic, q.broker_name, q.queue_id).as_bytes());
            let owner = ring
                .range(key..)
                .next()
                .or_else(|| ring.iter().next())
                .map(|(_, m)| *m);
            owner == Some(me)
        })
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use proptest::prelude::*;

    use super::*;

    fn queues(n: i32) -> Vec<MessageQueue> {
        (0..n)
            .map(|i| MessageQueue {
                topic: "T".to_owned(),
                broker_name: format!("b{}", i % 2),
                queue_id: i / 2,
            })
            .collect()
    }

    fn members(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("c{i}")).collect()
    }

    #[test]
    fn averagely_gives_contiguous_near_equal_ranges() {
        let qs = queues(8);
        let ms = members(3);
        let sizes: Vec<usize> = ms
            .iter()
            .map(|m| Allocation::Averagely.allocate(&qs, &ms, m).len())
            .collect();
        assert_eq!(sizes, [3, 3, 2]);
        assert!(Allocation::Averagely
            .allocate(&qs, &ms, "stranger")
            .is_empty());
    }

    fn check_partition(strategy: Allocation, nq: i32, nm: usize) {
        let qs = queues(nq);
        let ms = members(nm);
        let mut seen = BTreeSet::new();
        let mut total = 0;
        for m in &ms {
            for q in strategy.allocate(&qs, &ms, m) {
                total += 1;
                seen.insert(q);
            }
        }
        assert_eq!(total, seen.len(), "a queue was given to two members");
        let all: BTreeSet<_> = qs.into_iter().collect();
        assert_eq!(seen, all, "a queue was given to nobody");
    }

    proptest! {
        #[test]
        fn every_queue_has_exactly_one_owner(nq in 1_i32..40, nm in 1_usize..12, vn in 1_u32..20) {
            check_partition(Allocation::Averagely, nq, nm);
            check_partition(Allocation::ConsistentHash { virtual_nodes: vn }, nq, nm);
        }
    }

    #[test]
    fn consistent_hash_moves_few_queues_when_a_member_leaves() {
        let qs = queues(64);
        let before = members(4);
        let after = members(3);
        let strategy = Allocation::ConsistentHash { virtual_nodes: 50 };
        let mut moved = 0;
        for m in &after {
            let old: BTreeSet<_> = strategy.allocate(&qs, &before, m).into_iter().collect();
            let new: BTreeSet<_> = strategy.allocate(&qs, &after, m).into_iter().collect();
            assert!(old.is_subset(&new), "a surviving member lost a queue");
            moved += new.len() - old.len();
        }
        assert!(moved < 40, "{moved} queues moved, expected about a quarter");
    }
}
