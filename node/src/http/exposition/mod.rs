//! The broker's figures in the Prometheus text format (0.0.4), written by
//! `prometheus-client`'s encoder from one [`BrokerStatsSnapshot`].
//!
//! Names follow RocketMQ 5's OpenTelemetry metrics and rocketmq-exporter
//! where one exists (`rocketmq_*`); Sluice's own figures are `sluice_*`.
//! Every series carries `cluster`, `node_type` and `node_id`; topic and
//! group labels are bounded by the stats' cap (past it: `other`).
//!
//! A figure with no labels is one line of [`SCALARS`]; labelled families
//! have a method each on [`Figures`].

use std::fmt::Write as _;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use crate::broker::stats::series::split_pair;
use crate::broker::{BrokerStatsSnapshot, LatencySummary, QueueLag};

#[cfg(test)]
mod tests;

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

/// A figure with no labels of its own: a counter or a gauge, read from
/// the snapshot (`None`: not exported, e.g. ACL figures with ACL off).
struct Scalar {
    name: &'static str,
    help: &'static str,
    kind: MetricType,
    read: fn(&BrokerStatsSnapshot) -> Option<i64>,
}

fn signed(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

macro_rules! scalar {
    ($kind:ident, $name:literal, $help:literal, |$s:ident| $read:expr) => {
        Scalar {
            name: $name,
            help: $help,
            kind: MetricType::$kind,
            read: |$s: &BrokerStatsSnapshot| $read,
        }
    };
}

/// Every unlabelled figure, in exposition order.
const SCALARS: &[Scalar] = &[
    scalar!(
        Gauge,
        "rocketmq_storage_size",
        "CommitLog bytes retained, bytes.",
        |s| Some(signed(s.gauges.storage_size_bytes))
    ),
    scalar!(
        Gauge,
        "rocketmq_storage_flush_behind_bytes",
        "Bytes written but not yet fsynced.",
        |s| Some(signed(s.gauges.flush_behind_bytes))
    ),
    scalar!(
        Gauge,
        "rocketmq_storage_dispatch_behind_bytes",
        "Bytes written but not yet in the ConsumeQueues.",
        |s| Some(signed(s.gauges.dispatch_behind_bytes))
    ),
    scalar!(
        Gauge,
        "rocketmq_topic_number",
        "Topics on this broker.",
        |s| Some(signed(s.gauges.topics))
    ),
    scalar!(
        Counter,
        "sluice_group_commit_syncs",
        "Group-commit fsyncs that wrote something.",
        |s| Some(signed(s.store_syncs_total))
    ),
    scalar!(
        Counter,
        "sluice_group_commit_synced_bytes",
        "Bytes those fsyncs made durable.",
        |s| Some(signed(s.store_synced_bytes_total))
    ),
    scalar!(
        Gauge,
        "sluice_timer_backlog_messages",
        "Timer messages parked, not yet due.",
        |s| Some(signed(s.gauges.timers_pending))
    ),
    scalar!(
        Gauge,
        "sluice_transaction_halves_open",
        "Transactional halves neither committed nor rolled back.",
        |s| Some(signed(s.gauges.halves_open))
    ),
    scalar!(
        Gauge,
        "sluice_connections",
        "Open client connections on the broker's ports.",
        |s| Some(signed(s.gauges.connections))
    ),
    scalar!(
        Gauge,
        "sluice_pulls_suspended",
        "Pulls held in long polling.",
        |s| Some(s.pulls_suspended)
    ),
    scalar!(Counter, "sluice_requests", "Requests answered.", |s| Some(
        signed(s.requests_total)
    )),
    scalar!(
        Counter,
        "sluice_requests_refused",
        "Requests answered with a refusal.",
        |s| Some(signed(s.requests_refused_total))
    ),
    scalar!(
        Counter,
        "sluice_metrics_series_dropped",
        "Label sets folded into `other` past the series cap.",
        |s| Some(signed(s.series_dropped_total + s.gauges.lag_dropped))
    ),
    scalar!(
        Counter,
        "sluice_acl_refused",
        "Requests the ACL refused.",
        |s| s.gauges.acl_refused_total.map(signed)
    ),
    scalar!(
        Counter,
        "sluice_acl_would_refuse",
        "Requests a permissive ACL would have refused.",
        |s| s.gauges.acl_would_refuse_total.map(signed)
    ),
    scalar!(
        Gauge,
        "sluice_replication_epoch",
        "The last master epoch this broker knows.",
        |s| s.gauges.replication.as_ref().map(|r| i64::from(r.epoch))
    ),
    scalar!(
        Gauge,
        "sluice_replication_in_sync_replicas",
        "In-sync replicas, the master included (masters; else 0).",
        |s| s.gauges.replication.as_ref().map(|r| signed(r.in_sync))
    ),
    scalar!(
        Gauge,
        "sluice_replication_lag_bytes",
        "Bytes the furthest-behind replica lacks (masters; else 0).",
        |s| s.gauges.replication.as_ref().map(|r| signed(r.lag_bytes))
    ),
];

/// The snapshot as a collector, encoded once per scrape.
#[derive(Debug)]
struct Figures(BrokerStatsSnapshot);

type Labels = Vec<(&'static str, String)>;

fn counter(
    e: &mut DescriptorEncoder,
    (name, help): (&str, &str),
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
    (name, help): (&str, &str),
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
    (name, help): (&str, &str),
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

impl Collector for Figures {
    fn encode(&self, mut e: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        self.traffic(&mut e)?;
        self.latency(&mut e)?;
        self.consumers(&mut e)?;
        for scalar in SCALARS {
            let Some(v) = (scalar.read)(&self.0) else {
                continue;
            };
            let one = (scalar.name, scalar.help);
            if matches!(scalar.kind, MetricType::Counter) {
                counter(&mut e, one, &[(Vec::new(), v.max(0).unsigned_abs())])?;
            } else {
                gauge(&mut e, one, &[(Vec::new(), v)])?;
            }
        }
        self.replication_role(&mut e)
    }
}

impl Figures {
    fn traffic(&self, e: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let s = &self.0;
        let by_topic = |pick: fn(&(String, u64, u64)) -> u64| -> Vec<(Labels, u64)> {
            let labels = |t: &(String, u64, u64)| vec![("topic", t.0.clone())];
            s.topics_in.iter().map(|t| (labels(t), pick(t))).collect()
        };
        let by_pair = |pick: fn(&(String, u64, u64)) -> u64| -> Vec<(Labels, u64)> {
            let labels = |p: &(String, u64, u64)| {
                let (topic, group) = split_pair(&p.0);
                vec![
                    ("topic", topic.to_owned()),
                    ("consumer_group", group.to_owned()),
                ]
            };
            s.groups_out.iter().map(|p| (labels(p), pick(p))).collect()
        };
        let dlq: Vec<_> = s
            .dlq
            .iter()
            .map(|d| (vec![("consumer_group", d.0.clone())], d.1))
            .collect();
        counter(
            e,
            ("rocketmq_messages_in", "Messages stored for producers."),
            &by_topic(|t| t.1),
        )?;
        counter(
            e,
            (
                "rocketmq_throughput_in",
                "Bytes of messages stored for producers.",
            ),
            &by_topic(|t| t.2),
        )?;
        counter(
            e,
            (
                "rocketmq_messages_out",
                "Messages returned to consumers by pulls.",
            ),
            &by_pair(|p| p.1),
        )?;
        counter(
            e,
            (
                "rocketmq_throughput_out",
                "Bytes of messages returned to consumers.",
            ),
            &by_pair(|p| p.2),
        )?;
        counter(
            e,
            (
                "rocketmq_send_to_dlq_messages",
                "Messages moved to a dead-letter topic.",
            ),
            &dlq,
        )
    }

    fn latency(&self, e: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let s = &self.0;
        let codes = |request: i32, response: i32| {
            vec![
                ("request_code", request.to_string()),
                ("response_code", response.to_string()),
            ]
        };
        let rpc: Vec<_> = s
            .rpc_latency
            .iter()
            .map(|r| (codes(r.request_code, r.response_code), &r.latency))
            .collect();
        let rpc_help = "Time to answer a request, microseconds, by request and response code \
                        (-1: past the cap).";
        histogram(e, ("rocketmq_rpc_latency", rpc_help), &rpc)?;
        let fsync = (
            "sluice_fsync_latency",
            "Time of one group-commit fsync, microseconds.",
        );
        histogram(e, fsync, &[(Vec::new(), &s.store_fsync_latency_us)])?;
        let late = (
            "sluice_timer_lateness",
            "How late a timer message was delivered, microseconds (never early).",
        );
        histogram(e, late, &[(Vec::new(), &s.timer_lateness_us)])
    }

    fn consumers(&self, e: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let lag = &self.0.gauges.lag;
        let series = |pick: fn(&QueueLag) -> u64| -> Vec<(Labels, i64)> {
            let labels = |q: &QueueLag| {
                let queue = q
                    .queue_id
                    .map_or_else(|| "other".to_owned(), |id| id.to_string());
                vec![
                    ("topic", q.topic.clone()),
                    ("consumer_group", q.group.clone()),
                    ("queue_id", queue),
                ]
            };
            lag.iter().map(|q| (labels(q), signed(pick(q)))).collect()
        };
        let messages = (
            "rocketmq_consumer_lag_messages",
            "Messages stored and not yet committed by the group.",
        );
        let latency = (
            "rocketmq_consumer_lag_latency",
            "Age of the oldest uncommitted message, milliseconds.",
        );
        let inflight = (
            "rocketmq_consumer_inflight_messages",
            "Messages pulled and not yet committed.",
        );
        gauge(e, messages, &series(|q| q.lag_messages))?;
        gauge(e, latency, &series(|q| q.lag_latency_ms))?;
        gauge(e, inflight, &series(|q| q.inflight_messages))
    }

    fn replication_role(&self, e: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(r) = &self.0.gauges.replication else {
            return Ok(());
        };
        let role = (
            "sluice_replication_role",
            "This broker's role (the labelled one is 1).",
        );
        gauge(e, role, &[(vec![("role", r.role.clone())], 1)])?;
        let Some(leader) = &r.controller_leader else {
            return Ok(());
        };
        let help = (
            "sluice_controller_leader",
            "The controller leader this broker last heard of (the labelled one is 1).",
        );
        gauge(e, help, &[(vec![("leader", leader.clone())], 1)])
    }
}
