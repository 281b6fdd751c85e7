//! The crates.io RocketMQ Rust client (`rocketmq-client-rust` 1.0.0) against
//! a real standalone node, one test per feature scenario.
//!
//! The client lives in its own cargo project, `tests/interop/rust-peer`
//! (outside the workspace, so its dependency tree stays out of ours; it
//! needs rustc >= 1.95). Its binary runs one scenario per invocation and
//! prints `PASS`/`FAIL`. `.ci/test` builds it once and exports
//! `SLUICE_RUST_PEER`; without that variable the first test builds it
//! (minutes, cold) into `target/interop-rust` (dev profile, no debug info). `SLUICE_SKIP_RUST_INTEROP=1`
//! skips these tests where that toolchain is unavailable.
//!
//! Two scenarios run against a secured node: `tls-roundtrip` (every port
//! `[tls] mode = "enforcing"`, certificates minted by [`pki`]) and
//! `acl-roundtrip` (`[acl] mode = "enforcing"`).

#[path = "../../node/tests/support/mod.rs"]
mod support;

#[path = "../../net/tests/support/pki.rs"]
mod pki;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use pki::Pki;
use sluice_client::{Admin, ClientConfig, ClientInstance, TlsSettings, Transport};
use sluice_core::SystemClock;
use sluice_net::TokioTransport;
use support::{Node, ACL_TOML};

/// Broker settings the timed scenarios rely on: delay level 2 is 2 s and
/// every other level 1 s (retries use levels 3 and up), and a half message
/// is checked back after about a second.
const NODE_TOML: &str =
    "delay_levels = \"1s 2s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s\"\n\
                         transaction_timeout_ms = 1000\n\
                         transaction_check_interval_ms = 1000\n";

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_owned()
}

/// The peer binary: `SLUICE_RUST_PEER`, else built here (once per test
/// process) exactly as `.ci/test` builds it. `None` when skipped.
fn peer_binary() -> Option<&'static Path> {
    static PEER: OnceLock<Option<PathBuf>> = OnceLock::new();
    PEER.get_or_init(|| {
        if std::env::var_os("SLUICE_SKIP_RUST_INTEROP").is_some() {
            return None;
        }
        if let Some(path) = std::env::var_os("SLUICE_RUST_PEER") {
            let path = PathBuf::from(path);
            assert!(
                path.exists(),
                "SLUICE_RUST_PEER={} does not exist",
                path.display()
            );
            return Some(path);
        }
        let root = repo_root();
        let target = root.join("target/interop-rust");
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let status = Command::new(cargo)
            .current_dir(&root)
            .args(["build", "--locked", "--manifest-path"])
            .arg(root.join("client/tests/interop/rust-peer/Cargo.toml"))
            .arg("--target-dir")
            .arg(&target)
            // As .ci/test builds it, so its artifacts are reused.
            .env_remove("RUSTFLAGS")
            .env_remove("RUSTDOCFLAGS")
            .env_remove("CARGO_ENCODED_RUSTFLAGS")
            .status()
            .expect("run cargo to build the rust-peer");
        assert!(
            status.success(),
            "building the rust-peer failed (it needs rustc >= 1.95; \
             SLUICE_SKIP_RUST_INTEROP=1 skips these tests)"
        );
        Some(target.join("debug/rust-peer"))
    })
    .as_deref()
}

/// Waits until the node's name server routes `TBW102`, the topic a
/// producer's first send to a new topic is routed by. The node prints that
/// it listens before its first registration reaches its own name server;
/// a send before then fails with "No route info", as against Apache.
/// Route reads stay unsigned under ACL, as in Apache.
fn wait_routed<T: Transport>(node: &Node, transport: T) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let admin = Admin::new(ClientInstance::new(
            transport,
            SystemClock::new(),
            ClientConfig::new(&node.namesrv).with_instance_name("route-watch"),
        ));
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while admin.route("TBW102").await.is_err() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the broker never registered with the name server"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        admin.client().shutdown().await;
    });
}

/// Runs one scenario against a fresh node and fails with the peer's
/// output unless it passed.
fn scenario(name: &str) {
    if let Err(failure) = run_scenario(name) {
        panic!("{failure}");
    }
}

