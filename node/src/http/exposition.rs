//! The broker's figures in the Prometheus text format (0.0.4), written by
//! `prometheus-client`'s encoder from one [`BrokerStatsSnapshot`].
//!
//! Names follow RocketMQ 5's OpenTelemetry metrics and rocketmq-exporter
//! where one exists (`rocketmq_*`); Sluice's own figures are `sluice_*`.
//! Every series carries `cluster`, `node_type` and `node_id`; topic and
//! group labels are bounded by the stats' cap (past it: `other`).

use std::fmt::Write as _;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use crate::broker::stats::series::split_pair;
use crate::broker::{BrokerStatsSnapshot, LatencySummary};

/// Upper bounds (microseconds) of the exposed latency buckets; the
/// stats' finer buckets are folded into the first bound that holds them.
const LATENCY_BOUNDS_US: [u64; 16] = [
    50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000, 10_000_000,
];

/// Who the figures are about: the constant labels of every series.
#[derive(Clone, Debug)]
pub struct NodeLabels {
    /// The broker's cluster.
    pub cluster: String,
    /// `broker`.
    pub node_type: &'static str,
    /// The broker's name and id, `broker-a:0`.
    pub node_id: String,
}

/// The exposition of `snap` about `node`.
pub fn encode(snap: BrokerStatsSnapshot, node: &NodeLabels) -> String {
    let mut registry = Registry::with_labels(
        [
            ("cluster".into(), node.cluster.clone().into()),
            ("node_type".into(), node.node_type.into()),
            ("node_id".into(), node.node_id.clone().into()),
        ]
        .into_iter(),
    );
    registry.register_collector(Box::new(Figures(snap)));
    let mut out = String::new();
    if prometheus_client::encoding::prometheus_text::encode(&mut out, &registry).is_err() {
        // Writing to a String cannot fail; keep what was written.
        let _ = writeln!(out, "# encoding stopped early");
    }
    out
}

/// The snapshot as a collector, encoded once per scrape.
#[derive(Debug)]
struct Figures(BrokerStatsSnapshot);

type Labels = Vec<(&'static str, String)>;

fn counter(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: &[(Labels, u64)],
) -> Result<(), std::fmt::Error> {
    let mut m = e.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (labels, v) in series {
        ConstCounter::new(*v).encode(m.encode_family(labels)?)?;
    }
    Ok(())
}

fn gauge(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: &[(Labels, i64)],
) -> Result<(), std::fmt::Error> {
    let mut m = e.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, v) in series {
        ConstGauge::new(*v).encode(m.encode_family(labels)?)?;
    }
    Ok(())
}

fn histogram(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: &[(Labels, &LatencySummary)],
) -> Result<(), std::fmt::Error> {
    let mut m = e.encode_descriptor(name, help, None, MetricType::Histogram)?;
    for (labels, h) in series {
        let buckets = rebucket(h);
        #[expect(clippy::cast_precision_loss, reason = "a sum of microseconds")]
        let sum = h.sum_us as f64;
        m.encode_family(labels)?
            .encode_histogram::<NoLabelSet>(sum, h.count, &buckets, None)?;
    }
    Ok(())
}

/// `h`'s buckets folded into [`LATENCY_BOUNDS_US`]: `(bound, count in
/// it)`, not cumulative (the encoder accumulates); values past the last
/// bound only reach `+Inf`.
fn rebucket(h: &LatencySummary) -> Vec<(f64, u64)> {
    let mut counts = [0u64; LATENCY_BOUNDS_US.len()];
    for (upper, n) in &h.buckets {
        if let Some(i) = LATENCY_BOUNDS_US.iter().position(|b| upper <= b) {
            counts[i] += n;
        }
    }
    #[expect(clippy::cast_precision_loss, reason = "bounds below 2^52")]
    LATENCY_BOUNDS_US
        .iter()
        .zip(counts)
        .map(|(b, n)| (*b as f64, n))
        .collect()
}

