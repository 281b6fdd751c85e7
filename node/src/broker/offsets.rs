//! Consumer offsets: `topic@group` → queue id → next offset to consume, as
//! RocketMQ's `consumerOffset.json`. Updated by commits and pulls, written
//! atomically by the broker's persistence loop and at shutdown. A commit
//! never moves an offset backwards unless it is an explicit reset.

use std::collections::BTreeMap;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

/// The table, in RocketMQ's JSON shape.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct OffsetFile {
    offset_table: BTreeMap<String, BTreeMap<i32, i64>>,
}

/// Committed offsets of every consumer group.
#[derive(Default)]
pub struct OffsetTable {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    file: OffsetFile,
    dirty: bool,
    /// After an operator reset: (`topic@group`, queue) → (reset offset,
    /// wall ms until which commits above it are ignored). A consumer that
    /// has not yet heard of the reset would otherwise commit its old
    /// position straight over it; ignoring a commit only repeats messages.
    fences: BTreeMap<(String, i32), (i64, i64)>,
}

/// How long commits above a reset offset are ignored after the reset.
pub const RESET_FENCE_MS: i64 = 3_000;

fn key(topic: &str, group: &str) -> String {
    format!("{topic}@{group}")
}

impl OffsetTable {
    /// Loads `config/consumerOffset.json` contents.
    pub fn load(json: Option<&[u8]>) -> Result<Self, String> {
        let file = match json {
            Some(raw) => {
                serde_json::from_slice(raw).map_err(|e| format!("consumerOffset.json: {e}"))?
            }
            None => OffsetFile::default(),
        };
        Ok(Self {
            inner: Mutex::new(Inner {
                file,
                dirty: false,
                fences: BTreeMap::new(),
            }),
        })
    }

    /// A replica adopts its master's offsets (`consumerOffset.json`
    /// content), so a failover rewinds consumers as little as possible.
    pub fn adopt(&self, json: &[u8]) -> Result<(), String> {
        let file: OffsetFile =
            serde_json::from_slice(json).map_err(|e| format!("consumerOffset.json: {e}"))?;
        let mut inner = self.lock();
        if inner.file != file {
            inner.file = file;
            inner.dirty = true;
        }
        Ok(())
    }

    /// The committed offset, if any.
    pub fn get(&self, topic: &str, group: &str, queue_id: i32) -> Option<i64> {
        self.lock()
            .file
            .offset_table
            .get(&key(topic, group))?
            .get(&queue_id)
            .copied()
    }

    /// Records a commit at wall time `now_ms`. Older commits arriving late
    /// (oneway updates race with pull commits) never move the offset back,
    /// and for [`RESET_FENCE_MS`] after a reset none moves it past the reset.
    pub fn commit(&self, topic: &str, group: &str, queue_id: i32, offset: i64, now_ms: i64) {
        let mut inner = self.lock();
        let fence_key = (key(topic, group), queue_id);
        if let Some(&(fenced_at, until)) = inner.fences.get(&fence_key) {
            if now_ms >= until {
                inner.fences.remove(&fence_key);
            } else if offset > fenced_at {
                return;
            }
        }
        let slot = inner
            .file
            .offset_table
            .entry(key(topic, group))
            .or_default()
            .entry(queue_id)
            .or_insert(offset);
        if offset > *slot {
            *slot = offset;
        }
        inner.dirty = true;
    }

    /// Sets an offset unconditionally (operator reset at wall time `now_ms`).
    pub fn reset(&self, topic: &str, group: &str, queue_id: i32, offset: i64, now_ms: i64) {
        let mut inner = self.lock();
        inner.fences.insert(
            (key(topic, group), queue_id),
            (offset, now_ms.saturating_add(RESET_FENCE_MS)),
        );
        inner
            .file
            .offset_table
            .entry(key(topic, group))
            .or_default()
            .insert(queue_id, offset);
        inner.dirty = true;
    }

    /// Every group's offsets for `topic`: group → queue id → offset.
    pub fn groups_of(&self, topic: &str) -> BTreeMap<String, BTreeMap<i32, i64>> {
        let prefix = format!("{topic}@");
        self.lock()
            .file
            .offset_table
            .iter()
            .filter_map(|(k, v)| k.strip_prefix(&prefix).map(|g| (g.to_owned(), v.clone())))
            .collect()
    }

    /// The lowest offset any group has committed on `topic`'s queue
    /// `queue_id` (`None`: no group has): every entry below it has been
    /// consumed by every group with offsets there. Gates disk-pressure
    /// retention.
    pub fn consumed_floor(&self, topic: &str, queue_id: i32) -> Option<i64> {
        self.lock()
            .file
            .offset_table
            .iter()
            .filter(|(k, _)| k.split_once('@').is_some_and(|(t, _)| t == topic))
            .filter_map(|(_, queues)| queues.get(&queue_id).copied())
            .min()
    }

