//! The broker as users run it: a real `sluice-node standalone` process,
//! driven over TCP — by the official C++ client (through its Python
//! binding) and by a protocol client — including `kill -9` and bad input.

mod support;

use std::io::Write;
use std::time::Duration;

use sluice_net::header::{
    OffsetResponseHeader, QueryConsumerOffsetRequestHeader, QueryMessageRequestHeader,
    UpdateConsumerOffsetRequestHeader,
};
use sluice_net::remoting::{request_code, response_code};
use sluice_net::RemotingCommand;
use support::{split_records, Client, Node};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

#[test]
fn official_cpp_client_sends_pulls_pushes_and_filters_by_tag() {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_owned());
    let has_client = std::process::Command::new(&python)
        .args(["-c", "import rocketmq.client"])
        .status()
        .is_ok_and(|s| s.success());
    if !has_client {
        assert!(
            std::env::var("SLUICE_SKIP_CPP_INTEROP").is_ok(),
            "the C++ client is missing: run `pip install rocketmq==0.4.4` (bash .ci/test does) or set SLUICE_SKIP_CPP_INTEROP=1"
        );
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let node = Node::start(dir.path(), "async");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/interop/cpp_client.py");
    let out = std::process::Command::new(&python)
        .args([script, &node.namesrv, "InteropTopic", "1000"])
        .output()
        .expect("run the interop script");
    std::io::stdout().write_all(&out.stdout).expect("echo");
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("OK"),
        "C++ client interop failed"
    );

    // The messages the C++ client sent are found by key.
    let rt = runtime();
    rt.block_on(async {
        let c = Client::new(&node.broker);
        let h = QueryMessageRequestHeader {
            topic: "InteropTopic".into(),
            key: "key-7".into(),
            max_num: 32,
            begin_timestamp: 0,
            end_timestamp: i64::MAX,
        };
        let r = c
            .call(
                RemotingCommand::request_with_header(request_code::QUERY_MESSAGE, &h),
                Duration::from_secs(5),
            )
            .await
            .expect("query");
        assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
        let recs = split_records(&r.body);
        assert_eq!(recs.len(), 1);
        assert_eq!(&recs[0].body[..], b"body-7");
    });
}

#[test]
fn parked_pull_returns_as_soon_as_a_message_arrives() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = Node::start(dir.path(), "async");
    runtime().block_on(async {
        let c = Client::new(&node.broker);
        assert_eq!(
            c.send("LongPoll", 0, b"first", "k", "t")
                .await
                .expect("send")
                .code,
            0
        );
        let puller = Client::new(&node.broker);
        let parked = tokio::spawn(async move {
            let started = tokio::time::Instant::now();
            let p = puller
                .pull("LongPoll", 0, 1, 32, 20_000)
                .await
                .expect("pull");
            (p, started.elapsed())
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            !parked.is_finished(),
            "the pull must be held while nothing is new"
        );
        assert_eq!(
            c.send("LongPoll", 0, b"second", "k", "t")
                .await
                .expect("send")
                .code,
            0
        );
        let (p, waited) = parked.await.expect("join");
        assert_eq!(p.code, response_code::SUCCESS);
        assert_eq!(&p.records[0].body[..], b"second");
        assert!(
            waited < Duration::from_secs(10),
            "woken by the arrival, not the 20 s hold ({waited:?})"
        );
    });
}

#[test]
fn kill_9_during_sync_flush_sends_loses_no_acknowledged_message() {
    kill_9_loses_no_acknowledged_message("sync", 8, false);
}

/// 32 senders pipelining on one connection: their records are written
/// together after the read that brought them (deferred writes), and no
/// answer leaves before that write.
#[test]
fn kill_9_during_pipelined_async_sends_loses_no_acknowledged_message() {
    kill_9_loses_no_acknowledged_message("async", 32, true);
}

