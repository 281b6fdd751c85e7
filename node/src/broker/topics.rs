//! The broker's topic table: queue counts and permissions per topic,
//! RocketMQ's auto-creation rule (a topic inherits from `TBW102` when that
//! topic carries `PERM_INHERIT`), and its JSON form for `config/topics.json`
//! and broker registration.

use std::collections::BTreeMap;
use std::sync::Mutex;

use sluice_net::body::{DataVersion, TopicConfig, TopicConfigSerializeWrapper};

/// Permission bit: readable.
pub const PERM_READ: i32 = 4;
/// Permission bit: writable.
pub const PERM_WRITE: i32 = 2;
/// Permission bit: new topics may inherit from this one.
pub const PERM_INHERIT: i32 = 1;

/// The template topic producers name for unknown topics.
pub const DEFAULT_TOPIC: &str = sluice_core::message::topic::DEFAULT_TOPIC;

/// Most queues a topic may have.
pub const QUEUES_PER_TOPIC_MAX: i32 = 1024;

/// Topics of one broker.
#[derive(Default)]
pub struct TopicTable {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    topics: BTreeMap<String, TopicConfig>,
    version: DataVersion,
}

/// A plain read/write topic with `queues` queues.
pub fn topic_config(name: &str, queues: i32, perm: i32) -> TopicConfig {
    TopicConfig {
        topic_name: name.to_owned(),
        read_queue_nums: queues,
        write_queue_nums: queues,
        perm,
        topic_filter_type: "SINGLE_TAG".to_owned(),
        topic_sys_flag: 0,
        order: false,
        attributes: BTreeMap::new(),
    }
}

impl TopicTable {
    /// A table loaded from `config/topics.json` contents (if any), with the
    /// default topic present when auto-creation is on.
    pub fn load(
        json: Option<&[u8]>,
        auto_create: bool,
        default_queues: i32,
    ) -> Result<Self, String> {
        let mut inner = Inner::default();
        if let Some(raw) = json {
            let w: TopicConfigSerializeWrapper =
                serde_json::from_slice(raw).map_err(|e| format!("topics.json: {e}"))?;
            inner.topics = w.topic_config_table;
            inner.version = w.data_version;
        }
        if auto_create {
            inner
                .topics
                .entry(DEFAULT_TOPIC.to_owned())
                .or_insert_with(|| {
                    topic_config(
                        DEFAULT_TOPIC,
                        default_queues,
                        PERM_READ | PERM_WRITE | PERM_INHERIT,
                    )
                });
        } else {
            inner.topics.remove(DEFAULT_TOPIC);
        }
        Ok(Self {
            inner: Mutex::new(inner),
        })
    }

    /// A replica adopts its master's table (`topics.json` content); true
    /// when anything changed.
    pub fn adopt(&self, json: &[u8]) -> Result<bool, String> {
        let w: TopicConfigSerializeWrapper =
            serde_json::from_slice(json).map_err(|e| format!("topics.json: {e}"))?;
        let mut inner = self.lock();
        if inner.topics == w.topic_config_table {
            return Ok(false);
        }
        inner.topics = w.topic_config_table;
        inner.version = w.data_version;
        Ok(true)
    }

    /// The topic's configuration.
    pub fn get(&self, topic: &str) -> Option<TopicConfig> {
        self.lock().topics.get(topic).cloned()
    }

    /// What a send needs of the topic's configuration, without copying its
    /// name and attributes (the send path asks once per message).
    pub fn write_view(&self, topic: &str) -> Option<WriteView> {
        self.lock().topics.get(topic).map(WriteView::of)
    }

    /// Creates or replaces a topic; true when anything changed.
    pub fn put(&self, config: TopicConfig, now_ms: i64) -> bool {
        let mut inner = self.lock();
        if inner.topics.get(&config.topic_name) == Some(&config) {
            return false;
        }
        inner.topics.insert(config.topic_name.clone(), config);
        bump(&mut inner.version, now_ms);
        true
    }

    /// Removes a topic; true when it existed.
    pub fn remove(&self, topic: &str, now_ms: i64) -> bool {
        let mut inner = self.lock();
        let existed = inner.topics.remove(topic).is_some();
        if existed {
            bump(&mut inner.version, now_ms);
        }
        existed
    }

