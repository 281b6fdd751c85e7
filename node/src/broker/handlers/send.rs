//! `SEND_MESSAGE`, `SEND_MESSAGE_V2`, `SEND_BATCH_MESSAGE`: validate, resolve
//! (or auto-create) the topic, route exhausted retries to the DLQ, divert
//! delayed messages to the schedule topic (see `broker::schedule`) and
//! timer messages to the timer topic (see `broker::timer`), store
//! with the requested durability (`WAIT`), and answer the fields clients
//! need. Nothing is acknowledged that the store did not accept.

use bytes::Bytes;
use sluice_core::disk::Disk;
use sluice_core::message::{
    decode_batch, dlq_topic, is_retry_topic, keys, merge_batch_properties_into, offset_msg_id,
    validate_topic, MessageInput, Properties, NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR,
};
use sluice_core::{Clock, CommitLogOffset, Wait};
use sluice_net::header::{SendMessageRequestHeader, SendMessageResponseHeader};
use sluice_net::remoting::{request_code, response_code};
use sluice_net::{RemotingCommand, RequestContext};
use tokio::sync::SemaphorePermit;

use super::send_dedupe::{self, Claimed, Once};
use crate::broker::dedupe::sequences::Stamp;
use crate::broker::dedupe::Original;
use crate::broker::response::replica_ack_response;
use crate::broker::{Broker, PERM_READ, PERM_WRITE};
use crate::dispatch::{Refusal, Reply};

pub(super) async fn handle<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    ctx: &RequestContext,
    req: &RemotingCommand,
) -> Reply {
    let _permit = admit(b)?;
    let h = SendMessageRequestHeader::from_request(req)?;
    if let Err(e) = validate_topic(&h.topic) {
        return Err(Refusal::new(
            response_code::MESSAGE_ILLEGAL,
            format!("[sluice] invalid topic {:?}: {e}", h.topic),
        ));
    }
    let reconsume_times = h.reconsume_times.unwrap_or(0);
    let (topic, queue_id, to_dlq) = destination(b, &h, reconsume_times).await;
    super::send_half::refuse_reserved(&topic)?;
    let queue_id = writable_queue(b, &topic, &h, queue_id).await?;
    // The properties are parsed here, once per send, and passed down.
    let raw = h.properties.as_deref().unwrap_or_default();
    let mut parsed = Properties::parse(raw.as_bytes()).ok();
    let (wait, store_wait) = waits(parsed.as_ref(), ctx);
    let (uniq_key, stamp) = dedupe_keys(parsed.as_ref());
    let props = with_cluster(raw, parsed.as_mut(), &b.config().cluster_name);
    let template = MessageInput {
        topic,
        queue_id,
        flag: h.flag,
        sys_flag: h.sys_flag,
        born_timestamp_ms: h.born_timestamp,
        born_host: ctx.peer_addr(),
        store_host: b.store_host(),
        reconsume_times,
        prepared_transaction_offset: 0,
        body: Bytes::new(),
        properties: Bytes::from(props),
    };
    if crate::broker::transaction::records::is_half_send(&template) {
        return super::send_half::send_half(b, req, template, &h.producer_group, wait).await;
    }
    // Apache decides by the header's batch flag, not the code: the C++
    // client sends a batch as SEND_MESSAGE(_V2) with `batch=true`, and
    // storing its encoding as one message would ack what was not stored.
    let batch = req.code == request_code::SEND_BATCH_MESSAGE || h.batch == Some(true);
    let mut answer = if batch {
        send_batch(b, template, &req.body, store_wait).await?
    } else {
        let msg = MessageInput {
            body: req.body.clone(),
            ..template
        };
        match send_dedupe::claim(b, &msg.topic, uniq_key.as_deref(), stamp, to_dlq).await? {
            Once::Duplicate(original) => send_dedupe::answer(b, &original, wait).await,
            Once::Forgotten => send_dedupe::forgotten(msg.queue_id),
            Once::Store(claim) => {
                let how = Storing::of(b, ctx, store_wait);
                send_one(b, msg, parsed.as_mut(), to_dlq, how, claim).await?
            }
        }
    };
    // Apache's 5.x broker names the message's UNIQ_KEY (a batch's own key)
    // as `transactionId` in every answer to a stored send. `batchUniqId` is
    // only for its batch-ConsumeQueue topics: a client that sees it reports
    // that one id instead of the batch's per-message ids.
    if let (true, Some(key)) = (answer.code == response_code::SUCCESS, uniq_key) {
        answer.ext_fields.insert("transactionId", key);
    }
    Ok(answer)
}