/// One run of a scenario on a fresh node: the peer's output as the error
/// unless it passed.
fn run_scenario(name: &str) -> Result<(), String> {
    if peer_binary().is_none() {
        return Ok(());
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let node = Node::start_with_config(dir.path(), "async", NODE_TOML);
    wait_routed(&node, TokioTransport);
    run_peer(name, &node, dir.path(), &[])
}

/// Runs the peer's scenario `name` against a node already routed, with
/// `extra` arguments after `--namesrv`.
fn run_peer(name: &str, node: &Node, dir: &Path, extra: &[&str]) -> Result<(), String> {
    let Some(peer) = peer_binary() else {
        return Ok(());
    };
    let out = Command::new(peer)
        .args([name, "--namesrv", &node.namesrv])
        .args(extra)
        // Broadcasting consumers' local offset files.
        .env(
            "rocketmq.client.localOffsetStoreDir",
            dir.join("peer-offsets"),
        )
        .env(
            "RUST_LOG",
            std::env::var("SLUICE_PEER_LOG").unwrap_or_else(|_| "error".to_owned()),
        )
        .output()
        .expect("run the rust-peer");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    print!("{stdout}");
    let pass = format!("PASS {name} ");
    if out.status.success() && stdout.lines().any(|l| l.starts_with(&pass)) {
        return Ok(());
    }
    Err(format!(
        "rust-peer {name} failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        out.status
    ))
}

#[test]
fn sync_send() {
    scenario("sync-send");
}

#[test]
fn async_send() {
    scenario("async-send");
}

#[test]
fn oneway_send() {
    scenario("oneway-send");
}

#[test]
fn batch_send_is_consumed_as_its_messages() {
    scenario("batch-send");
}

#[test]
fn orderly_sharding_keys_stay_on_one_queue_in_order() {
    scenario("orderly");
}

#[test]
fn broadcasting_delivers_everything_to_each_consumer() {
    scenario("broadcasting");
}

#[test]
fn lite_pull_consumer() {
    scenario("lite-pull");
}

#[test]
fn sql92_filter_subscription() {
    scenario("sql-filter");
}

#[test]
fn transactions_commit_rollback_and_check_back() {
    scenario("transaction");
}

#[test]
fn delay_level_and_delivery_time_are_not_early() {
    scenario("delay");
}

#[test]
fn retry_then_dead_letter_queue() {
    scenario("retry-dlq");
}

#[test]
fn query_by_key_and_by_id() {
    scenario("query");
}

#[test]
fn request_reply() {
    // Seen twice in many runs, both on a loaded machine: one request of the
    // scenario times out although the responder's reply was stored (SendOk);
    // not yet explained (the broker logs why a push fails at warn level, see
    // SLUICE_TEST_LOG). A second failure on a fresh node fails the test.
    if let Err(first) = run_scenario("request-reply") {
        println!("request-reply: first attempt failed, running once more:\n{first}");
        scenario("request-reply");
    }
}

#[test]
fn tls_round_trip_verifies_the_node_against_the_ca() {
    if peer_binary().is_none() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = Pki::mint(dir.path());
    let toml = format!(
        "{NODE_TOML}[tls]\nmode = \"enforcing\"\ncert = \"{}\"\nkey = \"{}\"\nca = \"{}\"\n",
        pki.server_cert.display(),
        pki.server_key.display(),
        pki.ca.display()
    );
    let node = Node::start_with_config(dir.path(), "async", &toml);
    let trusting = TlsSettings {
        ca: Some(pki.ca.clone()),
        ..TlsSettings::default()
    }
    .transport()
    .expect("client TLS settings");
    wait_routed(&node, trusting);
    let (ca, other_ca) = (
        pki.ca.display().to_string(),
        pki.other_ca.display().to_string(),
    );
    if let Err(failure) = run_peer(
        "tls-roundtrip",
        &node,
        dir.path(),
        &["--ca", &ca, "--other-ca", &other_ca],
    ) {
        panic!("{failure}");
    }
}

#[test]
fn acl_round_trip_signs_and_a_wrong_secret_is_refused() {
    if peer_binary().is_none() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let node = Node::start_with_config(dir.path(), "async", &format!("{NODE_TOML}{ACL_TOML}"));
    wait_routed(&node, TokioTransport);
    // The shared ACL's `root` may publish and subscribe any topic and
    // group, as the scenario's fresh names need.
    if let Err(failure) = run_peer(
        "acl-roundtrip",
        &node,
        dir.path(),
        &["--access-key", "root", "--secret-key", "root-secret"],
    ) {
        panic!("{failure}");
    }
}