    /// RocketMQ's auto-creation: `topic` inherits from `default_topic` when
    /// that topic exists with `PERM_INHERIT`, with
    /// `min(requested, template write queues)` queues. `None` when not
    /// allowed.
    pub fn auto_create(
        &self,
        topic: &str,
        default_topic: &str,
        requested_queues: i32,
        now_ms: i64,
    ) -> Option<TopicConfig> {
        let mut inner = self.lock();
        if let Some(existing) = inner.topics.get(topic) {
            return Some(existing.clone());
        }
        let template = inner.topics.get(default_topic)?;
        if template.perm & PERM_INHERIT == 0 {
            return None;
        }
        let queues = requested_queues.clamp(1, template.write_queue_nums.max(1));
        let perm = template.perm & !PERM_INHERIT;
        let config = topic_config(topic, queues, perm);
        inner.topics.insert(topic.to_owned(), config.clone());
        bump(&mut inner.version, now_ms);
        Some(config)
    }

    /// Ensures a system topic (retry, DLQ, schedule) exists.
    pub fn ensure(&self, topic: &str, queues: i32, perm: i32, now_ms: i64) -> (TopicConfig, bool) {
        let mut inner = self.lock();
        if let Some(existing) = inner.topics.get(topic) {
            return (existing.clone(), false);
        }
        let config = topic_config(topic, queues, perm);
        inner.topics.insert(topic.to_owned(), config.clone());
        bump(&mut inner.version, now_ms);
        (config, true)
    }

    /// Every topic name, sorted.
    pub fn names(&self) -> Vec<String> {
        self.lock().topics.keys().cloned().collect()
    }

    /// The table with its version, as registered and persisted.
    pub fn snapshot(&self) -> TopicConfigSerializeWrapper {
        let inner = self.lock();
        TopicConfigSerializeWrapper {
            topic_config_table: inner.topics.clone(),
            data_version: inner.version,
        }
    }

    /// JSON for `config/topics.json`.
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec_pretty(&self.snapshot()).unwrap_or_default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .expect("invariant: topic table lock not poisoned")
    }
}

fn bump(v: &mut DataVersion, now_ms: i64) {
    v.counter += 1;
    v.timestamp = now_ms;
}

/// A topic's permission and write queue count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteView {
    /// `PERM_*` bits.
    pub perm: i32,
    /// Queues a producer writes.
    pub write_queue_nums: i32,
}

impl WriteView {
    /// The view of `tc`.
    pub fn of(tc: &TopicConfig) -> Self {
        Self {
            perm: tc.perm,
            write_queue_nums: tc.write_queue_nums,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_topics_inherit_from_the_default_topic() {
        let t = TopicTable::load(None, true, 8).expect("load");
        let c = t
            .auto_create("Orders", DEFAULT_TOPIC, 4, 1)
            .expect("created");
        assert_eq!((c.read_queue_nums, c.write_queue_nums), (4, 4));
        assert_eq!(
            c.perm & PERM_INHERIT,
            0,
            "created topics do not inherit further"
        );
        let big = t.auto_create("Big", DEFAULT_TOPIC, 64, 2).expect("created");
        assert_eq!(big.write_queue_nums, 8, "capped by the template's queues");
        assert!(
            t.auto_create("X", "Orders", 4, 3).is_none(),
            "no INHERIT, no creation"
        );
    }

    #[test]
    fn auto_creation_off_means_no_default_topic() {
        let t = TopicTable::load(None, false, 8).expect("load");
        assert!(t.auto_create("Orders", DEFAULT_TOPIC, 4, 1).is_none());
    }

    #[test]
    fn table_round_trips_through_json_and_versions_move() {
        let t = TopicTable::load(None, true, 8).expect("load");
        let v0 = t.snapshot().data_version.counter;
        assert!(t.put(topic_config("A", 2, PERM_READ | PERM_WRITE), 5));
        assert!(
            !t.put(topic_config("A", 2, PERM_READ | PERM_WRITE), 6),
            "unchanged"
        );
        assert!(t.snapshot().data_version.counter > v0);
        let again = TopicTable::load(Some(&t.to_json()), true, 8).expect("reload");
        assert_eq!(again.get("A"), t.get("A"));
        assert!(TopicTable::load(Some(b"{not json"), true, 8).is_err());
    }
}
