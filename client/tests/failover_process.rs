//! Automatic failover with real processes on loopback: a name server with
//! an embedded controller, a master and two replicas as separate
//! `sluice-node` processes, SYNC replication (two copies at least, the
//! master's included). A producer sends while the master is killed with
//! `kill -9`; the controller elects a replica, the other replica follows
//! it, the producer follows the route, and a consumer then drains every
//! acknowledged message from the new master. Prints the failover time
//! (kill → first acknowledged send on the new master), the figure
//! `docs/benchmarks.md` records. A message stored on the old master is
//! retried (same `UNIQ_KEY`) after the failover: the new master answers
//! with the original's position and stores no second copy (its dedupe
//! window is rebuilt from the replicated log). The story runs twice: open ports, and
//! secured: a group secret on the replication ports and a cluster secret
//! on the controller port (which then refuse a raw connection), ACL on the
//! name server and the brokers (every client request signed, unsigned ones
//! refused) and TLS enforced on every port (plain connections refused).

#[path = "../../net/tests/support/pki.rs"]
mod pki;
#[path = "../../node/tests/support/mod.rs"]
mod support;

use std::collections::BTreeSet;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pki::Pki;
use sluice_client::consumer::PullStatus;
use sluice_client::{
    ClientConfig, ClientInstance, Message, Producer, ProducerConfig, PullConsumer, SendStatus,
    Subscription,
};
use sluice_core::message::keys;
use sluice_core::SystemClock;
use sluice_net::remoting::response_code;
use sluice_net::{Credentials, RemotingCommand, RpcClient, RpcConfig, TlsSettings, TlsTransport};
use support::{node_binary, spawn_until};

const TOPIC: &str = "FailoverTopic";
const GROUP: &str = "broker-f";
/// The body of the message retried across the failover.
const RETRIED: &str = "retried-across-failover";
/// The replication ports' group secret and the controllers' cluster secret.
const SECRETS: (&str, &str) = ("group-secret-0123456789", "cluster-secret-0123456789");
/// The ACL policy of the secured story: the brokers' registration account
/// and the clients' account.
const ACL_POLICY: &str = r#"
[[accounts]]
access_key = "broker-f"
secret_key = "broker-f-secret"
broker = true
[[accounts]]
access_key = "failover-app"
secret_key = "failover-app-secret"
default_topic_perm = "PUB|SUB"
default_group_perm = "SUB"
"#;

/// What the secured story turns on: the secrets, the ACL policy file and
/// the certificates every port serves and every dialler trusts.
struct Secure {
    pki: Pki,
    acl_file: String,
}

impl Secure {
    fn new(dir: &Path) -> Self {
        let acl_file = dir.join("acl.toml");
        std::fs::write(&acl_file, ACL_POLICY).expect("acl file");
        Self {
            pki: Pki::mint(dir),
            acl_file: acl_file.to_string_lossy().into_owned(),
        }
    }

    fn path(p: &Path) -> String {
        p.to_string_lossy().into_owned()
    }

    /// The brokers' tables: secrets, ACL with its own credentials, TLS.
    fn broker_toml(&self) -> String {
        let (group, cluster) = SECRETS;
        format!(
            "group_secret = \"{group}\"\ncontroller_secret = \"{cluster}\"\n\
             [acl]\nmode = \"enforcing\"\nfile = \"{}\"\n\
             access_key = \"broker-f\"\nsecret_key = \"broker-f-secret\"\n\
             [tls]\nmode = \"enforcing\"\ncert = \"{}\"\nkey = \"{}\"\nca = \"{}\"\n",
            self.acl_file,
            Self::path(&self.pki.server_cert),
            Self::path(&self.pki.server_key),
            Self::path(&self.pki.ca),
        )
    }

    /// The name server's (and its controller's) flags.
    fn namesrv_args(&self, cluster_secret_file: &str) -> Vec<String> {
        [
            "--cluster-secret-file",
            cluster_secret_file,
            "--acl-file",
            &self.acl_file,
            "--tls-mode",
            "enforcing",
            "--tls-cert",
            &Self::path(&self.pki.server_cert),
            "--tls-key",
            &Self::path(&self.pki.server_key),
            "--tls-ca",
            &Self::path(&self.pki.ca),
        ]
        .map(str::to_owned)
        .to_vec()
    }

