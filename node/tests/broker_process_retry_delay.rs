//! Retry, dead letters and delay levels in a real `sluice-node standalone`
//! process configured by a broker TOML file with short delay levels:
//! failures go through the retry topic until the configured limit, then to
//! the DLQ; a delayed message survives a `kill -9` before it is due and is
//! delivered once, not early.

mod support;

use std::time::Duration;

use sluice_core::message::topic::SCHEDULE_TOPIC;
use sluice_core::message::{keys, StoredRecord};
use sluice_net::header::ConsumerSendMsgBackRequestHeader;
use sluice_net::remoting::{request_code, response_code};
use sluice_net::RemotingCommand;
use support::{Client, Node};
use tokio::time::Instant;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// Sends `body` to `topic` queue 0 with `extra` properties.
async fn send_with(c: &Client, topic: &str, body: &[u8], extra: &[(&str, &str)]) {
    let r = c
        .send_with_properties(topic, 0, body, extra)
        .await
        .expect("send");
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
}

async fn send_back(c: &Client, offset: i64, group: &str) {
    let h = ConsumerSendMsgBackRequestHeader {
        offset,
        group: group.to_owned(),
        delay_level: 0,
        origin_msg_id: None,
        origin_topic: None,
        unit_mode: Some(false),
        max_reconsume_times: None,
    };
    let cmd = RemotingCommand::request_with_header(request_code::CONSUMER_SEND_MSG_BACK, &h);
    let r = c
        .call(cmd, Duration::from_secs(5))
        .await
        .expect("send back");
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
}

/// Drains `topic` queue 0 until it holds `n` records or `limit` passes.
async fn wait_for(c: &Client, topic: &str, n: usize, limit: Duration) -> Vec<StoredRecord> {
    let deadline = Instant::now() + limit;
    loop {
        let got = c.drain(topic, 0).await;
        if got.len() >= n || Instant::now() >= deadline {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[test]
fn failed_message_is_retried_the_configured_times_then_dead_lettered() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = Node::start_with_config(
        dir.path(),
        "async",
        "delay_levels = \"1s\"\nmax_reconsume_times = 2\n",
    );
    runtime().block_on(async {
        let c = Client::new(&node.broker);
        send_with(&c, "PRetry", b"fails", &[(keys::KEYS, "k1")]).await;
        let mut failing = c.drain("PRetry", 0).await.remove(0);
        for failure in 1..=2 {
            send_back(&c, failing.phys_offset, "pg").await;
            let retried = wait_for(&c, "%RETRY%pg", failure, Duration::from_secs(5)).await;
            assert_eq!(retried.len(), failure, "failure {failure} is retried");
            failing = retried[failure - 1].clone();
            assert_eq!(
                failing.reconsume_times,
                i32::try_from(failure).expect("small")
            );
            assert_eq!(failing.body.as_ref(), b"fails");
            assert!(
                c.drain("%DLQ%pg", 0).await.is_empty(),
                "dead too early, after {failure} failures"
            );
        }
        // max_reconsume_times = 2 retries are used up: the third failure is final.
        send_back(&c, failing.phys_offset, "pg").await;
        let dead = c.drain("%DLQ%pg", 0).await;
        assert_eq!(dead.len(), 1);
        assert_eq!(dead[0].reconsume_times, 3);
        assert_eq!(dead[0].body.as_ref(), b"fails");
        tokio::time::sleep(Duration::from_millis(1_300)).await;
        assert_eq!(
            c.drain("%RETRY%pg", 0).await.len(),
            2,
            "no retry after the dead letter"
        );
    });
}

#[test]
fn delayed_message_survives_kill_9_and_arrives_once_not_early() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = Node::start_with_config(dir.path(), "async", "delay_levels = \"1s 3s\"\n");
    let rt = runtime();
    let (sent_at, parked) = rt.block_on(async {
        let c = Client::new(&node.broker);
        let sent_at = Instant::now();
        send_with(&c, "PDelay", b"later", &[(keys::DELAY, "2")]).await;
        assert!(c.drain("PDelay", 0).await.is_empty(), "visible at once");
        let parked = c.drain(SCHEDULE_TOPIC, 1).await;
        assert_eq!(parked.len(), 1, "parked in level 2's queue");
        (sent_at, parked[0].clone())
    });

    // Killed well before the 3 s level is due.
    assert!(
        sent_at.elapsed() < Duration::from_millis(2_500),
        "the test must kill the process before the message is due"
    );
    let node = node.restart_after_kill9("async");
    let node = rt.block_on(async {
        let c = Client::new(&node.broker);
        let got = wait_for(&c, "PDelay", 1, Duration::from_secs(8)).await;
        assert_eq!(got.len(), 1, "delivered after the restart");
        assert_eq!(got[0].body.as_ref(), b"later");
        assert!(
            got[0].store_timestamp_ms >= parked.store_timestamp_ms + 3_000,
            "delivered early: parked at {}, delivered at {}",
            parked.store_timestamp_ms,
            got[0].store_timestamp_ms
        );
        assert_eq!(
            got[0]
                .parsed_properties()
                .expect("properties")
                .get(keys::DELAY),
            None
        );
        node
    });

    // Delivery progress is kept: one more restart delivers nothing new.
    let node = node.restart("async");
    rt.block_on(async {
        let c = Client::new(&node.broker);
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        assert_eq!(c.drain("PDelay", 0).await.len(), 1, "delivered twice");
    });
}
