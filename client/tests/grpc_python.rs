//! The official RocketMQ 5 Python client (`PyPI` package
//! `rocketmq-python-client` 5.1.2, gRPC `apache.rocketmq.v2`) against a real node's 5.x endpoint,
//! through `tests/interop/py5_scenarios.py`: sends with tags, keys and
//! properties received by a filtered `SimpleConsumer` and acked once; FIFO
//! message groups in send order; a delay message not before its time;
//! transactions committed, rolled back and resolved by the broker's
//! check-back; an unacked message received again after its invisible
//! duration (attempt 2) and a renewed one only after its new time; a
//! `PushConsumer`; and 1,000 messages each way between a 4.x producer and a
//! 5.x `SimpleConsumer`, and a 5.x producer and a 4.x push consumer, intact.
//! Runs the Python from `SLUICE_PY5` (`bash .ci/test` makes it).

#[path = "../../node/tests/support/mod.rs"]
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use sluice_client::consumer::handler;
use sluice_client::{
    ClientConfig, ClientInstance, ConsumeFrom, ConsumeResult, Message, MessageExt, Producer,
    ProducerConfig, PushConsumer, PushConsumerConfig, Subscription,
};
use sluice_core::SystemClock;
use sluice_net::TokioTransport;
use support::Node;

/// Halves are checked back about a second after they are sent.
const NODE_TOML: &str = "transaction_timeout_ms = 1000\ntransaction_check_interval_ms = 1000\n";
/// Messages each way in the mixed test.
const MIXED: usize = 1_000;

