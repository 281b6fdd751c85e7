//! The 5.x endpoint with the remoting ports' security: under `[tls] mode
//! = "enforcing"` the official 5.x Python client round-trips over TLS
//! (ALPN `h2`) and a plaintext client gets nothing; under `[acl]
//! enforcing` a client signing with a known key (`MQv2-HMAC-SHA1`) sends
//! and receives on its topics, a wrong secret is refused, and a SUB-only
//! topic refuses its sends. Runs the client from `SLUICE_PY5` (as
//! `interop_py5.rs`).

#[path = "../../node/tests/support/mod.rs"]
mod support;

#[path = "../../net/tests/support/pki.rs"]
mod pki;

use std::process::{Command, Output};

use pki::Pki;
use support::Node;

/// Sends `count` messages to `topic` and receives + acks them with group
/// `{topic}-g`, signing with `ak`/`sk`, over TLS when `tls` is "1".
const ROUND_TRIP: &str = r#"
import json, sys, time
from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer
endpoint, topic, ak, sk, tls, count = sys.argv[1:7]
tls, count = tls == "1", int(count)
config = ClientConfiguration(endpoint, Credentials(ak, sk), request_timeout=3)
producer = Producer(config, (topic,), tls_enable=tls)
producer.startup()
sent = []
try:
    for i in range(count):
        m = Message()
        m.topic, m.body = topic, ("secure %d" % i).encode()
        sent.append(producer.send(m).message_id)
finally:
    producer.shutdown()
consumer = SimpleConsumer(config, topic + "-g", {topic: FilterExpression("*")}, tls_enable=tls)
consumer.startup()
got, deadline = [], time.time() + 20
try:
    while len(got) < count and time.time() < deadline:
        for m in consumer.receive(16, 15):
            consumer.ack(m)
            got.append(m.message_id)
finally:
    consumer.shutdown()
print(json.dumps({"sent": sorted(sent), "received": sorted(got)}))
"#;

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

fn round_trip(
    python: &str,
    node: &Node,
    topic: &str,
    key: (&str, &str),
    tls: bool,
    ca: Option<&std::path::Path>,
) -> Output {
    let mut command = Command::new(python);
    command
        .args(["-c", ROUND_TRIP, &node.grpc, topic, key.0, key.1])
        .arg(if tls { "1" } else { "0" })
        .arg("3");
    if let Some(ca) = ca {
        // gRPC's C core reads its trust roots from here.
        command.env("GRPC_DEFAULT_SSL_ROOTS_FILE_PATH", ca);
    }
    command.output().expect("run python")
}

/// The ids sent and received, after asserting both lists match.
fn assert_round_trip(out: &Output) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "round trip failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON line");
    assert_eq!(v["sent"].as_array().map(Vec::len), Some(3), "{v}");
    assert_eq!(v["sent"], v["received"], "everything sent is received: {v}");
}

#[test]
fn the_5x_endpoint_serves_tls_to_a_trusting_client_and_nothing_to_a_plain_one() {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = Pki::mint(dir.path());
    let quoted = |p: &std::path::Path| format!("\"{}\"", p.display());
    let toml = format!(
        "[tls]\nmode = \"enforcing\"\ncert = {}\nkey = {}\nca = {}\n",
        quoted(&pki.server_cert),
        quoted(&pki.server_key),
        quoted(&pki.ca)
    );
    let node = Node::start_with_config(dir.path(), "async", &toml);
    assert_round_trip(&round_trip(
        &python,
        &node,
        "TlsFive",
        ("", ""),
        true,
        Some(&pki.ca),
    ));
    let plain = round_trip(&python, &node, "TlsFivePlain", ("", ""), false, None);
    assert!(
        !plain.status.success(),
        "a plaintext 5.x client was served by an enforcing node"
    );
}

#[test]
fn the_5x_endpoint_enforces_acl_signatures_and_permissions() {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let node = Node::start_with_config(dir.path(), "async", support::ACL_TOML);
    assert_round_trip(&round_trip(
        &python,
        &node,
        "Orders",
        ("app", "app-secret"),
        false,
        None,
    ));
    let wrong = round_trip(
        &python,
        &node,
        "Orders",
        ("app", "not-the-secret"),
        false,
        None,
    );
    assert!(!wrong.status.success(), "a wrong secret was served");
    let read_only = round_trip(
        &python,
        &node,
        "ReadOnly",
        ("app", "app-secret"),
        false,
        None,
    );
    assert!(
        !read_only.status.success(),
        "a send to a SUB-only topic was served"
    );
    let text = String::from_utf8_lossy(&read_only.stderr);
    assert!(
        text.contains("40300") || text.to_lowercase().contains("forbidden"),
        "{text}"
    );
}
