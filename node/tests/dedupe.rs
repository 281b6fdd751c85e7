//! The broker's dedupe window of retried sends, on a real `sluice-node
//! standalone` process: a Java-style retry (the same `UNIQ_KEY`, its first
//! attempt stored but its answer lost) is stored once and answered with the
//! first attempt's msgId, queue and offset — before and after a clean
//! restart and a `kill -9` — and a consumer reading from offset 0 gets it
//! once. Batches are deduplicated per message. A message without
//! `UNIQ_KEY` is never deduplicated. (Retries across a failover are checked
//! in the simulation: `sim/tests/failover.rs` judges `StoredTwice`.)

mod support;

use std::time::Duration;

use bytes::Bytes;
use sluice_core::message::{encode_batch, keys, BatchItem, Properties, StoredRecord};
use sluice_net::header::SendMessageRequestHeaderV2;
use sluice_net::remoting::{request_code, response_code};
use sluice_net::RemotingCommand;
use support::{Client, Node, Sent};

const TOPIC: &str = "DedupeTopic";

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// Sends `body` with `UNIQ_KEY = key` to `queue_id`, as a Java producer's
/// attempt does.
async fn send_keyed(c: &Client, queue_id: i32, body: &str, key: &str) -> Sent {
    let sent = c
        .send_with_properties(TOPIC, queue_id, body.as_bytes(), &[(keys::UNIQ_KEY, key)])
        .await
        .expect("send");
    assert_eq!(sent.code, response_code::SUCCESS, "{:?}", sent.remark);
    sent
}

/// Every record of the topic's first two queues.
async fn stored(c: &Client) -> Vec<StoredRecord> {
    let mut all = c.drain(TOPIC, 0).await;
    all.extend(c.drain(TOPIC, 1).await);
    all
}

/// How many stored records carry `body`.
fn copies(records: &[StoredRecord], body: &str) -> usize {
    records.iter().filter(|r| r.body == body.as_bytes()).count()
}

/// The answer to a retry must be the first attempt's, field by field.
fn assert_same_answer(retry: &Sent, first: &Sent, when: &str) {
    assert_eq!(
        (&retry.msg_id, retry.queue_id, retry.queue_offset),
        (&first.msg_id, first.queue_id, first.queue_offset),
        "{when}: the retry is answered with the first attempt's msgId, queue and offset"
    );
}

#[test]
fn a_retried_send_is_stored_once_and_answered_with_the_first_attempts_offsets() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut node = Node::start(dir.path(), "sync");
    let rt = runtime();
    let first = rt.block_on(async {
        let c = Client::new(&node.broker);
        // The first attempt is stored; its answer is "lost" (the producer
        // never uses it) and it retries — possibly to another queue.
        let first = send_keyed(&c, 0, "order-1", "AC1100000001").await;
        send_keyed(&c, 0, "order-2", "AC1100000002").await;
        let retry = send_keyed(&c, 1, "order-1", "AC1100000001").await;
        assert_same_answer(&retry, &first, "live");
        let retry = send_keyed(&c, 0, "order-1", "AC1100000001").await;
        assert_same_answer(&retry, &first, "live, same queue");
        let all = stored(&c).await;
        assert_eq!(copies(&all, "order-1"), 1, "the retries were not stored");
        assert_eq!(all.len(), 2);
        first
    });
    for restart in ["clean restart", "kill -9"] {
        node = if restart == "kill -9" {
            node.restart_after_kill9("sync")
        } else {
            node.restart("sync")
        };
        rt.block_on(async {
            let c = Client::new(&node.broker);
            let retry = send_keyed(&c, 0, "order-1", "AC1100000001").await;
            assert_same_answer(&retry, &first, restart);
            let all = stored(&c).await;
            assert_eq!(copies(&all, "order-1"), 1, "{restart}: stored once");
            assert_eq!(all.len(), 2, "{restart}: nothing else stored");
        });
    }
}

