//! The POP bookkeeping of one broker, as pure state: for each (group,
//! topic, queue) the offsets handed out and not yet acknowledged (their
//! leases), the lowest offset never handed out, and from those the
//! committed offset (everything below it is acknowledged or was filtered
//! out). No I/O: `super` writes the records this state is rebuilt from.

use std::collections::BTreeMap;

/// A (group, topic, queue) consumed by POP.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct QueueKey {
    /// Consumer group.
    pub group: String,
    /// Topic (the group's retry topic is its own key).
    pub topic: String,
    /// Queue id.
    pub queue_id: i32,
}

/// One handed-out, unacknowledged offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    /// The lease's identity: the commit-log offset of the record that
    /// granted it. A receipt handle names it; a renewal or redelivery
    /// grants a new one, so a stale handle no longer matches.
    pub token: i64,
    /// Wall-clock ms when the offset becomes receivable again.
    pub visible_at_ms: i64,
    /// Deliveries so far (1 after the first).
    pub attempt: u32,
}

/// What a receive may hand out on one queue, decided under the queue's
/// lock: leases that expired (redeliveries, in offset order) and whether
/// to read fresh offsets from `fresh_from`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Expired offsets to deliver again, with their previous attempt.
    pub expired: Vec<(i64, u32)>,
    /// Read new offsets from here (`None`: a FIFO queue with unacked
    /// offsets hands out nothing new).
    pub fresh_from: Option<i64>,
}

#[derive(Debug, Clone, Default)]
struct PopQueue {
    /// Lowest offset never handed out (or skipped by the filter).
    next: i64,
    /// Handed-out offsets below `next` not yet acknowledged.
    leases: BTreeMap<i64, Lease>,
}

impl PopQueue {
    fn committed(&self) -> i64 {
        self.leases.keys().next().copied().unwrap_or(self.next)
    }
}

/// Why an acknowledgement or renewal was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stale {
    /// No lease at that offset: already acknowledged (or never handed out).
    NotLeased,
    /// The offset is leased under another token: the handle was renewed or
    /// the offset redelivered since.
    Superseded,
}

/// All POP queues of a broker.
#[derive(Debug, Default)]
pub struct PopState {
    queues: BTreeMap<QueueKey, PopQueue>,
}

impl PopState {
    /// Forgets everything (a role change: the state is rebuilt from the
    /// log by whoever writes next).
    pub fn clear(&mut self) {
        self.queues.clear();
    }

    /// The queue's state, never below `floor` (the committed offset known
    /// from elsewhere, or the queue's minimum): leases under it point at
    /// deleted messages and are dropped.
    fn queue(&mut self, key: &QueueKey, floor: i64) -> &mut PopQueue {
        let q = self.queues.entry(key.clone()).or_default();
        if q.leases.first_key_value().is_some_and(|(o, _)| *o < floor) {
            q.leases = q.leases.split_off(&floor);
        }
        q.next = q.next.max(floor);
        q
    }

    /// What a receive of up to `batch` offsets may hand out at `now_ms`.
    /// `floor` is the queue's lowest readable offset; a FIFO queue hands
    /// out nothing new while any offset is unacknowledged, and redelivers
    /// expired ones in order.
    pub fn plan(
        &mut self,
        key: &QueueKey,
        floor: i64,
        now_ms: i64,
        batch: usize,
        fifo: bool,
    ) -> Plan {
        let q = self.queue(key, floor);
        let expired: Vec<(i64, u32)> = q
            .leases
            .iter()
            .filter(|(_, l)| l.visible_at_ms <= now_ms)
            .take(batch)
            .map(|(o, l)| (*o, l.attempt))
            .collect();
        let fresh_from = if (fifo && !q.leases.is_empty()) || expired.len() >= batch {
            None
        } else {
            Some(q.next)
        };
        Plan {
            expired,
            fresh_from,
        }
    }

    /// Records that `offsets` (each with its attempt) were handed out under
    /// `token` until `visible_at_ms`, and that reading fresh offsets
    /// reached `next` (past anything the filter skipped).
    pub fn grant(
        &mut self,
        key: &QueueKey,
        offsets: &[(i64, u32)],
        token: i64,
        visible_at_ms: i64,
        next: Option<i64>,
    ) {
        let q = self.queue(key, 0);
        for &(offset, attempt) in offsets {
            q.leases.insert(
                offset,
                Lease {
                    token,
                    visible_at_ms,
                    attempt,
                },
            );
            q.next = q.next.max(offset + 1);
        }
        if let Some(next) = next {
            q.next = q.next.max(next);
        }
    }

    /// The lease at `offset` if `token` still names it.
    pub fn check(&self, key: &QueueKey, offset: i64, token: i64) -> Result<Lease, Stale> {
        let lease = self
            .queues
            .get(key)
            .and_then(|q| q.leases.get(&offset))
            .ok_or(Stale::NotLeased)?;
        if lease.token == token {
            Ok(*lease)
        } else {
            Err(Stale::Superseded)
        }
    }