/// Whether the producer waits for the store (`WAIT`, true unless "false"),
/// and how the store waits: requests already read behind this one on its
/// connection join its sync (group commit across one connection's
/// pipelined sends).
fn waits(props: Option<&Properties>, ctx: &RequestContext) -> (bool, Wait) {
    let wait = props
        .and_then(|p| p.get(keys::WAIT).map(|w| w != "false"))
        .unwrap_or(true);
    let store_wait = if wait {
        Wait::Durable {
            company: ctx.queued_behind,
        }
    } else {
        Wait::No
    };
    (wait, store_wait)
}

/// What a send is deduplicated by: its `UNIQ_KEY` and its producer's stamp.
fn dedupe_keys(props: Option<&Properties>) -> (Option<String>, Option<Stamp>) {
    let key = props.and_then(Properties::uniq_key).map(str::to_owned);
    (key, props.and_then(Stamp::of))
}

/// Where a send is stored: its topic and queue, or — for a retry whose
/// attempts are exhausted — the group's dead-letter queue (created on
/// first use), flagged so it is never delayed.
async fn destination<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    h: &SendMessageRequestHeader,
    reconsume_times: i32,
) -> (String, i32, bool) {
    let Some(group) = h
        .topic
        .strip_prefix(sluice_core::message::topic::RETRY_GROUP_TOPIC_PREFIX)
    else {
        return (h.topic.clone(), h.queue_id, false);
    };
    // The client's limit wins; else the group's, else the broker's.
    let max_reconsume = h.max_reconsume_times.unwrap_or_else(|| {
        b.subscription_groups()
            .get(group)
            .map_or(b.config().max_reconsume_times, |g| g.retry_max_times)
    });
    if reconsume_times < max_reconsume {
        return (h.topic.clone(), h.queue_id, false);
    }
    let topic = dlq_topic(group);
    let (_, created) = b
        .topics()
        .ensure(&topic, 1, PERM_READ | PERM_WRITE, b.now_ms());
    if created {
        b.topics_updated().await;
    }
    (topic, 0, true)
}

/// The queue a send goes to: the topic resolved (or auto-created) and
/// writable, and the queue (chosen by born time when negative) within its
/// write queues; else the refusal.
async fn writable_queue<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    topic: &str,
    h: &SendMessageRequestHeader,
    mut queue_id: i32,
) -> Result<i32, Refusal> {
    let Some(tc) = resolve_topic(b, topic, h).await else {
        return Err(Refusal::new(
            response_code::TOPIC_NOT_EXIST,
            format!("[sluice] topic[{topic}] not exist, apply first please"),
        ));
    };
    if tc.perm & PERM_WRITE == 0 {
        return Err(Refusal::new(
            response_code::NO_PERMISSION,
            format!("[sluice] topic[{topic}] is not writable"),
        ));
    }
    let write_queues = tc.write_queue_nums.max(1);
    if queue_id < 0 {
        queue_id = i32::try_from(h.born_timestamp.rem_euclid(i64::from(write_queues))).unwrap_or(0);
    }
    if queue_id >= write_queues {
        return Err(Refusal::system_error(format!(
            "[sluice] queueId[{queue_id}] is illegal, topic[{topic}] has {write_queues} write queues"
        )));
    }
    Ok(queue_id)
}