fn one<T: Copy>(v: T) -> Vec<(Labels, T)> {
    vec![(Vec::new(), v)]
}

fn signed(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

impl Collector for Figures {
    fn encode(&self, mut e: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        self.traffic(&mut e)?;
        self.latency(&mut e)?;
        self.storage(&mut e)?;
        self.consumers(&mut e)?;
        self.sluice(&mut e)
    }
}

impl Figures {
    fn traffic(&self, e: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let s = &self.0;
        let by_topic = |pick: fn(&(String, u64, u64)) -> u64| -> Vec<(Labels, u64)> {
            s.topics_in
                .iter()
                .map(|t| (vec![("topic", t.0.clone())], pick(t)))
                .collect()
        };
        let by_pair = |pick: fn(&(String, u64, u64)) -> u64| -> Vec<(Labels, u64)> {
            s.groups_out
                .iter()
                .map(|p| {
                    let (topic, group) = split_pair(&p.0);
                    let labels = vec![
                        ("topic", topic.to_owned()),
                        ("consumer_group", group.to_owned()),
                    ];
                    (labels, pick(p))
                })
                .collect()
        };
        counter(
            e,
            "rocketmq_messages_in",
            "Messages stored for producers.",
            &by_topic(|t| t.1),
        )?;
        counter(
            e,
            "rocketmq_throughput_in",
            "Bytes of messages stored for producers.",
            &by_topic(|t| t.2),
        )?;
        counter(
            e,
            "rocketmq_messages_out",
            "Messages returned to consumers by pulls.",
            &by_pair(|p| p.1),
        )?;
        counter(
            e,
            "rocketmq_throughput_out",
            "Bytes of messages returned to consumers.",
            &by_pair(|p| p.2),
        )?;
        let dlq: Vec<_> = s
            .dlq
            .iter()
            .map(|d| (vec![("consumer_group", d.0.clone())], d.1))
            .collect();
        counter(
            e,
            "rocketmq_send_to_dlq_messages",
            "Messages moved to a dead-letter topic.",
            &dlq,
        )
    }

    fn latency(&self, e: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let rpc: Vec<_> = self
            .0
            .rpc_latency
            .iter()
            .map(|r| {
                let labels = vec![
                    ("request_code", r.request_code.to_string()),
                    ("response_code", r.response_code.to_string()),
                ];
                (labels, &r.latency)
            })
            .collect();
        histogram(
            e,
            "rocketmq_rpc_latency",
            "Time to answer a request, microseconds, by request and response code (-1: past the cap).",
            &rpc,
        )
    }

    fn storage(&self, e: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let g = &self.0.gauges;
        gauge(
            e,
            "rocketmq_storage_size",
            "CommitLog bytes retained, bytes.",
            &one(signed(g.storage_size_bytes)),
        )?;
        gauge(
            e,
            "rocketmq_storage_flush_behind_bytes",
            "Bytes written but not yet fsynced.",
            &one(signed(g.flush_behind_bytes)),
        )?;
        gauge(
            e,
            "rocketmq_storage_dispatch_behind_bytes",
            "Bytes written but not yet in the ConsumeQueues.",
            &one(signed(g.dispatch_behind_bytes)),
        )?;
        gauge(
            e,
            "rocketmq_topic_number",
            "Topics on this broker.",
            &one(signed(g.topics)),
        )
    }

    fn consumers(&self, e: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let lag = &self.0.gauges.lag;
        let series = |pick: fn(&crate::broker::QueueLag) -> u64| -> Vec<(Labels, i64)> {
            lag.iter()
                .map(|q| {
                    let queue = q
                        .queue_id
                        .map_or_else(|| "other".to_owned(), |id| id.to_string());
                    let labels = vec![
                        ("topic", q.topic.clone()),
                        ("consumer_group", q.group.clone()),
                        ("queue_id", queue),
                    ];
                    (labels, signed(pick(q)))
                })
                .collect()
        };
        gauge(
            e,
            "rocketmq_consumer_lag_messages",
            "Messages stored and not yet committed by the group.",
            &series(|q| q.lag_messages),
        )?;
        gauge(
            e,
            "rocketmq_consumer_lag_latency",
            "Age of the oldest uncommitted message, milliseconds.",
            &series(|q| q.lag_latency_ms),
        )?;
        gauge(
            e,
            "rocketmq_consumer_inflight_messages",
            "Messages pulled and not yet committed.",
            &series(|q| q.inflight_messages),
        )
    }

    fn sluice(&self, e: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let s = &self.0;
        let g = &s.gauges;
        counter(
            e,
            "sluice_group_commit_syncs",
            "Group-commit fsyncs that wrote something.",
            &one(s.store_syncs_total),
        )?;
        counter(
            e,
            "sluice_group_commit_synced_bytes",
            "Bytes those fsyncs made durable.",
            &one(s.store_synced_bytes_total),
        )?;
        histogram(
            e,
            "sluice_fsync_latency",
            "Time of one group-commit fsync, microseconds.",
            &one(&s.store_fsync_latency_us),
        )?;
        histogram(
            e,
            "sluice_timer_lateness",
            "How late a timer message was delivered, microseconds (never early).",
            &one(&s.timer_lateness_us),
        )?;
        gauge(
            e,
            "sluice_timer_backlog_messages",
            "Timer messages parked, not yet due.",
            &one(signed(g.timers_pending)),
        )?;
        gauge(
            e,
            "sluice_transaction_halves_open",
            "Transactional halves neither committed nor rolled back.",
            &one(signed(g.halves_open)),
        )?;
        gauge(
            e,
            "sluice_connections",
            "Open client connections on the broker's ports.",
            &one(signed(g.connections)),
        )?;
        gauge(
            e,
            "sluice_pulls_suspended",
            "Pulls held in long polling.",
            &one(s.pulls_suspended),
        )?;
        counter(
            e,
            "sluice_requests",
            "Requests answered.",
            &one(s.requests_total),
        )?;
        counter(
            e,
            "sluice_requests_refused",
            "Requests answered with a refusal.",
            &one(s.requests_refused_total),
        )?;
        counter(
            e,
            "sluice_metrics_series_dropped",
            "Label sets folded into `other` past the series cap.",
            &one(s.series_dropped_total + g.lag_dropped),
        )?;
        if let (Some(refused), Some(would)) = (g.acl_refused_total, g.acl_would_refuse_total) {
            counter(
                e,
                "sluice_acl_refused",
                "Requests the ACL refused.",
                &one(refused),
            )?;
            counter(
                e,
                "sluice_acl_would_refuse",
                "Requests a permissive ACL would have refused.",
                &one(would),
            )?;
        }
        if let Some(r) = &g.replication {
            let role = vec![(vec![("role", r.role.clone())], 1)];
            gauge(
                e,
                "sluice_replication_role",
                "This broker's role (the labelled one is 1).",
                &role,
            )?;
            gauge(
                e,
                "sluice_replication_epoch",
                "The last master epoch this broker knows.",
                &one(i64::from(r.epoch)),
            )?;
            gauge(
                e,
                "sluice_replication_in_sync_replicas",
                "In-sync replicas, the master included.",
                &one(signed(r.in_sync)),
            )?;
            gauge(
                e,
                "sluice_replication_lag_bytes",
                "Bytes the furthest-behind replica lacks.",
                &one(signed(r.lag_bytes)),
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::broker::stats::series::pair_key;
    use crate::broker::{Gauges, QueueLag};

    fn node() -> NodeLabels {
        NodeLabels {
            cluster: "C".into(),
            node_type: "broker",
            node_id: "broker-a:0".into(),
        }
    }

    fn sample(text: &str, name: &str, labels: &[&str]) -> Option<f64> {
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .find(|l| {
                l.split(['{', ' ']).next() == Some(name) && labels.iter().all(|x| l.contains(x))
            })
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
    }

    #[test]
    fn counters_carry_topic_group_and_node_labels() {
        let snap = BrokerStatsSnapshot {
            topics_in: vec![("T".into(), 5, 500)],
            groups_out: vec![(pair_key("T", "g"), 4, 400)],
            ..BrokerStatsSnapshot::default()
        };
        let text = encode(snap, &node());
        let node_labels = [
            "cluster=\"C\"",
            "node_type=\"broker\"",
            "node_id=\"broker-a:0\"",
        ];
        let mut want = vec!["topic=\"T\""];
        want.extend(node_labels);
        assert_eq!(
            sample(&text, "rocketmq_messages_in_total", &want),
            Some(5.0)
        );
        assert_eq!(
            sample(&text, "rocketmq_throughput_in_total", &want),
            Some(500.0)
        );
        want.push("consumer_group=\"g\"");
        assert_eq!(
            sample(&text, "rocketmq_messages_out_total", &want),
            Some(4.0)
        );
        assert!(
            text.contains("# TYPE rocketmq_messages_in_total counter"),
            "{text}"
        );
    }

    #[test]
    fn latency_buckets_are_cumulative_over_fixed_bounds() {
        let h = LatencySummary {
            count: 3,
            sum_us: 1_260,
            max_us: 1_000,
            buckets: vec![(40, 1), (220, 1), (1_000, 1)],
            ..LatencySummary::default()
        };
        let snap = BrokerStatsSnapshot {
            store_fsync_latency_us: h,
            ..BrokerStatsSnapshot::default()
        };
        let text = encode(snap, &node());
        let b = |le: &str| {
            sample(
                &text,
                "sluice_fsync_latency_bucket",
                &[&format!("le=\"{le}\"")],
            )
        };
        assert_eq!(b("50"), Some(1.0));
        assert_eq!(b("250"), Some(2.0));
        assert_eq!(b("1000"), Some(3.0));
        assert_eq!(b("+Inf"), Some(3.0));
        assert_eq!(sample(&text, "sluice_fsync_latency_count", &[]), Some(3.0));
        assert_eq!(
            sample(&text, "sluice_fsync_latency_sum", &[]),
            Some(1_260.0)
        );
    }

    #[test]
    fn lag_is_per_queue_and_acl_only_when_on() {
        let snap = BrokerStatsSnapshot {
            gauges: Gauges {
                lag: vec![QueueLag {
                    topic: "T".into(),
                    group: "g".into(),
                    queue_id: Some(3),
                    lag_messages: 7,
                    lag_latency_ms: 1_500,
                    inflight_messages: 2,
                }],
                ..Gauges::default()
            },
            ..BrokerStatsSnapshot::default()
        };
        let text = encode(snap.clone(), &node());
        let q = ["queue_id=\"3\"", "consumer_group=\"g\""];
        assert_eq!(
            sample(&text, "rocketmq_consumer_lag_messages", &q),
            Some(7.0)
        );
        assert_eq!(
            sample(&text, "rocketmq_consumer_lag_latency", &q),
            Some(1_500.0)
        );
        assert_eq!(
            sample(&text, "rocketmq_consumer_inflight_messages", &q),
            Some(2.0)
        );
        assert!(!text.contains("sluice_acl_refused"));
        let mut on = snap;
        on.gauges.acl_refused_total = Some(4);
        on.gauges.acl_would_refuse_total = Some(0);
        let text = encode(on, &node());
        assert_eq!(sample(&text, "sluice_acl_refused_total", &[]), Some(4.0));
    }

    #[test]
    fn label_values_are_escaped() {
        let snap = BrokerStatsSnapshot {
            topics_in: vec![("a\"b\\c\nd".into(), 1, 1)],
            ..BrokerStatsSnapshot::default()
        };
        let text = encode(snap, &node());
        assert!(text.contains(r#"topic="a\"b\\c\nd""#), "{text}");
    }
}