#[test]
fn sends_without_a_uniq_key_or_with_dedupe_off_are_stored_every_time() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = Node::start(dir.path(), "async");
    runtime().block_on(async {
        let c = Client::new(&node.broker);
        for _ in 0..2 {
            // Only KEYS (the application's business keys): never deduplicated.
            let sent = c
                .send(TOPIC, 0, b"keyless", "biz-1", "t")
                .await
                .expect("send");
            assert_eq!(sent.code, response_code::SUCCESS);
        }
        assert_eq!(copies(&stored(&c).await, "keyless"), 2);
    });
    drop(node);
    let dir = tempfile::tempdir().expect("tempdir");
    let node = Node::start_with_config(dir.path(), "async", "dedupe_window_ms = 0\n");
    runtime().block_on(async {
        let c = Client::new(&node.broker);
        send_keyed(&c, 0, "off", "AC1100000009").await;
        send_keyed(&c, 0, "off", "AC1100000009").await;
        assert_eq!(
            copies(&stored(&c).await, "off"),
            2,
            "dedupe_window_ms = 0 disables it"
        );
    });
}

/// Sends a batch of `(body, UNIQ_KEY)` to queue 0.
async fn send_batch(c: &Client, items: &[(&str, &str)]) -> Sent {
    send_stamped_batch(c, items, None).await
}

/// A batch whose messages are stamped `producer` and `lane/<first + i>`
/// (the Sluice client's sequence properties) when `stamp` is given.
async fn send_stamped_batch(
    c: &Client,
    items: &[(&str, &str)],
    stamp: Option<(&str, u64)>,
) -> Sent {
    let items: Vec<BatchItem> = items
        .iter()
        .zip(0..)
        .map(|((body, key), i)| {
            let mut p = Properties::new();
            p.insert(keys::UNIQ_KEY, key).expect("fits");
            if let Some((producer, first)) = stamp {
                p.insert(keys::SLUICE_PRODUCER_ID, producer).expect("fits");
                let seq = format!("lane/{}", first + i);
                p.insert(keys::SLUICE_SEQUENCE, &seq).expect("fits");
            }
            BatchItem {
                flag: 0,
                body: Bytes::copy_from_slice(body.as_bytes()),
                properties: Bytes::from(p.encode()),
            }
        })
        .collect();
    let h = SendMessageRequestHeaderV2 {
        a: "test-producer".into(),
        b: TOPIC.into(),
        c: "TBW102".into(),
        d: 4,
        e: 0,
        f: 0,
        g: 1_700_000_000_000,
        h: 0,
        i: Some("WAIT\u{1}true\u{2}".to_owned()),
        j: Some(0),
        k: Some(false),
        l: None,
        m: Some(true),
        n: None,
    };
    let cmd = RemotingCommand::request_with_header(request_code::SEND_BATCH_MESSAGE, &h)
        .with_body(Bytes::from(encode_batch(&items).expect("batch")));
    let sent = Sent::of(c.call(cmd, Duration::from_secs(5)).await.expect("send"));
    assert_eq!(sent.code, response_code::SUCCESS, "{:?}", sent.remark);
    sent
}

#[test]
fn a_retried_batch_stores_only_its_new_messages_and_lists_every_id() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = Node::start(dir.path(), "async");
    runtime().block_on(async {
        let c = Client::new(&node.broker);
        let first = send_batch(&c, &[("b1", "AC1100000011"), ("b2", "AC1100000012")]).await;
        let first_ids: Vec<String> = first
            .msg_id
            .as_deref()
            .expect("ids")
            .split(',')
            .map(str::to_owned)
            .collect();
        // The same batch again: nothing stored, the same answer.
        let again = send_batch(&c, &[("b1", "AC1100000011"), ("b2", "AC1100000012")]).await;
        assert_same_answer(&again, &first, "whole batch retried");
        // Half old, half new: only b3 is stored; the answer starts at b2's
        // original offset and lists b2's original id, then b3's new one.
        let mixed = send_batch(&c, &[("b2", "AC1100000012"), ("b3", "AC1100000013")]).await;
        let ids: Vec<&str> = mixed.msg_id.as_deref().expect("ids").split(',').collect();
        assert_eq!(ids.len(), 2);
        assert_eq!(ids[0], first_ids[1]);
        assert!(!first_ids.iter().any(|id| id == ids[1]), "b3 got a new id");
        assert_eq!(mixed.queue_offset, first.queue_offset.map(|o| o + 1));
        let all = c.drain(TOPIC, 0).await;
        let bodies: Vec<&[u8]> = all.iter().map(|r| r.body.as_ref()).collect();
        assert_eq!(bodies, vec![&b"b1"[..], b"b2", b"b3"]);
    });
}

