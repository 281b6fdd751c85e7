//! `Liveness`: the leader's memory of broker heartbeats (never replicated).
//! A new leader starts empty and gives every master a full timeout from the
//! moment it became leader, so a leader change alone never fails a master
//! over; a candidate must have heartbeated to this leader within the timeout.

use std::collections::BTreeMap;
use std::time::Duration;

use super::state::Candidate;

#[derive(Clone, Copy, Debug)]
struct Seen {
    at: Duration,
    max_offset: u64,
}

/// Last heartbeat per group and replica, on the monotonic clock.
#[derive(Debug, Default)]
pub struct Liveness {
    leader_since: Duration,
    seen: BTreeMap<String, BTreeMap<u64, Seen>>,
}

impl Liveness {
    /// Forgets everything: this controller became leader at `now`.
    pub fn reset(&mut self, now: Duration) {
        self.leader_since = now;
        self.seen.clear();
    }

    /// Records a heartbeat of a known member.
    pub fn record(&mut self, group: &str, replica_id: u64, max_offset: u64, now: Duration) {
        if let Some(replicas) = self.seen.get_mut(group) {
            replicas.insert(
                replica_id,
                Seen {
                    at: now,
                    max_offset,
                },
            );
        } else {
            let replicas = BTreeMap::from([(
                replica_id,
                Seen {
                    at: now,
                    max_offset,
                },
            )]);
            self.seen.insert(group.to_owned(), replicas);
        }
    }

    fn get(&self, group: &str, replica_id: u64) -> Option<Seen> {
        self.seen.get(group)?.get(&replica_id).copied()
    }

    /// Whether the replica heartbeated to this leader within `timeout`.
    pub fn is_alive(&self, group: &str, replica_id: u64, now: Duration, timeout: Duration) -> bool {
        self.get(group, replica_id)
            .is_some_and(|seen| now.saturating_sub(seen.at) <= timeout)
    }

    /// Whether the master has been silent longer than `timeout`, counting
    /// from its last heartbeat or from when this leader took over.
    pub fn master_silent(
        &self,
        group: &str,
        master: u64,
        now: Duration,
        timeout: Duration,
    ) -> bool {
        let since = self
            .get(group, master)
            .map_or(self.leader_since, |seen| seen.at.max(self.leader_since));
        now.saturating_sub(since) > timeout
    }

    /// Replicas of `group` alive now, with their reported offsets.
    pub fn alive(&self, group: &str, now: Duration, timeout: Duration) -> BTreeMap<u64, Candidate> {
        self.seen
            .get(group)
            .into_iter()
            .flatten()
            .filter(|(_, seen)| now.saturating_sub(seen.at) <= timeout)
            .map(|(id, seen)| {
                (
                    *id,
                    Candidate {
                        max_offset: seen.max_offset,
                    },
                )
            })
            .collect()
    }

    /// The offset the replica last reported.
    pub fn max_offset(&self, group: &str, replica_id: u64) -> Option<u64> {
        self.get(group, replica_id).map(|seen| seen.max_offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIMEOUT: Duration = Duration::from_secs(10);

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn new_leader_gives_an_unheard_master_a_full_timeout() {
        let mut liveness = Liveness::default();
        liveness.reset(secs(100));
        assert!(!liveness.master_silent("g", 1, secs(109), TIMEOUT));
        assert!(liveness.master_silent("g", 1, secs(111), TIMEOUT));
    }

    #[test]
    fn master_silent_counts_from_its_last_heartbeat() {
        let mut liveness = Liveness::default();
        liveness.reset(secs(0));
        liveness.record("g", 1, 50, secs(20));
        assert!(!liveness.master_silent("g", 1, secs(29), TIMEOUT));
        assert!(liveness.master_silent("g", 1, secs(31), TIMEOUT));
        assert!(liveness.is_alive("g", 1, secs(29), TIMEOUT));
        assert!(!liveness.is_alive("g", 1, secs(31), TIMEOUT));
    }

    #[test]
    fn only_recent_heartbeats_make_candidates_and_reset_forgets_them() {
        let mut liveness = Liveness::default();
        liveness.record("g", 2, 7, secs(1));
        liveness.record("g", 3, 9, secs(15));
        let alive = liveness.alive("g", secs(16), TIMEOUT);
        assert_eq!(alive.keys().copied().collect::<Vec<_>>(), vec![3]);
        assert_eq!(liveness.max_offset("g", 2), Some(7));
        liveness.reset(secs(16));
        assert!(liveness.alive("g", secs(16), TIMEOUT).is_empty());
    }
}