    /// Topics `group` has committed offsets for, sorted.
    pub fn topics_of_group(&self, group: &str) -> Vec<String> {
        self.lock()
            .file
            .offset_table
            .keys()
            .filter_map(|k| k.split_once('@'))
            .filter(|(_, g)| *g == group)
            .map(|(t, _)| t.to_owned())
            .collect()
    }

    /// Drops every offset of `group`; true when it had any. (Topic and
    /// group names cannot hold `@`, so `topic@group` splits one way.)
    pub fn remove_group(&self, group: &str) -> bool {
        let mut inner = self.lock();
        let before = inner.file.offset_table.len();
        inner
            .file
            .offset_table
            .retain(|k, _| k.split_once('@').is_none_or(|(_, g)| g != group));
        let removed = inner.file.offset_table.len() != before;
        inner.dirty |= removed;
        removed
    }

    /// JSON to persist, if anything changed since the last call.
    pub fn take_dirty_json(&self) -> Option<Vec<u8>> {
        let mut inner = self.lock();
        if !inner.dirty {
            return None;
        }
        inner.dirty = false;
        serde_json::to_vec(&inner.file).ok()
    }

    /// Marks the table dirty again after a failed write.
    pub fn mark_dirty(&self) {
        self.lock().dirty = true;
    }

    /// JSON of the whole table.
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(&self.lock().file).unwrap_or_default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .expect("invariant: offset table lock not poisoned")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commits_never_move_backwards_but_resets_do() {
        let t = OffsetTable::load(None).expect("load");
        t.commit("T", "g", 0, 10, 0);
        t.commit("T", "g", 0, 7, 0);
        assert_eq!(t.get("T", "g", 0), Some(10));
        t.reset("T", "g", 0, 3, 1_000);
        assert_eq!(t.get("T", "g", 0), Some(3));
        // A stale commit of the old position right after the reset is ignored...
        t.commit("T", "g", 0, 10, 1_500);
        assert_eq!(t.get("T", "g", 0), Some(3));
        t.commit("T", "g", 0, 3, 1_600);
        assert_eq!(t.get("T", "g", 0), Some(3));
        // ...and once the fence expires commits advance again.
        t.commit("T", "g", 0, 5, 1_000 + RESET_FENCE_MS);
        assert_eq!(t.get("T", "g", 0), Some(5));
        assert_eq!(t.get("T", "other", 0), None);
    }

    #[test]
    fn offsets_are_listed_and_removed_by_group() {
        let t = OffsetTable::load(None).expect("load");
        t.commit("T", "g", 0, 1, 0);
        t.commit("%RETRY%g", "g", 0, 2, 0);
        t.commit("T", "g2", 0, 3, 0);
        assert_eq!(t.topics_of_group("g"), vec!["%RETRY%g", "T"]);
        let _ = t.take_dirty_json();
        assert!(t.remove_group("g"));
        assert!(t.topics_of_group("g").is_empty());
        assert_eq!(t.get("T", "g2", 0), Some(3), "other groups are kept");
        assert!(t.take_dirty_json().is_some(), "removal is persisted");
        assert!(!t.remove_group("g"));
    }

    #[test]
    fn the_consumed_floor_is_the_lowest_group_offset_on_the_queue() {
        let t = OffsetTable::load(None).expect("load");
        assert_eq!(t.consumed_floor("T", 0), None, "no group: unconsumed");
        t.commit("T", "g", 0, 40, 0);
        t.commit("T", "g2", 0, 25, 0);
        t.commit("T", "g2", 1, 7, 0);
        t.commit("TX", "g3", 0, 1, 0);
        assert_eq!(t.consumed_floor("T", 0), Some(25));
        assert_eq!(t.consumed_floor("T", 1), Some(7));
        assert_eq!(t.consumed_floor("T", 2), None);
    }

    #[test]
    fn offsets_round_trip_through_rocketmq_json() {
        let t = OffsetTable::load(None).expect("load");
        t.commit("T", "g", 1, 42, 0);
        let json = t.take_dirty_json().expect("dirty");
        assert!(t.take_dirty_json().is_none(), "clean after taking");
        let text = String::from_utf8(json.clone()).expect("utf8");
        assert!(
            text.contains("\"offsetTable\":{\"T@g\":{\"1\":42}}"),
            "{text}"
        );
        let again = OffsetTable::load(Some(&json)).expect("reload");
        assert_eq!(again.get("T", "g", 1), Some(42));
        assert!(OffsetTable::load(Some(b"[1,2")).is_err());
    }
}
