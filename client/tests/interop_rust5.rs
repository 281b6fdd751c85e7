//! The official RocketMQ 5 Rust client (crates.io `rocketmq` 5.0.0, gRPC
//! `apache.rocketmq.v2`) against a real standalone node's 5.x endpoint:
//! normal, FIFO, delay and transactional sends (commit, rollback, and the
//! broker's check-back), `SimpleConsumer` receive and ack, and redelivery of
//! an unacked message after its invisible duration.
//!
//! The client lives in its own cargo project, `tests/interop/rust5-peer`
//! (outside the workspace, so its dependency tree stays out of ours); its
//! binary runs one subcommand per invocation and prints JSON lines.
//! `.ci/test` builds it and exports `SLUICE_RUST5_PEER`; these tests fail
//! without that variable unless `SLUICE_SKIP_RUST5_INTEROP=1` skips them.
//!
//! Not covered: `ChangeInvisibleDuration` and the push consumer, which the
//! 5.0.0 client (the newest on crates.io) does not have; it picks the
//! invisible duration per receive instead.

#[path = "../../node/tests/support/mod.rs"]
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::{json, Value};
use support::Node;

/// A half message is checked back after about a second.
const NODE_TOML: &str = "transaction_timeout_ms = 1000\n\
                         transaction_check_interval_ms = 1000\n";

/// The peer binary from `SLUICE_RUST5_PEER`; `None` when skipped.
fn peer_binary() -> Option<&'static Path> {
    static PEER: OnceLock<Option<PathBuf>> = OnceLock::new();
    PEER.get_or_init(|| {
        if std::env::var_os("SLUICE_SKIP_RUST5_INTEROP").is_some() {
            return None;
        }
        let path = std::env::var_os("SLUICE_RUST5_PEER")
            .map(PathBuf::from)
            .expect(
                "SLUICE_RUST5_PEER is not set: build the RocketMQ 5 Rust client peer with \
             `cargo build --locked --manifest-path client/tests/interop/rust5-peer/Cargo.toml \
             --target-dir ~/.cache/sluice/interop-rust5` and export \
             SLUICE_RUST5_PEER=~/.cache/sluice/interop-rust5/debug/rust5-peer (as .ci/test \
             does), or set SLUICE_SKIP_RUST5_INTEROP=1 to skip these tests",
            );
        assert!(
            path.exists(),
            "SLUICE_RUST5_PEER={} does not exist",
            path.display()
        );
        Some(path)
    })
    .as_deref()
}

/// A fresh node for one test (with its data dir), or `None` when skipped.
fn node() -> Option<(tempfile::TempDir, Node)> {
    peer_binary()?;
    let dir = tempfile::tempdir().expect("tempdir");
    let node = Node::start_with_config(dir.path(), "async", NODE_TOML);
    Some((dir, node))
}

/// Runs the peer with `command_line` (a subcommand and its flags,
/// split on whitespace) against `node`'s gRPC endpoint; its JSON events.
/// Fails with the peer's output unless it exited 0.
fn peer(node: &Node, command_line: &str) -> Vec<Value> {
    let peer = peer_binary().expect("peer checked by node()");
    let mut words = command_line.split_whitespace();
    let subcommand = words.next().expect("a subcommand");
    let out = Command::new(peer)
        .args([subcommand, "--endpoint", &node.grpc])
        .args(words)
        .output()
        .expect("run the rust5-peer");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    print!("{stdout}");
    assert!(
        out.status.success(),
        "rust5-peer {command_line} failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        out.status
    );
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// The events of one kind, in order.
fn of<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["event"] == kind).collect()
}

fn str_of<'a>(event: &'a Value, field: &str) -> &'a str {
    event[field]
        .as_str()
        .unwrap_or_else(|| panic!("{field} is not a string in {event}"))
}

fn i64_of(event: &Value, field: &str) -> i64 {
    event[field]
        .as_i64()
        .unwrap_or_else(|| panic!("{field} is not a number in {event}"))
}

/// `message_id -> event` of the events of one kind; each id at most once.
fn by_id<'a>(events: &'a [Value], kind: &str) -> BTreeMap<String, &'a Value> {
    let mut out = BTreeMap::new();
    for e in of(events, kind) {
        let previous = out.insert(str_of(e, "message_id").to_owned(), e);
        assert!(previous.is_none(), "{kind} twice: {e}");
    }
    out
}

/// Asserts a received message carries what was sent.
fn assert_delivered(sent: &Value, received: &Value, topic: &str) {
    assert_eq!(str_of(received, "topic"), topic, "{received}");
    for field in [
        "message_id",
        "body",
        "tag",
        "keys",
        "properties",
        "message_group",
    ] {
        assert_eq!(
            received[field], sent[field],
            "{field}: sent {sent}, received {received}"
        );
    }
}

