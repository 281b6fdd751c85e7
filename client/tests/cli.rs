//! Every `sluice` verb against a real `sluice-node standalone` process.

#[path = "../../node/tests/support/mod.rs"]
mod support;

use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::Value;
use support::Node;

fn sluice(node: &Node, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("--namesrv")
        .arg(&node.namesrv)
        .args(args)
        .output()
        .expect("run sluice")
}

/// Runs a verb with `--json` and parses its stdout; the verb must succeed.
fn json(node: &Node, args: &[&str]) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let out = sluice(node, &all);
    assert!(
        out.status.success(),
        "sluice {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "sluice {args:?} printed no JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// `sluice consume --json` prints one object per line.
fn json_lines(out: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect()
}

/// Waits for a real process; this harness is not simulated code.
#[expect(
    clippy::disallowed_methods,
    reason = "the test waits for real processes"
)]
fn pause(d: Duration) {
    std::thread::sleep(d);
}

fn wait_registered(node: &Node) {
    for _ in 0..100 {
        let v = json(node, &["cluster"]);
        if v["brokers"].as_array().is_some_and(|b| !b.is_empty()) {
            return;
        }
        pause(Duration::from_millis(100));
    }
    panic!("the broker never registered");
}

#[test]
#[expect(
    clippy::too_many_lines,
    reason = "one scenario walks every verb in order"
)]
fn every_verb_works_against_a_standalone_node() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = Node::start(dir.path(), "async");
    wait_registered(&node);

    // cluster
    let cluster = json(&node, &["cluster"]);
    let broker = &cluster["brokers"][0];
    assert_eq!(broker["brokerId"], 0);
    assert_eq!(broker["addr"], node.broker.as_str());
    assert!(broker["runtime"]["brokerVersionDesc"]
        .as_str()
        .is_some_and(|v| v.starts_with("sluice")));
    let human = sluice(&node, &["cluster"]);
    assert!(String::from_utf8_lossy(&human.stdout).contains(&node.broker));

    // topic create / list / route
    let created = json(
        &node,
        &["topic", "create", "--topic", "Cli", "--queues", "2"],
    );
    assert_eq!(created["created"], true);
    let mut listed = false;
    for _ in 0..100 {
        let topics = json(&node, &["topic", "list"]);
        let route_ok = sluice(&node, &["--json", "topic", "route", "--topic", "Cli"]);
        if topics["topics"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t == "Cli"))
            && route_ok.status.success()
        {
            listed = true;
            break;
        }
        pause(Duration::from_millis(100));
    }
    assert!(listed, "the topic never showed up in list and route");
    let route = json(&node, &["topic", "route", "--topic", "Cli"]);
    assert_eq!(route["queueDatas"][0]["writeQueueNums"], 2);
    assert_eq!(
        route["brokerDatas"][0]["brokerAddrs"]["0"],
        node.broker.as_str()
    );

    // send
    let sent = json(
        &node,
        &[
            "send",
            "--topic",
            "Cli",
            "--body",
            "hello",
            "--tags",
            "greet",
            "--keys",
            "k1 k2",
            "--property",
            "shop=42",
            "--count",
            "3",
        ],
    );
    let sent = sent["sent"].as_array().expect("sent").clone();
    assert_eq!(sent.len(), 3);
    assert!(sent.iter().all(|s| s["status"] == "Ok"));

    // consume: all three, with everything intact
    let out = sluice(
        &node,
        &[
            "--json", "consume", "--topic", "Cli", "--group", "g1", "--count", "3",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let msgs = json_lines(&out);
    assert_eq!(msgs.len(), 3);
    for m in &msgs {
        assert_eq!(m["body"], "hello");
        assert_eq!(m["tags"], "greet");
        assert_eq!(m["keys"], serde_json::json!(["k1", "k2"]));
        assert_eq!(m["properties"]["shop"], "42");
    }
    // The group committed its progress: nothing is left to consume.
    let again = sluice(
        &node,
        &[
            "--json",
            "consume",
            "--topic",
            "Cli",
            "--group",
            "g1",
            "--idle-secs",
            "1",
        ],
    );
    assert!(again.status.success());
    assert!(json_lines(&again).is_empty(), "offsets were not committed");

    // group progress
    let progress = json(
        &node,
        &["group", "progress", "--group", "g1", "--topic", "Cli"],
    );
    assert_eq!(progress["totalLag"], 0);
    let committed: i64 = progress["queues"]
        .as_array()
        .expect("queues")
        .iter()
        .filter(|q| q["topic"] == "Cli")
        .map(|q| q["consumerOffset"].as_i64().unwrap_or(0))
        .sum();
    assert_eq!(committed, 3);

    // query by key and by both ids
    let by_key = json(&node, &["query", "--topic", "Cli", "--key", "k2"]);
    assert_eq!(by_key["messages"].as_array().map(Vec::len), Some(3));
    let offset_id = sent[1]["offsetMsgId"].as_str().expect("offset id");
    let by_id = json(&node, &["query", "--id", offset_id]);
    assert_eq!(by_id["messages"][0]["offsetMsgId"], offset_id);
    let uniq = sent[2]["msgId"].as_str().expect("msg id");
    let by_uniq = json(&node, &["query", "--id", uniq, "--topic", "Cli"]);
    assert_eq!(by_uniq["messages"][0]["msgId"], uniq);
    let missing = sluice(&node, &["query", "--topic", "Cli", "--key", "nope"]);
    assert!(!missing.status.success());

    // offset reset to the beginning: the group reads everything again
    let reset = json(
        &node,
        &[
            "offset",
            "reset",
            "--group",
            "g1",
            "--topic",
            "Cli",
            "--timestamp",
            "0",
        ],
    );
    let total: i64 = reset["queues"]
        .as_array()
        .expect("queues")
        .iter()
        .map(|q| q["offset"].as_i64().expect("offset"))
        .sum();
    assert_eq!(total, 0);
    let replay = sluice(
        &node,
        &[
            "--json", "consume", "--topic", "Cli", "--group", "g1", "--count", "3",
        ],
    );
    assert_eq!(json_lines(&replay).len(), 3, "reset did not rewind");

    // consume --follow waits for new messages until --count. It starts from
    // "now", so the late messages count however long its first rebalance
    // takes on a busy machine.
    let now_ms = sluice_core::Clock::wall_ms(&sluice_core::SystemClock::new()).to_string();
    let mut follower = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args([
            "--namesrv",
            &node.namesrv,
            "--json",
            "consume",
            "--topic",
            "Cli",
        ])
        .args([
            "--group", "g2", "--from", &now_ms, "--follow", "--count", "2",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn follower");
    pause(Duration::from_secs(2));
    json(
        &node,
        &["send", "--topic", "Cli", "--body", "late", "--count", "2"],
    );
    // Bounded: a follower that never sees the messages fails the test
    // instead of hanging it.
    let mut waited = Duration::ZERO;
    while follower.try_wait().expect("poll follower").is_none() {
        if waited > Duration::from_secs(60) {
            let _ = follower.kill();
            panic!("the follower did not receive the late messages in 60 s");
        }
        pause(Duration::from_millis(100));
        waited += Duration::from_millis(100);
    }
    let out = follower.wait_with_output().expect("follower");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let late = json_lines(&out);
    assert_eq!(late.len(), 2);
    assert!(late.iter().all(|m| m["body"] == "late"));

    // delete
    let deleted = json(&node, &["topic", "delete", "--topic", "Cli"]);
    assert_eq!(deleted["deleted"], true);
    let topics = json(&node, &["topic", "list"]);
    assert!(!topics["topics"]
        .as_array()
        .expect("topics")
        .iter()
        .any(|t| t == "Cli"));
}

#[test]
fn bad_input_fails_with_a_clear_message() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = Node::start(dir.path(), "async");
    wait_registered(&node);
    let bad = sluice(&node, &["send", "--topic", "no spaces!", "--body", "x"]);
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("invalid message"), "{err}");
    let bad = sluice(&node, &["topic", "create", "--topic", "T", "--queues", "0"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("queue count"));
    let bad = sluice(
        &node,
        &[
            "send",
            "--topic",
            "T",
            "--body",
            "x",
            "--property",
            "novalue",
        ],
    );
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("NAME=VALUE"));
    let unreachable = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["--namesrv", "127.0.0.1:1", "topic", "list"])
        .output()
        .expect("run");
    assert!(!unreachable.status.success());
    assert!(String::from_utf8_lossy(&unreachable.stderr).contains("error:"));
}