/// `senders` tasks send until 400 sends are acknowledged (each on its own
/// connection, or all on one when `shared`); the node is killed with
/// `kill -9` and restarted; every acknowledged message is where its answer
/// said.
fn kill_9_loses_no_acknowledged_message(flush: &str, senders: i32, shared: bool) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut node = Node::start(dir.path(), flush);
    let rt = runtime();
    let acked = rt.block_on(async {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let mut tasks = Vec::new();
        let one = std::sync::Arc::new(Client::new(&node.broker));
        for w in 0..senders {
            let c = if shared {
                std::sync::Arc::clone(&one)
            } else {
                std::sync::Arc::new(Client::new(&node.broker))
            };
            let tx = tx.clone();
            tasks.push(tokio::spawn(async move {
                for i in 0..100_000 {
                    let body = format!("w{w}-{i}");
                    match c.send("Durable", w % 4, body.as_bytes(), &body, "t").await {
                        Ok(s) if s.code == 0 => {
                            let _ = tx.send((w % 4, s.queue_offset.expect("offset"), body));
                        }
                        _ => return,
                    }
                }
            }));
        }
        drop(tx);
        let mut acked = Vec::new();
        while acked.len() < 400 {
            match rx.recv().await {
                Some(a) => acked.push(a),
                None => break,
            }
        }
        acked
    });
    node.kill9();
    assert!(
        acked.len() >= 400,
        "only {} sends were acknowledged",
        acked.len()
    );
    let node = Node::start_on(dir.path(), flush, node.namesrv.clone(), node.broker.clone());
    rt.block_on(async {
        let c = Client::new(&node.broker);
        for queue in 0..4 {
            let recs = c.drain("Durable", queue).await;
            for (q, off, body) in acked.iter().filter(|(q, _, _)| *q == queue) {
                let rec = recs
                    .get(usize::try_from(*off).expect("offset"))
                    .unwrap_or_else(|| panic!("acked {body} at {q}/{off} lost"));
                assert_eq!(
                    &rec.body[..],
                    body.as_bytes(),
                    "queue {q} offset {off} holds another message"
                );
            }
        }
    });
}

#[test]
fn consumer_offsets_survive_a_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = Node::start(dir.path(), "async");
    let rt = runtime();
    rt.block_on(async {
        let c = Client::new(&node.broker);
        assert_eq!(
            c.send("Offsets", 0, b"m", "k", "t")
                .await
                .expect("send")
                .code,
            0
        );
        let h = UpdateConsumerOffsetRequestHeader {
            consumer_group: "g".into(),
            topic: "Offsets".into(),
            queue_id: 0,
            commit_offset: 1,
        };
        let r = c
            .call(
                RemotingCommand::request_with_header(request_code::UPDATE_CONSUMER_OFFSET, &h),
                Duration::from_secs(5),
            )
            .await
            .expect("update");
        assert_eq!(r.code, 0);
    });
    let node = node.restart("async");
    rt.block_on(async {
        let c = Client::new(&node.broker);
        let h = QueryConsumerOffsetRequestHeader {
            consumer_group: "g".into(),
            topic: "Offsets".into(),
            queue_id: 0,
            set_zero_if_not_found: Some(false),
        };
        let r = c
            .call(
                RemotingCommand::request_with_header(request_code::QUERY_CONSUMER_OFFSET, &h),
                Duration::from_secs(5),
            )
            .await
            .expect("query");
        assert_eq!(r.code, 0);
        assert_eq!(
            r.header::<OffsetResponseHeader>().expect("offset").offset,
            1
        );
    });
}

#[test]
fn bad_input_gets_clear_errors_and_loses_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = Node::start(dir.path(), "async");
    let rt = runtime();
    rt.block_on(async {
        let c = Client::new(&node.broker);
        assert_eq!(
            c.send("Safe", 0, b"keep me", "k", "t")
                .await
                .expect("send")
                .code,
            0
        );

        // Garbage and truncated frames on every port close only that connection.
        let port: u16 = node
            .broker
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .expect("port");
        let vip = format!("127.0.0.1:{}", port - 2);
        for addr in [node.broker.as_str(), vip.as_str(), node.namesrv.as_str()] {
            for junk in [
                &b"\x00\x00\x00\x10garbage garbage!"[..],
                &b"\xff\xff\xff\xff"[..],
                &b"\x00\x00\x00\x20\x00\x00\x00\x05{\"co"[..],
            ] {
                use tokio::io::AsyncWriteExt;
                let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
                let _ = s.write_all(junk).await;
                let _ = s.shutdown().await;
            }
        }

        let big = vec![b'x'; 5 * 1024 * 1024];
        let r = c.send("Safe", 0, &big, "k", "t").await.expect("send");
        assert_eq!(r.code, response_code::MESSAGE_ILLEGAL, "{:?}", r.remark);
        let r = c.send("bad topic!", 0, b"x", "k", "t").await.expect("send");
        assert_eq!(r.code, response_code::MESSAGE_ILLEGAL);
        assert!(r.remark.unwrap_or_default().contains("invalid topic"));
        let r = c
            .call(RemotingCommand::request(9_999), Duration::from_secs(5))
            .await
            .expect("call");
        assert_eq!(r.code, response_code::REQUEST_CODE_NOT_SUPPORTED);

        // Still serving, and nothing stored was lost.
        let vip_client = Client::new(&vip);
        assert_eq!(
            vip_client
                .send("Safe", 0, b"via vip", "k", "t")
                .await
                .expect("send")
                .code,
            0
        );
        let recs = c.drain("Safe", 0).await;
        let bodies: Vec<&[u8]> = recs.iter().map(|r| &r.body[..]).collect();
        assert_eq!(bodies, vec![&b"keep me"[..], &b"via vip"[..]]);
    });
}
