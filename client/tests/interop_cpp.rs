//! The Sluice client and the official RocketMQ C++ client (`PyPI`
//! `rocketmq` 0.4.4) exchange messages through a real node, both ways, with body,
//! tags, keys and user properties intact; the C++ client's batch send stores
//! each of its messages, and an offset reset reaches C++ consumers. With
//! ACL on, the C++ client's signed requests (`set_session_credentials`)
//! are served and its wrong or insufficient credentials refused.

#[path = "../../node/tests/support/mod.rs"]
mod support;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sluice_client::consumer::handler;
use sluice_client::{
    Admin, ClientConfig, ClientInstance, ConsumeFrom, ConsumeResult, Message, MessageExt, Producer,
    ProducerConfig, PushConsumer, PushConsumerConfig, Subscription,
};
use sluice_core::SystemClock;
use sluice_net::TokioTransport;
use support::Node;

const COUNT: usize = 200;

fn python() -> Option<String> {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_owned());
    let has_client = Command::new(&python)
        .args(["-c", "import rocketmq.client"])
        .status()
        .is_ok_and(|s| s.success());
    if !has_client {
        assert!(
            std::env::var("SLUICE_SKIP_CPP_INTEROP").is_ok(),
            "the C++ client is missing: run `pip install rocketmq==0.4.4` (bash .ci/test does) or set SLUICE_SKIP_CPP_INTEROP=1"
        );
        return None;
    }
    Some(python)
}

fn peer(python: &str, args: &[&str]) -> std::process::Output {
    signed_peer(python, args, None)
}

/// The C++ peer, signing with `(access key, secret key)` when given.
fn signed_peer(
    python: &str,
    args: &[&str],
    credentials: Option<(&str, &str)>,
) -> std::process::Output {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/interop/cpp_peer.py");
    let mut command = Command::new(python);
    command.arg(script).args(args);
    if let Some((ak, sk)) = credentials {
        command
            .env("SLUICE_ACCESS_KEY", ak)
            .env("SLUICE_SECRET_KEY", sk);
    }
    let out = command.output().expect("run the C++ peer");
    print!("{}", String::from_utf8_lossy(&out.stdout));
    out
}

fn client(node: &Node, name: &str) -> ClientInstance<TokioTransport, SystemClock> {
    ClientInstance::new(
        TokioTransport,
        SystemClock::new(),
        ClientConfig::new(&node.namesrv).with_instance_name(name),
    )
}

fn check(m: &MessageExt, prefix: &str) -> usize {
    let body = String::from_utf8_lossy(&m.body).into_owned();
    let i: usize = body
        .strip_prefix(prefix)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("unexpected body {body}"));
    assert_eq!(
        m.tags(),
        Some(if i % 2 == 0 { "TagA" } else { "TagB" }),
        "{body}"
    );
    assert_eq!(m.keys().collect::<Vec<_>>(), [format!("key-{i}")], "{body}");
    assert_eq!(m.property("idx"), Some(i.to_string().as_str()), "{body}");
    i
}

#[test]
fn messages_cross_between_the_sluice_and_cpp_clients_intact() {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let node = Node::start(dir.path(), "async");
    let count = COUNT.to_string();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");

    // C++ produces, Sluice consumes.
    let out = peer(&python, &["produce", &node.namesrv, "FromCpp", &count]);
    assert!(out.status.success(), "the C++ producer failed");
    let producer = rt.block_on(sluice_side(&node));

    // Sluice produced; C++ consumes.
    let out = peer(&python, &["consume", &node.namesrv, "FromSluice", &count]);
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("OK received"),
        "the C++ consumer did not receive everything intact"
    );
    rt.block_on(producer.client().shutdown());
}

#[test]
fn a_cpp_batch_send_stores_each_message_with_its_own_tags_and_body() {
    const BATCH: usize = 16;
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let node = Node::start(dir.path(), "async");
    let out = peer(
        &python,
        &[
            "produce_batch",
            &node.namesrv,
            "CppBatch",
            &BATCH.to_string(),
        ],
    );
    assert!(out.status.success(), "the C++ batch producer failed");
    let rt = runtime();
    let seen = rt.block_on(consume_all(&node, "CppBatch", BATCH));
    // Stored as one message, the batch would arrive as one garbage body
    // without tags, which `check` rejects; each index arrives exactly once.
    assert_eq!(
        seen.keys().copied().collect::<Vec<_>>(),
        (0..BATCH).collect::<Vec<_>>()
    );
}

