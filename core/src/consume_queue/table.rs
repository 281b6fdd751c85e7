//! All ConsumeQueues of a store, by topic and queue id, under
//! `consumequeue/<topic>/<queueId>/`. Ordered maps keep every walk over the
//! queues (checkpoint, retention) deterministic.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use crate::disk::Disk;
use crate::error::Result;

use super::ConsumeQueue;

type Queues<D> = BTreeMap<String, BTreeMap<i32, Arc<ConsumeQueue<D>>>>;

/// The ConsumeQueues of one store.
pub struct ConsumeQueueTable<D: Disk> {
    disk: D,
    root: String,
    entries_per_segment: u64,
    queues: RwLock<Queues<D>>,
}

impl<D: Disk> ConsumeQueueTable<D> {
    pub(crate) fn new(disk: D, root: &str, entries_per_segment: u64) -> Self {
        Self {
            disk,
            root: root.to_owned(),
            entries_per_segment,
            queues: RwLock::new(BTreeMap::new()),
        }
    }

    /// The queue, if it exists.
    pub fn get(&self, topic: &str, queue_id: i32) -> Option<Arc<ConsumeQueue<D>>> {
        self.queues
            .read()
            .expect("invariant: lock not poisoned")
            .get(topic)
            .and_then(|q| q.get(&queue_id))
            .cloned()
    }

    /// The queue, opened from disk (files and all) if not yet loaded. The
    /// second value is true when it was opened by this call. The store
    /// opens queues from dispatch; it is public for benchmarks and tools.
    pub fn get_or_open(&self, topic: &str, queue_id: i32) -> Result<(Arc<ConsumeQueue<D>>, bool)> {
        if let Some(q) = self.get(topic, queue_id) {
            return Ok((q, false));
        }
        let mut map = self.queues.write().expect("invariant: lock not poisoned");
        if let Some(q) = map.get(topic).and_then(|q| q.get(&queue_id)) {
            return Ok((Arc::clone(q), false));
        }
        let dir = format!("{}/{topic}/{queue_id}", self.root);
        let q = Arc::new(ConsumeQueue::open(
            self.disk.clone(),
            &dir,
            topic,
            queue_id,
            self.entries_per_segment,
        )?);
        map.entry(topic.to_owned())
            .or_default()
            .insert(queue_id, Arc::clone(&q));
        Ok((q, true))
    }

    /// Every queue, ordered by topic then queue id.
    pub fn all(&self) -> Vec<Arc<ConsumeQueue<D>>> {
        self.queues
            .read()
            .expect("invariant: lock not poisoned")
            .values()
            .flat_map(|qs| qs.values().cloned())
            .collect()
    }

    /// Queue ids of one topic, ascending.
    pub fn queue_ids(&self, topic: &str) -> Vec<i32> {
        self.queues
            .read()
            .expect("invariant: lock not poisoned")
            .get(topic)
            .map(|qs| qs.keys().copied().collect())
            .unwrap_or_default()
    }
}