    /// A transport that dials TLS, trusting the test CA.
    fn transport(&self) -> TlsTransport {
        TlsSettings {
            ca: Some(self.pki.ca.clone()),
            ..TlsSettings::default()
        }
        .transport()
        .expect("tls transport")
    }
}
/// The controller's metadata request and the HA port's fetch (sluice-node's
/// codes), for the raw connections that must be refused.
const CONTROLLER_GET_METADATA: i32 = 1_953;
const HA_FETCH: i32 = 3_301;

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

/// A `sluice-node` process, killed when dropped.
struct Proc(Option<Child>);

impl Proc {
    /// Spawns `sluice-node args` and waits for a stdout line containing
    /// `ready` (`SLUICE_TEST_LOG=info` echoes the processes' logs).
    fn spawn(args: &[&str], ready: &str) -> Self {
        Self(Some(spawn_until(
            Command::new(node_binary()).args(args),
            ready,
        )))
    }

    fn kill9(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// A broker of the group: replica id `id`, SYNC replication, failover by
/// the controller at `controller`, secured when `secure` is given; and its
/// HA address.
fn broker(
    dir: &Path,
    id: u32,
    namesrv: &str,
    controller: &str,
    secure: Option<&Secure>,
) -> (Proc, String) {
    let data = dir.join(format!("broker{id}"));
    std::fs::create_dir_all(&data).expect("data dir");
    let ha = format!("127.0.0.1:{}", free_port());
    let mut toml = format!(
        "broker_name = \"{GROUP}\"\nbroker_id = {id}\nlisten = \"127.0.0.1:{}\"\n\
         listen_vip = false\nnamesrv_addrs = [\"{namesrv}\"]\ndata_dir = \"{}\"\n\
         flush_mode = \"async\"\ncommit_log_segment_bytes = 1048576\n\
         index_slots = 1024\nindex_entries = 4096\ntimer_log_segment_bytes = 5600000\n\
         [replication]\nmode = \"sync\"\ncontroller_addrs = [\"{controller}\"]\n\
         ha_listen = \"{ha}\"\ncontroller_heartbeat_ms = 300\n\
         not_caught_up_ms = 3000\nack_timeout_ms = 2000\n",
        free_port(),
        data.display(),
    );
    if let Some(secure) = secure {
        toml.push_str(&secure.broker_toml());
    }
    let path = dir.join(format!("broker{id}.toml"));
    std::fs::write(&path, toml).expect("write broker toml");
    let path = path.to_string_lossy().into_owned();
    let proc = Proc::spawn(&["broker", "--config", &path], "sluice broker listening");
    (proc, ha)
}

/// A raw request's answer code, from a connection (over TLS, trusting the
/// test CA) that proved and signed nothing.
async fn raw_code(secure: &Secure, addr: &str, code: i32) -> i32 {
    let raw = RpcClient::new(secure.transport(), RpcConfig::default());
    let answer = raw
        .invoke(addr, RemotingCommand::request(code), Duration::from_secs(5))
        .await
        .expect("answered");
    assert!(
        answer.body.is_empty(),
        "{} bytes to a raw connection",
        answer.body.len()
    );
    answer.code
}

type Client = ClientInstance<TlsTransport, SystemClock>;

/// A client; over TLS and signing as the app's account when `secure`.
fn client(namesrv: &str, name: &str, secure: Option<&Secure>) -> Client {
    let mut config = ClientConfig::new(namesrv).with_instance_name(name);
    config.poll_name_server_interval = Duration::from_secs(1);
    let transport = match secure {
        Some(s) => {
            config.rpc.credentials = Some(Credentials::new("failover-app", "failover-app-secret"));
            s.transport()
        }
        None => TlsTransport::plain(),
    };
    ClientInstance::new(transport, SystemClock::new(), config)
}

/// The master's address in the topic route, if any.
async fn master_of(c: &Client) -> Option<String> {
    let route = c.refresh_route(TOPIC).await.ok()?;
    route
        .broker_datas
        .iter()
        .find(|b| b.broker_name == GROUP)
        .and_then(|b| b.broker_addrs.get(&0).cloned())
}

/// The routed master, asking again for up to 10 s: a route query can fail
/// or come back without a master for a moment (a fresh connection, a
/// registration in flight) even after a send succeeded.
async fn routed_master(c: &Client) -> String {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(addr) = master_of(c).await {
            return addr;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no master is routed"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[derive(Default)]
struct Sends {
    acked: BTreeSet<String>,
    /// When each ack arrived, for the failover time.
    acked_at: Vec<tokio::time::Instant>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_of_the_master_under_sync_replication_loses_no_acknowledged_message() {
    failover(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_with_secrets_acl_and_tls_on_loses_no_acknowledged_message() {
    failover(true).await;
}

/// With everything on: a raw connection to the controller or an HA port
/// proves nothing and gets nothing, an unsigned request to the broker is
/// refused by ACL, and a plain connection to the broker is not served.
async fn secured_ports_refuse_strangers(secure: &Secure, controller: &str, ha: &str, broker: &str) {
    assert_eq!(
        raw_code(secure, controller, CONTROLLER_GET_METADATA).await,
        response_code::NO_PERMISSION
    );
    assert_eq!(
        raw_code(secure, ha, HA_FETCH).await,
        response_code::NO_PERMISSION
    );
    let unsigned = sluice_net::remoting::request_code::GET_ALL_TOPIC_CONFIG;
    assert_eq!(
        raw_code(secure, broker, unsigned).await,
        response_code::NO_PERMISSION
    );
    let plain = RpcClient::new(TlsTransport::plain(), RpcConfig::default());
    let answer = plain
        .invoke(
            broker,
            RemotingCommand::request(unsigned),
            Duration::from_secs(3),
        )
        .await;
    assert!(answer.is_err(), "a plain connection was served: {answer:?}");
}

#[expect(clippy::too_many_lines, reason = "one end-to-end story, told in order")]
async fn failover(secured: bool) {
    let dir = tempfile::tempdir().expect("tempdir");
    let secure = secured.then(|| Secure::new(dir.path()));
    let secure = secure.as_ref();
    let ns_port = free_port();
    let ctl_port = free_port();
    let namesrv = format!("127.0.0.1:{ns_port}");
    let controller = format!("127.0.0.1:{ctl_port}");
    let ctl_dir = dir.path().join("controller");
    let secret_file = dir.path().join("cluster.secret");
    std::fs::write(&secret_file, SECRETS.1).expect("secret file");
    let secret_file = secret_file.to_string_lossy().into_owned();
    let secure_args = secure
        .map(|s| s.namesrv_args(&secret_file))
        .unwrap_or_default();
    let secure_args: Vec<&str> = secure_args.iter().map(String::as_str).collect();
    let _ns = Proc::spawn(
        &[
            &[
                "namesrv",
                "--listen",
                &namesrv,
                "--controller-id",
                "1",
                "--controller-peers",
                &format!("1={controller}"),
                "--controller-data-dir",
                &ctl_dir.to_string_lossy(),
                "--broker-timeout-ms",
                "3000",
            ],
            &secure_args[..],
        ]
        .concat(),
        "sluice name server listening",
    );
    let (mut first, first_ha) = broker(dir.path(), 1, &namesrv, &controller, secure);
    let probe = client(&namesrv, "probe", secure);
    // The first broker to heartbeat becomes the master (auto-creating the
    // topic on the first send); then the replica starts.
    let producer = Producer::new(
        client(&namesrv, "producer", secure),
        ProducerConfig {
            retries: 0,
            send_timeout: Duration::from_secs(3),
            ..ProducerConfig::new("failover-producers")
        },
    );
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        assert!(tokio::time::Instant::now() < deadline, "no master elected");
        let r = producer.send(&Message::new(TOPIC, "warm-up")).await;
        if r.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let first_master = routed_master(&probe).await;
    let (_second, second_ha) = broker(dir.path(), 2, &namesrv, &controller, secure);
    let (_third, third_ha) = broker(dir.path(), 3, &namesrv, &controller, secure);

    let sends = Arc::new(Mutex::new(Sends::default()));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let producing = {
        let sends = Arc::clone(&sends);
        let stop = Arc::clone(&stop);
        tokio::spawn(async move {
            let mut n = 0u32;
            while !stop.load(std::sync::atomic::Ordering::Acquire) {
                n += 1;
                let id = format!("m{n}");
                match producer.send(&Message::new(TOPIC, id.clone())).await {
                    Ok(r) if r.status == SendStatus::Ok => {
                        let mut s = sends.lock().expect("lock");
                        s.acked.insert(id);
                        s.acked_at.push(tokio::time::Instant::now());
                    }
                    _ => tokio::time::sleep(Duration::from_millis(100)).await,
                }
            }
        })
    };
    // Wait until the replica is in sync (SYNC sends are acknowledged).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while sends.lock().expect("lock").acked.len() < 300 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "SYNC sends were never acknowledged: the replica never joined the in-sync set"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A Java-style retry across the failover: this message is stored (and
    // replicated) on the old master; its retry — the same UNIQ_KEY — goes
    // to the new master, which must recognise it from its replicated log.
    let retrier = Producer::new(
        client(&namesrv, "retrier", secure),
        ProducerConfig {
            retries: 0,
            send_timeout: Duration::from_secs(3),
            ..ProducerConfig::new("failover-retriers")
        },
    );
    let mut retried_msg = Message::new(TOPIC, RETRIED);
    retried_msg.set_property(keys::UNIQ_KEY, retrier.client().next_uniq_key());
    let original = retrier
        .send(&retried_msg)
        .await
        .expect("stored before the kill");
    assert_eq!(original.status, SendStatus::Ok);
    if let Some(secure) = secure {
        secured_ports_refuse_strangers(secure, &controller, &first_ha, &first_master).await;
    }
    first.kill9();
    let killed_at = tokio::time::Instant::now();
    let acked_at_kill = sends.lock().expect("lock").acked.len();
    // The controller fails over; the producer follows the new master.
    let deadline = killed_at + Duration::from_secs(40);
    while sends.lock().expect("lock").acked.len() < acked_at_kill + 200 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no failover: {} acknowledged sends since the kill",
            sends.lock().expect("lock").acked.len() - acked_at_kill
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.store(true, std::sync::atomic::Ordering::Release);
    producing.await.expect("producer task");
    let sends = Arc::try_unwrap(sends)
        .map_err(|_| "producer still running")
        .expect("sole owner")
        .into_inner()
        .expect("lock");
    let first_after = sends
        .acked_at
        .iter()
        .find(|t| **t > killed_at)
        .copied()
        .expect("an ack after the kill");
    println!(
        "failover time (kill -9 of the master → first acknowledged send on the new master): {} ms",
        (first_after - killed_at).as_millis()
    );
    let new_master = routed_master(&probe).await;
    if let Some(secure) = secure {
        for ha in [&second_ha, &third_ha] {
            assert_eq!(
                raw_code(secure, ha, HA_FETCH).await,
                response_code::NO_PERMISSION
            );
        }
    }
    assert_ne!(
        new_master, first_master,
        "the route still names the killed master"
    );

    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let retry = loop {
        match retrier.send(&retried_msg).await {
            Ok(r) => break r,
            Err(e) => assert!(
                tokio::time::Instant::now() < deadline,
                "the retry never reached the new master: {e}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(
        (
            &retry.offset_msg_id,
            retry.queue.queue_id,
            retry.queue_offset
        ),
        (
            &original.offset_msg_id,
            original.queue.queue_id,
            original.queue_offset
        ),
        "the new master answers the retry with the original's position"
    );

    // Drain every queue from the new master.
    let reader = PullConsumer::new(client(&namesrv, "reader", secure), "failover-readers");
    let queues = reader.queues(TOPIC).await.expect("queues");
    let sub = Subscription::all(TOPIC);
    let mut read = BTreeSet::new();
    let mut retried_copies = 0;
    for q in &queues {
        let mut offset = 0;
        loop {
            let r = reader.pull(q, &sub, offset, 64).await.expect("pull");
            if r.status != PullStatus::Found {
                break;
            }
            for m in r.messages {
                let body = String::from_utf8_lossy(&m.body).into_owned();
                retried_copies += usize::from(body == RETRIED);
                read.insert(body);
            }
            offset = r.next_begin_offset;
        }
    }
    assert_eq!(
        retried_copies, 1,
        "the retry across the failover was stored again"
    );
    let lost: Vec<&String> = sends.acked.difference(&read).collect();
    assert!(
        lost.is_empty(),
        "{} of {} acknowledged messages are missing on the new master, e.g. {:?}",
        lost.len(),
        sends.acked.len(),
        lost.iter().take(5).collect::<Vec<_>>()
    );
}
