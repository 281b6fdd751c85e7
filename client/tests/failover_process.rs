//! Automatic failover with real processes on loopback: a name server with
//! an embedded controller, a master and two replicas as separate
//! `sluice-node` processes, SYNC replication (two copies at least, the
//! master's included). A producer sends while the master is killed with
//! `kill -9`; the controller elects a replica, the other replica follows
//! it, the producer follows the route, and a consumer then drains every
//! acknowledged message from the new master. Prints the failover time
//! (kill → first acknowledged send on the new master), the figure
//! `docs/benchmarks.md` records. The story runs twice: open ports, and
//! with a group secret on the replication ports and a cluster secret on
//! the controller port (which then refuse a raw connection).

#[path = "../../node/tests/support/mod.rs"]
mod support;

use std::collections::BTreeSet;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sluice_client::consumer::PullStatus;
use sluice_client::{
    ClientConfig, ClientInstance, Message, Producer, ProducerConfig, PullConsumer, SendStatus,
    Subscription,
};
use sluice_core::SystemClock;
use sluice_net::remoting::response_code;
use sluice_net::{RemotingCommand, RpcClient, RpcConfig, TokioTransport};
use support::{node_binary, spawn_until};

const TOPIC: &str = "FailoverTopic";
const GROUP: &str = "broker-f";
/// The replication ports' group secret and the controllers' cluster secret.
const SECRETS: (&str, &str) = ("group-secret-0123456789", "cluster-secret-0123456789");
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
/// the controller at `controller`, with `secrets` when given; and its HA
/// address.
fn broker(
    dir: &Path,
    id: u32,
    namesrv: &str,
    controller: &str,
    secrets: Option<(&str, &str)>,
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
    if let Some((group, cluster)) = secrets {
        toml = format!("{toml}group_secret = \"{group}\"\ncontroller_secret = \"{cluster}\"\n");
    }
    let path = dir.join(format!("broker{id}.toml"));
    std::fs::write(&path, toml).expect("write broker toml");
    let path = path.to_string_lossy().into_owned();
    let proc = Proc::spawn(&["broker", "--config", &path], "sluice broker listening");
    (proc, ha)
}

/// A raw request's answer code, from a connection that proved nothing.
async fn raw_code(addr: &str, code: i32) -> i32 {
    let raw = RpcClient::new(TokioTransport, RpcConfig::default());
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

type Client = ClientInstance<TokioTransport, SystemClock>;

fn client(namesrv: &str, name: &str) -> Client {
    let mut config = ClientConfig::new(namesrv).with_instance_name(name);
    config.poll_name_server_interval = Duration::from_secs(1);
    ClientInstance::new(TokioTransport, SystemClock::new(), config)
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
    failover(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_with_group_and_cluster_secrets_loses_no_acknowledged_message() {
    failover(Some(SECRETS)).await;
}

#[expect(clippy::too_many_lines, reason = "one end-to-end story, told in order")]
async fn failover(secrets: Option<(&str, &str)>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let ns_port = free_port();
    let ctl_port = free_port();
    let namesrv = format!("127.0.0.1:{ns_port}");
    let controller = format!("127.0.0.1:{ctl_port}");
    let ctl_dir = dir.path().join("controller");
    let secret_file = dir.path().join("cluster.secret");
    std::fs::write(&secret_file, secrets.map_or("", |s| s.1)).expect("secret file");
    let secret_file = secret_file.to_string_lossy().into_owned();
    let secret_args = if secrets.is_some() {
        vec!["--cluster-secret-file", secret_file.as_str()]
    } else {
        Vec::new()
    };
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
            &secret_args[..],
        ]
        .concat(),
        "sluice name server listening",
    );
    let (mut first, first_ha) = broker(dir.path(), 1, &namesrv, &controller, secrets);
    let probe = client(&namesrv, "probe");
    // The first broker to heartbeat becomes the master (auto-creating the
    // topic on the first send); then the replica starts.
    let producer = Producer::new(
        client(&namesrv, "producer"),
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
    let (_second, second_ha) = broker(dir.path(), 2, &namesrv, &controller, secrets);
    let (_third, third_ha) = broker(dir.path(), 3, &namesrv, &controller, secrets);

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
    if secrets.is_some() {
        // The secrets are in force: raw connections get nothing.
        assert_eq!(
            raw_code(&controller, CONTROLLER_GET_METADATA).await,
            response_code::NO_PERMISSION
        );
        assert_eq!(
            raw_code(&first_ha, HA_FETCH).await,
            response_code::NO_PERMISSION
        );
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
    if secrets.is_some() {
        for ha in [&second_ha, &third_ha] {
            assert_eq!(raw_code(ha, HA_FETCH).await, response_code::NO_PERMISSION);
        }
    }
    assert_ne!(
        new_master, first_master,
        "the route still names the killed master"
    );

    // Drain every queue from the new master.
    let reader = PullConsumer::new(client(&namesrv, "reader"), "failover-readers");
    let queues = reader.queues(TOPIC).await.expect("queues");
    let sub = Subscription::all(TOPIC);
    let mut read = BTreeSet::new();
    for q in &queues {
        let mut offset = 0;
        loop {
            let r = reader.pull(q, &sub, offset, 64).await.expect("pull");
            if r.status != PullStatus::Found {
                break;
            }
            for m in r.messages {
                read.insert(String::from_utf8_lossy(&m.body).into_owned());
            }
            offset = r.next_begin_offset;
        }
    }
    let lost: Vec<&String> = sends.acked.difference(&read).collect();
    assert!(
        lost.is_empty(),
        "{} of {} acknowledged messages are missing on the new master, e.g. {:?}",
        lost.len(),
        sends.acked.len(),
        lost.iter().take(5).collect::<Vec<_>>()
    );
}
