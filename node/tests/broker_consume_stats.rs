//! `GET_CONSUME_STATS` against an in-process broker: per queue, the max
//! offset, the group's committed offset and the store time of the last
//! consumed message, in fastjson's object-keyed form, for one topic or for
//! every topic of the group (its retry topic included).

mod in_process;
mod support;

use std::time::Duration;

use in_process::{config, consume_stats, heartbeat, send, start};
use sluice_net::body::{MessageQueue, OffsetWrapper};
use sluice_net::header::UpdateConsumerOffsetRequestHeader;
use sluice_net::remoting::request_code;
use sluice_net::RemotingCommand;
use support::Client;

fn mq(topic: &str, queue_id: i32) -> MessageQueue {
    MessageQueue {
        topic: topic.into(),
        broker_name: "broker-a".into(),
        queue_id,
    }
}

async fn commit(c: &Client, group: &str, topic: &str, queue_id: i32, offset: i64) {
    let h = UpdateConsumerOffsetRequestHeader {
        consumer_group: group.into(),
        topic: topic.into(),
        queue_id,
        commit_offset: offset,
    };
    let cmd = RemotingCommand::request_with_header(request_code::UPDATE_CONSUMER_OFFSET, &h);
    let r = c.call(cmd, Duration::from_secs(5)).await.expect("commit");
    assert_eq!(r.code, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consume_stats_report_offsets_and_the_last_consumed_store_time() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = start(dir.path(), config()).await;
    let c = Client::new(&broker.addr);
    for body in [b"m0", b"m1", b"m2"] {
        send(&c, "Stats", 0, body, &[]).await;
    }
    send(&c, "Stats", 1, b"n0", &[]).await;
    send(&c, "Other", 0, b"o0", &[]).await;
    assert_eq!(heartbeat(&c, "sg", "Stats", "*", "TAG").await, 0);
    commit(&c, "sg", "Stats", 0, 2).await;
    commit(&c, "sg", "Other", 0, 1).await;
    let consumed = c.drain("Stats", 0).await.remove(1);

    let (stats, raw) = consume_stats(&c, "sg", None).await;
    let want_q0 = OffsetWrapper {
        broker_offset: 3,
        consumer_offset: 2,
        last_timestamp: consumed.store_timestamp_ms,
        pull_offset: 2,
    };
    assert!(want_q0.last_timestamp > 0);
    assert_eq!(stats.offset_table[&mq("Stats", 0)], want_q0);
    assert_eq!(
        stats.offset_table[&mq("Stats", 1)],
        OffsetWrapper {
            broker_offset: 1,
            consumer_offset: 0,
            last_timestamp: 0,
            pull_offset: 0,
        }
    );
    let topics: Vec<&str> = stats
        .offset_table
        .keys()
        .map(|q| q.topic.as_str())
        .collect();
    assert_eq!(
        topics,
        vec!["%RETRY%sg", "Stats", "Stats", "Stats", "Stats"]
    );
    assert!(
        !stats.offset_table.contains_key(&mq("Other", 0)),
        "a topic the live group does not subscribe to is skipped, as RocketMQ does"
    );
    assert!(raw.starts_with(
        r#"{"consumeTps":0.0,"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"%RETRY%sg"}:{"brokerOffset":0,"consumerOffset":0,"lastTimestamp":0,"pullOffset":0},"#
    ), "{raw}");
    let q0 = format!(
        r#"{{"brokerName":"broker-a","queueId":0,"topic":"Stats"}}:{{"brokerOffset":3,"consumerOffset":2,"lastTimestamp":{},"pullOffset":2}}"#,
        consumed.store_timestamp_ms
    );
    assert!(raw.contains(&q0), "{raw}");

    let (one, _) = consume_stats(&c, "sg", Some("Stats")).await;
    assert_eq!(one.offset_table.len(), 4, "one topic's queues");
    assert_eq!(one.offset_table[&mq("Stats", 0)], want_q0);

    // A group known only by its offsets reports every topic it committed.
    commit(&c, "offline", "Other", 0, 1).await;
    let (offline, _) = consume_stats(&c, "offline", None).await;
    let other = offline.offset_table[&mq("Other", 0)];
    assert_eq!((other.broker_offset, other.consumer_offset), (1, 1));
    assert!(other.last_timestamp > 0);
    let (nobody, _) = consume_stats(&c, "nobody", None).await;
    assert!(nobody.offset_table.is_empty());
    broker.shutdown().await;
}
