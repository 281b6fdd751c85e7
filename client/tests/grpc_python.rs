//! The official RocketMQ 5 Python client (`PyPI` package
//! `rocketmq-python-client` 5.1.2, gRPC `apache.rocketmq.v2`) against a real node's 5.x endpoint,
//! through `tests/interop/py5_scenarios.py`: sends with tags, keys and
//! properties received by a filtered `SimpleConsumer` and acked once; FIFO
//! message groups of an orderly group in send order, one unacked message
//! holding back its group; a delay message not before its time;
//! transactions committed, rolled back and resolved either way by the
//! broker's check-back; an unacked message received again after its
//! invisible duration (attempt 2), a renewed one only after its new time,
//! and a renewed handle that acks; `PushConsumer`s (a failed message back
//! after its back-off, an orderly group's messages in order); and 1,000
//! messages each way between a 4.x producer and a 5.x `SimpleConsumer`, and
//! a 5.x producer and a 4.x push consumer, intact and once.
//! Runs the Python from `SLUICE_PY5` (`bash .ci/test` makes it).

#[path = "../../node/tests/support/mod.rs"]
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use serde_json::{json, Value};
use sluice_client::admin::TopicOptions;
use sluice_client::consumer::handler;
use sluice_client::{
    Admin, ClientConfig, ClientInstance, ConsumeFrom, ConsumeResult, Message, MessageExt, Producer,
    ProducerConfig, PushConsumer, PushConsumerConfig, Subscription,
};
use sluice_core::SystemClock;
use sluice_net::remoting::{request_code, response_code};
use sluice_net::{RemotingCommand, TokioTransport};
use support::Node;

/// Halves are checked back about a second after they are sent.
const NODE_TOML: &str = "transaction_timeout_ms = 1000\ntransaction_check_interval_ms = 1000\n";
/// Messages each way in the mixed test.
const MIXED: usize = 1_000;
/// Every this many messages the 4.x producer sends one over its 4 KiB
/// compression threshold (stored zlib-compressed).
const MIXED_LARGE_EVERY: usize = 100;
/// The 5.x message types (`apache.rocketmq.v2.MessageType`).
const NORMAL: i64 = 1;
const FIFO: i64 = 2;
const DELAY: i64 = 3;
const TRANSACTION: i64 = 4;

fn python() -> Option<String> {
    let python = std::env::var("SLUICE_PY5").ok();
    let has_client = python.as_deref().is_some_and(|p| {
        Command::new(p)
            .args(["-c", "import rocketmq.v5"])
            .status()
            .is_ok_and(|s| s.success())
    });
    if !has_client {
        assert!(
            std::env::var_os("SLUICE_SKIP_PY5_INTEROP").is_some(),
            "the RocketMQ 5 Python client is missing: run `python3 -m venv ~/.cache/sluice/py5 && \
             ~/.cache/sluice/py5/bin/pip install rocketmq-python-client==5.1.2` and set \
             SLUICE_PY5=~/.cache/sluice/py5/bin/python (bash .ci/test does both; its own venv, \
             as it is also named `rocketmq`), or set SLUICE_SKIP_PY5_INTEROP=1"
        );
        return None;
    }
    python
}

/// Runs `scenario` of the Python peer on `topic`; its JSON answer.
fn scenario(python: &str, node: &Node, name: &str, topic: &str, args: &[&str]) -> Value {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/interop/py5_scenarios.py"
    );
    let out = Command::new(python)
        .arg(script)
        .args([name, node.grpc.as_str(), topic])
        .args(args)
        .output()
        .expect("run the 5.x Python peer");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{name} failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("{name}: not JSON ({e}): {stdout}"))
}

fn node() -> (tempfile::TempDir, Node) {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = Node::start_with_config(dir.path(), "async", NODE_TOML);
    (dir, node)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

fn list<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v[key]
        .as_array()
        .unwrap_or_else(|| panic!("{key} is not a list: {v}"))
}

fn text<'a>(m: &'a Value, key: &str) -> &'a str {
    m[key]
        .as_str()
        .unwrap_or_else(|| panic!("{key} is not a string: {m}"))
}

fn ms(m: &Value, key: &str) -> i64 {
    m[key]
        .as_i64()
        .unwrap_or_else(|| panic!("{key} is not a number: {m}"))
}