#[test]
fn an_offset_reset_reaches_cpp_consumers() {
    const SENT: usize = 20;
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let node = Node::start(dir.path(), "async");
    let rt = runtime();
    let _inside = rt.enter();
    let producer = Producer::new(client(&node, "writer"), ProducerConfig::new("reset-writer"));
    rt.block_on(async {
        for i in 0..SENT {
            producer
                .send(&indexed("CppReset", "sluice", i))
                .await
                .expect("send");
        }
    });
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/interop/cpp_peer.py");
    let mut child = Command::new(&python)
        .arg(script)
        .args([
            "consume_twice",
            &node.namesrv,
            "CppReset",
            &SENT.to_string(),
        ])
        .stdout(Stdio::piped())
        .spawn()
        .expect("run the C++ peer");
    let mut lines = BufReader::new(child.stdout.take().expect("piped")).lines();
    let mut seen_first = false;
    for line in lines.by_ref() {
        let line = line.expect("peer output");
        println!("{line}");
        if line == "FIRST" {
            seen_first = true;
            break;
        }
    }
    assert!(
        seen_first,
        "the C++ consumer did not consume the first round"
    );
    let admin = Admin::new(client(&node, "admin"));
    let reset = rt
        .block_on(admin.reset_offset_by_time("cpp-peer-consumer-CppReset", "CppReset", 0))
        .expect("reset");
    assert!(reset.iter().all(|(_, offset)| *offset == 0), "{reset:?}");
    let tail: Vec<String> = lines.map(|l| l.expect("peer output")).collect();
    println!("{}", tail.join("\n"));
    let status = child.wait().expect("peer exits");
    assert!(
        status.success() && tail.iter().any(|l| l.starts_with("OK received")),
        "the C++ consumer did not consume again from the reset offsets"
    );
    rt.block_on(producer.client().shutdown());
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// Message `i` in the shape both peers check: body `<who>-i`, tag by parity,
/// key `key-i`, property `idx=i`.
fn indexed(topic: &str, who: &str, i: usize) -> Message {
    Message::new(topic, format!("{who}-{i}"))
        .with_tags(if i % 2 == 0 { "TagA" } else { "TagB" })
        .with_keys([format!("key-{i}")])
        .with_property("idx", i.to_string())
}

/// Consumes `count` messages the C++ client sent to `topic`, each checked.
async fn consume_all(node: &Node, topic: &str, count: usize) -> BTreeMap<usize, MessageExt> {
    let mut config = PushConsumerConfig::new(format!("sluice-reads-{topic}"));
    config.consume_from = ConsumeFrom::FirstOffset;
    config.hold = Duration::from_secs(2);
    let consumer = PushConsumer::new(client(node, "reader"), config).expect("consumer");
    consumer.subscribe(Subscription::all(topic));
    let seen: Arc<Mutex<BTreeMap<usize, MessageExt>>> = Arc::default();
    let s = Arc::clone(&seen);
    consumer
        .start(handler(move |msgs: Vec<MessageExt>| {
            let s = Arc::clone(&s);
            async move {
                for m in msgs {
                    let i = check(&m, "cpp-");
                    s.lock().expect("lock").insert(i, m);
                }
                ConsumeResult::Success
            }
        }))
        .await
        .expect("start");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while seen.lock().expect("lock").len() < count {
        assert!(
            tokio::time::Instant::now() < deadline,
            "Sluice consumer got {} of {count}",
            seen.lock().expect("lock").len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    consumer.shutdown().await;
    let seen = seen.lock().expect("lock").clone();
    seen
}

/// Consumes what the C++ client sent, then sends for it to consume.
async fn sluice_side(node: &Node) -> Producer<TokioTransport, SystemClock> {
    consume_all(node, "FromCpp", COUNT).await;
    let producer = Producer::new(client(node, "writer"), ProducerConfig::new("sluice-writes"));
    for i in 0..COUNT {
        producer
            .send(&indexed("FromSluice", "sluice", i))
            .await
            .expect("send");
    }
    producer
}

#[test]
fn the_cpp_client_signs_with_its_credentials_and_is_refused_without_the_right_ones() {
    const SENT: usize = 20;
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let node = Node::start_with_config(dir.path(), "async", support::ACL_TOML);
    let count = SENT.to_string();
    let good = Some(("app", "app-secret"));
    let out = signed_peer(&python, &["produce", &node.namesrv, "CppAcl", &count], good);
    assert!(out.status.success(), "the signed C++ producer failed");
    let out = signed_peer(&python, &["consume", &node.namesrv, "CppAcl", &count], good);
    assert!(out.status.success(), "the signed C++ consumer failed");

    let refused = |topic: &str, credentials: Option<(&str, &str)>, remark: &str| {
        let out = signed_peer(
            &python,
            &["produce", &node.namesrv, topic, "1"],
            credentials,
        );
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(!out.status.success(), "{topic} was sent: {text}");
        // The C++ client raises "No route info" after its retries; the
        // broker's answer is in its log, which the peer prints.
        assert!(
            text.contains(remark) && text.contains("error code:16"),
            "the C++ client's error {text:?} lacks NO_PERMISSION (16) and {remark:?}"
        );
    };
    refused(
        "CppAcl",
        Some(("app", "wrong-secret")),
        "Check signature failed for accessKey=app",
    );
    refused(
        "CppReadOnly",
        good,
        "No permission for topic CppReadOnly: accessKey=app needs PUB, has SUB",
    );
    refused("CppAcl", None, "no AccessKey");
}
