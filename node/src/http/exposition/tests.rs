//! The exposition's unit tests.

use super::*;
use crate::broker::stats::series::pair_key;
use crate::broker::stats::Gauges;
use crate::broker::QueueLag;

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
        .find(|l| l.split(['{', ' ']).next() == Some(name) && labels.iter().all(|x| l.contains(x)))
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

#[test]
fn replication_figures_name_the_role_and_the_controller_leader() {
    let snap = BrokerStatsSnapshot {
        gauges: Gauges {
            replication: Some(crate::broker::stats::ReplicationGauges {
                role: "SYNC_MASTER".into(),
                epoch: 7,
                in_sync: 2,
                lag_bytes: 512,
                controller_leader: Some("10.0.0.9:9878".into()),
            }),
            ..Gauges::default()
        },
        ..BrokerStatsSnapshot::default()
    };
    let text = encode(snap, &node());
    let role = ["role=\"SYNC_MASTER\""];
    assert_eq!(sample(&text, "sluice_replication_role", &role), Some(1.0));
    assert_eq!(sample(&text, "sluice_replication_epoch", &[]), Some(7.0));
    assert_eq!(
        sample(&text, "sluice_replication_in_sync_replicas", &[]),
        Some(2.0)
    );
    assert_eq!(
        sample(&text, "sluice_replication_lag_bytes", &[]),
        Some(512.0)
    );
    let leader = ["leader=\"10.0.0.9:9878\""];
    assert_eq!(
        sample(&text, "sluice_controller_leader", &leader),
        Some(1.0)
    );
    let lone = encode(BrokerStatsSnapshot::default(), &node());
    assert!(!lone.contains("sluice_replication") && !lone.contains("sluice_controller"));
}
