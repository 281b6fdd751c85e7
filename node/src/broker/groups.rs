//! Subscription groups: each consumer group's broker-side settings
//! (RocketMQ's `SubscriptionGroupManager`) — whether it may consume, its
//! retry topic's queues, its retry limit before the DLQ. Created by admins
//! or, when allowed, automatically on a group's first heartbeat, pull or
//! send-back; kept in `config/subscriptionGroup.json` in RocketMQ's shape
//! (written atomically by the broker) and reloaded on start.

use std::sync::Mutex;

use sluice_core::message::{retry_topic, validate_topic};
use sluice_net::body::{DataVersion, SubscriptionGroupConfig, SubscriptionGroupWrapper};

use super::topics::QUEUES_PER_TOPIC_MAX;

/// Where subscription groups are kept, relative to the disk root.
pub const SUBSCRIPTION_GROUPS_FILE: &str = "config/subscriptionGroup.json";

/// Most subscription groups one broker keeps; auto-creation stops there
/// (admins may still replace existing groups).
pub const SUBSCRIPTION_GROUPS_MAX: usize = 65_536;

/// The table.
#[derive(Default)]
pub struct SubscriptionGroupTable {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    file: SubscriptionGroupWrapper,
    dirty: bool,
}

/// Why a group config is refused.
pub fn validate(config: &SubscriptionGroupConfig) -> Result<(), String> {
    if config.group_name.is_empty() {
        return Err("the group name is empty".to_owned());
    }
    validate_topic(&retry_topic(&config.group_name))
        .map_err(|e| format!("invalid group name {:?}: {e}", config.group_name))?;
    if !(1..=QUEUES_PER_TOPIC_MAX).contains(&config.retry_queue_nums) {
        return Err(format!(
            "retryQueueNums must be within 1..={QUEUES_PER_TOPIC_MAX}, not {}",
            config.retry_queue_nums
        ));
    }
    if config.retry_max_times < 0 {
        return Err(format!(
            "retryMaxTimes must not be negative, not {}",
            config.retry_max_times
        ));
    }
    Ok(())
}

impl SubscriptionGroupTable {
    /// Loads `config/subscriptionGroup.json` contents (if any).
    pub fn load(json: Option<&[u8]>) -> Result<Self, String> {
        let file = match json {
            Some(raw) => {
                serde_json::from_slice(raw).map_err(|e| format!("subscriptionGroup.json: {e}"))?
            }
            None => SubscriptionGroupWrapper::default(),
        };
        Ok(Self {
            inner: Mutex::new(Inner { file, dirty: false }),
        })
    }

    /// The group's config.
    pub fn get(&self, group: &str) -> Option<SubscriptionGroupConfig> {
        self.lock()
            .file
            .subscription_group_table
            .get(group)
            .cloned()
    }

    /// The group's config; when absent and `auto_create` is on, a new one
    /// made by `template` is added (RocketMQ's `autoCreateSubscriptionGroup`).
    /// `None` when the group does not exist and may not be created (auto
    /// creation off, an invalid name, or the table full).
    pub fn find_or_create(
        &self,
        group: &str,
        auto_create: bool,
        template: impl FnOnce(&str) -> SubscriptionGroupConfig,
        now_ms: i64,
    ) -> Option<SubscriptionGroupConfig> {
        let mut inner = self.lock();
        if let Some(c) = inner.file.subscription_group_table.get(group) {
            return Some(c.clone());
        }
        if !auto_create || inner.file.subscription_group_table.len() >= SUBSCRIPTION_GROUPS_MAX {
            return None;
        }
        let config = template(group);
        debug_assert_eq!(config.group_name, group);
        validate(&config).ok()?;
        tracing::info!(group, "subscription group auto-created");
        inner
            .file
            .subscription_group_table
            .insert(group.to_owned(), config.clone());
        bump(&mut inner.file.data_version, now_ms);
        inner.dirty = true;
        Some(config)
    }

    /// Creates or replaces a group; false when the table is full and the
    /// group is new. Callers validate first.
    pub fn put(&self, config: SubscriptionGroupConfig, now_ms: i64) -> bool {
        let mut inner = self.lock();
        let table = &mut inner.file.subscription_group_table;
        if !table.contains_key(&config.group_name) && table.len() >= SUBSCRIPTION_GROUPS_MAX {
            return false;
        }
        table.insert(config.group_name.clone(), config);
        bump(&mut inner.file.data_version, now_ms);
        inner.dirty = true;
        true
    }

