//! Transactional messages end to end against a real `sluice-node
//! standalone` process: commit delivers once, rollback never, a dead
//! producer's half is resolved through another member of its group,
//! duplicate and bogus ENDs, a broker restart between half and commit, and
//! parking after `transaction_check_max` unanswered checks.

#[path = "../../node/tests/support/mod.rs"]
mod support;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sluice_client::admin::TopicOptions;
use sluice_client::{
    Admin, ClientConfig, ClientInstance, Error, HalfMessage, LocalTransactionState, Message,
    MessageExt, ProducerConfig, TransactionListener, TransactionProducer,
};
use sluice_core::message::{keys, sys_flag, StoredRecord};
use sluice_core::SystemClock;
use sluice_net::TokioTransport;
use support::Node;

type Client = ClientInstance<TokioTransport, SystemClock>;

const TOPIC: &str = "TxOrders";
const CHECK_MAX_TOPIC: &str = "TRANS_CHECK_MAX_TIME_TOPIC";

/// Checks come quickly: a half is due 500 ms after it was stored, looked
/// at every 100 ms, parked after 3 checks.
const BROKER_TOML: &str = "transaction_timeout_ms = 500\n\
                           transaction_check_interval_ms = 100\n\
                           transaction_check_max = 3\n";

fn client(node: &Node, name: &str) -> Client {
    let mut config = ClientConfig::new(&node.namesrv).with_instance_name(name);
    config.heartbeat_interval = Duration::from_millis(500);
    ClientInstance::new(TokioTransport, SystemClock::new(), config)
}

async fn wait_for<F, Fut>(limit: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + limit;
    while !check().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "condition not reached in {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn start() -> (tempfile::TempDir, Node) {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = Node::start_with_config(dir.path(), "async", BROKER_TOML);
    let admin = Admin::new(client(&node, "admin"));
    wait_for(Duration::from_secs(10), || async {
        admin.cluster().await.is_ok_and(|c| !c.is_empty())
    })
    .await;
    admin
        .create_topic(
            TOPIC,
            &TopicOptions {
                queues: 1,
                ..TopicOptions::default()
            },
        )
        .await
        .expect("create topic");
    admin.client().shutdown().await;
    wait_routed(&node).await;
    (dir, node)
}

/// Waits until the node's name server routes `TOPIC`. A (re)started node
/// prints that it listens before its first registration reaches its fresh
/// name server, and a send before then fails with `NoRoute`, as a
/// RocketMQ producer's would.
async fn wait_routed(node: &Node) {
    let admin = Admin::new(client(node, "route-watch"));
    wait_for(Duration::from_secs(10), || async {
        admin.route(TOPIC).await.is_ok()
    })
    .await;
    admin.client().shutdown().await;
}

/// What a listener decides, and how often it was asked. A disarmed
/// listener answers checks `Unknown` (without counting them) until
/// `arm`, for tests whose checks may legitimately come early on a slow
/// machine (a half older than the 500 ms transaction timeout).
struct Scripted {
    execute: LocalTransactionState,
    check: LocalTransactionState,
    checks: AtomicUsize,
    armed: AtomicBool,
}

impl Scripted {
    fn new(execute: LocalTransactionState, check: LocalTransactionState) -> Arc<Self> {
        Arc::new(Self {
            execute,
            check,
            checks: AtomicUsize::new(0),
            armed: AtomicBool::new(true),
        })
    }

    fn disarmed(execute: LocalTransactionState, check: LocalTransactionState) -> Arc<Self> {
        let listener = Self::new(execute, check);
        listener.armed.store(false, Ordering::SeqCst);
        listener
    }

    fn arm(&self) {
        self.armed.store(true, Ordering::SeqCst);
    }

    fn checks(&self) -> usize {
        self.checks.load(Ordering::SeqCst)
    }
}

impl TransactionListener for Scripted {
    fn execute(&self, _msg: &Message, _half: &HalfMessage) -> LocalTransactionState {
        self.execute
    }

