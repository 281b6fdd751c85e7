//! `sluice bench` against a real `sluice-node standalone` process: short
//! runs whose JSON summaries must be internally consistent (messages were
//! sent and stored, percentiles are ordered, e2e received what it sent),
//! and bad flags that must fail with an error rather than a panic. These
//! check the tool works; they assert nothing about speed.

#[path = "../../node/tests/support/mod.rs"]
mod support;

use std::process::{Command, Output};

use serde_json::Value;
use support::Node;

fn sluice(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .output()
        .expect("run sluice")
}

fn summary(node: &Node, args: &[&str]) -> Value {
    let mut all = vec!["--namesrv", node.namesrv.as_str(), "--json", "bench"];
    all.extend_from_slice(args);
    let out = sluice(&all);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "sluice {all:?} failed: {stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("not one JSON object ({e}): {stdout}"))
}

fn u64_at(v: &Value, path: &str) -> u64 {
    v.pointer(path)
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("{path} missing in {v}"))
}

/// Asserts `min ≤ p50 ≤ p90 ≤ p99 ≤ p99.9 ≤ max` and a positive count.
fn assert_ordered(v: &Value, path: &str) {
    let p = v
        .pointer(path)
        .unwrap_or_else(|| panic!("{path} missing in {v}"));
    let at = |k: &str| {
        p.get(k)
            .and_then(Value::as_f64)
            .unwrap_or_else(|| panic!("{path}/{k} missing"))
    };
    assert!(u64_at(v, &format!("{path}/count")) > 0, "{p}");
    let order = [
        at("min"),
        at("p50"),
        at("p90"),
        at("p99"),
        at("p999"),
        at("max"),
    ];
    assert!(order[0] > 0.0, "{p}");
    assert!(
        order.windows(2).all(|w| w[0] <= w[1]),
        "{path} out of order: {p}"
    );
}

#[test]
fn bench_produce_summary_counts_sends_the_broker_stored() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = Node::start(dir.path(), "async");
    let v = summary(
        &node,
        &[
            "produce",
            "--topic",
            "BenchSmoke",
            "--size",
            "1024",
            "--duration",
            "1",
        ],
    );
    assert_eq!(v["setup"]["mode"], "sync");
    let msgs = u64_at(&v, "/sent/msgs");
    assert!(msgs > 0, "{v}");
    assert_eq!(u64_at(&v, "/sent/errors"), 0, "{v}");
    assert_eq!(u64_at(&v, "/sent/bytes"), msgs * 1024);
    assert_eq!(u64_at(&v, "/send_latency_us/count"), msgs);
    assert_ordered(&v, "/send_latency_us");
    // Everything acknowledged is in the topic.
    assert!(u64_at(&v, "/stored_msgs") >= msgs, "{v}");
    assert!(v["sent"]["msgs_per_s"].as_f64().is_some_and(|r| r > 0.0));
}

#[test]
fn bench_e2e_batch_open_loop_receives_what_it_sent() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = Node::start(dir.path(), "async");
    let v = summary(
        &node,
        &[
            "e2e",
            "--topic",
            "BenchE2e",
            "--queues",
            "2",
            "--mode",
            "batch",
            "--batch",
            "4",
            "--rate",
            "400",
            "--duration",
            "1",
        ],
    );
    let sent = u64_at(&v, "/sent/msgs");
    assert!(sent > 0 && sent % 4 == 0, "{v}");
    assert_eq!(u64_at(&v, "/received/msgs"), sent, "{v}");
    assert_eq!(v["missing_msgs"], 0, "{v}");
    assert_ordered(&v, "/send_latency_us");
    assert_ordered(&v, "/e2e_latency_us");
    assert!(v.pointer("/schedule_lag_us/count").is_some(), "{v}");
}

#[test]
fn bench_over_grpc_stores_what_it_sent_and_receives_it_all_with_acks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = Node::start(dir.path(), "async");
    let grpc = ["--protocol", "grpc", "--grpc-endpoint", node.grpc.as_str()];
    let mut produce = vec!["produce", "--topic", "BenchGrpc", "--queues", "2"];
    produce.extend_from_slice(&["--producers", "2", "--batch", "2", "--duration", "1"]);
    produce.extend_from_slice(&grpc);
    let v = summary(&node, &produce);
    let sent = u64_at(&v, "/sent/msgs");
    assert!(sent > 0 && sent % 2 == 0, "{v}");
    assert_eq!(u64_at(&v, "/sent/errors"), 0, "{v}");
    assert_ordered(&v, "/send_latency_us");
    assert_eq!(u64_at(&v, "/stored_msgs"), sent, "{v}");
    let consume = |duration: &'static str| {
        let mut args = vec!["consume", "--topic", "BenchGrpc", "--group", "bench-grpc"];
        args.extend_from_slice(&[
            "--consumers",
            "2",
            "--idle-exit",
            "1",
            "--duration",
            duration,
        ]);
        args.extend_from_slice(&grpc);
        summary(&node, &args)
    };
    let v = consume("20");
    assert_eq!(v["setup"]["consumer_kind"], "grpc receive+ack", "{v}");
    assert_eq!(u64_at(&v, "/received/msgs"), sent, "{v}");
    // Everything was acked: a second drain by the same group finds nothing.
    let again = consume("2");
    assert_eq!(u64_at(&again, "/received/msgs"), 0, "{again}");
}

#[test]
fn bench_refuses_bad_flags_with_an_error_not_a_panic() {
    for bad in [
        &["bench", "produce", "--topic", "T", "--duration", "-1"][..],
        &["bench", "produce", "--topic", "T", "--size", "0"],
        &[
            "bench", "produce", "--topic", "T", "--mode", "sync", "--window", "8",
        ],
        &[
            "bench", "produce", "--topic", "T", "--mode", "sync", "--batch", "64",
        ],
        &["bench", "e2e", "--topic", "T", "--size", "8"],
        &["bench", "produce", "--topic", "bad topic!"],
        &[
            "bench",
            "produce",
            "--topic",
            "T",
            "--mode",
            "oneway",
            "--protocol",
            "grpc",
        ],
    ] {
        let out = sluice(bad);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{bad:?} succeeded");
        assert!(!stderr.contains("panicked"), "{bad:?} panicked: {stderr}");
        assert!(
            stderr.contains("Error") || stderr.contains("error"),
            "{bad:?}: {stderr}"
        );
    }
}