/// A received message's body checksum held and it came on `topic` as
/// message type `kind`.
fn assert_intact(m: &Value, topic: &str, kind: i64) {
    assert_eq!(m["corrupted"], false, "body digest mismatch: {m}");
    assert_eq!((text(m, "topic"), ms(m, "type")), (topic, kind), "{m}");
}

/// The (body, attempt) of each delivery in `log` of message group `group`.
fn deliveries(log: &[Value], group: &str) -> Vec<(String, i64)> {
    log.iter()
        .filter(|m| m["group"] == group)
        .map(|m| (text(m, "body").to_owned(), ms(m, "attempt")))
        .collect()
}

fn firsts(bodies: &[&str]) -> Vec<(String, i64)> {
    bodies.iter().map(|b| ((*b).to_owned(), 1)).collect()
}

/// Message `i` in the shape both directions of the mixed test (and the
/// push consumer) check: `body`, tag by parity, key `key-i`, property
/// `idx=i`.
fn assert_indexed(m: &Value, body: &str, i: usize) {
    assert_eq!(text(m, "body"), body, "{}", m["id"]);
    let tag = if i % 2 == 0 { "TagA" } else { "TagB" };
    assert_eq!(
        (text(m, "tag"), &m["keys"], &m["props"]),
        (
            tag,
            &json!([format!("key-{i}")]),
            &json!({"idx": i.to_string()})
        ),
        "{m}"
    );
}

/// Creates `topic` with one queue and `group` consuming orderly (FIFO),
/// as `mqadmin updateTopic` / `updateSubGroup -o true` would.
fn orderly(node: &Node, topic: &str, group: &str) {
    runtime().block_on(async {
        let admin = Admin::new(client(node, "admin"));
        let one_queue = TopicOptions {
            queues: 1,
            ..TopicOptions::default()
        };
        admin
            .create_topic(topic, &one_queue)
            .await
            .expect("create topic");
        admin.client().shutdown().await;
        let body = json!({"groupName": group, "consumeMessageOrderly": true}).to_string();
        let cmd = RemotingCommand::request(request_code::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP)
            .with_body(Bytes::from(body));
        let r = support::Client::new(&node.broker)
            .call(cmd, Duration::from_secs(5))
            .await
            .expect("create group");
        assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    });
}

#[test]
fn sends_keep_tags_keys_and_properties_and_a_tag_filter_gets_exactly_its_tag_once() {
    let Some(python) = python() else { return };
    let (_dir, node) = node();
    let v = scenario(&python, &node, "send-and-receive", "PyFive", &[]);
    let tag_a: BTreeSet<&str> = list(&v, "sent")
        .iter()
        .filter(|s| s["tag"] == "TagA")
        .map(|s| text(s, "id"))
        .collect();
    let got = list(&v, "tag_a");
    assert_eq!(got.len(), 3, "{v}");
    assert_eq!(
        got.iter().map(|m| text(m, "id")).collect::<BTreeSet<_>>(),
        tag_a,
        "{v}"
    );
    for m in got {
        let i = text(m, "body").strip_prefix("body ").expect("body");
        assert_intact(m, "PyFive", NORMAL);
        assert_eq!(text(m, "tag"), "TagA", "{m}");
        assert_eq!(m["keys"], json!([format!("k{i}")]), "{m}");
        assert_eq!(m["props"], json!({"color": "blue", "idx": i}), "{m}");
        assert_eq!(m["attempt"], 1, "{m}");
    }
    // Received under a 2 s lease and acked, then looked for past it.
    assert_eq!(
        list(&v, "again"),
        [] as [Value; 0],
        "acked messages came back"
    );
}