#[test]
fn normal_messages_arrive_with_their_tags_keys_and_properties() {
    let Some((_dir, node)) = node() else { return };
    let topic = "Rust5Normal";
    let tagged = peer(
        &node,
        &format!(
            "produce --topic {topic} --count 3 --body-prefix a --tag TagA --keys k1,k2 \
             --prop color=red --prop size=9"
        ),
    );
    let other = peer(
        &node,
        &format!("produce --topic {topic} --count 2 --body-prefix b --tag TagB"),
    );
    let tagged = by_id(&tagged, "sent");
    let other = by_id(&other, "sent");
    assert_eq!((tagged.len(), other.len()), (3, 2));

    // A group subscribed to TagA gets exactly the TagA messages, as sent.
    let filtered = peer(
        &node,
        &format!(
            "simple-consume --topic {topic} --group Rust5TagA --filter TagA --expect 3 \
             --linger-secs 2"
        ),
    );
    let received = by_id(&filtered, "received");
    assert_eq!(
        received.keys().collect::<Vec<_>>(),
        tagged.keys().collect::<Vec<_>>()
    );
    for (id, sent) in &tagged {
        assert_delivered(sent, received[id], topic);
        assert_eq!(i64_of(received[id], "delivery_attempt"), 1);
    }
    assert_eq!(
        by_id(&filtered, "acked").keys().collect::<Vec<_>>(),
        tagged.keys().collect::<Vec<_>>()
    );

    // Another group gets every message again, its own copy.
    let all = peer(
        &node,
        &format!("simple-consume --topic {topic} --group Rust5All --expect 5 --linger-secs 2"),
    );
    let received = by_id(&all, "received");
    let sent: BTreeMap<_, _> = tagged.into_iter().chain(other).collect();
    assert_eq!(
        received.keys().collect::<Vec<_>>(),
        sent.keys().collect::<Vec<_>>()
    );
    for (id, s) in &sent {
        assert_delivered(s, received[id], topic);
    }
}

#[test]
fn fifo_messages_of_one_group_arrive_in_send_order() {
    let Some((_dir, node)) = node() else { return };
    let topic = "Rust5Fifo";
    let sent = peer(
        &node,
        &format!("produce --topic {topic} --count 8 --group order-a --group order-b --tag fifo"),
    );
    let sent = of(&sent, "sent");
    assert_eq!(sent.len(), 8);
    // Small batches, so the order holds across receives too.
    let got = peer(
        &node,
        &format!("simple-consume --topic {topic} --group Rust5FifoReader --batch 3 --expect 8"),
    );
    let received = of(&got, "received");
    assert_eq!(received.len(), 8, "each message once");
    for group in ["order-a", "order-b"] {
        let sent_ids: Vec<&str> = sent
            .iter()
            .filter(|e| e["message_group"] == group)
            .map(|e| str_of(e, "message_id"))
            .collect();
        let received_ids: Vec<&str> = received
            .iter()
            .filter(|e| e["message_group"] == group)
            .map(|e| str_of(e, "message_id"))
            .collect();
        assert_eq!(sent_ids.len(), 4);
        assert_eq!(received_ids, sent_ids, "message group {group} out of order");
    }
    for s in &sent {
        let r = received
            .iter()
            .find(|r| r["message_id"] == s["message_id"])
            .unwrap_or_else(|| panic!("never received: {s}"));
        assert_delivered(s, r, topic);
    }
}

#[test]
fn delay_message_is_not_received_before_its_delivery_time() {
    let Some((_dir, node)) = node() else { return };
    let topic = "Rust5Delay";
    let sent = peer(
        &node,
        &format!("produce --topic {topic} --delay-secs 3 --body-prefix later --tag delayed"),
    );
    let sent = of(&sent, "sent")[0];
    let due_s = i64_of(sent, "delivery_timestamp");
    assert!(due_s * 1000 > i64_of(sent, "sent_at_ms"), "{sent}");

    let got = peer(
        &node,
        &format!("simple-consume --topic {topic} --group Rust5DelayReader --expect 1"),
    );
    let received = of(&got, "received");
    assert_eq!(received.len(), 1);
    let r = received[0];
    assert_delivered(sent, r, topic);
    // Both times are this machine's clock (the peer's).
    assert!(
        i64_of(r, "received_at_ms") >= due_s * 1000,
        "received before its delivery time {due_s} s: {r}"
    );
    // The delivered message still says when it was due, as Apache's does
    // (its timer keeps TIMER_DELIVER_MS; the proxy maps it to
    // delivery_timestamp).
    assert_eq!(
        r["delivery_timestamp"],
        json!(due_s),
        "delivery_timestamp of a delivered delay message: {r}"
    );
}

