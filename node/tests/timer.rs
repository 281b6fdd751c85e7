//! Timer messages (arbitrary delivery time) against in-process brokers on
//! real disks and loopback TCP: parked until due and never early, at once
//! when already due, kept across a restart and delivered once, refused
//! beyond the maximum delay, and delivered by a replica promoted after its
//! master stopped.

mod in_process;
mod support;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use in_process::replication;
use sluice_core::disk::MmapDisk;
use sluice_core::message::{keys, StoredRecord};
use sluice_core::{Clock, SystemClock};
use sluice_net::body::{self, KvTable};
use sluice_net::remoting::{request_code, response_code};
use sluice_net::{RemotingCommand, TokioTransport};
use sluice_node::broker::{Broker, BrokerConfig, TIMER_TOPIC};
use support::{free_port, Client};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// A broker serving in this process, with its handle.
struct Running {
    addr: String,
    broker: Arc<Broker<MmapDisk, SystemClock>>,
    stop: oneshot::Sender<()>,
    task: JoinHandle<sluice_node::Result<()>>,
}

fn config() -> BrokerConfig {
    BrokerConfig {
        timer_precision_ms: 100,
        timer_max_delay_ms: 60_000,
        timer_log_segment_bytes: 56 * 64,
        ..in_process::config()
    }
}

async fn start(dir: &Path, config: BrokerConfig) -> Running {
    let disk = MmapDisk::new(dir).expect("disk");
    let broker = Broker::open(disk, SystemClock::new(), config)
        .await
        .expect("open broker");
    let (stop, stopped) = oneshot::channel::<()>();
    let (bound_tx, bound) = oneshot::channel();
    let task = tokio::spawn(Arc::clone(&broker).serve(
        TokioTransport,
        async move {
            let _ = stopped.await;
        },
        move |addr| {
            let _ = bound_tx.send(addr);
        },
    ));
    let addr = bound.await.expect("broker bound").to_string();
    Running {
        addr,
        broker,
        stop,
        task,
    }
}

impl Running {
    async fn shutdown(self) {
        let _ = self.stop.send(());
        self.task
            .await
            .expect("serve task")
            .expect("clean shutdown");
    }
}

fn now_ms() -> u64 {
    SystemClock::new().wall_ms()
}

async fn send(c: &Client, topic: &str, props: &[(&str, &str)]) -> (i32, Option<String>) {
    let mut all = vec![(keys::KEYS, "k1"), (keys::TAGS, "tagA")];
    all.extend_from_slice(props);
    let s = c
        .send_with_properties(topic, 0, b"tick", &all)
        .await
        .expect("send");
    (s.code, s.remark)
}

