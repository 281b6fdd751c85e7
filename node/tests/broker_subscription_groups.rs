//! Subscription groups against an in-process broker: admins create, list
//! and delete them; the settings survive restarts; `consumeEnable=false`
//! refuses pulls; `retryMaxTimes` decides when a sent-back message is a
//! dead letter; unknown groups are refused when auto-creation is off.

mod in_process;
mod support;

use std::time::Duration;

use bytes::Bytes;
use in_process::{config, consume_stats, heartbeat, pull_as, send, start};
use sluice_net::body::{self, SubscriptionGroupWrapper};
use sluice_net::header::{ConsumerSendMsgBackRequestHeader, DeleteSubscriptionGroupRequestHeader};
use sluice_net::remoting::{request_code, response_code};
use sluice_net::RemotingCommand;
use sluice_node::broker::BrokerConfig;
use support::Client;
use tokio::time::Instant;

async fn update_group(c: &Client, json: &str) -> RemotingCommand {
    let cmd = RemotingCommand::request(request_code::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP)
        .with_body(Bytes::copy_from_slice(json.as_bytes()));
    c.call(cmd, Duration::from_secs(5)).await.expect("update")
}

async fn all_groups(c: &Client) -> SubscriptionGroupWrapper {
    let cmd = RemotingCommand::request(request_code::GET_ALL_SUBSCRIPTIONGROUP_CONFIG);
    let r = c.call(cmd, Duration::from_secs(5)).await.expect("get all");
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    body::decode(&r.body, "SubscriptionGroupWrapper").expect("decode")
}