#[test]
fn acl_verbs_list_accounts_and_check_keys_and_every_verb_signs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = Node::start_with_config(dir.path(), "async", support::ACL_TOML);
    let root = ["--access-key", "root", "--secret-key", "root-secret"];
    let with = |creds: &[&str], args: &[&str]| {
        let mut all = creds.to_vec();
        all.extend_from_slice(args);
        sluice(&node, &all)
    };
    let unsigned = sluice(&node, &["topic", "create", "--topic", "Orders"]);
    assert!(
        !unsigned.status.success(),
        "an unsigned admin verb is refused"
    );
    assert!(String::from_utf8_lossy(&unsigned.stderr).contains("no AccessKey"));
    let made = with(&root, &["topic", "create", "--topic", "Orders"]);
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );

    let mut args = root.to_vec();
    args.extend(["acl", "list"]);
    let list = json(&node, &args);
    let text = list.to_string();
    assert!(
        text.contains("\"accessKey\":\"app\"") && text.contains("ReadOnly=SUB"),
        "{text}"
    );
    assert!(!text.contains("-secret"), "a secret was listed: {text}");

    let mut args = root.to_vec();
    args.extend([
        "acl", "check", "--key", "app", "--topic", "ReadOnly", "--group", "g",
    ]);
    let check = json(&node, &args);
    let checks = &check[0]["answer"]["checks"];
    let verdict = |perm: &str, resource: &str| {
        checks
            .as_array()
            .expect("checks")
            .iter()
            .find(|c| c["perm"] == perm && c["resource"] == resource)
            .map(|c| c["allowed"] == true)
            .expect("checked")
    };
    assert!(!verdict("PUB", "topic ReadOnly"));
    assert!(verdict("SUB", "topic ReadOnly"));
    assert!(verdict("SUB", "group g"));

    let app = ["--access-key", "app", "--secret-key", "app-secret"];
    let sent = with(&app, &["send", "--topic", "Orders", "--body", "signed"]);
    assert!(
        sent.status.success(),
        "{}",
        String::from_utf8_lossy(&sent.stderr)
    );
    let denied = with(&app, &["send", "--topic", "ReadOnly", "--body", "x"]);
    assert!(!denied.status.success(), "a SUB-only key cannot send");
}
