//! `produce`: normal, FIFO (`--group`, repeatable: message i goes to group
//! i mod groups) and delay (`--delay-secs`) messages, one `sent` event each
//! with what was sent and the receipt.

use std::collections::BTreeMap;

use anyhow::{bail, Context, Result};
use rocketmq::conf::ProducerOption;
use rocketmq::model::message::MessageBuilder;
use rocketmq::Producer;
use serde_json::json;

use crate::{client_error, client_option, emit, now_ms, Args};

/// User properties from `--prop K=V` flags.
pub(crate) fn properties(args: &Args) -> Result<BTreeMap<String, String>> {
    args.all("--prop")
        .iter()
        .map(|kv| {
            let (k, v) = kv
                .split_once('=')
                .with_context(|| format!("--prop {kv:?} is not K=V"))?;
            Ok((k.to_owned(), v.to_owned()))
        })
        .collect()
}

pub(crate) async fn run(args: &Args) -> Result<()> {
    let topic = args.req("--topic")?.to_owned();
    let count: usize = args.num("--count", 1)?;
    let prefix = args.opt("--body-prefix").unwrap_or("body").to_owned();
    let tag = args.opt("--tag").map(str::to_owned);
    let keys: Vec<String> = args
        .opt("--keys")
        .map(|k| k.split(',').map(str::to_owned).collect())
        .unwrap_or_default();
    let props = properties(args)?;
    let groups = args.all("--group");
    let delay_secs: Option<i64> = args.opt("--delay-secs").map(str::parse).transpose()?;
    if delay_secs.is_some() && !groups.is_empty() {
        bail!("--delay-secs and --group exclude each other (a message is DELAY or FIFO)");
    }

    let mut option = ProducerOption::default();
    option.set_topics(vec![topic.clone()]);
    let mut producer = Producer::new(option, client_option(args)?)
        .map_err(|e| client_error("create producer", &e))?;
    producer
        .start()
        .await
        .map_err(|e| client_error("start producer", &e))?;

    for i in 0..count {
        let body = format!("{prefix}-{i}");
        let mut builder = MessageBuilder::builder()
            .set_topic(topic.clone())
            .set_body(body.clone().into_bytes());
        if let Some(tag) = &tag {
            builder = builder.set_tag(tag.clone());
        }
        if !keys.is_empty() {
            builder = builder.set_keys(keys.clone());
        }
        if !props.is_empty() {
            builder = builder.set_properties(props.clone().into_iter().collect());
        }
        let group = (!groups.is_empty()).then(|| groups[i % groups.len()].clone());
        if let Some(g) = &group {
            builder = builder.set_message_group(g.clone());
        }
        // The 5.0.0 client sends the delivery timestamp in whole seconds.
        let delivery = delay_secs.map(|s| now_ms() / 1000 + s);
        if let Some(at) = delivery {
            builder = builder.set_delivery_timestamp(at);
        }
        let message = builder
            .build()
            .map_err(|e| client_error("build message", &e))?;
        let sent_at_ms = now_ms();
        let receipt = producer
            .send(message)
            .await
            .map_err(|e| client_error(&format!("send {body}"), &e))?;
        emit(
            "sent",
            json!({
                "message_id": receipt.message_id(),
                "transaction_id": receipt.transaction_id(),
                "body": body,
                "tag": tag,
                "keys": keys,
                "properties": props,
                "message_group": group,
                "delivery_timestamp": delivery,
                "sent_at_ms": sent_at_ms,
            }),
        );
    }
    producer
        .shutdown()
        .await
        .map_err(|e| client_error("shut down producer", &e))
}