/// Drains `topic` queue 0 every 10 ms until it holds a record or `limit`
/// passes.
async fn wait_for(c: &Client, topic: &str, limit: Duration) -> Vec<StoredRecord> {
    let deadline = Instant::now() + limit;
    loop {
        let got = c.drain(topic, 0).await;
        if !got.is_empty() || Instant::now() >= deadline {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn prop(r: &StoredRecord, key: &str) -> Option<String> {
    r.parsed_properties()
        .expect("properties")
        .get(key)
        .map(str::to_owned)
}

/// Waits (up to 3 s) until the broker's pending timers read `want`.
async fn eventually_pending(c: &Client, want: &str) {
    let mut got = String::new();
    for _ in 0..300 {
        got = pending_timers(c).await;
        if got == want {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(got, want, "pending timers");
}

async fn pending_timers(c: &Client) -> String {
    let r = c
        .call(
            RemotingCommand::request(request_code::GET_BROKER_RUNTIME_INFO),
            Duration::from_secs(5),
        )
        .await
        .expect("runtime info");
    let kv: KvTable = body::decode(&r.body, "KvTable").expect("kv table");
    kv.table
        .get("sluicePendingTimers")
        .cloned()
        .expect("sluicePendingTimers present")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timer_message_arrives_after_its_delay_and_not_before() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = start(dir.path(), config()).await;
    let c = Client::new(&broker.addr);
    let due = now_ms() + 3_000;
    let sent_at = Instant::now();
    let (code, remark) = send(&c, "TimerT", &[(keys::TIMER_DELIVER_MS, &due.to_string())]).await;
    assert_eq!(code, response_code::SUCCESS, "{remark:?}");
    assert!(c.drain("TimerT", 0).await.is_empty(), "visible at once");
    let parked = c.drain(TIMER_TOPIC, 0).await;
    assert_eq!(parked.len(), 1, "parked in the timer topic");
    assert_eq!(
        prop(&parked[0], keys::REAL_TOPIC).as_deref(),
        Some("TimerT")
    );
    assert_eq!(prop(&parked[0], keys::TIMER_OUT_MS), Some(due.to_string()));
    eventually_pending(&c, r#"{"TimerT":1}"#).await;

    let got = wait_for(&c, "TimerT", Duration::from_secs(6)).await;
    let waited = sent_at.elapsed();
    assert_eq!(got.len(), 1, "delivered");
    assert!(
        waited >= Duration::from_millis(2_900),
        "delivered early, after {waited:?}"
    );
    assert!(
        waited < Duration::from_secs(4),
        "delivered late, after {waited:?}"
    );
    assert!(
        u64::try_from(got[0].store_timestamp_ms).expect("positive") >= due,
        "re-put before its due time on the broker's clock"
    );
    assert_eq!(got[0].body.as_ref(), b"tick");
    assert_eq!(prop(&got[0], keys::KEYS).as_deref(), Some("k1"));
    assert_eq!(prop(&got[0], keys::TAGS).as_deref(), Some("tagA"));
    assert!(
        prop(&got[0], keys::UNIQ_KEY).is_none()
            || prop(&got[0], keys::UNIQ_KEY) == prop(&parked[0], keys::UNIQ_KEY)
    );
    for stripped in [keys::TIMER_OUT_MS, keys::REAL_TOPIC] {
        assert_eq!(prop(&got[0], stripped), None, "{stripped} left on");
    }
    // As Apache's timer: the delivered message keeps its due time.
    assert_eq!(
        prop(&got[0], keys::TIMER_DELIVER_MS),
        Some(due.to_string()),
        "TIMER_DELIVER_MS is the message's delivery time"
    );
    eventually_pending(&c, "{}").await;
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deliver_time_in_the_past_arrives_at_once_and_timer_wins_over_delay() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = start(dir.path(), config()).await;
    let c = Client::new(&broker.addr);
    let past = (now_ms() - 5_000).to_string();
    let (code, _) = send(
        &c,
        "TimerPast",
        &[(keys::TIMER_DELIVER_MS, &past), (keys::DELAY, "3")],
    )
    .await;
    assert_eq!(code, response_code::SUCCESS);
    let got = c.drain("TimerPast", 0).await;
    assert_eq!(got.len(), 1, "stored straight to its topic");
    assert_eq!(
        prop(&got[0], keys::DELAY),
        None,
        "the delay level was dropped"
    );
    assert!(c.drain(TIMER_TOPIC, 0).await.is_empty());

    // A relative delay wins over a delay level too: parked as a timer.
    let (code, _) = send(
        &c,
        "TimerRel",
        &[(keys::TIMER_DELAY_MS, "500"), (keys::DELAY, "3")],
    )
    .await;
    assert_eq!(code, response_code::SUCCESS);
    assert_eq!(c.drain(TIMER_TOPIC, 0).await.len(), 1);
    let got = wait_for(&c, "TimerRel", Duration::from_secs(3)).await;
    assert_eq!(got.len(), 1, "delivered by the timer, not after level 3");
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delay_beyond_the_maximum_or_unparsable_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = start(dir.path(), config()).await;
    let c = Client::new(&broker.addr);
    let (code, remark) = send(&c, "TimerMax", &[(keys::TIMER_DELAY_SEC, "61")]).await;
    assert_eq!(code, response_code::MESSAGE_ILLEGAL);
    assert!(
        remark
            .as_deref()
            .unwrap_or_default()
            .contains("timer_max_delay_ms"),
        "{remark:?}"
    );
    let (code, remark) = send(&c, "TimerMax", &[(keys::TIMER_DELAY_MS, "soon")]).await;
    assert_eq!(code, response_code::MESSAGE_ILLEGAL, "{remark:?}");
    assert!(c.drain(TIMER_TOPIC, 0).await.is_empty(), "nothing parked");
    assert!(c.drain("TimerMax", 0).await.is_empty(), "nothing stored");
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timers_survive_a_restart_and_are_delivered_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = start(dir.path(), config()).await;
    let c = Client::new(&broker.addr);
    // Enough timers to fill several timer log files.
    for i in 0..200 {
        let delay = (1_500 + i * 5).to_string();
        let (code, _) = send(&c, "TimerR", &[(keys::TIMER_DELAY_MS, &delay)]).await;
        assert_eq!(code, response_code::SUCCESS);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(c.drain("TimerR", 0).await.is_empty());
    broker.shutdown().await;

    let broker = start(dir.path(), config()).await;
    let c = Client::new(&broker.addr);
    assert_eq!(pending_timers(&c).await, r#"{"TimerR":200}"#);
    let deadline = Instant::now() + Duration::from_secs(8);
    let mut got = Vec::new();
    while got.len() < 200 && Instant::now() < deadline {
        got = c.drain("TimerR", 0).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(got.len(), 200, "all delivered after the restart");
    // Delivered timers' log files are deleted once progress is persisted.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    broker.shutdown().await;
    let files = std::fs::read_dir(dir.path().join("timerlog"))
        .expect("timerlog dir")
        .count();
    assert!(files <= 1, "{files} delivered timer log files kept");

    let broker = start(dir.path(), config()).await;
    let c = Client::new(&broker.addr);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(c.drain("TimerR", 0).await.len(), 200, "delivered twice");
    assert_eq!(pending_timers(&c).await, "{}");
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_promoted_replica_delivers_the_pending_timers_and_not_the_delivered() {
    let master_dir = tempfile::tempdir().expect("tempdir");
    let replica_dir = tempfile::tempdir().expect("tempdir");
    let master_ha = free_port();
    let mut mc = config();
    mc.replication = Some(replication(master_ha, None));
    let master = start(master_dir.path(), mc).await;
    let mut rc = config();
    rc.broker_id = 1;
    rc.replication = Some(replication(
        free_port(),
        Some(format!("127.0.0.1:{master_ha}")),
    ));
    let replica = start(replica_dir.path(), rc).await;
    let m = Client::new(&master.addr);
    let r = Client::new(&replica.addr);

    // SYNC sends are acknowledged once the replica has joined (earlier
    // ones are stored but answered SLAVE_NOT_AVAILABLE).
    let mut joined = false;
    for _ in 0..200 {
        if send(&m, "Warmup", &[]).await.0 == response_code::SUCCESS {
            joined = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(joined, "the replica never joined");
    // One timer due soon (the master delivers it), one later (pending at
    // the failover).
    let (code, _) = send(&m, "TimerHA", &[(keys::TIMER_DELAY_MS, "300")]).await;
    assert_eq!(code, response_code::SUCCESS);
    let (code, _) = send(&m, "TimerHA", &[(keys::TIMER_DELAY_MS, "6000")]).await;
    assert_eq!(code, response_code::SUCCESS);
    let got = wait_for(&m, "TimerHA", Duration::from_secs(3)).await;
    assert_eq!(got.len(), 1, "the early timer delivered by the master");
    // The replica has the re-put and the master's progress.
    eventually_pending(&r, r#"{"TimerHA":1}"#).await;
    let mut on_replica = Vec::new();
    for _ in 0..100 {
        on_replica = r.drain("TimerHA", 0).await;
        if !on_replica.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(on_replica.len(), 1, "the master's delivery replicated");
    master.shutdown().await;

    let epoch = replica
        .broker
        .replication()
        .expect("replicated")
        .epochs()
        .last_epoch()
        + 1;
    replica.broker.become_master(epoch).await.expect("promote");
    let deadline = Instant::now() + Duration::from_secs(10);
    while on_replica.len() < 2 && Instant::now() < deadline {
        on_replica = r.drain("TimerHA", 0).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        on_replica.len(),
        2,
        "the pending timer delivered after promotion"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        r.drain("TimerHA", 0).await.len(),
        2,
        "the delivered one repeated"
    );
    replica.shutdown().await;
}
