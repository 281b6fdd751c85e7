//! `simple-consume`: a `SimpleConsumer` receives (`--invisible-secs` per
//! receive) and acks until `--expect` distinct messages are acked, then
//! keeps receiving for `--linger-secs` so that anything extra shows up.
//! `--skip-first-ack` leaves the first delivery unacked to see it again
//! after its invisible duration; `--ack-stale` then acks that first
//! delivery's (now stale) handle and reports the answer.
//! Events: `received` (with `received_at_ms`), `ack_skipped`, `acked`,
//! `stale_ack`, and `done`.

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::{bail, Result};
use rocketmq::conf::SimpleConsumerOption;
use rocketmq::model::common::{FilterExpression, FilterType};
use rocketmq::model::message::MessageView;
use rocketmq::SimpleConsumer;
use serde_json::json;
use tokio::time::Instant;

use crate::{client_error, client_option, emit, message_json, now_ms, Args};

/// What the run is waiting for, and what it has seen.
struct Progress {
    expect: usize,
    acked: BTreeSet<String>,
    skip_first_ack: bool,
    /// The first delivery, left unacked (`--skip-first-ack`).
    skipped: Option<MessageView>,
}

impl Progress {
    fn complete(&self) -> bool {
        self.acked.len() >= self.expect
    }
}

fn received(m: &MessageView) {
    let mut event = message_json(m);
    event["received_at_ms"] = json!(now_ms());
    emit("received", event);
}

/// Handles one delivery: leave it unacked if it is the first and
/// `--skip-first-ack` asked so, else ack it (after acking the stale first
/// handle of a redelivered message, with `--ack-stale`).
async fn handle(
    consumer: &SimpleConsumer,
    progress: &mut Progress,
    ack_stale: bool,
    m: MessageView,
) -> Result<()> {
    received(&m);
    if progress.skip_first_ack && progress.skipped.is_none() {
        emit(
            "ack_skipped",
            json!({ "message_id": m.message_id(), "delivery_attempt": m.delivery_attempt() }),
        );
        progress.skipped = Some(m);
        return Ok(());
    }
    let stale = progress
        .skipped
        .as_ref()
        .filter(|first| first.message_id() == m.message_id());
    if let (true, Some(first)) = (ack_stale, stale) {
        let answer = consumer.ack(first).await;
        emit(
            "stale_ack",
            json!({
                "message_id": first.message_id(),
                "ok": answer.is_ok(),
                "error": answer.err().map(|e| e.to_string()),
            }),
        );
    }
    consumer
        .ack(&m)
        .await
        .map_err(|e| client_error(&format!("ack {}", m.message_id()), &e))?;
    emit(
        "acked",
        json!({ "message_id": m.message_id(), "delivery_attempt": m.delivery_attempt() }),
    );
    progress.acked.insert(m.message_id().to_owned());
    Ok(())
}

pub(crate) async fn run(args: &Args) -> Result<()> {
    let topic = args.req("--topic")?.to_owned();
    let group = args.req("--group")?.to_owned();
    let filter = FilterExpression::new(FilterType::Tag, args.opt("--filter").unwrap_or("*"));
    let invisible = Duration::from_secs(args.num("--invisible-secs", 10)?);
    let batch: i32 = args.num("--batch", 32)?;
    let linger = Duration::from_secs(args.num("--linger-secs", 0)?);
    let wait = Duration::from_secs(args.num("--wait-secs", 30)?);
    let ack_stale = args.has("--ack-stale");
    let mut progress = Progress {
        expect: args.num("--expect", 1)?,
        acked: BTreeSet::new(),
        skip_first_ack: args.has("--skip-first-ack"),
        skipped: None,
    };

    let mut option = SimpleConsumerOption::default();
    option.set_consumer_group(group);
    option.set_topics(vec![topic.clone()]);
    let mut client = client_option(args)?;
    // The 5.0.0 client's receive deadline is this long-polling time alone
    // (default 40 s); the broker answers an empty poll before it.
    client.set_long_polling_timeout(Duration::from_secs(args.num("--await-secs", 5)?));
    let mut consumer = SimpleConsumer::new(option, client)
        .map_err(|e| client_error("create simple consumer", &e))?;
    consumer
        .start()
        .await
        .map_err(|e| client_error("start simple consumer", &e))?;

    let deadline = Instant::now() + wait;
    let mut linger_until: Option<Instant> = None;
    loop {
        if progress.complete() && linger_until.is_none() {
            linger_until = Some(Instant::now() + linger);
        }
        let now = Instant::now();
        if linger_until.is_some_and(|until| now >= until) {
            break;
        }
        if now >= deadline {
            bail!(
                "acked {} of {} expected messages within {wait:?}",
                progress.acked.len(),
                progress.expect
            );
        }
        let messages = consumer
            .receive_with(&topic, &filter, batch, invisible)
            .await
            .map_err(|e| client_error("receive", &e))?;
        for m in messages {
            handle(&consumer, &mut progress, ack_stale, m).await?;
        }
    }
    emit("done", json!({ "acked": progress.acked.len() }));
    consumer
        .shutdown()
        .await
        .map_err(|e| client_error("shut down simple consumer", &e))
}
