//! The everyday verbs of `sluice`: thin layers over the client library.

use std::fmt::Write as _;
use std::time::Duration;

use anyhow::{bail, Context};
use serde_json::{json, Value};
use sluice_client::admin::TopicOptions;
use sluice_client::consumer::PushConsumerConfig;
use sluice_client::{
    Admin, ConsumeFrom, LitePullConsumer, Message, MessageExt, Producer, ProducerConfig,
    Subscription, TlsTransport,
};
use sluice_core::SystemClock;

use crate::endpoint::{client, Endpoint};

/// How results are printed.
#[derive(Clone, Copy)]
pub struct Output {
    /// One JSON document instead of text.
    pub json: bool,
}

impl Output {
    pub(crate) fn print(self, human: &str, json: &Value) {
        if self.json {
            println!("{json}");
        } else {
            print!("{human}");
        }
    }
}

/// `sluice topic ...`
#[derive(clap::Subcommand, Debug)]
pub enum TopicCmd {
    /// Create or update a topic on every master (or the named brokers).
    Create {
        /// Topic name.
        #[arg(long)]
        topic: String,
        /// Queues per broker.
        #[arg(long, default_value_t = 8)]
        queues: i32,
        /// Mark the topic ordered.
        #[arg(long)]
        order: bool,
        /// Only on these brokers (repeatable).
        #[arg(long = "broker")]
        brokers: Vec<String>,
    },
    /// Every topic the name servers know.
    List,
    /// Which brokers and queues serve a topic.
    Route {
        /// Topic name.
        #[arg(long)]
        topic: String,
    },
    /// Delete a topic from every broker and name server.
    Delete {
        /// Topic name.
        #[arg(long)]
        topic: String,
    },
}

/// Runs `sluice topic`.
pub async fn topic(cmd: TopicCmd, endpoint: &Endpoint, out: Output) -> anyhow::Result<()> {
    let admin = Admin::new(client(endpoint));
    let result = topic_inner(&admin, cmd, out).await;
    admin.client().shutdown().await;
    result
}

async fn topic_inner(
    admin: &Admin<TlsTransport, SystemClock>,
    cmd: TopicCmd,
    out: Output,
) -> anyhow::Result<()> {
    match cmd {
        TopicCmd::Create {
            topic,
            queues,
            order,
            brokers,
        } => {
            let options = TopicOptions {
                queues,
                order,
                brokers,
                ..TopicOptions::default()
            };
            admin
                .create_topic(&topic, &options)
                .await
                .with_context(|| format!("creating topic {topic}"))?;
            out.print(
                &format!("created topic {topic} with {queues} queues per broker\n"),
                &json!({"topic": topic, "queues": queues, "created": true}),
            );
        }
        TopicCmd::List => {
            let topics = admin.list_topics().await.context("listing topics")?;
            let mut human = String::new();
            for t in &topics {
                human.push_str(t);
                human.push('\n');
            }
            out.print(&human, &json!({ "topics": topics }));
        }
        TopicCmd::Route { topic } => {
            let route = admin
                .route(&topic)
                .await
                .with_context(|| format!("route of {topic}"))?;
            let mut human = format!(
                "{:<20} {:>6} {:>6} {:>5}  ADDRESSES\n",
                "BROKER", "READ", "WRITE", "PERM"
            );
            for q in &route.queue_datas {
                let addrs = route
                    .broker_datas
                    .iter()
                    .find(|b| b.broker_name == q.broker_name)
                    .map(|b| {
                        b.broker_addrs
                            .iter()
                            .map(|(id, a)| format!("{id}={a}"))
                            .collect::<Vec<_>>()
                            .join(" ")
                    })
                    .unwrap_or_default();
                let _ = writeln!(
                    human,
                    "{:<20} {:>6} {:>6} {:>5}  {addrs}",
                    q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm
                );
            }
            let queues: Vec<Value> = route
                .queue_datas
                .iter()
                .map(|q| {
                    json!({"brokerName": q.broker_name, "readQueueNums": q.read_queue_nums,
                           "writeQueueNums": q.write_queue_nums, "perm": q.perm})
                })
                .collect();
            let brokers: Vec<Value> = route
                .broker_datas
                .iter()
                .map(|b| {
                    let addrs: serde_json::Map<String, Value> = b
                        .broker_addrs
                        .iter()
                        .map(|(id, a)| (id.to_string(), Value::from(a.clone())))
                        .collect();
                    json!({"brokerName": b.broker_name, "cluster": b.cluster, "brokerAddrs": addrs})
                })
                .collect();
            out.print(
                &human,
                &json!({"topic": topic, "queueDatas": queues, "brokerDatas": brokers}),
            );
        }
        TopicCmd::Delete { topic } => crate::steps::delete_topic(admin, &topic, out).await?,
    }
    Ok(())
}