    /// Removes a group; true when it existed.
    pub fn remove(&self, group: &str, now_ms: i64) -> bool {
        let mut inner = self.lock();
        let existed = inner.file.subscription_group_table.remove(group).is_some();
        if existed {
            bump(&mut inner.file.data_version, now_ms);
            inner.dirty = true;
        }
        existed
    }

    /// A replica adopts its master's groups (`subscriptionGroup.json`
    /// content).
    pub fn adopt(&self, json: &[u8]) -> Result<(), String> {
        let file: SubscriptionGroupWrapper =
            serde_json::from_slice(json).map_err(|e| format!("subscriptionGroup.json: {e}"))?;
        let mut inner = self.lock();
        if inner.file != file {
            inner.file = file;
            inner.dirty = true;
        }
        Ok(())
    }

    /// Every group with the table's version.
    pub fn snapshot(&self) -> SubscriptionGroupWrapper {
        self.lock().file.clone()
    }

    /// Names of every group, sorted.
    pub fn names(&self) -> Vec<String> {
        self.lock()
            .file
            .subscription_group_table
            .keys()
            .cloned()
            .collect()
    }

    /// JSON to persist, if anything changed since the last call.
    pub fn take_dirty_json(&self) -> Option<Vec<u8>> {
        let mut inner = self.lock();
        if !inner.dirty {
            return None;
        }
        inner.dirty = false;
        serde_json::to_vec_pretty(&inner.file).ok()
    }

    /// Marks the table dirty again after a failed write.
    pub fn mark_dirty(&self) {
        self.lock().dirty = true;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .expect("invariant: subscription group lock not poisoned")
    }
}

fn bump(v: &mut DataVersion, now_ms: i64) {
    v.counter += 1;
    v.timestamp = now_ms;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template(retry_max_times: i32) -> impl FnOnce(&str) -> SubscriptionGroupConfig {
        move |g| SubscriptionGroupConfig {
            group_name: g.to_owned(),
            retry_max_times,
            ..SubscriptionGroupConfig::default()
        }
    }

    #[test]
    fn groups_are_auto_created_only_when_allowed_and_valid() {
        let t = SubscriptionGroupTable::load(None).expect("load");
        assert!(t.find_or_create("g", false, template(3), 1).is_none());
        let g = t
            .find_or_create("g", true, template(3), 1)
            .expect("created");
        assert_eq!(g.retry_max_times, 3);
        let again = t.find_or_create("g", true, template(9), 2).expect("exists");
        assert_eq!(again.retry_max_times, 3, "an existing group is kept");
        assert!(t
            .find_or_create("bad group!", true, template(3), 3)
            .is_none());
        assert_eq!(t.names(), vec!["g".to_owned()]);
    }

    #[test]
    fn table_round_trips_through_rocketmq_json_and_tracks_changes() {
        let t = SubscriptionGroupTable::load(None).expect("load");
        assert!(t.take_dirty_json().is_none(), "clean when loaded");
        assert!(t.put(
            SubscriptionGroupConfig {
                group_name: "g".into(),
                consume_enable: false,
                ..SubscriptionGroupConfig::default()
            },
            5
        ));
        let json = t.take_dirty_json().expect("dirty");
        assert!(t.take_dirty_json().is_none());
        let text = String::from_utf8(json.clone()).expect("utf8");
        assert!(text.contains("\"subscriptionGroupTable\""), "{text}");
        assert!(text.contains("\"consumeEnable\": false"), "{text}");
        let again = SubscriptionGroupTable::load(Some(&json)).expect("reload");
        assert_eq!(again.get("g"), t.get("g"));
        assert_eq!(again.snapshot().data_version.counter, 1);
        assert!(again.remove("g", 6));
        assert!(!again.remove("g", 7));
        assert!(again.take_dirty_json().is_some());
        assert!(SubscriptionGroupTable::load(Some(b"{oops")).is_err());
    }

    #[test]
    fn invalid_configs_are_refused_with_a_reason() {
        let ok = SubscriptionGroupConfig {
            group_name: "g".into(),
            ..SubscriptionGroupConfig::default()
        };
        assert!(validate(&ok).is_ok());
        for bad in [
            SubscriptionGroupConfig {
                group_name: String::new(),
                ..ok.clone()
            },
            SubscriptionGroupConfig {
                retry_queue_nums: 0,
                ..ok.clone()
            },
            SubscriptionGroupConfig {
                retry_max_times: -1,
                ..ok.clone()
            },
        ] {
            assert!(validate(&bad).is_err(), "{bad:?}");
        }
    }
}
