//! A real `sluice-node standalone` with `[tls] mode = "enforcing"`: its
//! broker registers with its name server over TLS, the Rust client and the
//! `sluice` CLI round-trip through it with TLS and are refused without, and
//! Python's `ssl` module completes a handshake and a remoting request. Then
//! a name server and a broker as separate processes with mutual TLS.

#[path = "../../node/tests/support/mod.rs"]
mod support;

#[path = "../../net/tests/support/pki.rs"]
mod pki;

use std::process::{Child, Command};
use std::time::Duration;

use pki::Pki;
use sluice_client::admin::TopicOptions;
use sluice_client::consumer::PullStatus;
use sluice_client::{
    Admin, ClientConfig, ClientInstance, Message, Producer, ProducerConfig, PullConsumer,
    SendStatus, Subscription, TlsSettings, TlsTransport,
};
use sluice_core::SystemClock;
use support::{free_port, node_binary, spawn_until, with_small_store, Node};

/// `path` as a TOML string (temp paths hold no quote or backslash).
fn quoted(path: &std::path::Path) -> String {
    format!("\"{}\"", path.display())
}

/// A standalone node whose every port requires TLS; its broker dials its
/// name server trusting the test CA.
fn enforcing_node(dir: &std::path::Path, pki: &Pki) -> Node {
    let toml = format!(
        "[tls]\nmode = \"enforcing\"\ncert = {}\nkey = {}\nca = {}\n",
        quoted(&pki.server_cert),
        quoted(&pki.server_key),
        quoted(&pki.ca)
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
/// sends `GET_BROKER_CLUSTER_INFO` as a JSON-header frame and prints the
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

/// A `sluice-node` process, killed on drop.
struct Proc(Child);

impl Proc {
    fn spawn(args: &[&std::ffi::OsStr], ready: &str) -> Self {
        Self(spawn_until(Command::new(node_binary()).args(args), ready))
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn broker_registers_with_a_mutual_tls_name_server_started_by_flags() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = Pki::mint(dir.path());
    let namesrv = format!("127.0.0.1:{}", free_port());
    let ns_args: Vec<std::ffi::OsString> = vec![
        "namesrv".into(),
        "--listen".into(),
        namesrv.clone().into(),
        "--tls-mode".into(),
        "enforcing".into(),
        "--tls-cert".into(),
        pki.server_cert.clone().into(),
        "--tls-key".into(),
        pki.server_key.clone().into(),
        "--tls-client-ca".into(),
        pki.ca.clone().into(),
        // About TLS only: no access control.
        "--acl-mode".into(),
        "off".into(),
    ];
    let ns_args: Vec<&std::ffi::OsStr> = ns_args.iter().map(AsRef::as_ref).collect();
    let _ns = Proc::spawn(&ns_args, "sluice name server listening");
    // The broker serves plain but dials the name server with TLS and its
    // client certificate; "listening" waits for the registration.
    let broker = format!("127.0.0.1:{}", free_port());
    let toml = with_small_store(&format!(
        "listen = \"{broker}\"\nlisten_vip = false\nnamesrv_addrs = [\"{namesrv}\"]\n\
         data_dir = {}\n[tls]\nca = {}\nclient_cert = {}\nclient_key = {}\n",
        quoted(&dir.path().join("broker")),
        quoted(&pki.ca),
        quoted(&pki.client_cert),
        quoted(&pki.client_key),
    ));
    let config = dir.path().join("broker.toml");
    std::fs::write(&config, toml).expect("write broker.toml");
    let _broker = Proc::spawn(
        &["broker".as_ref(), "--config".as_ref(), config.as_os_str()],
        "sluice broker listening",
    );
    let mutual = TlsSettings {
        ca: Some(pki.ca.clone()),
        client_cert: Some(pki.client_cert.clone()),
        client_key: Some(pki.client_key.clone()),
        ..TlsSettings::default()
    }
    .transport()
    .expect("client settings");
    let c = ClientInstance::new(mutual, SystemClock::new(), ClientConfig::new(&namesrv));
    let info = Admin::new(c.clone())
        .cluster_info()
        .await
        .expect("cluster info over mTLS");
    let registered = info
        .broker_addr_table
        .values()
        .any(|b| b.broker_addrs.values().any(|a| *a == broker));
    assert!(registered, "the broker registered over mTLS: {info:?}");
    c.shutdown().await;
    let no_certificate = ClientInstance::new(
        trusting(&pki),
        SystemClock::new(),
        ClientConfig::new(&namesrv),
    );
    assert!(
        Admin::new(no_certificate.clone())
            .cluster_info()
            .await
            .is_err(),
        "no client certificate: refused"
    );
    no_certificate.shutdown().await;
}