/// Runs `sluice cluster`.
pub async fn cluster(endpoint: &Endpoint, out: Output) -> anyhow::Result<()> {
    let admin = Admin::new(client(endpoint));
    let brokers = admin.cluster().await.context("reading the cluster");
    admin.client().shutdown().await;
    let brokers = brokers?;
    let mut human = format!(
        "{:<14} {:<16} {:>3} {:<22} {:<12} {:>5} {:<9} {:>10} {:>16} {:>8}  VERSION\n",
        "CLUSTER",
        "BROKER",
        "ID",
        "ADDRESS",
        "ROLE",
        "EPOCH",
        "IN-SYNC",
        "LAG BYTES",
        "COMMITLOG BYTES",
        "TOPICS"
    );
    let mut rows = Vec::new();
    for b in &brokers {
        let get = |k: &str| b.runtime.get(k).cloned().unwrap_or_else(|| "-".to_owned());
        let _ = writeln!(
            human,
            "{:<14} {:<16} {:>3} {:<22} {:<12} {:>5} {:<9} {:>10} {:>16} {:>8}  {}",
            b.cluster,
            b.broker_name,
            b.broker_id,
            b.addr,
            get("brokerRole"),
            get("masterEpoch"),
            get("inSyncReplicas"),
            get("replicaLagBytes"),
            get("commitLogMaxOffset"),
            get("topicCount"),
            get("brokerVersionDesc"),
        );
        rows.push(
            json!({"cluster": b.cluster, "brokerName": b.broker_name, "brokerId": b.broker_id,
                         "addr": b.addr, "runtime": b.runtime}),
        );
    }
    out.print(&human, &json!({ "brokers": rows }));
    Ok(())
}

/// `sluice send`
#[derive(clap::Args, Debug)]
pub struct SendArgs {
    /// Topic.
    #[arg(long)]
    topic: String,
    /// Message body.
    #[arg(long)]
    body: String,
    /// Tag.
    #[arg(long)]
    tags: Option<String>,
    /// Business keys, space- or comma-separated.
    #[arg(long)]
    keys: Option<String>,
    /// User property `NAME=VALUE` (repeatable).
    #[arg(long = "property", value_parser = parse_property)]
    properties: Vec<(String, String)>,
    /// Delay level (1–18).
    #[arg(long)]
    delay_level: Option<u32>,
    /// Deliver this many milliseconds after the broker stores it (timer
    /// message; wins over `--delay-level`).
    #[arg(long)]
    delay_ms: Option<u64>,
    /// Deliver at this wall-clock time, ms since the Unix epoch on the
    /// broker's clock (timer message; wins over `--delay-ms`).
    #[arg(long)]
    deliver_time_ms: Option<u64>,
    /// Send the message this many times.
    #[arg(long, default_value_t = 1)]
    count: u32,
    /// Producer group.
    #[arg(long, default_value = "sluice-cli")]
    group: String,
}

fn parse_property(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
        _ => Err(format!("`{s}` is not NAME=VALUE")),
    }
}

