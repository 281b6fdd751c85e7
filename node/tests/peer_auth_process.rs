//! `sluice-node` processes and their logs: a raw connection to a master's
//! HA port under a group secret gets no byte of the log and the master
//! logs the refusal naming the peer; an HA port or a controller port that
//! listens beyond loopback without a secret warns at start-up.

mod support;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::Duration;

use sluice_net::remoting::response_code;
use sluice_net::{RemotingCommand, RpcClient, RpcConfig, TokioTransport};
use sluice_node::broker::ha::{HA_FETCH, HA_HANDSHAKE, HA_METADATA};
use support::free_port;

/// A node killed and reaped when dropped, even after a failed assertion,
/// and its stdout lines.
struct Node {
    child: Child,
    lines: Receiver<String>,
}

impl Node {
    fn spawn(args: &[&str]) -> Self {
        let mut child = Command::new(support::node_binary())
            .args(args)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn sluice-node");
        let lines = support::stdout_lines(&mut child);
        Self { child, lines }
    }

    /// A standalone node on `dir` with broker TOML `toml`.
    fn standalone(dir: &Path, toml: &str) -> Self {
        let config = dir.join("broker.toml");
        std::fs::write(&config, support::with_small_store(toml)).expect("broker.toml");
        let broker = format!("127.0.0.1:{}", support::free_port_pair());
        let namesrv = format!("127.0.0.1:{}", free_port());
        let config = config.to_string_lossy().into_owned();
        let data = dir.to_string_lossy().into_owned();
        Self::spawn(&[
            "standalone",
            "--config",
            &config,
            "--data-dir",
            &data,
            "--namesrv-listen",
            &namesrv,
            "--broker-listen",
            &broker,
            "--metrics-listen",
            "127.0.0.1:0",
        ])
    }

    /// The first line containing `needle`, waiting up to 20 s per line.
    fn wait_for(&self, needle: &str) -> String {
        loop {
            match self.lines.recv_timeout(Duration::from_secs(20)) {
                Ok(line) if line.contains(needle) => return line,
                Ok(_) => {}
                Err(e) => panic!("sluice-node never logged {needle:?}: {e}"),
            }
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_raw_connection_to_the_ha_port_gets_no_log_bytes_and_the_master_logs_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ha_port = free_port();
    let node = Node::standalone(
        dir.path(),
        &format!(
            "[replication]\nmode = \"async\"\nha_listen = \"127.0.0.1:{ha_port}\"\n\
             group_secret = \"group-secret-0123456789\"\n"
        ),
    );
    node.wait_for("sluice broker listening");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let answers = rt.block_on(async {
        let raw = RpcClient::new(TokioTransport, RpcConfig::default());
        let ha = format!("127.0.0.1:{ha_port}");
        let mut answers = Vec::new();
        for code in [HA_HANDSHAKE, HA_FETCH, HA_METADATA] {
            let req = RemotingCommand::request(code).with_body(b"{}".to_vec());
            let answer = raw.invoke(&ha, req, Duration::from_secs(5)).await;
            answers.push(answer.expect("answered"));
        }
        answers
    });
    for a in &answers {
        assert_eq!(a.code, response_code::NO_PERMISSION, "{:?}", a.remark);
        assert!(a.body.is_empty(), "{} bytes leaked", a.body.len());
    }
    let line = node.wait_for("refused a peer that has not proven the shared secret");
    assert!(
        line.contains("peer") && line.contains("127.0.0.1:"),
        "the log line names the peer: {line}"
    );
}

#[test]
fn an_ha_port_beyond_loopback_without_a_group_secret_warns_at_start_up() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = Node::standalone(
        dir.path(),
        &format!(
            "[replication]\nmode = \"async\"\nha_listen = \"0.0.0.0:{}\"\n",
            free_port()
        ),
    );
    node.wait_for("without a group_secret");
}

#[test]
fn a_controller_beyond_loopback_without_a_cluster_secret_warns_at_start_up() {
    let dir = tempfile::tempdir().expect("tempdir");
    let peers = format!("1=0.0.0.0:{}", free_port());
    let data = dir.path().to_string_lossy().into_owned();
    let node = Node::spawn(&[
        "controller",
        "--id",
        "1",
        "--peers",
        &peers,
        "--data-dir",
        &data,
    ]);
    node.wait_for("without a cluster secret");
}