#[test]
fn fifo_message_groups_arrive_in_send_order_and_an_unacked_message_holds_back_its_group() {
    let Some(python) = python() else { return };
    let (_dir, node) = node();
    orderly(&node, "PyFifo", "PyFifo-orderly");
    let v = scenario(&python, &node, "fifo", "PyFifo", &["PyFifo-orderly"]);
    let log = list(&v, "log");
    for m in log {
        assert_intact(m, "PyFifo", FIFO);
        assert!(text(m, "body").starts_with(text(m, "group")), "{m}");
    }
    // One receive, one message: g0-0 unacked, the next receive gets none
    // of g0 (g0-1 waits behind it).
    assert!(
        list(&v, "probe").iter().all(|m| m["group"] != "g0"),
        "a receive handed out g0's next message while g0-0 was unacked: {v}"
    );
    // g0-1's first delivery was left unacked for its 2 s: it came back
    // before anything after it in g0.
    assert_eq!(
        deliveries(log, "g0"),
        [
            ("g0-0".to_owned(), 1),
            ("g0-1".to_owned(), 1),
            ("g0-1".to_owned(), 2),
            ("g0-2".to_owned(), 1),
            ("g0-3".to_owned(), 1),
            ("g0-4".to_owned(), 1),
        ],
        "{v}"
    );
    assert_eq!(
        deliveries(log, "g1"),
        firsts(&["g1-0", "g1-1", "g1-2", "g1-3", "g1-4"]),
        "{v}"
    );
    let g01: Vec<i64> = log
        .iter()
        .filter(|m| m["body"] == "g0-1")
        .map(|m| ms(m, "at_ms"))
        .collect();
    assert!(g01[1] - g01[0] >= 1_900, "g0-1 came back early: {v}");
}

#[test]
fn a_delay_message_is_not_received_before_its_delivery_time() {
    let Some(python) = python() else { return };
    let (_dir, node) = node();
    let v = scenario(&python, &node, "delay", "PyDelay", &["3"]);
    let due = ms(&v, "due_ms");
    let got = list(&v, "received");
    assert_eq!(got.len(), 1, "{v}");
    let m = &got[0];
    assert_intact(m, "PyDelay", DELAY);
    assert_eq!((&m["id"], text(m, "body")), (&v["id"], "later"), "{v}");
    assert_eq!(ms(m, "delivery_ms"), due, "the delivery time changed: {v}");
    let early = due - ms(m, "at_ms");
    assert!(early <= 0, "received {early} ms early: {v}");
}

#[test]
fn transactions_commit_roll_back_and_are_resolved_either_way_by_the_check_back() {
    let Some(python) = python() else { return };
    let (_dir, node) = node();
    let v = scenario(&python, &node, "transaction", "PyTx", &[]);
    let ids = &v["ids"];
    let got = list(&v, "received");
    let mut bodies: Vec<&str> = got.iter().map(|m| text(m, "body")).collect();
    bodies.sort_unstable();
    assert_eq!(
        bodies,
        ["check-commit", "commit"],
        "committed halves, each once, and no rolled-back one: {v}"
    );
    for m in got {
        assert_intact(m, "PyTx", TRANSACTION);
        assert_eq!(m["id"], ids[text(m, "body")], "{m}");
        assert_eq!(m["keys"], json!([text(m, "body")]), "{m}");
    }
    // The unended halves went to the producer's checker through Telemetry
    // under their own topic, id and body.
    for kind in ["check-commit", "check-rollback"] {
        let asked = list(&v, "checked")
            .iter()
            .find(|m| m["body"] == kind)
            .unwrap_or_else(|| panic!("the checker was never asked about {kind}: {v}"));
        assert_eq!(
            (&asked["id"], text(asked, "topic")),
            (&ids[kind], "PyTx"),
            "{asked}"
        );
    }
}

#[test]
fn unacked_messages_come_back_after_their_invisible_duration_and_renewals_hold_and_ack() {
    let Some(python) = python() else { return };
    let (_dir, node) = node();
    let v = scenario(&python, &node, "redelivery", "PyRedo", &[]);
    let first = &v["first"];
    for body in ["m0", "m1", "m2"] {
        assert_eq!(first[body]["attempt"], 1, "{v}");
    }
    let later: BTreeMap<&str, &Value> = list(&v, "later")
        .iter()
        .map(|m| (text(m, "body"), m))
        .collect();
    assert_eq!(
        later.keys().copied().collect::<Vec<_>>(),
        ["m0", "m1"],
        "m0 and m1 once each again, m2 (acked) never: {v}"
    );
    // m0, left alone: back after its 2 s, attempt 2.
    let m0 = later["m0"];
    assert_eq!(m0["attempt"], 2, "{v}");
    assert!(ms(m0, "at_ms") - ms(&first["m0"], "at_ms") >= 1_900, "{v}");
    // m1, renewed to 6 s: not back before that, then attempt 2.
    let m1 = later["m1"];
    assert_eq!(
        (&m1["id"], &m1["attempt"]),
        (&first["m1"]["id"], &json!(2)),
        "{v}"
    );
    assert!(ms(m1, "at_ms") - ms(&v, "renewed_ms") >= 5_900, "{v}");
    // m2: the renewal answered a new handle, which acked after the first
    // lease had ended.
    assert_ne!(v["handles"]["before"], v["handles"]["after"], "{v}");
    assert!(
        ms(&v, "m2_acked_ms") - ms(&first["m2"], "at_ms") >= 2_000,
        "{v}"
    );
}

