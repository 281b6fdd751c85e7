//! `sluice pending`: per broker and real topic, the timer messages waiting
//! for their time (`sluicePendingTimers`) and the transactional half
//! messages waiting for a decision (`sluicePendingHalfMessages`), both read
//! from each broker's runtime info. A broker without a key shows 0.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use anyhow::Context;
use serde_json::json;
use sluice_client::Admin;

use crate::endpoint::{client, Endpoint};
use crate::verbs::Output;

/// Runtime-info key: JSON object real topic → pending timer messages.
const PENDING_TIMERS_KEY: &str = "sluicePendingTimers";
/// Runtime-info key: JSON object real topic → pending half messages.
const PENDING_HALF_KEY: &str = "sluicePendingHalfMessages";

/// One output row.
#[derive(Debug, PartialEq, Eq)]
struct Row {
    broker: String,
    topic: String,
    timers: u64,
    half: u64,
}

/// A runtime-info value `{"topic": count, ...}`; missing or unreadable is
/// empty.
fn counts(runtime: &BTreeMap<String, String>, key: &str) -> BTreeMap<String, u64> {
    runtime
        .get(key)
        .and_then(|v| serde_json::from_str(v).ok())
        .unwrap_or_default()
}

/// The rows of one broker, one per topic with anything pending.
fn rows(broker: &str, runtime: &BTreeMap<String, String>) -> Vec<Row> {
    let timers = counts(runtime, PENDING_TIMERS_KEY);
    let half = counts(runtime, PENDING_HALF_KEY);
    let mut topics: Vec<&String> = timers.keys().chain(half.keys()).collect();
    topics.sort();
    topics.dedup();
    topics
        .into_iter()
        .map(|t| Row {
            broker: broker.to_owned(),
            topic: t.clone(),
            timers: timers.get(t).copied().unwrap_or(0),
            half: half.get(t).copied().unwrap_or(0),
        })
        .collect()
}

/// `sluice pending`
pub async fn pending(endpoint: &Endpoint, out: Output) -> anyhow::Result<()> {
    let admin = Admin::new(client(endpoint));
    let brokers = admin.cluster().await.context("reading the cluster");
    admin.client().shutdown().await;
    let brokers = brokers?;
    let mut human = format!(
        "{:<16} {:>3} {:<40} {:>14} {:>12}\n",
        "BROKER", "ID", "TOPIC", "PENDING-TIMERS", "PENDING-HALF"
    );
    let mut json_rows = Vec::new();
    for b in &brokers {
        for r in rows(&b.broker_name, &b.runtime) {
            let _ = writeln!(
                human,
                "{:<16} {:>3} {:<40} {:>14} {:>12}",
                r.broker, b.broker_id, r.topic, r.timers, r.half
            );
            json_rows.push(json!({"brokerName": r.broker, "brokerId": b.broker_id,
                "addr": b.addr, "topic": r.topic, "pendingTimers": r.timers,
                "pendingHalf": r.half}));
        }
    }
    out.print(&human, &json!({ "pending": json_rows }));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_merge_both_keys_and_a_missing_key_counts_zero() {
        let mut runtime = BTreeMap::new();
        runtime.insert(PENDING_TIMERS_KEY.to_owned(), r#"{"A":3,"B":1}"#.to_owned());
        runtime.insert(PENDING_HALF_KEY.to_owned(), r#"{"B":2,"C":5}"#.to_owned());
        let got = rows("b1", &runtime);
        let view: Vec<(&str, u64, u64)> = got
            .iter()
            .map(|r| (r.topic.as_str(), r.timers, r.half))
            .collect();
        assert_eq!(view, vec![("A", 3, 0), ("B", 1, 2), ("C", 0, 5)]);
        runtime.remove(PENDING_HALF_KEY);
        let got = rows("b1", &runtime);
        assert_eq!(got.iter().map(|r| r.half).sum::<u64>(), 0);
        assert_eq!(got.len(), 2);
        assert!(rows("b1", &BTreeMap::new()).is_empty());
    }
}
