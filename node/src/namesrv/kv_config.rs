//! The name server's KV config: namespaces of string keys and values
//! (`PUT/GET/DELETE_KV_CONFIG`), held in memory. The `ORDER_TOPIC_CONFIG`
//! namespace is what registering brokers receive back.

use std::collections::BTreeMap;

use sluice_net::body::KvTable;

/// The namespace whose table is returned to every registering broker, and
/// whose values are routes' `orderTopicConf` (`brokerName:queueNum;...`).
pub const ORDER_TOPIC_CONFIG_NAMESPACE: &str = "ORDER_TOPIC_CONFIG";

/// Namespace → key → value.
#[derive(Debug, Clone, Default)]
pub struct KvConfig {
    namespaces: BTreeMap<String, BTreeMap<String, String>>,
}

impl KvConfig {
    /// An empty config.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `key` in `namespace`; returns the previous value.
    pub fn put(&mut self, namespace: &str, key: &str, value: &str) -> Option<String> {
        self.namespaces
            .entry(namespace.to_owned())
            .or_default()
            .insert(key.to_owned(), value.to_owned())
    }

    /// The value of `key` in `namespace`.
    pub fn get(&self, namespace: &str, key: &str) -> Option<&str> {
        self.namespaces.get(namespace)?.get(key).map(String::as_str)
    }

    /// Removes `key` from `namespace` (and the namespace once empty);
    /// returns the removed value.
    pub fn delete(&mut self, namespace: &str, key: &str) -> Option<String> {
        let table = self.namespaces.get_mut(namespace)?;
        let removed = table.remove(key);
        if table.is_empty() {
            self.namespaces.remove(namespace);
        }
        removed
    }

    /// A whole namespace as a KV table, or `None` if it has no keys.
    pub fn namespace(&self, namespace: &str) -> Option<KvTable> {
        self.namespaces.get(namespace).map(|table| KvTable {
            table: table.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn put_get_delete_round_trip_within_a_namespace() {
        let mut kv = KvConfig::new();
        assert_eq!(kv.put("ns", "k", "v1"), None);
        assert_eq!(kv.put("ns", "k", "v2").as_deref(), Some("v1"));
        assert_eq!(kv.get("ns", "k"), Some("v2"));
        assert_eq!(kv.get("other", "k"), None);
        assert_eq!(kv.delete("ns", "k").as_deref(), Some("v2"));
        assert_eq!(kv.get("ns", "k"), None);
        assert!(kv.namespace("ns").is_none(), "empty namespaces are dropped");
    }

    #[test]
    fn namespace_lists_every_key() {
        let mut kv = KvConfig::new();
        kv.put(ORDER_TOPIC_CONFIG_NAMESPACE, "T1", "broker-a:4");
        kv.put(ORDER_TOPIC_CONFIG_NAMESPACE, "T2", "broker-b:2");
        kv.put("elsewhere", "T3", "x");
        let table = kv.namespace(ORDER_TOPIC_CONFIG_NAMESPACE).expect("present");
        assert_eq!(
            table.table.into_iter().collect::<Vec<_>>(),
            vec![
                ("T1".to_owned(), "broker-a:4".to_owned()),
                ("T2".to_owned(), "broker-b:2".to_owned()),
            ]
        );
    }
}
