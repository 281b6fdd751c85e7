//! POP consumption against an in-process broker, over the remoting POP
//! requests (the operations the 5.x gRPC endpoint serves): an unacked
//! message comes back with one more attempt and, past the group's
//! `retryMaxTimes` + 1 attempts, goes to `%DLQ%<group>` instead; a receipt
//! handle acks only the delivery of the group that received it; and a
//! group consumes by POP or by offsets, not both at once.

mod in_process;
mod support;

use std::time::Duration;

use bytes::Bytes;
use in_process::{config, heartbeat, pull_as, start};
use sluice_core::message::StoredRecord;
use sluice_net::body::{self, ConsumerData, HeartbeatData};
use sluice_net::header::{
    SluicePopAckRequestHeader, SluicePopReceiveRequestHeader, SluicePopReceiveResponseHeader,
};
use sluice_net::remoting::{request_code, response_code};
use sluice_net::RemotingCommand;
use support::Client;

/// One receive of `group` on `topic` with leases of `invisible_ms`: the
/// records with their receipt handles and attempts (none when the
/// broker answers otherwise, with its code).
async fn receive(
    c: &Client,
    group: &str,
    topic: &str,
    invisible_ms: i64,
) -> (i32, Vec<(StoredRecord, String, u32)>) {
    let h = SluicePopReceiveRequestHeader {
        consumer_group: group.into(),
        topic: topic.into(),
        max_msg_nums: 16,
        invisible_time: invisible_ms,
        poll_time: 0,
        expression_type: None,
        expression: None,
        queue_id: None,
    };
    let cmd = RemotingCommand::request_with_header(request_code::SLUICE_POP_RECEIVE, &h);
    let r = c.call(cmd, Duration::from_secs(5)).await.expect("receive");
    if r.code != response_code::SUCCESS {
        return (r.code, Vec::new());
    }
    let h: SluicePopReceiveResponseHeader = r.header().expect("receive header");
    let records = support::split_records(&r.body);
    let handles = h.receipt_handles.split(',').map(str::to_owned);
    let attempts = h.attempts.split(',').map(|a| a.parse().expect("attempt"));
    let got = records
        .into_iter()
        .zip(handles.zip(attempts))
        .map(|(rec, (h, a))| (rec, h, a))
        .collect();
    (r.code, got)
}

async fn ack(c: &Client, group: &str, topic: &str, handle: &str) -> i32 {
    let h = SluicePopAckRequestHeader {
        consumer_group: group.into(),
        topic: topic.into(),
        receipt_handle: handle.into(),
    };
    let cmd = RemotingCommand::request_with_header(request_code::SLUICE_POP_ACK, &h);
    c.call(cmd, Duration::from_secs(5)).await.expect("ack").code
}

