//! A real `sluice-node standalone` with `[tls] mode = "enforcing"`: its
//! broker registers with its name server over TLS, the Rust client and the
//! `sluice` CLI round-trip through it with TLS and are refused without, and
//! Python's `ssl` module completes a handshake and a remoting request.

#[path = "../../node/tests/support/mod.rs"]
mod support;

#[path = "../../net/tests/support/pki.rs"]
mod pki;

use std::process::Command;
use std::time::Duration;

use pki::Pki;
use sluice_client::admin::TopicOptions;
use sluice_client::consumer::PullStatus;
use sluice_client::{
    Admin, ClientConfig, ClientInstance, Message, Producer, ProducerConfig, PullConsumer,
    SendStatus, Subscription, TlsSettings, TlsTransport,
};
use sluice_core::SystemClock;
use support::Node;

/// A standalone node whose every port requires TLS; its broker dials its
/// name server trusting the test CA.
fn enforcing_node(dir: &std::path::Path, pki: &Pki) -> Node {
    let toml = format!(
        "[tls]\nmode = \"enforcing\"\ncert = {:?}\nkey = {:?}\nca = {:?}\n",
        pki.server_cert, pki.server_key, pki.ca
    );
    // The harness returns once the broker is registered: over TLS here.
    Node::start_with_config(dir, "async", &toml)
}

fn client(
    node: &Node,
    transport: TlsTransport,
    name: &str,
) -> ClientInstance<TlsTransport, SystemClock> {
    let mut config = ClientConfig::new(&node.namesrv).with_instance_name(name);
    config.request_timeout = Duration::from_secs(3);
    ClientInstance::new(transport, SystemClock::new(), config)
}

fn trusting(pki: &Pki) -> TlsTransport {
    TlsSettings {
        ca: Some(pki.ca.clone()),
        ..TlsSettings::default()
    }
    .transport()
    .expect("client settings")
}

#[tokio::test]
async fn enforcing_node_round_trips_send_and_pull_over_tls_and_refuses_plain() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = Pki::mint(dir.path());
    let node = enforcing_node(dir.path(), &pki);
    let c = client(&node, trusting(&pki), "tls-client");
    let admin = Admin::new(c.clone());
    admin
        .create_topic(
            "Secure",
            &TopicOptions {
                queues: 1,
                ..TopicOptions::default()
            },
        )
        .await
        .expect("create topic over TLS");
    let producer = Producer::new(c.clone(), ProducerConfig::new("pg"));
    let sent = producer
        .send(&Message::new("Secure", "over tls"))
        .await
        .expect("send over TLS");
    assert_eq!(sent.status, SendStatus::Ok);
    let pull = PullConsumer::new(c.clone(), "reader");
    let got = pull
        .pull(&sent.queue, &Subscription::all("Secure"), 0, 32)
        .await
        .expect("pull over TLS");
    assert_eq!(got.status, PullStatus::Found);
    assert_eq!(got.messages[0].body.as_ref(), b"over tls");
    c.shutdown().await;

    let plain = client(&node, TlsTransport::plain(), "plain-client");
    assert!(
        Admin::new(plain.clone()).cluster().await.is_err(),
        "a plain client must be refused"
    );
    plain.shutdown().await;
}

#[test]
fn sluice_cli_reaches_an_enforcing_node_with_tls_ca_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = Pki::mint(dir.path());
    let node = enforcing_node(dir.path(), &pki);
    let cli = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_sluice"))
            .arg("--namesrv")
            .arg(&node.namesrv)
            .args(args)
            .arg("cluster")
            .output()
            .expect("run sluice")
    };
    let ca = pki.ca.to_str().expect("utf-8 path");
    let with_tls = cli(&["--json", "--tls-ca", ca]);
    assert!(
        with_tls.status.success(),
        "sluice --tls-ca failed: {}",
        String::from_utf8_lossy(&with_tls.stderr)
    );
    assert!(String::from_utf8_lossy(&with_tls.stdout).contains(&node.broker));
    assert!(!cli(&["--json"]).status.success(), "plain is refused");
    let tls_without_trust = cli(&["--tls"]);
    assert!(!tls_without_trust.status.success());
    assert!(String::from_utf8_lossy(&tls_without_trust.stderr).contains("--tls-ca"));
}

/// Handshakes with Python's `ssl` (verifying against the CA and the IP),
/// sends GET_BROKER_CLUSTER_INFO as a JSON-header frame and prints the
/// negotiated version and the response code.
const PYTHON_PROBE: &str = r#"
import json, socket, ssl, struct, sys
host, port, ca = sys.argv[1], int(sys.argv[2]), sys.argv[3]
ctx = ssl.create_default_context(cafile=ca)
with socket.create_connection((host, port), timeout=10) as raw:
    with ctx.wrap_socket(raw, server_hostname=host) as s:
        header = json.dumps({"code": 106, "flag": 0, "language": "PYTHON", "opaque": 7,
                             "serializeTypeCurrentRPC": "JSON", "version": 0}).encode()
        s.sendall(struct.pack(">II", 4 + len(header), len(header)) + header)
        def exact(n):
            buf = b""
            while len(buf) < n:
                chunk = s.recv(n - len(buf))
                if not chunk:
                    sys.exit("closed early")
                buf += chunk
            return buf
        (total,) = struct.unpack(">I", exact(4))
        rest = exact(total)
        header_len = struct.unpack(">I", rest[:4])[0] & 0xFFFFFF
        reply = json.loads(rest[4:4 + header_len])
        print(s.version(), reply["code"], reply["opaque"])
"#;

#[test]
fn python_ssl_completes_a_handshake_and_a_request_with_an_enforcing_node() {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_owned());
    if Command::new(&python).arg("--version").output().is_err() {
        eprintln!("SKIPPED: no Python interpreter ({python}); set PYTHON to run this test");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = Pki::mint(dir.path());
    let node = enforcing_node(dir.path(), &pki);
    let (host, port) = node.namesrv.rsplit_once(':').expect("host:port");
    let out = Command::new(&python)
        .args(["-c", PYTHON_PROBE, host, port])
        .arg(&pki.ca)
        .output()
        .expect("run python");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "python probe failed: {}{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    let fields: Vec<&str> = stdout.split_whitespace().collect();
    assert!(fields[0].starts_with("TLSv1."), "negotiated {stdout}");
    assert_eq!(&fields[1..], ["0", "7"], "SUCCESS to our opaque: {stdout}");
}
