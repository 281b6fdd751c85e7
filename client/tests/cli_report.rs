//! `sluice bench --report` and the admin verbs' progress lines, against a
//! real `sluice-node standalone` process. The reports are kept under the
//! target directory (`target/tmp/bench-reports/`) for CI to keep.

#[path = "../../node/tests/support/mod.rs"]
mod support;

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;
use support::Node;

fn sluice(namesrv: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("--namesrv")
        .arg(namesrv)
        .args(args)
        .output()
        .expect("run sluice")
}

/// Runs `args`, which must succeed; returns (stdout, stderr).
fn ok(node: &Node, args: &[&str]) -> (String, String) {
    let out = sluice(&node.namesrv, args);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "sluice {args:?} failed: {stderr}");
    (stdout, stderr)
}

fn report_path(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("bench-reports");
    std::fs::create_dir_all(&dir).expect("report dir");
    let path = dir.join(name);
    let _ = std::fs::remove_file(&path);
    path
}

/// The number of points of every polyline after `marker` in `doc`.
fn polyline_points_after(doc: &str, marker: &str) -> Vec<usize> {
    let (_, rest) = doc
        .split_once(marker)
        .unwrap_or_else(|| panic!("no {marker} in the report"));
    let rest = rest.split("</svg>").next().unwrap_or_default();
    rest.split("<polyline")
        .skip(1)
        .map(|p| {
            let points = p.split("points=\"").nth(1).expect("points attribute");
            points[..points.find('"').expect("closing quote")]
                .split(' ')
                .filter(|xy| xy.contains(','))
                .count()
        })
        .collect()
}

/// Both charts have data: a latency curve and a throughput line with a
/// point per second sampled (at least 2 in a 2 s run).
fn assert_charts(doc: &str) {
    let latency = polyline_points_after(doc, "Latency by percentile</text>");
    assert!(latency.first().is_some_and(|n| *n >= 2), "{latency:?}");
    let throughput = polyline_points_after(doc, "Throughput over time</text>");
    assert!(
        throughput.first().is_some_and(|n| *n >= 2),
        "{throughput:?}"
    );
    assert!(!doc.contains("no data"));
    assert!(!doc.contains("<script") && !doc.contains("NaN"));
}

const PRODUCE: [&str; 8] = [
    "bench",
    "produce",
    "--topic",
    "BenchReport",
    "--queues",
    "4",
    "--duration",
    "2",
];

#[test]
fn bench_report_writes_html_and_svg_charts_of_a_real_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = Node::start(dir.path(), "async");

    let html_path = report_path("produce.html");
    let html_arg = html_path.to_str().expect("utf-8 path");
    let mut args = vec!["--json"];
    args.extend_from_slice(&PRODUCE);
    args.extend_from_slice(&["--report", html_arg]);
    let (stdout, _) = ok(&node, &args);
    let summary: Value = serde_json::from_str(stdout.trim()).expect("one JSON summary");
    let sent = summary["sent"]["msgs"].as_u64().expect("sent.msgs");
    assert!(sent > 0, "{summary}");
    let html = std::fs::read_to_string(&html_path).expect("html report written");
    assert!(html.starts_with("<!DOCTYPE html>"), "{html}");
    assert_eq!(html.matches("<svg").count(), 2, "{html}");
    assert!(html.trim_end().ends_with("</html>"));
    assert!(
        html.contains(&format!("<th>sent</th><td>{sent} msgs")),
        "summary table lacks the {sent} sent messages: {html}"
    );
    assert_charts(&html);

    let svg_path = report_path("produce.svg");
    let mut args = PRODUCE.to_vec();
    args.extend_from_slice(&["--report", svg_path.to_str().expect("utf-8 path")]);
    let (stdout, stderr) = ok(&node, &args);
    assert!(stdout.starts_with("sluice bench produce"), "{stdout}");
    assert!(stderr.contains("report written to"), "{stderr}");
    let svg = std::fs::read_to_string(&svg_path).expect("svg report written");
    assert!(svg.starts_with("<?xml"), "{svg}");
    assert_eq!(svg.matches("<svg").count(), 3, "outer plus two charts");
    assert_charts(&svg);
}

#[test]
fn bench_report_refuses_an_unknown_type_before_running() {
    // Nothing listens on the name server: the flag must be refused first.
    let path = report_path("produce.png");
    let out = sluice(
        "127.0.0.1:1",
        &[
            "bench",
            "produce",
            "--topic",
            "T",
            "--report",
            path.to_str().expect("utf-8 path"),
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains(".html or .svg"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!path.exists());
}

#[test]
fn offset_reset_and_topic_delete_report_steps_on_stderr_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = Node::start(dir.path(), "async");
    let topic = ["--topic", "Steps"];
    ok(
        &node,
        &["topic", "create", topic[0], topic[1], "--queues", "4"],
    );
    let (stdout, stderr) = ok(
        &node,
        &[
            "offset",
            "reset",
            "--group",
            "g",
            topic[0],
            topic[1],
            "--timestamp",
            "0",
        ],
    );
    assert!(
        stderr.contains("reset 4/4 queues on ") && stderr.contains("(1/1 brokers)"),
        "{stderr}"
    );
    assert_eq!(stdout.lines().count(), 4, "{stdout}");
    assert!(
        stdout
            .lines()
            .all(|l| l.starts_with("Steps:") && l.ends_with(" -> 0")),
        "{stdout}"
    );
    // With --json stderr carries no steps.
    let (_, quiet) = ok(
        &node,
        &[
            "--json",
            "offset",
            "reset",
            "--group",
            "g",
            topic[0],
            topic[1],
            "--timestamp",
            "0",
        ],
    );
    assert!(!quiet.contains("reset "), "{quiet}");

    let (stdout, stderr) = ok(&node, &["topic", "delete", topic[0], topic[1]]);
    assert_eq!(stdout, "deleted topic Steps\n");
    assert!(stderr.contains("deleted Steps on broker "), "{stderr}");
    assert!(stderr.contains("(1/2)"), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "deleted Steps on name server {} (2/2)",
            node.namesrv
        )),
        "{stderr}"
    );
}