#[test]
fn transactions_commit_roll_back_and_are_resolved_by_check_back() {
    let Some((_dir, node)) = node() else { return };
    let topic = "Rust5Tx";
    let events = peer(
        &node,
        &format!(
            "transaction --topic {topic} --commit 2 --rollback 2 --check-commit 1 \
             --check-rollback 1"
        ),
    );
    let sent = by_id(&events, "sent");
    assert_eq!(sent.len(), 6);
    for s in sent.values() {
        assert!(!str_of(s, "transaction_id").is_empty(), "{s}");
    }
    let kind_of = |id: &str| {
        let body = str_of(sent[id], "body");
        body[..body.rfind('-').expect("body is <kind>-<i>")].to_owned()
    };
    let ids_of = |kind: &str| -> BTreeSet<String> {
        sent.keys()
            .filter(|id| kind_of(id) == kind)
            .cloned()
            .collect()
    };
    let ended = |event: &str| -> BTreeSet<String> {
        of(&events, event)
            .iter()
            .map(|e| str_of(e, "message_id").to_owned())
            .collect()
    };
    assert_eq!(ended("committed"), ids_of("commit"));
    assert_eq!(ended("rolled_back"), ids_of("rollback"));

    // Only the open halves are checked back, each as it was sent, and the
    // checker's answer (by body) ends it.
    let checked = of(&events, "checked");
    let checked_ids: BTreeSet<String> = checked
        .iter()
        .map(|e| str_of(e, "message_id").to_owned())
        .collect();
    let open: BTreeSet<String> = ids_of("check-commit")
        .union(&ids_of("check-rollback"))
        .cloned()
        .collect();
    assert_eq!(checked_ids, open);
    for c in &checked {
        let id = str_of(c, "message_id");
        let kind = kind_of(id);
        assert_eq!(str_of(c, "topic"), topic, "{c}");
        assert_eq!(c["body"], sent[id]["body"], "{c}");
        assert_eq!(str_of(c, "tag"), kind, "{c}");
        assert_eq!(c["keys"], json!([str_of(sent[id], "body")]), "{c}");
        assert_eq!(c["properties"], json!({ "kind": kind }), "{c}");
        assert!(!str_of(c, "transaction_id").is_empty(), "{c}");
        let resolution = kind.trim_start_matches("check-");
        assert_eq!(str_of(c, "resolution"), resolution, "{c}");
    }

    // Consumers see exactly the committed halves.
    let got = peer(
        &node,
        &format!("simple-consume --topic {topic} --group Rust5TxReader --expect 3 --linger-secs 3"),
    );
    let received = by_id(&got, "received");
    let committed: BTreeSet<String> = ids_of("commit")
        .union(&ids_of("check-commit"))
        .cloned()
        .collect();
    assert_eq!(received.keys().cloned().collect::<BTreeSet<_>>(), committed);
    for (id, r) in &received {
        assert_eq!(r["body"], sent[id.as_str()]["body"], "{r}");
        assert_eq!(r["properties"], json!({ "kind": kind_of(id) }), "{r}");
    }
}

#[test]
fn unacked_message_is_received_again_after_its_invisible_duration() {
    let Some((_dir, node)) = node() else { return };
    let topic = "Rust5Redeliver";
    let sent = peer(
        &node,
        &format!("produce --topic {topic} --body-prefix again --tag retry --keys r1"),
    );
    let sent = of(&sent, "sent")[0];
    let invisible_ms = 3_000;
    // Lingers past another invisible duration: a lost ack would show as a
    // third delivery.
    let got = peer(
        &node,
        &format!(
            "simple-consume --topic {topic} --group Rust5Redeliverer --expect 1 \
             --invisible-secs 3 --skip-first-ack --ack-stale --linger-secs 4"
        ),
    );
    let received = of(&got, "received");
    assert_eq!(received.len(), 2, "delivered twice, then acked");
    for r in &received {
        assert_delivered(sent, r, topic);
    }
    assert_eq!(
        received
            .iter()
            .map(|r| i64_of(r, "delivery_attempt"))
            .collect::<Vec<_>>(),
        [1, 2]
    );
    // Not before the invisible duration ran out (less the client's
    // receive latency on the first delivery, which the server timed).
    let gap_ms = i64_of(received[1], "received_at_ms") - i64_of(received[0], "received_at_ms");
    assert!(
        gap_ms >= invisible_ms - 1_000,
        "redelivered after {gap_ms} ms"
    );

    // The first delivery's handle is stale once the message is out again.
    let stale = of(&got, "stale_ack");
    assert_eq!(stale.len(), 1);
    assert_eq!(stale[0]["ok"], json!(false), "{}", stale[0]);
    assert!(
        str_of(stale[0], "error").contains("INVALID_RECEIPT_HANDLE"),
        "{}",
        stale[0]
    );
    let acked = of(&got, "acked");
    assert_eq!(acked.len(), 1);
    assert_eq!(acked[0]["message_id"], sent["message_id"]);
    assert_eq!(i64_of(acked[0], "delivery_attempt"), 2);
}