fn python() -> Option<String> {
    if let Ok(p) = std::env::var("SLUICE_PY5") {
        return Some(p);
    }
    assert!(
        std::env::var_os("SLUICE_SKIP_PY5_INTEROP").is_some(),
        "SLUICE_PY5 is not set: point it at a Python with rocketmq-python-client==5.1.2 \
         (bash .ci/test makes one), or set SLUICE_SKIP_PY5_INTEROP=1"
    );
    None
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

fn strs(v: &Value, key: &str) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("not a list: {v}"))
        .iter()
        .map(|x| x[key].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn sends_keep_tags_keys_and_properties_and_a_tag_filter_gets_exactly_its_tag_once() {
    let Some(python) = python() else { return };
    let (_dir, node) = node();
    let v = scenario(&python, &node, "send-and-receive", "PyFive", &[]);
    let tag_a: BTreeSet<String> = v["sent"]
        .as_array()
        .expect("sent")
        .iter()
        .filter(|s| s["tag"] == "TagA")
        .map(|s| s["id"].as_str().unwrap_or_default().to_owned())
        .collect();
    let got = &v["tag_a"];
    assert_eq!(
        strs(got, "id").into_iter().collect::<BTreeSet<_>>(),
        tag_a,
        "{v}"
    );
    for m in got.as_array().expect("received") {
        let i = m["body"]
            .as_str()
            .and_then(|b| b.strip_prefix("body "))
            .expect("body");
        assert_eq!(m["tag"], "TagA", "{m}");
        assert_eq!(m["keys"], serde_json::json!([format!("k{i}")]), "{m}");
        assert_eq!(m["props"], serde_json::json!({"color": "blue"}), "{m}");
        assert_eq!(m["attempt"], 1, "{m}");
    }
    assert_eq!(v["again"], 0, "acked messages came back: {v}");
}

#[test]
fn fifo_message_groups_arrive_in_send_order() {
    let Some(python) = python() else { return };
    let (_dir, node) = node();
    let v = scenario(&python, &node, "fifo", "PyFifo", &[]);
    let got = v["received"].as_array().expect("received");
    assert_eq!(got.len(), 10, "{v}");
    for group in ["g0", "g1"] {
        let order: Vec<&str> = got
            .iter()
            .filter(|m| m["group"] == group)
            .map(|m| m["body"].as_str().unwrap_or_default())
            .collect();
        let want: Vec<String> = (0..5).map(|i| format!("{group}-{i}")).collect();
        assert_eq!(order, want, "group {group} out of order: {v}");
    }
}

#[test]
fn a_delay_message_is_not_received_before_its_delivery_time() {
    let Some(python) = python() else { return };
    let (_dir, node) = node();
    let v = scenario(&python, &node, "delay", "PyDelay", &["3"]);
    let due = v["due_ms"].as_i64().expect("due");
    let got: Vec<i64> = v["received_ms"]
        .as_array()
        .expect("received")
        .iter()
        .filter_map(Value::as_i64)
        .collect();
    assert_eq!(got.len(), 1, "{v}");
    assert!(got[0] >= due, "received {} ms early: {v}", due - got[0]);
}

#[test]
fn transactions_commit_roll_back_and_are_resolved_by_the_check_back() {
    let Some(python) = python() else { return };
    let (_dir, node) = node();
    let v = scenario(&python, &node, "transaction", "PyTx", &[]);
    let ids = &v["ids"];
    let got: BTreeSet<String> = strs(&v["received"], "id").into_iter().collect();
    let want: BTreeSet<String> = ["commit", "check"]
        .iter()
        .map(|k| ids[k].as_str().expect("id").to_owned())
        .collect();
    assert_eq!(
        got, want,
        "committed and checked-back messages, each once: {v}"
    );
    assert_eq!(v["received"].as_array().map(Vec::len), Some(2), "{v}");
}

#[test]
fn unacked_messages_come_back_after_their_invisible_duration_and_renewals_hold() {
    let Some(python) = python() else { return };
    let (_dir, node) = node();
    let v = scenario(&python, &node, "redelivery", "PyRedo", &[]);
    let second = v["second"].as_array().expect("second");
    let third = v["third"].as_array().expect("third");
    assert_eq!((second.len(), third.len()), (1, 1), "{v}");
    // The one left alone came back after its 2 s, attempt 2.
    assert_ne!(second[0]["id"], v["renewed_id"], "{v}");
    assert_eq!(second[0]["attempt"], 2, "{v}");
    assert!(
        second[0]["after_s"].as_f64().is_some_and(|s| s >= 1.9),
        "{v}"
    );
    // The renewed one (8 s from its renewal) came back only after that.
    assert_eq!(third[0]["id"], v["renewed_id"], "{v}");
    assert!(
        third[0]["after_s"].as_f64().is_some_and(|s| s >= 7.5),
        "{v}"
    );
    assert_eq!(third[0]["attempt"], 2, "{v}");
}

#[test]
fn a_push_consumer_consumes_everything_sent() {
    let Some(python) = python() else { return };
    let (_dir, node) = node();
    let v = scenario(&python, &node, "push", "PyPush", &["20"]);
    assert_eq!(v["sent"].as_array().map(Vec::len), Some(20), "{v}");
    assert_eq!(v["sent"], v["seen"], "{v}");
}

fn client(node: &Node, name: &str) -> ClientInstance<TokioTransport, SystemClock> {
    let config = ClientConfig::new(&node.namesrv).with_instance_name(name);
    ClientInstance::new(TokioTransport, SystemClock::new(), config)
}

/// A 4.x push consumer of `topic` until it holds `count` messages.
async fn consume_4x(node: &Node, topic: &str, count: usize) -> BTreeMap<String, MessageExt> {
    let mut config = PushConsumerConfig::new(format!("{topic}-4x"));
    config.consume_from = ConsumeFrom::FirstOffset;
    let consumer = PushConsumer::new(client(node, "reader"), config).expect("consumer");
    consumer.subscribe(Subscription::all(topic));
    let seen: Arc<Mutex<BTreeMap<String, MessageExt>>> = Arc::default();
    let s = Arc::clone(&seen);
    consumer
        .start(handler(move |msgs: Vec<MessageExt>| {
            let s = Arc::clone(&s);
            async move {
                for m in msgs {
                    s.lock().expect("lock").insert(m.msg_id().to_owned(), m);
                }
                ConsumeResult::Success
            }
        }))
        .await
        .expect("start");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while seen.lock().expect("lock").len() < count && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    consumer.shutdown().await;
    let seen = seen.lock().expect("lock").clone();
    seen
}

#[test]
fn a_thousand_messages_cross_each_way_between_4x_and_5x_clients_intact() {
    let Some(python) = python() else { return };
    let (_dir, node) = node();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    // 4.x producer -> 5.x SimpleConsumer.
    let sent: BTreeMap<String, usize> = rt.block_on(async {
        let producer = Producer::new(client(&node, "writer"), ProducerConfig::new("mixed-4x"));
        let mut ids = BTreeMap::new();
        for i in 0..MIXED {
            let m = Message::new("FourToFive", format!("four-{i}"))
                .with_tags("TagA")
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
    assert_eq!(v["extra"], 0, "acked messages came back: {}", v["extra"]);
    let got = v["received"].as_array().expect("received");
    assert_eq!(got.len(), MIXED, "received each once");
    for m in got {
        let id = m["id"].as_str().expect("id");
        let i = sent
            .get(id)
            .unwrap_or_else(|| panic!("unknown or changed id {id}"));
        assert_eq!(m["body"], format!("four-{i}"), "{m}");
        assert_eq!(
            (m["tag"].as_str(), &m["keys"]),
            (Some("TagA"), &serde_json::json!([format!("key-{i}")])),
            "{m}"
        );
        assert_eq!(m["props"], serde_json::json!({"idx": i.to_string()}), "{m}");
    }
    // 5.x producer -> 4.x push consumer.
    let v = scenario(&python, &node, "produce", "FiveToFour", &[&count]);
    let sent: BTreeSet<String> = v["sent"]
        .as_array()
        .expect("sent")
        .iter()
        .filter_map(|s| s.as_str().map(str::to_owned))
        .collect();
    assert_eq!(sent.len(), MIXED, "{v}");
    let got = rt.block_on(consume_4x(&node, "FiveToFour", MIXED));
    assert_eq!(
        got.keys().cloned().collect::<BTreeSet<_>>(),
        sent,
        "the 4.x consumer got every id"
    );
    for m in got.values() {
        assert_eq!(m.tags(), Some("Mixed"));
        assert_eq!(m.keys().collect::<Vec<_>>(), ["mixed"]);
        assert_eq!(m.property("from"), Some("5x"));
    }
}
