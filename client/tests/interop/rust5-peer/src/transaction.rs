//! `transaction`: half messages ended by the producer (`--commit N`,
//! `--rollback N`) and left open for the broker's check-back
//! (`--check-commit N`, `--check-rollback N`), which the producer's checker
//! resolves by the body's prefix. Each half has tag `<kind>`, key `<body>`
//! and the user properties `kind=<kind>` and each `--prop K=V`.
//! Events: `sent` per half, `committed` / `rolled_back` per producer-side
//! end, `checked` per check-back; the run waits until every open half has
//! been checked back.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use anyhow::{bail, Result};
use rocketmq::conf::ProducerOption;
use rocketmq::model::message::MessageBuilder;
use rocketmq::model::transaction::{Transaction, TransactionResolution};
use rocketmq::Producer;
use serde_json::json;
use tokio::sync::mpsc;

use crate::{client_error, client_option, emit, message_json, Args};

/// How long the producer stays up after the last check-back, so that the
/// checker's `EndTransaction` (sent by the client after the checker returns,
/// with no completion signal) reaches the broker.
const AFTER_LAST_CHECK: Duration = Duration::from_secs(2);

/// The checker's answer for a half with this body.
fn resolution_for(body: &str) -> (TransactionResolution, &'static str) {
    if body.starts_with("check-commit-") {
        (TransactionResolution::COMMIT, "commit")
    } else if body.starts_with("check-rollback-") {
        (TransactionResolution::ROLLBACK, "rollback")
    } else {
        (TransactionResolution::UNKNOWN, "unknown")
    }
}

/// A half's user properties: `--prop`s and `kind=<kind>`.
fn half_properties(extra: &BTreeMap<String, String>, kind: &str) -> BTreeMap<String, String> {
    let mut props = extra.clone();
    props.insert("kind".to_owned(), kind.to_owned());
    props
}

pub(crate) async fn run(args: &Args) -> Result<()> {
    let topic = args.req("--topic")?.to_owned();
    let commits: usize = args.num("--commit", 0)?;
    let rollbacks: usize = args.num("--rollback", 0)?;
    let check_commits: usize = args.num("--check-commit", 0)?;
    let check_rollbacks: usize = args.num("--check-rollback", 0)?;
    let wait = Duration::from_secs(args.num("--wait-secs", 30)?);
    let extra = crate::produce::properties(args)?;

    let (checked_tx, mut checked_rx) = mpsc::unbounded_channel::<String>();
    let checker = move |transaction_id: String, message: rocketmq::model::message::MessageView| {
        let body = String::from_utf8_lossy(message.body()).into_owned();
        let (resolution, name) = resolution_for(&body);
        let mut event = message_json(&message);
        event["transaction_id"] = json!(transaction_id);
        event["resolution"] = json!(name);
        emit("checked", event);
        let _ = checked_tx.send(message.message_id().to_owned());
        resolution
    };
    // The broker checks back the producers of the half's group, which for
    // a 5.x producer is each topic its Settings name.
    let mut option = ProducerOption::default();
    option.set_topics(vec![topic.clone()]);
    let mut producer =
        Producer::new_transaction_producer(option, client_option(args)?, Box::new(checker))
            .map_err(|e| client_error("create transaction producer", &e))?;
    producer
        .start()
        .await
        .map_err(|e| client_error("start producer", &e))?;

    let plan = [
        ("commit", commits),
        ("rollback", rollbacks),
        ("check-commit", check_commits),
        ("check-rollback", check_rollbacks),
    ];
    let mut open = BTreeSet::new();
    for (kind, count) in plan {
        for i in 0..count {
            let body = format!("{kind}-{i}");
            let message = MessageBuilder::transaction_message_builder(
                topic.clone(),
                body.clone().into_bytes(),
            )
            .set_tag(kind)
            .set_keys(vec![body.clone()])
            .set_properties(half_properties(&extra, kind).into_iter().collect())
            .build()
            .map_err(|e| client_error("build message", &e))?;
            let tx = producer
                .send_transaction_message(message)
                .await
                .map_err(|e| client_error(&format!("send half {body}"), &e))?;
            let (message_id, transaction_id) =
                (tx.message_id().to_owned(), tx.transaction_id().to_owned());
            emit(
                "sent",
                json!({ "message_id": message_id, "transaction_id": transaction_id, "body": body }),
            );
            match kind {
                "commit" => {
                    tx.commit()
                        .await
                        .map_err(|e| client_error(&format!("commit {body}"), &e))?;
                    emit("committed", json!({ "message_id": message_id }));
                }
                "rollback" => {
                    tx.rollback()
                        .await
                        .map_err(|e| client_error(&format!("roll back {body}"), &e))?;
                    emit("rolled_back", json!({ "message_id": message_id }));
                }
                _ => {
                    open.insert(message_id);
                }
            }
        }
    }

    let deadline = tokio::time::Instant::now() + wait;
    while !open.is_empty() {
        match tokio::time::timeout_at(deadline, checked_rx.recv()).await {
            Ok(Some(id)) => {
                open.remove(&id);
            }
            Ok(None) => bail!("the checker is gone"),
            Err(_) => bail!("no check-back within {wait:?} for {open:?}"),
        }
    }
    if check_commits + check_rollbacks > 0 {
        tokio::time::sleep(AFTER_LAST_CHECK).await;
    }
    producer
        .shutdown()
        .await
        .map_err(|e| client_error("shut down producer", &e))
}
