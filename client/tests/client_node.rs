//! The client library against a real `sluice-node standalone` process:
//! sends of every kind, pull and push consumers, rebalance, ordering,
//! broadcasting, retries and admin lookups.

#[path = "../../node/tests/support/mod.rs"]
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sluice_client::admin::TopicOptions;
use sluice_client::consumer::{handler, DiskOffsetFile, PullStatus};
use sluice_client::{
    Admin, ClientConfig, ClientInstance, ConsumeFrom, ConsumeResult, Message, MessageExt,
    MessageModel, MessageQueue, Producer, ProducerConfig, PullConsumer, PushConsumer,
    PushConsumerConfig, SendStatus, Subscription,
};
use sluice_core::disk::MmapDisk;
use sluice_core::SystemClock;
use sluice_net::TokioTransport;
use support::Node;

type Client = ClientInstance<TokioTransport, SystemClock>;

fn client(node: &Node, name: &str) -> Client {
    let mut config = ClientConfig::new(&node.namesrv).with_instance_name(name);
    config.rebalance_interval = Duration::from_millis(500);
    config.heartbeat_interval = Duration::from_secs(1);
    config.persist_offset_interval = Duration::from_millis(500);
    ClientInstance::new(TokioTransport, SystemClock::new(), config)
}

async fn create_topic(node: &Node, topic: &str, queues: i32) {
    let admin = Admin::new(client(node, "admin"));
    // The broker registers with the name server just after it listens.
    wait_for(Duration::from_secs(10), || async {
        admin.cluster().await.is_ok_and(|c| !c.is_empty())
    })
    .await;
    admin
        .create_topic(
            topic,
            &TopicOptions {
                queues,
                ..TopicOptions::default()
            },
        )
        .await
        .expect("create topic");
    // The broker re-registers with the name server on topic change.
    wait_for(Duration::from_secs(10), || async {
        admin
            .route(topic)
            .await
            .is_ok_and(|r| r.queue_datas.iter().any(|q| q.write_queue_nums == queues))
    })
    .await;
    admin.client().shutdown().await;
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

fn push_config(group: &str) -> PushConsumerConfig {
    let mut c = PushConsumerConfig::new(group);
    c.consume_from = ConsumeFrom::FirstOffset;
    c.hold = Duration::from_secs(2);
    c
}

/// Collects what a push consumer's handler sees.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<MessageExt>>>);

impl Seen {
    fn handler(&self) -> sluice_client::consumer::Handler {
        let seen = self.clone();
        handler(move |msgs: Vec<MessageExt>| {
            let seen = seen.clone();
            async move {
                seen.0.lock().expect("lock").extend(msgs);
                ConsumeResult::Success
            }
        })
    }

    fn bodies(&self) -> BTreeSet<String> {
        self.0
            .lock()
            .expect("lock")
            .iter()
            .map(|m| String::from_utf8_lossy(&m.body).into_owned())
            .collect()
    }

    fn len(&self) -> usize {
        self.0.lock().expect("lock").len()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[expect(
    clippy::too_many_lines,
    reason = "one scenario: every send kind, then every read path"
)]
async fn sends_of_every_kind_are_read_back_intact_and_found_by_key_and_id() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = Node::start(dir.path(), "async");
    create_topic(&node, "Orders", 4).await;
    let c = client(&node, "p1");
    let producer = Producer::new(c.clone(), ProducerConfig::new("pg"));

    let mut sent = BTreeMap::new();
    for i in 0..40 {
        let msg = Message::new("Orders", format!("order-{i}"))
            .with_tags(if i % 2 == 0 { "even" } else { "odd" })
            .with_keys([format!("key-{i}")])
            .with_property("shop", format!("s{}", i % 3));
        let r = producer.send(&msg).await.expect("send");
        assert_eq!(r.status, SendStatus::Ok);
        sent.insert(format!("order-{i}"), r);
    }
    // A large body is compressed on the wire and inflated on read.
    let big = "x".repeat(64 * 1024);
    producer
        .send(&Message::new("Orders", big.clone()).with_keys(["big"]))
        .await
        .expect("big send");
    let batch: Vec<Message> = (0..10)
        .map(|i| Message::new("Orders", format!("batch-{i}")).with_tags("batch"))
        .collect();
    let br = producer.send_batch(&batch).await.expect("batch send");
    assert_eq!(br.msg_id.split(',').count(), 10);
    producer
        .send_oneway(&Message::new("Orders", "oneway-0"))
        .await
        .expect("oneway");
    let handles: Vec<_> = (0..10)
        .map(|i| producer.send_async(Message::new("Orders", format!("async-{i}"))))
        .collect();
    for h in handles {
        h.await.expect("join").expect("async send");
    }

    let pull = PullConsumer::new(c.clone(), "reader");
    let queues = pull.queues("Orders").await.expect("queues");
    assert_eq!(queues.len(), 4);
    let mut got: BTreeMap<String, MessageExt> = BTreeMap::new();
    let sub = Subscription::all("Orders");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while got.len() < 40 + 1 + 10 + 1 + 10 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "only {} read",
            got.len()
        );
        for q in &queues {
            let mut offset = 0;
            loop {
                let r = pull.pull(q, &sub, offset, 32).await.expect("pull");
                if r.status != PullStatus::Found {
                    break;
                }
                for m in r.messages {
                    got.insert(String::from_utf8_lossy(&m.body).into_owned(), m);
                }
                offset = r.next_begin_offset;
            }
        }
    }
    for (body, r) in &sent {
        let m = &got[body];
        assert_eq!(m.msg_id(), r.msg_id, "UNIQ_KEY is the message id");
        assert_eq!(m.queue_offset, r.queue_offset);
        assert_eq!(m.queue_id, r.queue.queue_id);
        let i: usize = body["order-".len()..].parse().expect("index");
        assert_eq!(m.tags(), Some(if i % 2 == 0 { "even" } else { "odd" }));
        assert_eq!(m.keys().collect::<Vec<_>>(), [format!("key-{i}")]);
        assert_eq!(m.property("shop"), Some(format!("s{}", i % 3).as_str()));
    }
    assert!(got.contains_key(&big), "compressed body inflated");

    // A tag subscription sees only its tag.
    let evens = Subscription::tag("Orders", "even");
    let mut even_count = 0;
    for q in &queues {
        let r = pull.pull(q, &evens, 0, 100).await.expect("pull");
        assert!(r.messages.iter().all(|m| m.tags() == Some("even")));
        even_count += r.messages.len();
    }
    assert_eq!(even_count, 20);
    check_sql92(&pull, &queues).await;

    let admin = Admin::new(c.clone());
    let found = admin
        .query_by_key("Orders", "key-7", 32)
        .await
        .expect("query");
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].body.as_ref(), b"order-7");
    let by_offset_id = admin
        .view_message(&sent["order-9"].offset_msg_id, None)
        .await
        .expect("view")
        .expect("found by offset id");
    assert_eq!(by_offset_id.body.as_ref(), b"order-9");
    let by_uniq = admin
        .view_message(&sent["order-3"].msg_id, Some("Orders"))
        .await
        .expect("view")
        .expect("found by client id");
    assert_eq!(by_uniq.body.as_ref(), b"order-3");
    c.shutdown().await;
}