    fn check(&self, msg: &MessageExt) -> LocalTransactionState {
        assert_eq!(msg.topic, TOPIC, "a check shows the real topic");
        if !self.armed.load(Ordering::SeqCst) {
            return LocalTransactionState::Unknown;
        }
        self.checks.fetch_add(1, Ordering::SeqCst);
        self.check
    }
}

fn producer(
    c: &Client,
    group: &str,
    listener: Arc<Scripted>,
) -> TransactionProducer<TokioTransport, SystemClock> {
    TransactionProducer::new(c.clone(), ProducerConfig::new(group), listener)
}

/// Every message a consumer of the real topic can read.
async fn delivered(node: &Node) -> Vec<StoredRecord> {
    support::Client::new(&node.broker).drain(TOPIC, 0).await
}

fn bodies(records: &[StoredRecord]) -> Vec<String> {
    records
        .iter()
        .map(|r| String::from_utf8_lossy(&r.body).into_owned())
        .collect()
}

fn remark(e: &Error) -> String {
    match e {
        Error::Broker { remark, .. } => remark.clone(),
        other => panic!("expected a broker error, got {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_delivers_exactly_once_and_duplicate_ends_deliver_nothing_more() {
    use LocalTransactionState::{Commit, Rollback};
    let (_dir, node) = start().await;
    let c = client(&node, "tx1");
    let listener = Scripted::new(Commit, Rollback);
    let p = producer(&c, "txg", Arc::clone(&listener));

    let half = p
        .send_half(&Message::new(TOPIC, "order-1").with_keys(["k1"]))
        .await
        .expect("half");
    assert!(delivered(&node).await.is_empty(), "a half is invisible");
    p.end_transaction(&half, Commit).await.expect("commit");
    let got = delivered(&node).await;
    assert_eq!(bodies(&got), ["order-1"]);
    let props = got[0].parsed_properties().expect("props");
    assert_eq!(props.uniq_key(), Some(half.msg_id.as_str()));
    assert!(props.get(keys::REAL_TOPIC).is_none());
    assert_eq!(
        got[0].sys_flag & sys_flag::TRANSACTION_MASK,
        sys_flag::TRANSACTION_COMMIT
    );
    assert_eq!(got[0].prepared_transaction_offset, half.commit_log_offset);

    // The same END again, twice: acknowledged, nothing stored again.
    p.end_transaction(&half, Commit)
        .await
        .expect("duplicate commit");
    p.end_transaction(&half, Commit)
        .await
        .expect("duplicate commit");
    // A rollback after the commit is refused, clearly.
    let e = p
        .end_transaction(&half, Rollback)
        .await
        .expect_err("rollback after commit");
    assert!(remark(&e).contains("already committed"), "{e}");

    // send_in_transaction: execute said Commit.
    let (_, state) = p
        .send_in_transaction(&Message::new(TOPIC, "order-2"))
        .await
        .expect("in transaction");
    assert_eq!(state, Commit);
    // Past a few check intervals: still each exactly once, never checked.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(bodies(&delivered(&node).await), ["order-1", "order-2"]);
    assert_eq!(listener.checks(), 0, "a resolved half is never checked");
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollback_never_delivers_even_past_the_check_interval() {
    use LocalTransactionState::{Commit, Rollback};
    let (_dir, node) = start().await;
    let c = client(&node, "tx2");
    // Once both rollbacks are in, a check would answer Commit: if the
    // broker checked a rolled-back half, the message would appear. (A check
    // before a rollback arrives is legal on a slow machine: it gets Unknown.)
    let listener = Scripted::disarmed(Rollback, Commit);
    let p = producer(&c, "txg", Arc::clone(&listener));
    let (_, state) = p
        .send_in_transaction(&Message::new(TOPIC, "never"))
        .await
        .expect("in transaction");
    assert_eq!(state, Rollback);
    let half = p.send_half(&Message::new(TOPIC, "x")).await.expect("half");
    p.end_transaction(&half, Rollback).await.expect("rollback");
    listener.arm();
    // A commit after the rollback is refused.
    let e = p
        .end_transaction(&half, Commit)
        .await
        .expect_err("commit after rollback");
    assert!(remark(&e).contains("already rolled back"), "{e}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(delivered(&node).await.is_empty());
    assert_eq!(listener.checks(), 0);
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_producers_half_is_committed_through_another_member_of_its_group() {
    use LocalTransactionState::{Commit, Unknown};
    let (_dir, node) = start().await;
    let dead_client = client(&node, "dead");
    let dead = producer(&dead_client, "txg", Scripted::new(Unknown, Unknown));
    let half = dead
        .send_half(&Message::new(TOPIC, "orphan"))
        .await
        .expect("half");
    dead_client.shutdown().await;
    drop(dead);

    let live_client = client(&node, "live");
    let listener = Scripted::new(Commit, Commit);
    let _live = producer(&live_client, "txg", Arc::clone(&listener));
    live_client
        .send_heartbeat_for_topic(TOPIC)
        .await
        .expect("heartbeat");
    wait_for(Duration::from_secs(15), || async {
        !delivered(&node).await.is_empty()
    })
    .await;
    let checks = listener.checks();
    assert!(checks >= 1);
    // Well past the timeout: no further check, no second delivery.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let got = delivered(&node).await;
    assert_eq!(bodies(&got), ["orphan"]);
    assert_eq!(
        got[0].parsed_properties().expect("props").uniq_key(),
        Some(half.msg_id.as_str())
    );
    assert_eq!(
        listener.checks(),
        checks,
        "a resolved half is not checked again"
    );
    // The dead producer's own late END (naming the first copy) stores nothing.
    let other = client(&node, "late");
    let late = producer(&other, "txg", Scripted::new(Commit, Commit));
    late.end_transaction(&half, Commit)
        .await
        .expect("late duplicate commit");
    assert_eq!(delivered(&node).await.len(), 1);
    live_client.shutdown().await;
    other.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_end_for_a_bogus_offset_or_a_foreign_group_is_refused_clearly() {
    use LocalTransactionState::{Commit, Unknown};
    let (_dir, node) = start().await;
    let c = client(&node, "tx4");
    let p = producer(&c, "txg", Scripted::new(Unknown, Unknown));
    let half = p
        .send_half(&Message::new(TOPIC, "real"))
        .await
        .expect("half");

    let bogus = HalfMessage {
        commit_log_offset: half.commit_log_offset + 7,
        ..half.clone()
    };
    let e = p
        .end_transaction(&bogus, Commit)
        .await
        .expect_err("bogus offset");
    assert!(remark(&e).contains("commitLogOffset"), "{e}");
    let wrong_queue = HalfMessage {
        queue_offset: half.queue_offset + 5,
        ..half.clone()
    };
    let e = p
        .end_transaction(&wrong_queue, Commit)
        .await
        .expect_err("wrong half-queue offset");
    assert!(remark(&e).contains("tranStateTableOffset"), "{e}");
    // A normal message is not a half.
    let plain = p
        .producer()
        .send(&Message::new(TOPIC, "plain"))
        .await
        .expect("plain send");
    let not_half = HalfMessage {
        commit_log_offset: sluice_core::message::decode_offset_msg_id(&plain.offset_msg_id)
            .expect("offset id")
            .1,
        queue_offset: plain.queue_offset,
        ..half.clone()
    };
    let e = p
        .end_transaction(&not_half, Commit)
        .await
        .expect_err("not a half");
    assert!(remark(&e).contains("not a half"), "{e}");
    let foreign = producer(&c, "other-group", Scripted::new(Unknown, Unknown));
    let e = foreign
        .end_transaction(&half, Commit)
        .await
        .expect_err("foreign group");
    assert!(remark(&e).contains("does not own"), "{e}");
    // None of that delivered the half.
    assert_eq!(bodies(&delivered(&node).await), ["plain"]);
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_after_a_broker_restart_delivers_once() {
    use LocalTransactionState::{Commit, Unknown};
    let (_dir, node) = start().await;
    // The half's producer goes away, so nothing is checked (and parked)
    // while the broker restarts.
    let first = client(&node, "tx5");
    let p = producer(&first, "txg", Scripted::new(Unknown, Unknown));
    let half = p
        .send_half(&Message::new(TOPIC, "survivor"))
        .await
        .expect("half");
    first.shutdown().await;
    let node = node.restart("async");
    let second = client(&node, "tx5b");
    let p = producer(&second, "txg", Scripted::new(Unknown, Unknown));
    wait_for(Duration::from_secs(15), || async {
        p.end_transaction(&half, Commit).await.is_ok()
    })
    .await;
    assert_eq!(bodies(&delivered(&node).await), ["survivor"]);
    // Restart again: the commit is remembered, a duplicate stores nothing.
    let node = node.restart("async");
    wait_for(Duration::from_secs(15), || async {
        p.end_transaction(&half, Commit).await.is_ok()
    })
    .await;
    assert_eq!(bodies(&delivered(&node).await), ["survivor"]);
    second.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_half_that_stays_unknown_is_parked_after_the_maximum_checks() {
    use LocalTransactionState::Unknown;
    let (_dir, node) = start().await;
    let c = client(&node, "tx6");
    let listener = Scripted::new(Unknown, Unknown);
    let p = producer(&c, "txg", Arc::clone(&listener));
    p.send_half(&Message::new(TOPIC, "limbo"))
        .await
        .expect("half");
    c.send_heartbeat_for_topic(TOPIC).await.expect("heartbeat");
    let raw = support::Client::new(&node.broker);
    wait_for(Duration::from_secs(20), || async {
        !raw.drain(CHECK_MAX_TOPIC, 0).await.is_empty()
    })
    .await;
    let parked = raw.drain(CHECK_MAX_TOPIC, 0).await;
    assert_eq!(bodies(&parked), ["limbo"]);
    assert_eq!(
        listener.checks(),
        3,
        "checked exactly transaction_check_max times"
    );
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(listener.checks(), 3, "a parked half is not checked again");
    assert!(delivered(&node).await.is_empty());
    let admin = Admin::new(client(&node, "admin2"));
    let info = admin
        .runtime_info(&node.broker)
        .await
        .expect("runtime info");
    assert_eq!(
        info.get("sluicePendingHalfMessages").map(String::as_str),
        Some("{}")
    );
    admin.client().shutdown().await;
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_halves_are_reported_per_real_topic() {
    use LocalTransactionState::{Commit, Unknown};
    let (_dir, node) = start().await;
    let c = client(&node, "tx7");
    let p = producer(&c, "txg", Scripted::new(Unknown, Unknown));
    let half = p
        .send_half(&Message::new(TOPIC, "pending"))
        .await
        .expect("half");
    let admin = Admin::new(client(&node, "admin3"));
    let pending = || async {
        admin
            .runtime_info(&node.broker)
            .await
            .expect("runtime info")
            .get("sluicePendingHalfMessages")
            .cloned()
    };
    wait_for(Duration::from_secs(5), || async {
        pending().await.as_deref() == Some(r#"{"TxOrders":1}"#)
    })
    .await;
    p.end_transaction(&half, Commit).await.expect("commit");
    wait_for(Duration::from_secs(5), || async {
        pending().await.as_deref() == Some("{}")
    })
    .await;
    admin.client().shutdown().await;
    c.shutdown().await;
}

/// Stops `node` and starts a new one on the same data (new ports).
fn relaunch(mut node: Node, dir: &std::path::Path) -> Node {
    node.stop();
    drop(node);
    Node::start_with_config(dir, "async", BROKER_TOML)
}

/// `half` as seen through `node` (same offsets, that node's address).
fn at(node: &Node, half: &HalfMessage) -> HalfMessage {
    HalfMessage {
        broker_addr: node.broker.clone(),
        ..half.clone()
    }
}

async fn end_eventually(
    p: &TransactionProducer<TokioTransport, SystemClock>,
    half: &HalfMessage,
    state: LocalTransactionState,
) {
    wait_for(Duration::from_secs(15), || async {
        p.end_transaction(half, state).await.is_ok()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_or_bogus_tracker_snapshot_never_redelivers_or_loses_a_half() {
    use LocalTransactionState::{Commit, Unknown};
    let (dir, node) = start().await;
    let snapshot = dir.path().join("config/transactions.json");
    let c = client(&node, "tx8");
    let p = producer(&c, "txg", Scripted::new(Unknown, Unknown));
    let one = p
        .send_half(&Message::new(TOPIC, "one"))
        .await
        .expect("half");
    p.end_transaction(&one, Commit).await.expect("commit one");
    let two = p
        .send_half(&Message::new(TOPIC, "two"))
        .await
        .expect("half");
    c.shutdown().await;
    // A clean stop writes the snapshot: `one` committed, `two` open.
    let node = relaunch(node, dir.path());
    let stale = std::fs::read(&snapshot).expect("snapshot written at shutdown");
    let c = client(&node, "tx8b");
    let p = producer(&c, "txg", Scripted::new(Unknown, Unknown));
    end_eventually(&p, &at(&node, &two), Commit).await;
    assert_eq!(bodies(&delivered(&node).await), ["one", "two"]);
    c.shutdown().await;

    // Put the older snapshot back: it still shows `two` open, but the op
    // record after its cursor resolves it, so a duplicate stores nothing.
    let mut node = node;
    node.stop();
    std::fs::write(&snapshot, &stale).expect("write stale snapshot");
    let node = Node::start_with_config(dir.path(), "async", BROKER_TOML);
    let c = client(&node, "tx8c");
    let p = producer(&c, "txg", Scripted::new(Unknown, Unknown));
    end_eventually(&p, &at(&node, &two), Commit).await;
    assert_eq!(bodies(&delivered(&node).await), ["one", "two"]);
    c.shutdown().await;

    // A snapshot ahead of the store (cursors past the queues' ends) is
    // dropped for a rescan: nothing it claims is trusted.
    let mut node = node;
    node.stop();
    std::fs::write(
        &snapshot,
        br#"{"scanStart":0,"halfNext":50,"opNext":50,"open":{},"resolved":{"40":"commit"}}"#,
    )
    .expect("write bogus snapshot");
    let node = Node::start_with_config(dir.path(), "async", BROKER_TOML);
    let c = client(&node, "tx8d");
    let p = producer(&c, "txg", Scripted::new(Unknown, Unknown));
    end_eventually(&p, &at(&node, &one), Commit).await;
    wait_routed(&node).await;
    let three = p
        .send_half(&Message::new(TOPIC, "three"))
        .await
        .expect("half");
    p.end_transaction(&three, Commit)
        .await
        .expect("commit three");
    assert_eq!(bodies(&delivered(&node).await), ["one", "two", "three"]);
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_sends_to_the_transaction_topics_are_refused() {
    let (_dir, node) = start().await;
    let raw = support::Client::new(&node.broker);
    for topic in [
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "RMQ_SYS_TRANS_OP_HALF_TOPIC",
        CHECK_MAX_TOPIC,
    ] {
        let sent = raw.send(topic, 0, b"0", "k", "d").await.expect("answer");
        assert_eq!(
            sent.code,
            sluice_net::remoting::response_code::NO_PERMISSION,
            "{topic}"
        );
        assert!(sent
            .remark
            .as_deref()
            .is_some_and(|r| r.contains("reserved")));
    }
}