/// The properties with `CLUSTER` set to this broker's cluster, as Apache's
/// broker stores every sent message: appended when absent (the common case,
/// no re-encode), replaced when the producer set another value, left as is
/// when they do not parse (the store rejects them with a clear error).
/// `parsed` gets the same value, so what is passed down matches the bytes.
fn with_cluster(raw: &str, parsed: Option<&mut Properties>, cluster: &str) -> Vec<u8> {
    let Some(parsed) = parsed else {
        return raw.as_bytes().to_vec();
    };
    let previous = parsed.get(keys::CLUSTER).map(str::to_owned);
    if previous.is_none() && parsed.insert(keys::CLUSTER, cluster).is_err() {
        return raw.as_bytes().to_vec();
    }
    match previous {
        Some(c) if c == cluster => raw.as_bytes().to_vec(),
        Some(_) => match parsed.insert(keys::CLUSTER, cluster) {
            Ok(_) => parsed.encode(),
            Err(_) => raw.as_bytes().to_vec(),
        },
        None => {
            let mut out = Vec::with_capacity(raw.len() + cluster.len() + 10);
            out.extend_from_slice(raw.as_bytes());
            if !raw.is_empty() && !raw.ends_with(char::from(PROPERTY_SEPARATOR)) {
                out.push(PROPERTY_SEPARATOR);
            }
            out.extend_from_slice(keys::CLUSTER.as_bytes());
            out.push(NAME_VALUE_SEPARATOR);
            out.extend_from_slice(cluster.as_bytes());
            out.push(PROPERTY_SEPARATOR);
            out
        }
    }
}

/// Flow control: a permit for one send in flight, or the busy answer
/// (`SYSTEM_BUSY`, which producers retry) when too many are in flight.
fn admit<D: Disk, C: Clock>(b: &Broker<D, C>) -> Result<SemaphorePermit<'_>, Refusal> {
    let Ok(permit) = b.send_permits().try_acquire() else {
        return Err(Refusal::new(
            response_code::SYSTEM_BUSY,
            "[TIMEOUT_CLEAN_QUEUE]broker busy: too many sends in flight, try another broker",
        ));
    };
    if sluice_core::buggify!() {
        // A legal rare answer: flow control refuses the send before it is
        // stored, and the producer must retry (or report a failure).
        return Err(Refusal::new(
            response_code::SYSTEM_BUSY,
            "[TIMEOUT_CLEAN_QUEUE]broker busy (buggify)",
        ));
    }
    Ok(permit)
}

/// How a send is stored: what it waits for, and whether its write may be
/// deferred ([`sluice_core::store::MessageStore::put_deferred`]).
#[derive(Clone, Copy)]
struct Storing {
    wait: Wait,
    defer: bool,
}

impl Storing {
    /// Deferred when more requests were already read behind this one on
    /// its connection: its record may wait in memory and reach the disk
    /// with theirs (one write); the connection has the store write its
    /// deferred records before any answer leaves (the broker routes'
    /// barrier). Never on a master with replicas: their wait reads the
    /// written log.
    fn of<D: Disk, C: Clock>(b: &Broker<D, C>, ctx: &RequestContext, wait: Wait) -> Self {
        let defer = ctx.queued_behind && b.replication().is_none();
        Self { wait, defer }
    }
}

/// Stores one message, first diverting it to the timer or schedule topic
/// when it asks for a delivery time or a delay and has `props` (its parsed
/// properties) — unless it is a dead letter (`to_dlq`), never delayed —
/// and recording it in the dedupe window under `claim` once stored.
async fn send_one<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    mut msg: MessageInput,
    props: Option<&mut Properties>,
    to_dlq: bool,
    how: Storing,
    claim: Option<Claimed<'_>>,
) -> Reply {
    let queue_id = msg.queue_id;
    let traffic = b.stats().topic_in(&msg.topic);
    let dlq_group = to_dlq.then(|| {
        let topic = msg.topic.as_str();
        let group = topic.strip_prefix(sluice_core::message::DLQ_GROUP_TOPIC_PREFIX);
        group.unwrap_or(topic).to_owned()
    });
    if let Some(props) = props.filter(|_| !to_dlq) {
        // Timer properties win over a delay level (the level is dropped).
        b.divert_timer(&mut msg, props).await.map_err(|e| {
            Refusal::new(
                response_code::MESSAGE_ILLEGAL,
                format!("[sluice] cannot schedule timer message: {}", e.0),
            )
        })?;
        b.divert_delayed(&mut msg, props).await.map_err(|e| {
            Refusal::new(
                response_code::MESSAGE_ILLEGAL,
                format!("[sluice] cannot delay message: {}", e.0),
            )
        })?;
    }
    let a = if how.defer {
        b.store().put_deferred(msg, how.wait).await?
    } else {
        b.store().put(msg, how.wait).await?
    };
    b.stats().message_in(&traffic, u64::from(a.size));
    if let Some(group) = dlq_group {
        b.stats().sent_to_dlq(&group, u64::from(a.size));
    }
    let host = b.store_host();
    let id = offset_msg_id(host, a.phys_offset.to_wire());
    let q = a.queue_offset.to_wire();
    if let Some(claim) = claim {
        let end = a.end().get();
        let original = Original {
            store_host: host,
            phys_offset: a.phys_offset.to_wire(),
            queue_id,
            queue_offset: q,
            end,
        };
        claim.stored(original, a.store_timestamp_ms);
    }
    let stored =
        RemotingCommand::success().with_header(&SendMessageResponseHeader::new(id, queue_id, q));
    Ok(replicated(b, a.end(), how.wait.durable(), stored).await)
}