async fn create_group(c: &Client, json: &str) {
    let cmd = RemotingCommand::request(request_code::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP)
        .with_body(Bytes::copy_from_slice(json.as_bytes()));
    let r = c.call(cmd, Duration::from_secs(5)).await.expect("group");
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_groups_attempts_an_unacked_message_goes_to_the_dead_letter_queue() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = start(dir.path(), config()).await;
    let c = Client::new(&broker.addr);
    create_group(&c, r#"{"groupName":"dlq-g","retryMaxTimes":1}"#).await;
    let sent = c
        .send("PopDlq", 0, b"poison", "k", "t")
        .await
        .expect("send");
    assert_eq!(sent.code, response_code::SUCCESS);

    let (_, first) = receive(&c, "dlq-g", "PopDlq", 200).await;
    assert_eq!(
        first.iter().map(|g| g.2).collect::<Vec<_>>(),
        [1],
        "first delivery"
    );
    let (_, hidden) = receive(&c, "dlq-g", "PopDlq", 200).await;
    assert!(hidden.is_empty(), "handed out again while invisible");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (_, second) = receive(&c, "dlq-g", "PopDlq", 200).await;
    assert_eq!(
        second.iter().map(|g| g.2).collect::<Vec<_>>(),
        [2],
        "second attempt"
    );
    assert_eq!(&second[0].0.body[..], b"poison");
    tokio::time::sleep(Duration::from_millis(300)).await;
    // retryMaxTimes 1: two attempts, then the dead-letter queue.
    let (_, third) = receive(&c, "dlq-g", "PopDlq", 200).await;
    assert!(third.is_empty(), "a third delivery past the limit");
    let dead = c.drain("%DLQ%dlq-g", 0).await;
    assert_eq!(dead.len(), 1, "one dead letter");
    assert_eq!(&dead[0].body[..], b"poison");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (_, after) = receive(&c, "dlq-g", "PopDlq", 200).await;
    assert!(after.is_empty(), "the dead letter came back");
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receipt_handle_acks_only_its_own_groups_delivery() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = start(dir.path(), config()).await;
    let c = Client::new(&broker.addr);
    assert_eq!(
        c.send("PopOwn", 0, b"m", "k", "t")
            .await
            .expect("send")
            .code,
        response_code::SUCCESS
    );
    let (_, mine) = receive(&c, "owner", "PopOwn", 200).await;
    let (_, theirs) = receive(&c, "other", "PopOwn", 200).await;
    assert_eq!(
        (mine.len(), theirs.len()),
        (1, 1),
        "each group gets the message"
    );
    // The owner's handle presented by the other group: refused, and the
    // other group's own delivery stays open (it comes back).
    assert_eq!(
        ack(&c, "other", "PopOwn", &mine[0].1).await,
        response_code::NO_MESSAGE
    );
    assert_eq!(
        ack(&c, "owner", "PopOwn", &mine[0].1).await,
        response_code::SUCCESS
    );
    assert_eq!(
        ack(&c, "owner", "PopOwn", &mine[0].1).await,
        response_code::NO_MESSAGE,
        "acked twice"
    );
    assert_eq!(
        ack(&c, "owner", "PopOwn", "not-a-handle").await,
        response_code::NO_MESSAGE
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (_, again) = receive(&c, "other", "PopOwn", 200).await;
    assert_eq!(
        again.iter().map(|g| g.2).collect::<Vec<_>>(),
        [2],
        "the other group's delivery came back"
    );
    let (_, done) = receive(&c, "owner", "PopOwn", 200).await;
    assert!(done.is_empty(), "an acked delivery came back");
    broker.shutdown().await;
}

/// Registers a 5.x-style (POP) member of `group` on `c`'s connection.
async fn heartbeat_pop(c: &Client, group: &str) {
    let hb = HeartbeatData {
        client_id: "127.0.0.1@pop".into(),
        producer_data_set: Vec::new(),
        consumer_data_set: vec![ConsumerData {
            group_name: group.into(),
            consume_type: "CONSUME_POP".into(),
            message_model: "CLUSTERING".into(),
            consume_from_where: "CONSUME_FROM_LAST_OFFSET".into(),
            subscription_data_set: Vec::new(),
            unit_mode: false,
        }],
    };
    let json = body::encode(&hb, "HeartbeatData").expect("encode");
    let cmd = RemotingCommand::request(request_code::HEART_BEAT).with_body(Bytes::from(json));
    let r = c
        .call(cmd, Duration::from_secs(5))
        .await
        .expect("heartbeat");
    assert_eq!(r.code, response_code::SUCCESS);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_consumes_by_pop_or_by_offsets_not_both() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = start(dir.path(), config()).await;
    let c = Client::new(&broker.addr);
    assert_eq!(
        c.send("PopMix", 0, b"m", "k", "t")
            .await
            .expect("send")
            .code,
        response_code::SUCCESS
    );
    // A 4.x push member: POP receives of its group are refused.
    assert_eq!(
        heartbeat(&c, "by-offsets", "PopMix", "*", "TAG").await,
        response_code::SUCCESS
    );
    let (code, got) = receive(&c, "by-offsets", "PopMix", 1_000).await;
    assert_eq!((code, got.len()), (response_code::NO_PERMISSION, 0));
    // A POP member: 4.x pulls of its group are refused, other groups pull.
    heartbeat_pop(&c, "by-pop").await;
    let (pulled, remark) = pull_as(&c, "by-pop", "PopMix", 0, None).await;
    assert_eq!(pulled.code, response_code::NO_PERMISSION, "{remark:?}");
    assert!(
        remark.is_some_and(|r| r.contains("POP")),
        "the refusal says why"
    );
    let (pulled, _) = pull_as(&c, "by-offsets", "PopMix", 0, None).await;
    assert_eq!(pulled.code, response_code::SUCCESS);
    let (code, got) = receive(&c, "by-pop", "PopMix", 1_000).await;
    assert_eq!((code, got.len()), (response_code::SUCCESS, 1));
    broker.shutdown().await;
}
