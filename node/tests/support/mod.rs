//! Shared fixtures for node integration tests: a real `sluice-node
//! standalone` process on free loopback ports with a temp data dir, and a
//! tiny protocol client built on `RpcClient`.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use bytes::Bytes;
use sluice_core::message::{keys, Properties, StoredRecord};
use sluice_net::header::{
    PullMessageRequestHeader, PullMessageResponseHeader, SendMessageRequestHeaderV2,
    SendMessageResponseHeader, PULL_FLAG_SUSPEND,
};
use sluice_net::remoting::request_code;
use sluice_net::{RemotingCommand, RpcClient, RpcConfig, TokioTransport};

/// The `sluice-node` executable: cargo names it for this package's tests;
/// other packages' tests (which include this file) find it beside their own
/// executable in the target directory, where `cargo test --workspace`
/// builds it.
pub fn node_binary() -> PathBuf {
    if let Some(path) = option_env!("CARGO_BIN_EXE_sluice-node") {
        return PathBuf::from(path);
    }
    if let Some(path) = std::env::var_os("SLUICE_NODE_BIN") {
        return PathBuf::from(path);
    }
    let exe = std::env::current_exe().expect("test executable path");
    // target/<profile>/deps/<test> -> target/<profile>/sluice-node
    let path = exe
        .parent()
        .and_then(Path::parent)
        .map(|dir| dir.join("sluice-node"))
        .expect("target directory");
    assert!(
        path.exists(),
        "{} is missing: run `cargo build -p sluice-node` (or test the whole workspace)",
        path.display()
    );
    path
}

/// Spawns `command` (a `sluice-node`) with stdout piped and waits for a
/// stdout line containing `ready`; the rest of stdout is drained (echoed
/// to stderr with the program's first argument when `SLUICE_TEST_LOG` is
/// set, which also sets the child's `RUST_LOG`; default `warn`).
pub fn spawn_until(command: &mut Command, ready: &str) -> Child {
    spawn_until_seen(command, ready).0
}

/// As [`spawn_until`], also returning the stdout lines read before the
/// ready line (the HTTP port's line, say).
pub fn spawn_until_seen(command: &mut Command, ready: &str) -> (Child, Vec<String>) {
    try_spawn_until_seen(command, ready).unwrap_or_else(|e| panic!("{e}"))
}

/// As [`spawn_until_seen`], but a child that exits before `ready` (a port
/// another test took between our probe and its bind, say) is an error
/// naming its exit status, not a panic.
pub fn try_spawn_until_seen(
    command: &mut Command,
    ready: &str,
) -> Result<(Child, Vec<String>), String> {
    let log = std::env::var("SLUICE_TEST_LOG").ok();
    let name = command
        .get_args()
        .next()
        .map(|a| a.to_string_lossy().into_owned())
        .unwrap_or_default();
    // A filter the caller set on the command stands.
    if !command.get_envs().any(|(k, _)| k == "RUST_LOG") {
        command.env("RUST_LOG", log.as_deref().unwrap_or("warn"));
    }
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn sluice-node");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    let mut seen = Vec::new();
    loop {
        match lines.next() {
            Some(Ok(line)) if line.contains(ready) => break,
            Some(Ok(line)) => seen.push(line),
            _ => {
                let status = child
                    .wait()
                    .map_or_else(|e| e.to_string(), |s| s.to_string());
                return Err(format!(
                    "sluice-node {name} exited before printing {ready:?} ({status})"
                ));
            }
        }
    }
    // Keep draining stdout so the child never blocks on a full pipe.
    #[expect(
        clippy::disallowed_methods,
        reason = "test harness thread, not simulated code"
    )]
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            if log.is_some() {
                eprintln!("[{name}] {line}");
            }
        }
    });
    Ok((child, seen))
}

/// The line `sluice-node` prints when its HTTP port serves.
pub const HTTP_LINE: &str = "sluice http listening on ";

/// What `sluice-node` prints before its gRPC endpoint's address.
pub const GRPC_LINE: &str = "sluice gRPC (RocketMQ 5) listening on ";

/// The HTTP base URL (`http://127.0.0.1:PORT`) among `lines`.
pub fn http_base(lines: &[String]) -> Option<String> {
    lines.iter().find_map(|l| {
        let url = l.split(HTTP_LINE).nth(1)?;
        Some(url.trim().trim_end_matches('/').to_owned())
    })
}

/// Every stdout line of `child` (spawned with piped stdout), read on a
/// thread and sent to the returned receiver, for tests that wait for a log
/// line.
pub fn stdout_lines(child: &mut Child) -> std::sync::mpsc::Receiver<String> {
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    #[expect(
        clippy::disallowed_methods,
        reason = "test harness thread, not simulated code"
    )]
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx
}

