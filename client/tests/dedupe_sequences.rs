//! The Sluice producer's id and sequence stamps against a real `sluice-node
//! standalone` whose `UNIQ_KEY` window is tiny (1 s): a retry of a stored
//! send (its exact stamped properties, resent to another queue as a
//! producer's retry is) arriving well past the window is still stored once
//! and answered with the original's position — live and after a `kill -9`
//! restart. With the broker's producer lanes off (`dedupe_producer_lanes =
//! 0`, the sequence check disabled) the same retry is stored twice, so the
//! test fails if the check does.

#[path = "../../node/tests/support/mod.rs"]
mod support;

use std::time::Duration;

use sluice_client::{ClientConfig, ClientInstance, Message, Producer, ProducerConfig, SendResult};
use sluice_core::message::{keys, Properties, StoredRecord};
use sluice_core::SystemClock;
use sluice_net::remoting::response_code;
use sluice_net::TokioTransport;
use support::{Client, Node, Sent};

const TOPIC: &str = "StampedTopic";
const QUEUES: i32 = 4;
/// The broker's `UNIQ_KEY` window (tiny) and the wait that outlives it.
const WINDOW: &str = "dedupe_window_ms = 1000\ndedupe_sequences_rebuild_ms = 3600000\n";
const PAST_THE_WINDOW: Duration = Duration::from_millis(1_600);

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// Sends `body` with a fresh Sluice producer, waiting for the route.
async fn send_stamped(node: &Node, bodies: &[&str]) -> Vec<SendResult> {
    let config = ClientConfig::new(&node.namesrv).with_instance_name("stamped");
    let client = ClientInstance::new(TokioTransport, SystemClock::new(), config);
    let producer = Producer::new(
        client,
        ProducerConfig {
            default_topic_queues: QUEUES,
            producer_id_prefix: Some("orders".to_owned()),
            ..ProducerConfig::new("stamped-producers")
        },
    );
    assert!(producer.producer_id().starts_with("orders-"));
    let mut out = Vec::new();
    for body in bodies {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
        loop {
            match producer.send(&Message::new(TOPIC, body.to_string())).await {
                Ok(r) => break out.push(r),
                Err(e) => assert!(tokio::time::Instant::now() < deadline, "send: {e}"),
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    producer.client().shutdown().await;
    out
}

/// Every stored record of the topic.
async fn stored(c: &Client) -> Vec<StoredRecord> {
    let mut all = Vec::new();
    for q in 0..QUEUES {
        all.extend(c.drain(TOPIC, q).await);
    }
    all
}

fn copies(records: &[StoredRecord], body: &str) -> usize {
    records.iter().filter(|r| r.body == body.as_bytes()).count()
}

/// Resends `record` as a retry would: its body and its `UNIQ_KEY`,
/// producer id and sequence, to another queue than the one it went to.
async fn retry(c: &Client, record: &StoredRecord) -> Sent {
    let props = Properties::parse(&record.properties).expect("stored properties");
    let keep: Vec<(&str, &str)> = [
        keys::UNIQ_KEY,
        keys::SLUICE_PRODUCER_ID,
        keys::SLUICE_SEQUENCE,
    ]
    .into_iter()
    .filter_map(|k| props.get(k).map(|v| (k, v)))
    .collect();
    assert_eq!(keep.len(), 3, "the Sluice producer stamped {keep:?}");
    let queue = (record.queue_id + 1) % QUEUES;
    let sent = c
        .send_with_properties(TOPIC, queue, &record.body, &keep)
        .await
        .expect("retry");
    assert_eq!(sent.code, response_code::SUCCESS, "{:?}", sent.remark);
    sent
}

fn assert_original(retry: &Sent, first: &SendResult, when: &str) {
    assert_eq!(
        (retry.msg_id.as_deref(), retry.queue_id, retry.queue_offset),
        (
            Some(first.offset_msg_id.as_str()),
            Some(first.queue.queue_id),
            Some(first.queue_offset)
        ),
        "{when}: answered with the original's msgId, queue and offset"
    );
}

/// Two stamped sends, then a retry of the first past the window: how many
/// copies of the first are stored, and the retry's answer.
async fn retry_past_the_window(node: &Node) -> (SendResult, StoredRecord, Sent, usize) {
    let sent = send_stamped(node, &["first", "second"]).await;
    let c = Client::new(&node.broker);
    let all = stored(&c).await;
    let first = all
        .iter()
        .find(|r| r.body == b"first".as_slice())
        .expect("stored")
        .clone();
    let props = Properties::parse(&first.properties).expect("properties");
    let seq = props.get(keys::SLUICE_SEQUENCE).expect("stamped");
    assert!(seq.ends_with("/1"), "the first number of its lane: {seq}");
    tokio::time::sleep(PAST_THE_WINDOW).await;
    let answer = retry(&c, &first).await;
    let n = copies(&stored(&c).await, "first");
    (sent[0].clone(), first, answer, n)
}

#[test]
fn a_sluice_producers_retry_past_the_window_is_stored_once_also_after_a_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut node = Node::start_with_config(dir.path(), "sync", WINDOW);
    let rt = runtime();
    let (first, record, answer, n) = rt.block_on(retry_past_the_window(&node));
    assert_eq!(n, 1, "the retry past the window was not stored");
    assert_original(&answer, &first, "live");
    node = node.restart_after_kill9("sync");
    rt.block_on(async {
        let c = Client::new(&node.broker);
        let answer = retry(&c, &record).await;
        assert_original(&answer, &first, "after kill -9");
        let all = stored(&c).await;
        assert_eq!(copies(&all, "first"), 1, "after kill -9: stored once");
        assert_eq!(all.len(), 2, "nothing else stored");
    });
}

#[test]
fn with_the_sequence_check_off_the_same_retry_is_stored_twice() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = format!("{WINDOW}dedupe_producer_lanes = 0\n");
    let node = Node::start_with_config(dir.path(), "sync", &config);
    let (first, _, answer, n) = runtime().block_on(retry_past_the_window(&node));
    assert_eq!(
        n, 2,
        "only the sequence check stops a retry past the window"
    );
    assert_ne!(answer.msg_id.as_deref(), Some(first.offset_msg_id.as_str()));
}