#[test]
fn a_push_consumer_consumes_everything_sent_once() {
    let Some(python) = python() else { return };
    let (_dir, node) = node();
    let v = scenario(&python, &node, "push", "PyPush", &["20"]);
    let sent = list(&v, "sent");
    let seen = list(&v, "seen");
    assert_eq!((sent.len(), seen.len()), (20, 20), "{v}");
    let by_id: BTreeMap<&str, &Value> = seen.iter().map(|m| (text(m, "id"), m)).collect();
    for (i, id) in sent.iter().enumerate() {
        let m = by_id
            .get(id.as_str().expect("id"))
            .unwrap_or_else(|| panic!("message {i} never consumed: {v}"));
        assert_intact(m, "PyPush", NORMAL);
        assert_indexed(m, &format!("push-{i}"), i);
        assert_eq!(m["attempt"], 1, "{m}");
    }
}

#[test]
fn a_push_consumers_failed_message_comes_back_after_its_one_second_back_off() {
    let Some(python) = python() else { return };
    let (_dir, node) = node();
    let v = scenario(&python, &node, "push", "PyRetry", &["20", "push-3"]);
    let seen = list(&v, "seen");
    let attempts = |body: &str| -> Vec<(i64, i64)> {
        seen.iter()
            .filter(|m| m["body"] == body)
            .map(|m| (ms(m, "attempt"), ms(m, "at_ms")))
            .collect()
    };
    let retried = attempts("push-3");
    assert_eq!(
        retried.iter().map(|a| a.0).collect::<Vec<_>>(),
        [1, 2],
        "the failed message, then once more: {v}"
    );
    // The consumer nacks with the group's first back-off (1 s); the
    // message must come back then, not when the consumer's next 20 s long
    // poll happens to end.
    let after_ms = retried[1].1 - retried[0].1;
    assert!(
        (900..10_000).contains(&after_ms),
        "the failed message came back after {after_ms} ms, not its 1 s back-off"
    );
    for i in (0..20).filter(|i| *i != 3) {
        assert_eq!(attempts(&format!("push-{i}")).len(), 1, "push-{i}: {v}");
    }
}

#[test]
fn a_fifo_push_consumer_gets_a_groups_next_message_as_soon_as_the_previous_is_acked() {
    let Some(python) = python() else { return };
    let (_dir, node) = node();
    orderly(&node, "PyFifoPush", "PyFifoPush-orderly");
    let v = scenario(
        &python,
        &node,
        "fifo-push",
        "PyFifoPush",
        &["PyFifoPush-orderly"],
    );
    assert_eq!(v["fifo"], true, "the settings did not say FIFO: {v}");
    let seen = list(&v, "seen");
    for m in seen {
        assert_intact(m, "PyFifoPush", FIFO);
    }
    // Each message arrived while its group's previous one was still being
    // consumed; 15 s is room for all 8 at 0.3 s each, not for a receive
    // that waits out its 20 s long poll after the ack.
    assert_eq!(
        deliveries(seen, "g0"),
        firsts(&["g0-0", "g0-1", "g0-2", "g0-3"]),
        "{v}"
    );
    assert_eq!(
        deliveries(seen, "g1"),
        firsts(&["g1-0", "g1-1", "g1-2", "g1-3"]),
        "{v}"
    );
}

fn client(node: &Node, name: &str) -> ClientInstance<TokioTransport, SystemClock> {
    let config = ClientConfig::new(&node.namesrv).with_instance_name(name);
    ClientInstance::new(TokioTransport, SystemClock::new(), config)
}

/// The body of the 4.x producer's message `i`: large (compressed) every
/// [`MIXED_LARGE_EVERY`].
fn four_body(i: usize) -> String {
    if i % MIXED_LARGE_EVERY == 0 {
        format!("four-{i}-{}", "x".repeat(5_000))
    } else {
        format!("four-{i}")
    }
}