/// Runs `sluice send`.
pub async fn send(args: SendArgs, endpoint: &Endpoint, out: Output) -> anyhow::Result<()> {
    let producer = Producer::new(client(endpoint), ProducerConfig::new(args.group.clone()));
    let mut msg = Message::new(args.topic.clone(), args.body.clone().into_bytes());
    if let Some(t) = &args.tags {
        msg = msg.with_tags(t.clone());
    }
    if let Some(k) = &args.keys {
        msg = msg.with_keys(k.split([' ', ',']).filter(|k| !k.is_empty()));
    }
    for (k, v) in &args.properties {
        msg = msg.with_property(k.clone(), v.clone());
    }
    if let Some(ms) = args.delay_ms {
        msg = msg.with_delay_ms(ms);
    }
    if let Some(ms) = args.deliver_time_ms {
        msg = msg.with_deliver_time_ms(ms);
    }
    if let Some(level) = args.delay_level {
        msg = msg.with_delay_level(level);
    }
    let mut results = Vec::new();
    let mut human = String::new();
    let mut failure = None;
    for _ in 0..args.count {
        match producer.send(&msg).await {
            Ok(r) => {
                let _ = writeln!(
                    human,
                    "{:?} msgId={} offsetMsgId={} queue={}:{} offset={}",
                    r.status,
                    r.msg_id,
                    r.offset_msg_id,
                    r.queue.broker_name,
                    r.queue.queue_id,
                    r.queue_offset
                );
                results.push(
                    json!({"status": format!("{:?}", r.status), "msgId": r.msg_id,
                    "offsetMsgId": r.offset_msg_id, "brokerName": r.queue.broker_name,
                    "queueId": r.queue.queue_id, "queueOffset": r.queue_offset}),
                );
            }
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    producer.client().shutdown().await;
    out.print(&human, &json!({ "sent": results }));
    if let Some(e) = failure {
        bail!(
            "send to {} failed after {} sent: {e}",
            args.topic,
            results.len()
        );
    }
    Ok(())
}

/// `sluice consume`
#[derive(clap::Args, Debug)]
pub struct ConsumeArgs {
    /// Topic.
    #[arg(long)]
    topic: String,
    /// Consumer group (its committed offsets are used and advanced).
    #[arg(long)]
    group: String,
    /// Stop after this many messages.
    #[arg(long)]
    count: Option<u64>,
    /// Keep waiting for new messages (until --count or Ctrl-C).
    #[arg(long)]
    follow: bool,
    /// Tag expression (`a || b`).
    #[arg(long, conflicts_with = "sql")]
    tags: Option<String>,
    /// SQL92 property filter.
    #[arg(long)]
    sql: Option<String>,
    /// Where a group without offsets starts: `first`, `last` or a time in
    /// ms since the epoch.
    #[arg(long, default_value = "first")]
    from: String,
    /// Without --follow: stop after this many seconds without a message.
    #[arg(long, default_value_t = 2)]
    idle_secs: u64,
}

fn message_json(m: &MessageExt) -> Value {
    let props: serde_json::Map<String, Value> = m
        .properties
        .iter()
        .map(|(k, v)| (k.to_owned(), Value::from(v)))
        .collect();
    json!({"topic": m.topic, "msgId": m.msg_id(), "offsetMsgId": m.offset_msg_id,
        "brokerName": m.broker_name, "queueId": m.queue_id, "queueOffset": m.queue_offset,
        "tags": m.tags(), "keys": m.keys().collect::<Vec<_>>(),
        "body": String::from_utf8_lossy(&m.body), "bornTimestamp": m.born_timestamp_ms,
        "storeTimestamp": m.store_timestamp_ms, "reconsumeTimes": m.reconsume_times,
        "properties": props})
}

fn message_line(m: &MessageExt) -> String {
    format!(
        "{}:{}@{} id={} tags={} keys={} body={}\n",
        m.broker_name,
        m.queue_id,
        m.queue_offset,
        m.msg_id(),
        m.tags().unwrap_or("-"),
        m.keys().collect::<Vec<_>>().join(","),
        String::from_utf8_lossy(&m.body)
    )
}

/// Runs `sluice consume`. With `--json`, one JSON object per message (JSON lines).
pub async fn consume(args: ConsumeArgs, endpoint: &Endpoint, out: Output) -> anyhow::Result<()> {
    let mut config = PushConsumerConfig::new(args.group.clone());
    config.consume_from =
        match args.from.as_str() {
            "first" => ConsumeFrom::FirstOffset,
            "last" => ConsumeFrom::LastOffset,
            ms => ConsumeFrom::Timestamp(ms.parse().with_context(|| {
                format!("--from `{ms}` is not first, last or ms since the epoch")
            })?),
        };
    config.hold = Duration::from_secs(5);
    let sub = match (&args.sql, &args.tags) {
        (Some(sql), _) => Subscription::sql92(args.topic.clone(), sql.clone()),
        (None, Some(tags)) => Subscription::tag(args.topic.clone(), tags.clone()),
        (None, None) => Subscription::all(args.topic.clone()),
    };
    let c = client(endpoint);
    let consumer = LitePullConsumer::new(c.clone(), config)?;
    consumer.subscribe(sub);
    consumer.start().await?;
    let limit = args.count.unwrap_or(u64::MAX);
    let mut received: u64 = 0;
    // The first poll also waits for the first rebalance.
    let mut wait = Duration::from_secs(args.idle_secs.max(1) + 3);
    let stop = tokio::signal::ctrl_c();
    tokio::pin!(stop);
    'outer: while received < limit {
        let batch_max = usize::try_from(limit - received)
            .unwrap_or(usize::MAX)
            .min(256);
        let batch = tokio::select! {
            r = consumer.poll(batch_max, wait) => r?,
            _ = &mut stop => break 'outer,
        };
        if batch.is_empty() {
            if args.follow {
                continue;
            }
            break;
        }
        wait = Duration::from_secs(args.idle_secs.max(1));
        for m in batch {
            if received >= limit {
                break;
            }
            received += 1;
            if out.json {
                println!("{}", message_json(&m));
            } else {
                print!("{}", message_line(&m));
            }
        }
    }
    consumer.shutdown().await;
    c.shutdown().await;
    if !out.json {
        eprintln!("{received} message(s)");
    }
    Ok(())
}

/// `sluice query`
#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["key", "id"])))]
pub struct QueryArgs {
    /// Business key (needs --topic).
    #[arg(long, requires = "topic")]
    key: Option<String>,
    /// Message id: an offset id, or a client id (`UNIQ_KEY`, needs --topic).
    #[arg(long)]
    id: Option<String>,
    /// Topic.
    #[arg(long)]
    topic: Option<String>,
    /// Most messages to return for a key.
    #[arg(long, default_value_t = 32)]
    max: i32,
}

/// Runs `sluice query`.
pub async fn query(args: QueryArgs, endpoint: &Endpoint, out: Output) -> anyhow::Result<()> {
    let admin = Admin::new(client(endpoint));
    let found = match (&args.key, &args.id) {
        (Some(key), _) => {
            let topic = args.topic.as_deref().unwrap_or_default();
            admin.query_by_key(topic, key, args.max).await
        }
        (None, Some(id)) => admin
            .view_message(id, args.topic.as_deref())
            .await
            .map(|m| m.into_iter().collect()),
        (None, None) => Ok(Vec::new()),
    };
    admin.client().shutdown().await;
    let found = found.context("querying messages")?;
    let human: String = found.iter().map(message_line).collect();
    out.print(
        &human,
        &json!({ "messages": found.iter().map(message_json).collect::<Vec<_>>() }),
    );
    if found.is_empty() {
        bail!("no message found");
    }
    Ok(())
}

/// `sluice group ...`
#[derive(clap::Subcommand, Debug)]
pub enum GroupCmd {
    /// Per-queue broker offset, committed offset and lag of a group.
    Progress {
        /// Consumer group.
        #[arg(long)]
        group: String,
        /// Only this topic (and the group's retry topic); default: every
        /// topic the group consumes.
        #[arg(long)]
        topic: Option<String>,
    },
}

/// Runs `sluice group`.
pub async fn group(cmd: GroupCmd, endpoint: &Endpoint, out: Output) -> anyhow::Result<()> {
    let GroupCmd::Progress { group, topic } = cmd;
    let admin = Admin::new(client(endpoint));
    let progress = admin.group_progress(&group, topic.as_deref()).await;
    admin.client().shutdown().await;
    let progress = progress.with_context(|| format!("progress of group {group}"))?;
    let mut human = format!(
        "{:<28} {:<16} {:>5} {:>14} {:>14} {:>10}  LAST CONSUMED (ms)\n",
        "TOPIC", "BROKER", "QUEUE", "BROKER OFFSET", "CONSUMER OFF.", "LAG"
    );
    let mut total = 0;
    let mut rows = Vec::new();
    for p in &progress {
        total += p.lag();
        let _ = writeln!(
            human,
            "{:<28} {:<16} {:>5} {:>14} {:>14} {:>10}  {}",
            p.queue.topic,
            p.queue.broker_name,
            p.queue.queue_id,
            p.broker_offset,
            p.consumer_offset,
            p.lag(),
            p.last_timestamp_ms
        );
        rows.push(
            json!({"topic": p.queue.topic, "brokerName": p.queue.broker_name,
            "queueId": p.queue.queue_id, "brokerOffset": p.broker_offset,
            "consumerOffset": p.consumer_offset, "lastTimestamp": p.last_timestamp_ms,
            "lag": p.lag()}),
        );
    }
    let _ = writeln!(human, "total lag: {total}");
    out.print(
        &human,
        &json!({"group": group, "queues": rows, "totalLag": total}),
    );
    Ok(())
}
