//! Long polling: a pull that finds nothing new parks on its queue's signal
//! and is woken by the store's dispatch of a new message to that queue (or
//! by its timeout) — an event, not a polling loop. The waiter registers
//! before it looks at the queue, so a message arriving in between is never
//! missed.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

/// The queue id of a signal woken by an arrival on any queue of its topic.
pub const ANY_QUEUE: i32 = -1;

/// One wake-up signal per topic/queue.
#[derive(Default)]
pub struct ArrivalSignals {
    signals: Mutex<BTreeMap<(String, i32), Arc<Notify>>>,
}

impl ArrivalSignals {
    /// The signal of a queue, created on first use.
    pub fn signal(&self, topic: &str, queue_id: i32) -> Arc<Notify> {
        let mut map = self.lock();
        if let Some(n) = map.get(&(topic.to_owned(), queue_id)) {
            return Arc::clone(n);
        }
        let n = Arc::new(Notify::new());
        map.insert((topic.to_owned(), queue_id), Arc::clone(&n));
        n
    }

    /// Wakes every pull parked on the queue, and every waiter on the
    /// whole topic (queue id [`ANY_QUEUE`]).
    pub fn notify(&self, topic: &str, queue_id: i32) {
        let (one, any) = {
            let map = self.lock();
            let mut key = (topic.to_owned(), queue_id);
            let one = map.get(&key).cloned();
            key.1 = ANY_QUEUE;
            (one, map.get(&key).cloned())
        };
        for n in one.into_iter().chain(any) {
            n.notify_waiters();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<(String, i32), Arc<Notify>>> {
        self.signals
            .lock()
            .expect("invariant: signal lock not poisoned")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn a_registered_waiter_is_woken_by_a_later_notify() {
        let s = ArrivalSignals::default();
        let n = s.signal("T", 0);
        let waiter = n.notified();
        tokio::pin!(waiter);
        waiter.as_mut().enable();
        s.notify("T", 0);
        tokio::time::timeout(std::time::Duration::from_secs(1), waiter)
            .await
            .expect("woken, not timed out");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_topic_wide_waiter_is_woken_by_any_of_its_queues() {
        let s = ArrivalSignals::default();
        let n = s.signal("T", ANY_QUEUE);
        let waiter = n.notified();
        tokio::pin!(waiter);
        waiter.as_mut().enable();
        s.notify("U", 3);
        s.notify("T", 3);
        tokio::time::timeout(std::time::Duration::from_secs(1), waiter)
            .await
            .expect("woken by queue 3 of its topic");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn other_queues_do_not_wake_a_waiter() {
        let s = ArrivalSignals::default();
        let n = s.signal("T", 0);
        let waiter = n.notified();
        tokio::pin!(waiter);
        waiter.as_mut().enable();
        s.notify("T", 1);
        s.notify("U", 0);
        let r = tokio::time::timeout(std::time::Duration::from_millis(50), waiter).await;
        assert!(r.is_err(), "woken by another queue's arrival");
    }
}