async fn send_batch<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    mut template: MessageInput,
    body: &Bytes,
    wait: Wait,
) -> Reply {
    let items = match decode_batch(body) {
        Ok(items) if !items.is_empty() => items,
        Ok(_) => {
            return Err(Refusal::new(
                response_code::MESSAGE_ILLEGAL,
                "[sluice] empty batch",
            ))
        }
        Err(e) => {
            return Err(Refusal::new(
                response_code::MESSAGE_ILLEGAL,
                format!("[sluice] bad batch body: {e}"),
            ))
        }
    };
    let queue_id = template.queue_id;
    // Every item's merged properties in one buffer, each a view of it: one
    // allocation per batch, not one (and a shared header) per message.
    // The template's own body and properties are not cloned per item.
    template.body = Bytes::new();
    let header = std::mem::take(&mut template.properties);
    let mut merged = Vec::with_capacity(
        items
            .iter()
            .map(|it| it.properties.len() + 1 + header.len())
            .sum(),
    );
    let ends: Vec<usize> = items
        .iter()
        .map(|it| {
            merge_batch_properties_into(&it.properties, &header, &mut merged);
            merged.len()
        })
        .collect();
    let merged = Bytes::from(merged);
    let mut start = 0;
    let msgs: Vec<MessageInput> = items
        .into_iter()
        .zip(ends)
        .map(|(it, end)| {
            let properties = merged.slice(start..end);
            start = end;
            MessageInput {
                flag: it.flag,
                body: it.body,
                properties,
                ..template.clone()
            }
        })
        .collect();
    send_dedupe::store_batch(b, &template.topic, queue_id, msgs, wait).await
}

/// The answer to a stored send: as is, or — for a SYNC-replicated master
/// and a producer that waits — once the in-sync set holds `[0, end)`.
pub(super) async fn replicated<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    end: CommitLogOffset,
    wait: bool,
    stored: RemotingCommand,
) -> RemotingCommand {
    let Some(ha) = b.replication() else {
        return stored;
    };
    if !wait {
        return stored;
    }
    let written = b.store().commit_log().written();
    match ha.await_replicated(end, written).await {
        Ok(()) => stored,
        Err(e) => replica_ack_response(&e, stored),
    }
}

/// The topic's config, auto-creating it from the request's default topic
/// when allowed (and retry topics always).
async fn resolve_topic<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    topic: &str,
    h: &SendMessageRequestHeader,
) -> Option<crate::broker::topics::WriteView> {
    if let Some(view) = b.topics().write_view(topic) {
        return Some(view);
    }
    let created = if is_retry_topic(topic) {
        Some(
            b.topics()
                .ensure(topic, 1, PERM_READ | PERM_WRITE, b.now_ms())
                .0,
        )
    } else {
        b.topics().auto_create(
            topic,
            &h.default_topic,
            h.default_topic_queue_nums,
            b.now_ms(),
        )
    };
    if created.is_some() {
        tracing::info!(topic, "topic auto-created");
        b.topics_updated().await;
    }
    created.as_ref().map(crate::broker::topics::WriteView::of)
}