async fn delete_group(c: &Client, group: &str, clean_offset: bool) -> i32 {
    let h = DeleteSubscriptionGroupRequestHeader {
        group_name: group.into(),
        clean_offset: Some(clean_offset),
    };
    let cmd = RemotingCommand::request_with_header(request_code::DELETE_SUBSCRIPTIONGROUP, &h);
    c.call(cmd, Duration::from_secs(5))
        .await
        .expect("delete")
        .code
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disabled_group_is_refused_pulls_and_group_settings_survive_restarts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = start(dir.path(), config()).await;
    let c = Client::new(&broker.addr);
    send(&c, "GroupT", 0, b"m0", &[]).await;
    let r = update_group(&c, r#"{"groupName":"blocked","consumeEnable":false}"#).await;
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);

    let (p, remark) = pull_as(&c, "blocked", "GroupT", 0, None).await;
    assert_eq!(p.code, response_code::NO_PERMISSION);
    assert!(remark.unwrap_or_default().contains("consumeEnable=false"));
    let (p, _) = pull_as(&c, "free", "GroupT", 0, None).await;
    assert_eq!(p.code, response_code::SUCCESS, "first use auto-creates");

    let all = all_groups(&c).await;
    let table = &all.subscription_group_table;
    assert!(!table["blocked"].consume_enable);
    assert_eq!(table["blocked"].retry_max_times, 16, "RocketMQ defaults");
    assert!(table["free"].consume_enable);
    broker.shutdown().await;

    let broker = start(dir.path(), config()).await;
    let c = Client::new(&broker.addr);
    let after = all_groups(&c).await;
    assert_eq!(after.subscription_group_table, all.subscription_group_table);
    assert!(after.data_version.counter >= 2);
    let (p, _) = pull_as(&c, "blocked", "GroupT", 0, None).await;
    assert_eq!(p.code, response_code::NO_PERMISSION, "still disabled");

    let r = update_group(&c, r#"{"groupName":"blocked","consumeEnable":true}"#).await;
    assert_eq!(r.code, response_code::SUCCESS);
    let (p, _) = pull_as(&c, "blocked", "GroupT", 0, None).await;
    assert_eq!(p.code, response_code::SUCCESS);
    assert_eq!(delete_group(&c, "free", true).await, response_code::SUCCESS);
    assert!(!all_groups(&c)
        .await
        .subscription_group_table
        .contains_key("free"));
    broker.shutdown().await;

    let broker = start(dir.path(), config()).await;
    let c = Client::new(&broker.addr);
    let table = all_groups(&c).await.subscription_group_table;
    assert!(table["blocked"].consume_enable, "enabling was persisted");
    assert!(!table.contains_key("free"), "deletion was persisted");
    broker.shutdown().await;
}

async fn send_back(c: &Client, offset: i64, group: &str, max: Option<i32>) -> i32 {
    let h = ConsumerSendMsgBackRequestHeader {
        offset,
        group: group.to_owned(),
        delay_level: 0,
        origin_msg_id: None,
        origin_topic: None,
        unit_mode: Some(false),
        max_reconsume_times: max,
    };
    let cmd = RemotingCommand::request_with_header(request_code::CONSUMER_SEND_MSG_BACK, &h);
    c.call(cmd, Duration::from_secs(5))
        .await
        .expect("send back")
        .code
}

/// Drains `topic` queue 0 until it holds `n` records or 5 s pass.
async fn wait_for(c: &Client, topic: &str, n: usize) -> Vec<sluice_core::message::StoredRecord> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let got = c.drain(topic, 0).await;
        if got.len() >= n || Instant::now() >= deadline {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_retry_max_times_decides_when_a_sent_back_message_is_dead() {
    let dir = tempfile::tempdir().expect("tempdir");
    let short = BrokerConfig {
        delay_levels: "1s".to_owned(),
        ..config()
    };
    assert_eq!(short.max_reconsume_times, 16);
    let broker = start(dir.path(), short).await;
    let c = Client::new(&broker.addr);
    let r = update_group(&c, r#"{"groupName":"once","retryMaxTimes":1}"#).await;
    assert_eq!(r.code, response_code::SUCCESS);
    send(&c, "RetryG", 0, b"fails", &[]).await;
    let original = c.drain("RetryG", 0).await.remove(0);

    for group in ["once", "often"] {
        assert_eq!(send_back(&c, original.phys_offset, group, None).await, 0);
        let retried = wait_for(&c, &format!("%RETRY%{group}"), 1).await;
        assert_eq!(retried.len(), 1, "{group}: first failure is retried");
        assert_eq!(retried[0].reconsume_times, 1);
        assert_eq!(send_back(&c, retried[0].phys_offset, group, None).await, 0);
    }
    let dead = c.drain("%DLQ%once", 0).await;
    assert_eq!(
        dead.len(),
        1,
        "retryMaxTimes=1: the second failure is final"
    );
    assert!(
        c.drain("%DLQ%often", 0).await.is_empty(),
        "an auto-created group keeps the broker's 16"
    );
    assert_eq!(wait_for(&c, "%RETRY%often", 2).await.len(), 2);

    // A client's own maxReconsumeTimes wins over the group's, as in RocketMQ.
    assert_eq!(
        send_back(&c, original.phys_offset, "often", Some(0)).await,
        0
    );
    assert_eq!(c.drain("%DLQ%often", 0).await.len(), 1);
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_groups_are_refused_when_auto_creation_is_off() {
    let dir = tempfile::tempdir().expect("tempdir");
    let strict = BrokerConfig {
        auto_create_subscription_group: false,
        ..config()
    };
    let broker = start(dir.path(), strict).await;
    let c = Client::new(&broker.addr);
    send(&c, "StrictT", 0, b"m0", &[]).await;
    assert_eq!(heartbeat(&c, "nobody", "StrictT", "*", "TAG").await, 0);
    let (p, remark) = pull_as(&c, "nobody", "StrictT", 0, None).await;
    assert_eq!(
        p.code,
        response_code::SUBSCRIPTION_GROUP_NOT_EXIST,
        "{remark:?}"
    );
    let (stats, _) = consume_stats(&c, "nobody", Some("%RETRY%nobody")).await;
    assert!(
        stats.offset_table.is_empty(),
        "no retry topic without a group"
    );
    assert!(all_groups(&c).await.subscription_group_table.is_empty());

    for bad in [
        r#"{"groupName":"nobody","retryQueueNums":0}"#,
        r#"{"groupName":"no body"}"#,
        r#"{"groupName":""}"#,
    ] {
        let r = update_group(&c, bad).await;
        assert_eq!(r.code, response_code::INVALID_PARAMETER, "{bad}");
    }
    let r = update_group(&c, r#"{"groupName":"nobody"}"#).await;
    assert_eq!(r.code, response_code::SUCCESS);
    let (p, _) = pull_as(&c, "nobody", "StrictT", 0, None).await;
    assert_eq!(p.code, response_code::SUCCESS);
    assert_eq!(p.records.len(), 1);
    assert_eq!(heartbeat(&c, "nobody", "StrictT", "*", "TAG").await, 0);
    let (stats, _) = consume_stats(&c, "nobody", Some("%RETRY%nobody")).await;
    assert_eq!(
        stats.offset_table.len(),
        1,
        "the group's heartbeat makes its retry topic"
    );
    broker.shutdown().await;
}