/// Every delivery to a 4.x push consumer of `topic` until it holds
/// `count` distinct messages (or 60 s pass).
async fn consume_4x(node: &Node, topic: &str, count: usize) -> Vec<MessageExt> {
    let mut config = PushConsumerConfig::new(format!("{topic}-4x"));
    config.consume_from = ConsumeFrom::FirstOffset;
    let consumer = PushConsumer::new(client(node, "reader"), config).expect("consumer");
    consumer.subscribe(Subscription::all(topic));
    let seen: Arc<Mutex<Vec<MessageExt>>> = Arc::default();
    let s = Arc::clone(&seen);
    consumer
        .start(handler(move |msgs: Vec<MessageExt>| {
            let s = Arc::clone(&s);
            async move {
                s.lock().expect("lock").extend(msgs);
                ConsumeResult::Success
            }
        }))
        .await
        .expect("start");
    let distinct = || {
        let seen = seen.lock().expect("lock");
        seen.iter()
            .map(MessageExt::msg_id)
            .collect::<BTreeSet<_>>()
            .len()
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while distinct() < count && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    consumer.shutdown().await;
    let seen = seen.lock().expect("lock").clone();
    seen
}

#[test]
fn a_thousand_messages_cross_each_way_between_4x_and_5x_clients_intact_and_once() {
    let Some(python) = python() else { return };
    let (_dir, node) = node();
    let rt = runtime();
    // 4.x producer -> 5.x SimpleConsumer.
    let sent: BTreeMap<String, usize> = rt.block_on(async {
        let producer = Producer::new(client(&node, "writer"), ProducerConfig::new("mixed-4x"));
        let mut ids = BTreeMap::new();
        for i in 0..MIXED {
            let m = Message::new("FourToFive", four_body(i))
                .with_tags(if i % 2 == 0 { "TagA" } else { "TagB" })
                .with_keys([format!("key-{i}")])
                .with_property("idx", i.to_string());
            let r = producer.send(&m).await.expect("4.x send");
            ids.insert(r.msg_id, i);
        }
        producer.client().shutdown().await;
        ids
    });
    let count = MIXED.to_string();
    let v = scenario(
        &python,
        &node,
        "consume",
        "FourToFive",
        &["five-readers", &count],
    );
    assert_eq!(
        list(&v, "extra"),
        [] as [Value; 0],
        "acked messages came back"
    );
    let got = list(&v, "received");
    let ids: BTreeSet<&str> = got.iter().map(|m| text(m, "id")).collect();
    assert_eq!(
        (got.len(), ids),
        (MIXED, sent.keys().map(String::as_str).collect()),
        "the 5.x consumer got each 4.x id once"
    );
    for m in got {
        let i = sent[text(m, "id")];
        assert_intact(m, "FourToFive", NORMAL);
        assert_eq!(m["attempt"], 1, "{m}");
        assert_indexed(m, &four_body(i), i);
    }
    // 5.x producer -> 4.x push consumer.
    let v = scenario(&python, &node, "produce", "FiveToFour", &[&count]);
    let sent: BTreeMap<&str, usize> = list(&v, "sent")
        .iter()
        .enumerate()
        .map(|(i, id)| (id.as_str().expect("id"), i))
        .collect();
    assert_eq!(sent.len(), MIXED, "{v}");
    let got = rt.block_on(consume_4x(&node, "FiveToFour", MIXED));
    let ids: BTreeSet<&str> = got.iter().map(MessageExt::msg_id).collect();
    assert_eq!(
        (got.len(), ids),
        (MIXED, sent.keys().copied().collect()),
        "the 4.x consumer got each 5.x id once"
    );
    for m in &got {
        let i = sent[m.msg_id()];
        let body = String::from_utf8_lossy(&m.body);
        assert_eq!(body, format!("five-{i}"), "{}", m.msg_id());
        assert_eq!(
            m.tags(),
            Some(if i % 2 == 0 { "TagA" } else { "TagB" }),
            "{body}"
        );
        assert_eq!(m.keys().collect::<Vec<_>>(), [format!("key-{i}")], "{body}");
        assert_eq!(m.property("idx"), Some(i.to_string().as_str()), "{body}");
    }
}