#[test]
fn a_batch_resent_with_new_keys_is_still_a_duplicate_by_its_stamps() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = Node::start(dir.path(), "async");
    runtime().block_on(async {
        let c = Client::new(&node.broker);
        let items = [("s1", "AC1100000021"), ("s2", "AC1100000022")];
        let first = send_stamped_batch(&c, &items, Some(("P1", 7))).await;
        // Same numbers, new UNIQ_KEYs: the stamps alone find the originals.
        let rekeyed = [("s1", "AC1100000031"), ("s2", "AC1100000032")];
        let again = send_stamped_batch(&c, &rekeyed, Some(("P1", 7))).await;
        assert_same_answer(&again, &first, "stamped batch with new keys");
        // Another producer's numbers are its own: stored.
        let other = send_stamped_batch(&c, &rekeyed, Some(("P2", 7))).await;
        assert_ne!(other.msg_id, first.msg_id);
        let all = c.drain(TOPIC, 0).await;
        let bodies: Vec<&[u8]> = all.iter().map(|r| r.body.as_ref()).collect();
        assert_eq!(bodies, vec![&b"s1"[..], b"s2", b"s1", b"s2"]);
    });
}

/// `line` without terminal colour codes.
fn without_colours(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // Skip to the end of the escape sequence.
            for e in chars.by_ref() {
                if e.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The saved window's file under `dir`, if the broker wrote one.
fn window_file(dir: &std::path::Path) -> Option<std::path::PathBuf> {
    let mut todo = vec![dir.to_owned()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).ok()?.flatten() {
            let path = entry.path();
            if path.is_dir() {
                todo.push(path);
            } else if path.file_name().is_some_and(|n| n == "dedupe.window") {
                return Some(path);
            }
        }
    }
    None
}

/// A lone broker saves its window (here on a clean shutdown); after a
/// `kill -9` it reads the file back and replays only the log written since
/// (a key sent after the save is found there), and retries of keys from
/// either part are answered with their first attempt. A corrupt file is not
/// used: the window is rebuilt from the log and still answers every retry.
#[test]
fn a_restart_reads_the_saved_window_and_replays_only_the_log_since() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = Node::start(dir.path(), "async");
    let rt = runtime();
    let mut firsts = rt.block_on(async {
        let c = Client::new(&node.broker);
        let a = send_keyed(&c, 0, "saved-a", "AC11000000A1").await;
        let b = send_keyed(&c, 1, "saved-b", "AC11000000B1").await;
        vec![
            ("saved-a", "AC11000000A1", a),
            ("saved-b", "AC11000000B1", b),
        ]
    });
    // A clean shutdown saves the window with both keys.
    let mut node = node.restart("async");
    let path = window_file(dir.path()).expect("saved on shutdown");
    let saved = std::fs::read(&path).expect("read the saved window");
    firsts.push(rt.block_on(async {
        let c = Client::new(&node.broker);
        let late = send_keyed(&c, 0, "after-save", "AC11000000C1").await;
        ("after-save", "AC11000000C1", late)
    }));
    node.kill9();
    // The file as it was before the last send, whether or not the broker
    // saved again before it was killed.
    std::fs::write(&path, &saved).expect("put the earlier save back");
    for (round, corrupt) in [("from the file", false), ("file corrupt", true)] {
        if corrupt {
            let mut bad = saved.clone();
            let mid = bad.len() / 2;
            bad[mid] ^= 0x01;
            std::fs::write(&path, &bad).expect("corrupt the file");
        }
        node = Node::start_on_logging(
            dir.path(),
            "async",
            node.namesrv.clone(),
            node.broker.clone(),
            "warn,sluice_node::broker::dedupe=info",
        );
        let restored = node
            .started
            .iter()
            .any(|l| l.contains("dedupe window read from its file"));
        let rebuilt = node
            .started
            .iter()
            .any(|l| l.contains("dedupe window rebuilt"));
        assert_eq!(
            (restored, rebuilt),
            (!corrupt, corrupt),
            "{round}: {:#?}",
            node.started
        );
        if !corrupt {
            let line = node
                .started
                .iter()
                .find(|l| l.contains("dedupe window read from its file"))
                .map(|l| without_colours(l))
                .expect("seen");
            assert!(
                line.contains("replayed=1"),
                "{round}: one record written since the save: {line}"
            );
        }
        rt.block_on(async {
            let c = Client::new(&node.broker);
            for (body, key, first) in &firsts {
                let retry = send_keyed(&c, 1, body, key).await;
                assert_same_answer(&retry, first, round);
            }
            let all = stored(&c).await;
            assert_eq!(all.len(), 3, "{round}: no retry stored");
        });
        node.kill9();
    }
}