/// A SQL92 subscription is evaluated by the broker over the properties of
/// the messages the first test sends; a malformed one is refused.
async fn check_sql92(
    pull: &PullConsumer<TokioTransport, SystemClock>,
    queues: &[sluice_client::MessageQueue],
) {
    let sql = Subscription::sql92("Orders", "shop = 's1' AND TAGS = 'odd'");
    let mut matched = BTreeSet::new();
    for q in queues {
        let mut offset = 0;
        loop {
            let r = pull.pull(q, &sql, offset, 32).await.expect("sql pull");
            for m in &r.messages {
                matched.insert(String::from_utf8_lossy(&m.body).into_owned());
            }
            if r.status == PullStatus::NoNewMessage || r.next_begin_offset == offset {
                break;
            }
            offset = r.next_begin_offset;
        }
    }
    let want: BTreeSet<String> = (0..40)
        .filter(|i| i % 3 == 1 && i % 2 == 1)
        .map(|i| format!("order-{i}"))
        .collect();
    assert_eq!(matched, want);
    let bad = pull
        .pull(
            &queues[0],
            &Subscription::sql92("Orders", "shop = = 1"),
            0,
            32,
        )
        .await
        .expect_err("a malformed expression is refused");
    assert!(bad.to_string().contains("23"), "{bad}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_splits_queues_exactly_and_reconverges_when_a_member_leaves() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = Node::start(dir.path(), "async");
    create_topic(&node, "Split", 8).await;
    let producer = Producer::new(client(&node, "p"), ProducerConfig::new("pg"));
    let seen = Seen::default();
    let mut members = Vec::new();
    // What each member's queue listener was last told.
    let told: Vec<Arc<Mutex<Option<Vec<MessageQueue>>>>> = (0..3).map(|_| Arc::default()).collect();
    for (i, name) in ["c1", "c2", "c3"].into_iter().enumerate() {
        let c =
            PushConsumer::new(client(&node, name), push_config("split-group")).expect("consumer");
        c.subscribe(Subscription::all("Split"));
        let last = Arc::clone(&told[i]);
        c.on_queues_changed(move |queues| {
            *last.lock().expect("lock") = Some(queues.to_vec());
        });
        c.start(seen.handler()).await.expect("start");
        members.push(c);
    }
    // Every change was told: the listener's last word is the assignment.
    let told_is_assigned = |members: &[PushConsumer<TokioTransport, SystemClock>]| {
        members
            .iter()
            .zip(&told)
            .all(|(m, last)| last.lock().expect("lock").as_deref() == Some(m.assigned().as_slice()))
    };
    let exact = |members: &[PushConsumer<TokioTransport, SystemClock>]| {
        let mut owned: Vec<_> = members
            .iter()
            .flat_map(|m| m.assigned().into_iter().filter(|q| q.topic == "Split"))
            .collect();
        let total = owned.len();
        owned.sort();
        owned.dedup();
        total == 8 && owned.len() == 8
    };
    // Every member owns something once all three see each other.
    wait_for(Duration::from_secs(20), || async {
        exact(&members)
            && members
                .iter()
                .all(|m| m.assigned().iter().any(|q| q.topic == "Split"))
            && told_is_assigned(&members)
    })
    .await;
    let mut bodies = BTreeSet::new();
    for i in 0..100 {
        let body = format!("m{i}");
        producer
            .send(&Message::new("Split", body.clone()))
            .await
            .expect("send");
        bodies.insert(body);
    }
    let leaving = members.pop().expect("member");
    leaving.shutdown().await;
    wait_for(Duration::from_secs(20), || async {
        exact(&members) && told_is_assigned(&members)
    })
    .await;
    for i in 100..200 {
        let body = format!("m{i}");
        producer
            .send(&Message::new("Split", body.clone()))
            .await
            .expect("send");
        bodies.insert(body);
    }
    wait_for(Duration::from_secs(20), || async {
        seen.bodies().is_superset(&bodies)
    })
    .await;
    for m in &members {
        m.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordered_sends_arrive_in_order_per_sharding_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = Node::start(dir.path(), "async");
    create_topic(&node, "Ordered", 4).await;
    let producer = Producer::new(client(&node, "p"), ProducerConfig::new("pg"));
    for i in 0..30 {
        for key in ["alice", "bob", "carol", "dave", "erin"] {
            producer
                .send_ordered(&Message::new("Ordered", format!("{key}:{i}")), key)
                .await
                .expect("ordered send");
        }
    }
    let mut config = push_config("ordered-group");
    config.orderly = true;
    let consumer = PushConsumer::new(client(&node, "oc"), config).expect("consumer");
    consumer.subscribe(Subscription::all("Ordered"));
    let seen = Seen::default();
    consumer.start(seen.handler()).await.expect("start");
    wait_for(Duration::from_secs(20), || async { seen.len() >= 150 }).await;
    let mut per_key: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    for body in seen
        .0
        .lock()
        .expect("lock")
        .iter()
        .map(|m| String::from_utf8_lossy(&m.body).into_owned())
    {
        let (key, i) = body.split_once(':').expect("key:i");
        per_key
            .entry(key.to_owned())
            .or_default()
            .push(i.parse().expect("i"));
    }
    for (key, seq) in &per_key {
        let expected: Vec<u32> = (0..30).collect();
        assert_eq!(seq, &expected, "order broken for {key}");
    }
    consumer.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broadcasting_delivers_every_message_to_every_member_with_local_offsets() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = Node::start(dir.path(), "async");
    create_topic(&node, "News", 2).await;
    let producer = Producer::new(client(&node, "p"), ProducerConfig::new("pg"));
    let offsets = tempfile::tempdir().expect("tempdir");
    let disk = MmapDisk::new(offsets.path()).expect("disk");
    let mut members = Vec::new();
    let mut seens = Vec::new();
    for name in ["b1", "b2"] {
        let mut config = push_config("news-readers");
        config.model = MessageModel::Broadcasting;
        config.offset_file = Some(Arc::new(DiskOffsetFile::new(
            disk.clone(),
            format!("{name}.offsets.json"),
        )));
        let c = PushConsumer::new(client(&node, name), config).expect("consumer");
        c.subscribe(Subscription::all("News"));
        let seen = Seen::default();
        c.start(seen.handler()).await.expect("start");
        members.push(c);
        seens.push(seen);
    }
    let bodies: BTreeSet<String> = (0..50).map(|i| format!("n{i}")).collect();
    for b in &bodies {
        producer
            .send(&Message::new("News", b.clone()))
            .await
            .expect("send");
    }
    for seen in &seens {
        wait_for(Duration::from_secs(20), || async {
            seen.bodies() == bodies
        })
        .await;
    }
    for m in &members {
        m.shutdown().await;
    }
    // Each member's progress is in its own file.
    for name in ["b1", "b2"] {
        let text = std::fs::read_to_string(offsets.path().join(format!("{name}.offsets.json")))
            .expect("offset file");
        let v: serde_json::Value = serde_json::from_str(&text).expect("json");
        let total: i64 = v["offsets"]
            .as_array()
            .expect("array")
            .iter()
            .map(|e| e["offset"].as_i64().expect("offset"))
            .sum();
        assert_eq!(total, 50, "{name}: {text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_handler_gets_the_message_again_through_the_retry_topic() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = Node::start(dir.path(), "async");
    create_topic(&node, "Flaky", 2).await;
    let producer = Producer::new(client(&node, "p"), ProducerConfig::new("pg"));
    let attempts: Arc<Mutex<Vec<(String, i32, String)>>> = Arc::default();
    let a = Arc::clone(&attempts);
    let consumer =
        PushConsumer::new(client(&node, "fc"), push_config("flaky-group")).expect("consumer");
    consumer.subscribe(Subscription::all("Flaky"));
    consumer
        .start(handler(move |msgs: Vec<MessageExt>| {
            let a = Arc::clone(&a);
            async move {
                let m = &msgs[0];
                a.lock().expect("lock").push((
                    String::from_utf8_lossy(&m.body).into_owned(),
                    m.reconsume_times,
                    m.topic.clone(),
                ));
                if m.reconsume_times == 0 {
                    ConsumeResult::Retry
                } else {
                    ConsumeResult::Success
                }
            }
        }))
        .await
        .expect("start");
    producer
        .send(&Message::new("Flaky", "try-me"))
        .await
        .expect("send");
    // Delay level 3 (10 s) is RocketMQ's first retry.
    wait_for(Duration::from_secs(30), || async {
        attempts.lock().expect("lock").len() >= 2
    })
    .await;
    let seen = attempts.lock().expect("lock").clone();
    assert_eq!(seen[0], ("try-me".to_owned(), 0, "Flaky".to_owned()));
    assert_eq!(
        seen[1],
        ("try-me".to_owned(), 1, "Flaky".to_owned()),
        "redelivered with the original topic"
    );
    consumer.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consume_from_a_timestamp_skips_older_messages_and_offsets_are_committed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = Node::start(dir.path(), "async");
    create_topic(&node, "Replay", 1).await;
    let c = client(&node, "p");
    let producer = Producer::new(c.clone(), ProducerConfig::new("pg"));
    for i in 0..10 {
        producer
            .send(&Message::new("Replay", format!("old-{i}")))
            .await
            .expect("send");
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    let cut = i64::try_from(sluice_core::Clock::wall_ms(&SystemClock::new())).expect("ms");
    tokio::time::sleep(Duration::from_millis(50)).await;
    for i in 0..10 {
        producer
            .send(&Message::new("Replay", format!("new-{i}")))
            .await
            .expect("send");
    }
    let mut config = push_config("replay-group");
    config.consume_from = ConsumeFrom::Timestamp(cut);
    let consumer = PushConsumer::new(client(&node, "rc"), config).expect("consumer");
    consumer.subscribe(Subscription::all("Replay"));
    let seen = Seen::default();
    consumer.start(seen.handler()).await.expect("start");
    let expected: BTreeSet<String> = (0..10).map(|i| format!("new-{i}")).collect();
    wait_for(Duration::from_secs(20), || async {
        seen.bodies() == expected
    })
    .await;
    let admin = Admin::new(c.clone());
    // The running consumer commits its progress within a persist interval.
    wait_for(Duration::from_secs(10), || async {
        admin
            .group_progress("replay-group", Some("Replay"))
            .await
            .is_ok_and(|p| {
                p.iter()
                    .any(|q| q.queue.topic == "Replay" && q.consumer_offset == 20)
            })
    })
    .await;
    let progress = admin
        .group_progress("replay-group", Some("Replay"))
        .await
        .expect("progress");
    let main: Vec<_> = progress
        .iter()
        .filter(|p| p.queue.topic == "Replay")
        .collect();
    assert_eq!(main.len(), 1);
    assert_eq!(main[0].lag(), 0);
    // Resetting a live group to the cut rewinds it to the first new
    // message: the consumer sees the new messages a second time.
    let reset = admin
        .reset_offset_by_time("replay-group", "Replay", cut)
        .await
        .expect("reset");
    wait_for(Duration::from_secs(20), || async { seen.len() >= 20 }).await;
    let replayed: Vec<String> = seen.0.lock().expect("lock")[10..]
        .iter()
        .map(|m| String::from_utf8_lossy(&m.body).into_owned())
        .collect();
    let replayed: BTreeSet<String> = replayed.into_iter().collect();
    assert_eq!(
        replayed, expected,
        "the reset did not rewind the live consumer"
    );
    consumer.shutdown().await;
    assert_eq!(reset[0].1, 10);
    c.shutdown().await;
}