/// Store file sizes for test nodes. The defaults are RocketMQ's and every
/// file is allocated in full (`posix_fallocate`), so a default node takes
/// 1.4 GB of disk before its first message (a 1 GiB CommitLog segment, a
/// 400 MB index file); a test suite that starts dozens of them filled a CI
/// machine's disk (ENOSPC creating the index file).
pub const SMALL_STORE: &str = "commit_log_segment_bytes = 16777216\n\
                               index_slots = 4096\n\
                               index_entries = 16384\n\
                               timer_log_segment_bytes = 5600000\n";

/// `broker_toml` preceded by each [`SMALL_STORE`] line whose key it does
/// not set (top-level keys must come before any `[table]`).
pub fn with_small_store(broker_toml: &str) -> String {
    let mut out = String::new();
    for line in SMALL_STORE.lines() {
        let key = line.split('=').next().unwrap_or_default().trim();
        let set = broker_toml
            .lines()
            .any(|l| l.split('=').next().is_some_and(|k| k.trim() == key));
        if !set {
            out.push_str(line);
            out.push('\n');
        }
    }
    out.push_str(broker_toml);
    out
}

/// A standalone node's `[acl]` for tests: the broker's own account
/// (`broker-a`, which the broker signs its registration with), an admin
/// (`root`) and an application key (`app`: PUB|SUB on `Orders` and
/// `CppAcl`, SUB only on `ReadOnly` and `CppReadOnly`, SUB on every group,
/// nothing else). Secrets are the key followed by `-secret`.
pub const ACL_TOML: &str = r#"
[acl]
mode = "enforcing"
access_key = "broker-a"
secret_key = "broker-a-secret"
[[acl.accounts]]
access_key = "broker-a"
secret_key = "broker-a-secret"
broker = true
[[acl.accounts]]
access_key = "root"
secret_key = "root-secret"
admin = true
default_topic_perm = "PUB|SUB"
default_group_perm = "PUB|SUB"
[[acl.accounts]]
access_key = "app"
secret_key = "app-secret"
default_topic_perm = "DENY"
default_group_perm = "SUB"
topic_perms = { Orders = "PUB|SUB", ReadOnly = "SUB", CppAcl = "PUB|SUB", CppReadOnly = "SUB" }
"#;

/// A running standalone node.
pub struct Node {
    child: Option<Child>,
    pub data_dir: PathBuf,
    pub namesrv: String,
    pub broker: String,
    /// The broker TOML file passed with `--config`, if any.
    pub config: Option<PathBuf>,
    /// The HTTP port's base URL (`/metrics`, the dashboard).
    pub http: String,
    /// The RocketMQ 5 gRPC endpoint (`host:port`).
    pub grpc: String,
    /// What the node printed until its broker listened.
    pub started: Vec<String>,
}

/// A port `p` such that `p` and `p - 2` (the VIP port) are free now.
pub fn free_port_pair() -> u16 {
    for _ in 0..200 {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let p = l.local_addr().expect("addr").port();
        if p > 1026 && TcpListener::bind(("127.0.0.1", p - 2)).is_ok() {
            return p;
        }
    }
    panic!("no free port pair");
}

/// A loopback port that is free now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

impl Node {
    /// Starts a standalone node on `data_dir` with the given flush mode and
    /// waits until the broker listens.
    pub fn start(data_dir: &Path, flush: &str) -> Self {
        Self::start_with_config(data_dir, flush, "")
    }

    /// Starts with a broker TOML file (written beside the data) whose
    /// settings apply over [`SMALL_STORE`]'s; the harness still picks the
    /// ports and data dir.
    ///
    /// A port probed free can be taken before the node binds it (tests run
    /// side by side, each binding ephemeral ports), so a node that exits
    /// before listening is started again on fresh ports, three times at
    /// most.
    pub fn start_with_config(data_dir: &Path, flush: &str, broker_toml: &str) -> Self {
        let path = data_dir.join("broker.toml");
        std::fs::write(&path, with_small_store(broker_toml)).expect("write broker.toml");
        let mut errors = Vec::new();
        for _ in 0..3 {
            let ns = free_port();
            let broker = loop {
                let p = free_port_pair();
                if p != ns && p - 2 != ns {
                    break p;
                }
            };
            let (ns, broker) = (format!("127.0.0.1:{ns}"), format!("127.0.0.1:{broker}"));
            match Self::try_launch(data_dir, flush, ns, broker, Some(path.clone()), None) {
                Ok(node) => return node,
                Err(e) => errors.push(e),
            }
        }
        panic!("sluice-node did not start in 3 tries: {errors:?}");
    }

