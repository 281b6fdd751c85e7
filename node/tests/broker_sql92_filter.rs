//! SQL92 property filtering on pulls, against an in-process broker: only
//! matching messages come back, skipped ones still advance the offset, a
//! group's registered SQL92 subscription applies without the subscription
//! flag, and malformed or disabled filters get RocketMQ's answers.

mod in_process;
mod support;

use std::time::Duration;

use bytes::Bytes;
use in_process::{bodies, config, heartbeat, pull_as, send, start};
use sluice_core::message::keys;
use sluice_net::body::{self, CheckClientRequestBody, SubscriptionData};
use sluice_net::remoting::{request_code, response_code};
use sluice_net::RemotingCommand;
use sluice_node::broker::BrokerConfig;
use support::Client;

/// Sends m0..m5: `a` = i, `region` eu for even i, `TAGS` TagA/TagB.
async fn send_six(c: &Client, topic: &str) {
    for i in 0..6 {
        let a = i.to_string();
        let region = if i % 2 == 0 { "eu" } else { "us" };
        let tag = if i < 3 { "TagA" } else { "TagB" };
        let body = format!("m{i}");
        send(
            c,
            topic,
            0,
            body.as_bytes(),
            &[("a", &a), ("region", region), (keys::TAGS, tag)],
        )
        .await;
    }
}

async fn check_client(c: &Client, expression: &str, kind: &str) -> RemotingCommand {
    let request = CheckClientRequestBody {
        client_id: "127.0.0.1@test".into(),
        group: "g".into(),
        subscription_data: Some(SubscriptionData {
            topic: "Sql".into(),
            sub_string: expression.into(),
            expression_type: Some(kind.into()),
            ..SubscriptionData::default()
        }),
    };
    let json = body::encode(&request, "CheckClientRequestBody").expect("encode");
    let cmd =
        RemotingCommand::request(request_code::CHECK_CLIENT_CONFIG).with_body(Bytes::from(json));
    c.call(cmd, Duration::from_secs(5)).await.expect("check")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sql92_pull_returns_only_matching_messages_and_moves_past_the_rest() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = start(dir.path(), config()).await;
    let c = Client::new(&broker.addr);
    send_six(&c, "Sql").await;

    let sql = Some(("a >= 2 AND region = 'eu'", "SQL92"));
    let (p, remark) = pull_as(&c, "g", "Sql", 0, sql).await;
    assert_eq!(p.code, response_code::SUCCESS, "{remark:?}");
    assert_eq!(bodies(&p.records), vec!["m2", "m4"]);
    assert_eq!(p.next, 6, "skipped messages advance the offset");

    let (p, _) = pull_as(&c, "g", "Sql", 0, Some(("TAGS = 'TagB' OR a = 0", "sql92"))).await;
    assert_eq!(bodies(&p.records), vec!["m0", "m3", "m4", "m5"]);
    let (p, _) = pull_as(
        &c,
        "g",
        "Sql",
        0,
        Some(("missing IS NULL AND NOT a BETWEEN 1 AND 4", "SQL92")),
    )
    .await;
    assert_eq!(bodies(&p.records), vec!["m0", "m5"]);

    // Nothing left matches: retry at once from past the skipped messages.
    send(&c, "Sql", 0, b"m6", &[("a", "1"), ("region", "us")]).await;
    let (p, _) = pull_as(&c, "g", "Sql", 6, sql).await;
    assert_eq!(p.code, response_code::PULL_RETRY_IMMEDIATELY);
    assert!(p.records.is_empty());
    assert_eq!(p.next, 7);

    // Tag filtering is unchanged.
    let (p, _) = pull_as(&c, "g", "Sql", 0, Some(("TagB", "TAG"))).await;
    assert_eq!(bodies(&p.records), vec!["m3", "m4", "m5"]);
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registered_sql92_subscription_filters_pulls_without_the_subscription_flag() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = start(dir.path(), config()).await;
    let c = Client::new(&broker.addr);
    send_six(&c, "Sql").await;
    let code = heartbeat(&c, "g", "Sql", "region = 'us' AND a > 1", "SQL92").await;
    assert_eq!(code, response_code::SUCCESS);
    let (p, remark) = pull_as(&c, "g", "Sql", 0, None).await;
    assert_eq!(p.code, response_code::SUCCESS, "{remark:?}");
    assert_eq!(bodies(&p.records), vec!["m3", "m5"]);
    // Another group without a subscription gets everything.
    let (p, _) = pull_as(&c, "other", "Sql", 0, None).await;
    assert_eq!(p.records.len(), 6);
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_sql92_is_refused_with_subscription_parse_failed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = start(dir.path(), config()).await;
    let c = Client::new(&broker.addr);
    send_six(&c, "Sql").await;
    for bad in [
        "a >",
        "a = 'open",
        "region > 'x'",
        "((a = 1)",
        "a LIKE 'x%'",
    ] {
        let (p, remark) = pull_as(&c, "g", "Sql", 0, Some((bad, "SQL92"))).await;
        assert_eq!(p.code, response_code::SUBSCRIPTION_PARSE_FAILED, "{bad}");
        let remark = remark.unwrap_or_default();
        assert!(
            remark.contains("SQL92") && remark.contains("at byte"),
            "{remark}"
        );
        let r = check_client(&c, bad, "SQL92").await;
        assert_eq!(r.code, response_code::SUBSCRIPTION_PARSE_FAILED, "{bad}");
    }
    let (p, _) = pull_as(&c, "g", "Sql", 0, Some(("a = 1", "BLOOM"))).await;
    assert_eq!(p.code, response_code::SUBSCRIPTION_PARSE_FAILED);
    assert_eq!(check_client(&c, "a = 1", "SQL92").await.code, 0);
    assert_eq!(check_client(&c, "TagA || TagB", "TAG").await.code, 0);
    // Still serving.
    let (p, _) = pull_as(&c, "g", "Sql", 0, Some(("a = 1", "SQL92"))).await;
    assert_eq!(bodies(&p.records), vec!["m1"]);
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sql92_is_refused_when_property_filtering_is_off() {
    let dir = tempfile::tempdir().expect("tempdir");
    let off = BrokerConfig {
        enable_property_filter: false,
        ..config()
    };
    let broker = start(dir.path(), off).await;
    let c = Client::new(&broker.addr);
    send_six(&c, "Sql").await;
    let (p, remark) = pull_as(&c, "g", "Sql", 0, Some(("a = 1", "SQL92"))).await;
    assert_eq!(p.code, response_code::SYSTEM_ERROR);
    assert!(remark.unwrap_or_default().contains("does not support"));
    assert_eq!(
        check_client(&c, "a = 1", "SQL92").await.code,
        response_code::SYSTEM_ERROR
    );
    let (p, _) = pull_as(&c, "g", "Sql", 0, Some(("TagA", "TAG"))).await;
    assert_eq!(bodies(&p.records), vec!["m0", "m1", "m2"]);
    broker.shutdown().await;
}
