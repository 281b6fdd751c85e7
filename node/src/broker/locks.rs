//! Orderly-consumption queue locks (`LOCK_BATCH_MQ` / `UNLOCK_BATCH_MQ`):
//! per consumer group, each queue (topic, broker name, queue id) is held by
//! at most one client id. A lock is granted when the queue is free, its
//! lock expired, or the same client already holds it (which renews it).
//! Expiry is judged on the monotonic clock the caller passes in.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use sluice_net::body::MessageQueue;

#[derive(Clone, Debug)]
struct Holder {
    client_id: String,
    renewed_at: Duration,
}

/// The lock table of one broker.
pub struct LockTable {
    expiry: Duration,
    groups: Mutex<BTreeMap<String, BTreeMap<MessageQueue, Holder>>>,
}

impl LockTable {
    /// An empty table whose locks expire `expiry` after their last renewal.
    pub fn new(expiry: Duration) -> Self {
        Self {
            expiry,
            groups: Mutex::new(BTreeMap::new()),
        }
    }

    /// Locks (or renews) each of `queues` for `client_id` in `group` where
    /// allowed at monotonic time `now`; returns the queues the client now holds.
    pub fn lock_batch(
        &self,
        group: &str,
        client_id: &str,
        queues: &[MessageQueue],
        now: Duration,
    ) -> Vec<MessageQueue> {
        let mut groups = self.groups.lock().expect("invariant: lock not poisoned");
        let table = groups.entry(group.to_owned()).or_default();
        let mut granted = Vec::new();
        for mq in queues {
            let free = table.get(mq).is_none_or(|h| {
                h.client_id == client_id || now.saturating_sub(h.renewed_at) > self.expiry
            });
            if free {
                table.insert(
                    mq.clone(),
                    Holder {
                        client_id: client_id.to_owned(),
                        renewed_at: now,
                    },
                );
                granted.push(mq.clone());
            }
        }
        granted
    }

    /// Releases those of `queues` that `client_id` holds in `group`.
    pub fn unlock_batch(&self, group: &str, client_id: &str, queues: &[MessageQueue]) {
        let mut groups = self.groups.lock().expect("invariant: lock not poisoned");
        if let Some(table) = groups.get_mut(group) {
            for mq in queues {
                if table.get(mq).is_some_and(|h| h.client_id == client_id) {
                    table.remove(mq);
                }
            }
            if table.is_empty() {
                groups.remove(group);
            }
        }
    }

    /// The client holding an unexpired lock on `mq` in `group`, if any.
    pub fn holder(&self, group: &str, mq: &MessageQueue, now: Duration) -> Option<String> {
        let groups = self.groups.lock().expect("invariant: lock not poisoned");
        let h = groups.get(group)?.get(mq)?;
        (now.saturating_sub(h.renewed_at) <= self.expiry).then(|| h.client_id.clone())
    }
}

#[cfg(test)]
mod tests {
    use sluice_core::testing::ManualClock;
    use sluice_core::Clock;

    use super::*;

    fn mq(queue_id: i32) -> MessageQueue {
        MessageQueue {
            topic: "T".into(),
            broker_name: "broker-a".into(),
            queue_id,
        }
    }

    #[test]
    fn a_locked_queue_is_exclusive_to_its_client() {
        let clock = ManualClock::new(0);
        let t = LockTable::new(Duration::from_secs(60));
        let got = t.lock_batch("g", "c1", &[mq(0), mq(1)], clock.monotonic());
        assert_eq!(got, vec![mq(0), mq(1)]);
        let got = t.lock_batch("g", "c2", &[mq(1), mq(2)], clock.monotonic());
        assert_eq!(got, vec![mq(2)]);
        assert_eq!(
            t.holder("g", &mq(1), clock.monotonic()).as_deref(),
            Some("c1")
        );
        // Another group's locks are independent.
        assert_eq!(
            t.lock_batch("other", "c2", &[mq(1)], clock.monotonic()),
            vec![mq(1)]
        );
    }

    #[test]
    fn the_same_client_renews_and_keeps_its_lock() {
        let clock = ManualClock::new(0);
        let t = LockTable::new(Duration::from_secs(60));
        t.lock_batch("g", "c1", &[mq(0)], clock.monotonic());
        clock.advance(Duration::from_secs(50));
        assert_eq!(
            t.lock_batch("g", "c1", &[mq(0)], clock.monotonic()),
            vec![mq(0)]
        );
        // 70 s after the first lock but 20 s after the renewal: still held.
        clock.advance(Duration::from_secs(20));
        assert!(t
            .lock_batch("g", "c2", &[mq(0)], clock.monotonic())
            .is_empty());
    }

    #[test]
    fn an_expired_lock_goes_to_another_client() {
        let clock = ManualClock::new(0);
        let t = LockTable::new(Duration::from_secs(60));
        t.lock_batch("g", "c1", &[mq(0)], clock.monotonic());
        clock.advance(Duration::from_secs(60));
        assert!(t
            .lock_batch("g", "c2", &[mq(0)], clock.monotonic())
            .is_empty());
        clock.advance(Duration::from_millis(1));
        assert_eq!(t.holder("g", &mq(0), clock.monotonic()), None);
        assert_eq!(
            t.lock_batch("g", "c2", &[mq(0)], clock.monotonic()),
            vec![mq(0)]
        );
        assert_eq!(
            t.holder("g", &mq(0), clock.monotonic()).as_deref(),
            Some("c2")
        );
    }

    #[test]
    fn unlock_releases_only_the_holders_locks() {
        let clock = ManualClock::new(0);
        let t = LockTable::new(Duration::from_secs(60));
        t.lock_batch("g", "c1", &[mq(0)], clock.monotonic());
        t.unlock_batch("g", "c2", &[mq(0)]);
        assert!(t
            .lock_batch("g", "c2", &[mq(0)], clock.monotonic())
            .is_empty());
        t.unlock_batch("g", "c1", &[mq(0)]);
        assert_eq!(
            t.lock_batch("g", "c2", &[mq(0)], clock.monotonic()),
            vec![mq(0)]
        );
    }
}