    /// Starts on explicit addresses (restarts reuse them), with
    /// [`SMALL_STORE`] files.
    pub fn start_on(data_dir: &Path, flush: &str, namesrv: String, broker: String) -> Self {
        Self::launch_with(data_dir, flush, namesrv, broker, "")
    }

    /// Writes `data_dir/broker.toml`: [`SMALL_STORE`]'s sizes that
    /// `broker_toml` does not set, then `broker_toml`.
    fn launch_with(
        data_dir: &Path,
        flush: &str,
        namesrv: String,
        broker: String,
        broker_toml: &str,
    ) -> Self {
        let path = data_dir.join("broker.toml");
        std::fs::write(&path, with_small_store(broker_toml)).expect("write broker.toml");
        Self::launch(data_dir, flush, namesrv, broker, Some(path))
    }

    fn launch(
        data_dir: &Path,
        flush: &str,
        namesrv: String,
        broker: String,
        config: Option<PathBuf>,
    ) -> Self {
        Self::try_launch(data_dir, flush, namesrv, broker, config, None)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`start_on`](Self::start_on) printing what `rust_log` (a
    /// `RUST_LOG` filter) lets through, seen in [`started`](Self::started)
    /// up to the listening line.
    pub fn start_on_logging(
        data_dir: &Path,
        flush: &str,
        namesrv: String,
        broker: String,
        rust_log: &str,
    ) -> Self {
        let path = data_dir.join("broker.toml");
        std::fs::write(&path, with_small_store("")).expect("write broker.toml");
        Self::try_launch(data_dir, flush, namesrv, broker, Some(path), Some(rust_log))
            .unwrap_or_else(|e| panic!("{e}"))
    }

    fn try_launch(
        data_dir: &Path,
        flush: &str,
        namesrv: String,
        broker: String,
        config: Option<PathBuf>,
        rust_log: Option<&str>,
    ) -> Result<Self, String> {
        let mut command = Command::new(node_binary());
        command.arg("standalone");
        if let Some(filter) = rust_log {
            command.env("RUST_LOG", filter);
        }
        if let Some(path) = &config {
            command.arg("--config").arg(path);
        }
        command.arg("--data-dir").arg(data_dir).args([
            "--namesrv-listen",
            &namesrv,
            "--broker-listen",
            &broker,
            "--flush",
            flush,
            // Ephemeral HTTP and gRPC ports: tests run side by side.
            "--metrics-listen",
            "127.0.0.1:0",
            "--grpc-listen",
            "127.0.0.1:0",
        ]);
        let (child, seen) = try_spawn_until_seen(&mut command, "sluice broker listening")?;
        let http = http_base(&seen).expect("sluice-node printed its HTTP port");
        let grpc = seen
            .iter()
            .find_map(|l| l.split(GRPC_LINE).nth(1).map(|a| a.trim().to_owned()))
            .expect("sluice-node printed its gRPC port");
        Ok(Self {
            child: Some(child),
            started: seen,
            data_dir: data_dir.to_owned(),
            namesrv,
            broker,
            config,
            http,
            grpc,
        })
    }

    /// The process id (for signals).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// `kill -9`: no shutdown, no final flush.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM and wait: a clean shutdown.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let pid = c.id().to_string();
            let _ = Command::new("kill").args(["-TERM", &pid]).status();
            let _ = c.wait();
        }
    }

    /// Restarts on the same data dir, ports and config file.
    pub fn restart(mut self, flush: &str) -> Self {
        self.stop();
        self.relaunch(flush)
    }

    /// `kill -9`, then starts again on the same data dir, ports and config.
    pub fn restart_after_kill9(mut self, flush: &str) -> Self {
        self.kill9();
        self.relaunch(flush)
    }

    fn relaunch(&mut self, flush: &str) -> Self {
        Self::launch(
            &self.data_dir.clone(),
            flush,
            self.namesrv.clone(),
            self.broker.clone(),
            self.config.clone(),
        )
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// A client speaking the protocol directly.
pub struct Client {
    rpc: RpcClient<TokioTransport>,
    pub addr: String,
}

/// The outcome of a send.
#[derive(Debug)]
pub struct Sent {
    pub code: i32,
    pub remark: Option<String>,
    pub queue_offset: Option<i64>,
    /// The answered `msgId` (offset message id; comma-joined for a batch).
    pub msg_id: Option<String>,
    /// The answered queue.
    pub queue_id: Option<i32>,
}

impl Sent {
    /// The outcome a send's response carries.
    pub fn of(r: RemotingCommand) -> Self {
        let h = r.header::<SendMessageResponseHeader>().ok();
        Self {
            code: r.code,
            queue_offset: h.as_ref().map(|h| h.queue_offset),
            msg_id: h.as_ref().map(|h| h.msg_id.clone()),
            queue_id: h.as_ref().map(|h| h.queue_id),
            remark: r.remark,
        }
    }
}

/// The outcome of a pull.
#[derive(Debug)]
pub struct Pulled {
    pub code: i32,
    pub next: i64,
    pub records: Vec<StoredRecord>,
}

impl Client {
    pub fn new(addr: &str) -> Self {
        Self {
            rpc: RpcClient::new(TokioTransport, RpcConfig::default()),
            addr: addr.to_owned(),
        }
    }

    pub async fn call(
        &self,
        cmd: RemotingCommand,
        timeout: Duration,
    ) -> sluice_net::Result<RemotingCommand> {
        self.rpc.invoke(&self.addr, cmd, timeout).await
    }

    pub async fn send(
        &self,
        topic: &str,
        queue_id: i32,
        body: &[u8],
        key: &str,
        tags: &str,
    ) -> sluice_net::Result<Sent> {
        self.send_with_properties(
            topic,
            queue_id,
            body,
            &[(keys::KEYS, key), (keys::TAGS, tags)],
        )
        .await
    }

    /// Sends `body` to `topic`/`queue_id` with `WAIT=true` and `props`.
    pub async fn send_with_properties(
        &self,
        topic: &str,
        queue_id: i32,
        body: &[u8],
        props: &[(&str, &str)],
    ) -> sluice_net::Result<Sent> {
        let mut properties = Properties::new();
        for (k, v) in props {
            properties.insert(k, v).expect("property");
        }
        properties.insert(keys::WAIT, "true").expect("wait");
        let h = SendMessageRequestHeaderV2 {
            a: "test-producer".into(),
            b: topic.into(),
            c: "TBW102".into(),
            d: 4,
            e: queue_id,
            f: 0,
            g: 1_700_000_000_000,
            h: 0,
            i: Some(String::from_utf8(properties.encode()).expect("utf8")),
            j: Some(0),
            k: Some(false),
            l: None,
            m: Some(false),
            n: None,
        };
        let cmd = RemotingCommand::request_with_header(request_code::SEND_MESSAGE_V2, &h)
            .with_body(Bytes::copy_from_slice(body));
        let r = self.call(cmd, Duration::from_secs(5)).await?;
        Ok(Sent::of(r))
    }

    pub async fn pull(
        &self,
        topic: &str,
        queue_id: i32,
        offset: i64,
        max: i32,
        suspend_ms: i64,
    ) -> sluice_net::Result<Pulled> {
        let h = PullMessageRequestHeader {
            consumer_group: "test-consumer".into(),
            topic: topic.into(),
            queue_id,
            queue_offset: offset,
            max_msg_nums: max,
            sys_flag: if suspend_ms > 0 { PULL_FLAG_SUSPEND } else { 0 },
            commit_offset: 0,
            suspend_timeout_millis: suspend_ms,
            subscription: None,
            sub_version: 0,
            expression_type: None,
            max_msg_bytes: None,
        };
        let cmd = RemotingCommand::request_with_header(request_code::PULL_MESSAGE, &h);
        let timeout = Duration::from_millis(u64::try_from(suspend_ms).unwrap_or(0) + 10_000);
        let r = self.call(cmd, timeout).await?;
        let next = r
            .header::<PullMessageResponseHeader>()
            .map_or(offset, |h| h.next_begin_offset);
        Ok(Pulled {
            code: r.code,
            next,
            records: split_records(&r.body),
        })
    }

    /// Every record of a queue from offset 0.
    pub async fn drain(&self, topic: &str, queue_id: i32) -> Vec<StoredRecord> {
        let mut out = Vec::new();
        let mut next = 0;
        loop {
            let p = self.pull(topic, queue_id, next, 32, 0).await.expect("pull");
            if p.code != 0 {
                return out;
            }
            next = p.next;
            out.extend(p.records);
        }
    }
}

/// Splits a pull body into its stored records.
pub fn split_records(body: &Bytes) -> Vec<StoredRecord> {
    let mut out = Vec::new();
    let mut at = 0usize;
    while at + 4 <= body.len() {
        let size = u32::from_be_bytes(body[at..at + 4].try_into().expect("4 bytes")) as usize;
        let rec = StoredRecord::decode(&body.slice(at..at + size)).expect("valid record");
        out.push(rec);
        at += size;
    }
    out
}