    /// Acknowledges `offset` under `token`; returns the queue's committed
    /// offset after it. A stale token changes nothing.
    pub fn ack(&mut self, key: &QueueKey, offset: i64, token: i64) -> Result<i64, Stale> {
        self.check(key, offset, token)?;
        let q = self.queues.get_mut(key).ok_or(Stale::NotLeased)?;
        q.leases.remove(&offset);
        Ok(q.committed())
    }

    /// The committed offset of `key`: everything below it is acknowledged.
    pub fn committed(&self, key: &QueueKey) -> Option<i64> {
        self.queues.get(key).map(PopQueue::committed)
    }

    /// The open lease at `offset` of `key`, if any.
    pub fn lease(&self, key: &QueueKey, offset: i64) -> Option<Lease> {
        self.queues.get(key)?.leases.get(&offset).copied()
    }

    /// Earliest wall-clock ms at which a lease of `key` expires.
    pub fn next_expiry(&self, key: &QueueKey) -> Option<i64> {
        self.queues
            .get(key)?
            .leases
            .values()
            .map(|l| l.visible_at_ms)
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> QueueKey {
        QueueKey {
            group: "g".into(),
            topic: "t".into(),
            queue_id: 0,
        }
    }

    #[test]
    fn fresh_offsets_come_first_then_only_expired_leases_come_back() {
        let mut s = PopState::default();
        let plan = s.plan(&key(), 0, 1_000, 4, false);
        assert_eq!(
            plan,
            Plan {
                expired: vec![],
                fresh_from: Some(0)
            }
        );
        s.grant(&key(), &[(0, 1), (1, 1)], 100, 2_000, Some(2));
        // Before expiry: nothing old, fresh reading goes on at 2.
        let plan = s.plan(&key(), 0, 1_999, 4, false);
        assert_eq!(
            plan,
            Plan {
                expired: vec![],
                fresh_from: Some(2)
            }
        );
        // At expiry: both come back with their attempts.
        let plan = s.plan(&key(), 0, 2_000, 4, false);
        assert_eq!(plan.expired, vec![(0, 1), (1, 1)]);
        assert_eq!(s.committed(&key()), Some(0));
    }

    #[test]
    fn acks_advance_the_committed_offset_only_over_a_contiguous_prefix() {
        let mut s = PopState::default();
        s.grant(&key(), &[(0, 1), (1, 1), (2, 1)], 7, 5_000, Some(3));
        assert_eq!(s.ack(&key(), 1, 7), Ok(0));
        assert_eq!(s.ack(&key(), 0, 7), Ok(2));
        assert_eq!(s.ack(&key(), 0, 7), Err(Stale::NotLeased));
        assert_eq!(s.ack(&key(), 2, 7), Ok(3));
    }

    #[test]
    fn a_renewed_or_redelivered_lease_refuses_the_old_token() {
        let mut s = PopState::default();
        s.grant(&key(), &[(5, 1)], 10, 1_000, Some(6));
        s.grant(&key(), &[(5, 2)], 20, 9_000, None);
        assert_eq!(s.ack(&key(), 5, 10), Err(Stale::Superseded));
        assert_eq!(s.check(&key(), 5, 20).map(|l| l.attempt), Ok(2));
        assert_eq!(s.ack(&key(), 5, 20), Ok(6));
    }

    #[test]
    fn a_fifo_queue_hands_out_nothing_new_while_an_offset_is_unacked() {
        let mut s = PopState::default();
        s.grant(&key(), &[(0, 1)], 1, 1_000, Some(1));
        assert_eq!(s.plan(&key(), 0, 500, 8, true).fresh_from, None);
        let redo = s.plan(&key(), 0, 1_000, 8, true);
        assert_eq!(
            redo,
            Plan {
                expired: vec![(0, 1)],
                fresh_from: None
            }
        );
        s.ack(&key(), 0, 1).expect("ack");
        assert_eq!(s.plan(&key(), 0, 1_000, 8, true).fresh_from, Some(1));
    }

    #[test]
    fn leases_below_the_readable_floor_are_dropped_and_new_queues_start_at_it() {
        let mut s = PopState::default();
        assert_eq!(s.plan(&key(), 40, 0, 1, false).fresh_from, Some(40));
        let other = QueueKey {
            queue_id: 1,
            ..key()
        };
        s.grant(&other, &[(3, 1)], 1, 0, Some(4));
        let plan = s.plan(&other, 10, 100, 4, false);
        assert_eq!(
            plan,
            Plan {
                expired: vec![],
                fresh_from: Some(10)
            }
        );
        assert_eq!(s.committed(&other), Some(10));
    }
}
