//! Message filters for pulls: RocketMQ's tag filter (the ConsumeQueue's
//! tag hash against the subscription's `a || b` tags) and the SQL92
//! property filter (evaluated over each stored record's properties), plus
//! the cache that compiles each group's SQL92 subscription once.

pub mod sql92;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use sluice_core::message::{tags_code, StoredRecord};
use sluice_core::store::{MessageFilter, TagsFilter};

pub use sql92::{ParseError, Sql92};

/// Expression type of tag subscriptions (the default).
pub const EXPRESSION_TYPE_TAG: &str = "TAG";
/// Expression type of SQL92 subscriptions.
pub const EXPRESSION_TYPE_SQL92: &str = "SQL92";

/// Most compiled subscriptions kept; past it the cache starts over (it
/// is only a cache: entries are recompiled on their next pull).
pub const CACHED_FILTERS_MAX: usize = 16_384;

/// The filter of one pull.
#[derive(Clone, Debug)]
pub enum PullFilter {
    /// By tag hash on the ConsumeQueue entry.
    Tags(TagsFilter),
    /// By SQL92 over the stored record's properties.
    Sql92(Arc<Sql92>),
}

impl MessageFilter for PullFilter {
    fn matches_tags_code(&self, tags_code: i64) -> bool {
        match self {
            Self::Tags(t) => t.matches_tags_code(tags_code),
            Self::Sql92(_) => true,
        }
    }

    fn matches_record(&self, record: &Bytes) -> bool {
        match self {
            Self::Tags(_) => true,
            // A record that does not decode matches nothing; the store
            // has already checked what it hands out.
            Self::Sql92(sql) => StoredRecord::decode_unchecked_crc(record)
                .is_ok_and(|r| sql.matches_properties(&r.properties)),
        }
    }
}

/// Parses a tag expression: `*` (or empty) matches all, else `a || b`.
pub fn tag_filter(expression: &str) -> TagsFilter {
    let expr = expression.trim();
    if expr.is_empty() || expr == "*" {
        return TagsFilter::default();
    }
    TagsFilter {
        codes: expr
            .split("||")
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(tags_code)
            .collect(),
    }
}

/// True for the tag expression type (also when absent).
pub fn is_tag_type(expression_type: Option<&str>) -> bool {
    expression_type.is_none_or(|k| k.is_empty() || k.eq_ignore_ascii_case(EXPRESSION_TYPE_TAG))
}

/// True for the SQL92 expression type.
pub fn is_sql92_type(expression_type: Option<&str>) -> bool {
    expression_type.is_some_and(|k| k.eq_ignore_ascii_case(EXPRESSION_TYPE_SQL92))
}

/// Compiled SQL92 subscriptions by (group, topic), each kept with the
/// expression text it was compiled from; a changed expression replaces
/// the entry. Failures are cached too, so a bad subscription costs one
/// parse, not one per pull.
#[derive(Default)]
pub struct FilterCache {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    entries: BTreeMap<(String, String), Entry>,
    compiles: u64,
}

struct Entry {
    expression: String,
    compiled: Result<Arc<Sql92>, ParseError>,
}

impl FilterCache {
    /// The compiled form of `expression` for `group` on `topic`.
    pub fn sql92(
        &self,
        group: &str,
        topic: &str,
        expression: &str,
    ) -> Result<Arc<Sql92>, ParseError> {
        let key = (group.to_owned(), topic.to_owned());
        let mut inner = self.lock();
        if let Some(e) = inner.entries.get(&key) {
            if e.expression == expression {
                return e.compiled.clone();
            }
        }
        let compiled = Sql92::compile(expression).map(Arc::new);
        inner.compiles += 1;
        if inner.entries.len() >= CACHED_FILTERS_MAX && !inner.entries.contains_key(&key) {
            inner.entries.clear();
        }
        inner.entries.insert(
            key,
            Entry {
                expression: expression.to_owned(),
                compiled: compiled.clone(),
            },
        );
        compiled
    }

    /// How many compilations the cache has run (for tests and stats).
    pub fn compiles(&self) -> u64 {
        self.lock().compiles
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .expect("invariant: filter cache lock not poisoned")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tag_expressions_parse_like_rocketmq() {
        assert!(tag_filter("*").codes.is_empty());
        assert!(tag_filter("  ").codes.is_empty());
        let f = tag_filter("TagA || TagB");
        assert_eq!(f.codes, vec![tags_code("TagA"), tags_code("TagB")]);
    }

    #[test]
    fn expression_types_are_case_insensitive() {
        assert!(is_tag_type(None) && is_tag_type(Some("tag")) && is_tag_type(Some("")));
        assert!(is_sql92_type(Some("sql92")) && !is_sql92_type(None));
        assert!(!is_tag_type(Some("SQL92")));
    }

    #[test]
    fn each_subscription_is_compiled_once_until_its_expression_changes() {
        let cache = FilterCache::default();
        let a = cache.sql92("g", "T", "a > 1").expect("compiles");
        let again = cache.sql92("g", "T", "a > 1").expect("cached");
        assert!(Arc::ptr_eq(&a, &again));
        assert_eq!(cache.compiles(), 1);
        cache.sql92("g2", "T", "a > 1").expect("other group");
        assert_eq!(cache.compiles(), 2);
        cache.sql92("g", "T", "a > 2").expect("changed");
        assert_eq!(cache.compiles(), 3);
        assert!(cache.sql92("g", "T", "a >").is_err());
        assert!(cache.sql92("g", "T", "a >").is_err(), "failure cached");
        assert_eq!(cache.compiles(), 4);
    }

    #[test]
    fn sql92_filter_reads_properties_of_stored_records_and_ignores_tag_hashes() {
        let f = PullFilter::Sql92(Arc::new(Sql92::compile("a = 1").expect("compiles")));
        assert!(f.matches_tags_code(12345));
        assert!(!f.matches_record(&Bytes::from_static(b"garbage")));
        let record = |props: &'static [u8]| {
            let input = sluice_core::message::MessageInput {
                topic: "T".into(),
                queue_id: 0,
                flag: 0,
                sys_flag: 0,
                born_timestamp_ms: 1,
                born_host: "127.0.0.1:1".parse().expect("addr"),
                store_host: "127.0.0.1:2".parse().expect("addr"),
                reconsume_times: 0,
                prepared_transaction_offset: 0,
                body: Bytes::from_static(b"body"),
                properties: Bytes::from_static(props),
            };
            let stamp = sluice_core::message::RecordStamp {
                queue_offset: 0,
                phys_offset: 0,
                store_timestamp_ms: 2,
            };
            Bytes::from(input.encode_to_vec(&stamp).expect("encodes"))
        };
        assert!(f.matches_record(&record(b"TAGS\x01t\x02a\x011\x02")));
        assert!(!f.matches_record(&record(b"TAGS\x01t\x02a\x012\x02")));
        assert!(!f.matches_record(&record(b"TAGS\x01t\x02")));
        let tags = PullFilter::Tags(tag_filter("x"));
        assert!(tags.matches_record(&record(b"")));
        assert!(!tags.matches_tags_code(0));
        assert!(tags.matches_tags_code(tags_code("x")));
    }
}
