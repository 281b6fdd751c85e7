//! v2 messages to and from the stored (4.x) form, with Apache's property
//! mapping: tag ↔ `TAGS`, keys ↔ `KEYS` (space-separated), message id ↔
//! `UNIQ_KEY`, message group ↔ `__SHARDINGKEY`, delivery time ↔
//! `TIMER_DELIVER_MS`, transactional ↔ `TRAN_MSG` + a PREPARED sys flag,
//! the producer group of a 5.x producer being its topic (`PGROUP`).

use sluice_core::message::{keys, offset_msg_id, strip_seal, sys_flag, Properties, StoredRecord};
use sluice_net::header::SendMessageRequestHeaderV2;
use sluice_net::remoting::request_code as rc;
use sluice_net::RemotingCommand;

use super::proto::{self, Code, DigestType, Encoding, FilterType, MessageType};
use super::status;
use crate::broker::filter::{EXPRESSION_TYPE_SQL92, EXPRESSION_TYPE_TAG};
use crate::broker::pop::Handle;

/// Longest message group (bytes), as Apache's proxy allows.
const MESSAGE_GROUP_BYTES_MAX: usize = 64;
/// A `delivery_timestamp.seconds` beyond this is read as milliseconds:
/// the official Python client writes milliseconds into the seconds field.
const SECONDS_THAT_ARE_MILLIS: i64 = 100_000_000_000;

/// Properties the broker and the protocol own; anything else a message
/// carries is a user property.
const SYSTEM_KEYS: &[&str] = &[
    keys::KEYS,
    keys::TAGS,
    keys::WAIT,
    keys::DELAY,
    keys::RETRY_TOPIC,
    keys::REAL_TOPIC,
    keys::REAL_QID,
    keys::TRAN_MSG,
    keys::PGROUP,
    keys::MIN_OFFSET,
    keys::MAX_OFFSET,
    keys::UNIQ_KEY,
    keys::MAX_RECONSUME_TIMES,
    keys::RECONSUME_TIME,
    keys::ORIGIN_MESSAGE_ID,
    keys::CONSUME_START_TIME,
    keys::TRANSACTION_ID,
    keys::TRANSACTION_CHECK_TIMES,
    keys::CHECK_IMMUNITY_TIME_IN_SECONDS,
    keys::CLUSTER,
    keys::MSG_TYPE,
    keys::SHARDING_KEY,
    keys::TIMER_DELIVER_MS,
    keys::TIMER_DELAY_SEC,
    keys::TIMER_DELAY_MS,
    keys::TIMER_ENQUEUE_MS,
    keys::TIMER_DEQUEUE_MS,
    keys::TIMER_ROLL_TIMES,
    keys::TIMER_OUT_MS,
    keys::TIMER_DEL_UNIQKEY,
    keys::CRC32,
    keys::DLQ_ORIGIN_TOPIC,
    keys::DLQ_ORIGIN_MESSAGE_ID,
    keys::SLUICE_PRODUCER_ID,
    keys::SLUICE_SEQUENCE,
    keys::TRACE_ON,
    keys::INNER_NUM,
    keys::INNER_BASE,
    "__BORNHOST",
    crate::broker::transaction::records::ORIGIN_QUEUE_OFFSET,
    "BORN_TIMESTAMP",
    "TRACE_CONTEXT",
];

fn is_system_key(key: &str) -> bool {
    SYSTEM_KEYS.contains(&key)
}

/// The 4.x expression type and text of a v2 filter (`TAG *` when absent).
pub(super) fn filter_of(expression: Option<&proto::FilterExpression>) -> (&'static str, String) {
    match expression {
        Some(e) if e.r#type == FilterType::Sql as i32 => {
            (EXPRESSION_TYPE_SQL92, e.expression.clone())
        }
        Some(e) if !e.expression.trim().is_empty() => (EXPRESSION_TYPE_TAG, e.expression.clone()),
        _ => (EXPRESSION_TYPE_TAG, "*".to_owned()),
    }
}

/// The properties a v2 message is stored with; a refusal is the status
/// the client gets.
fn properties_of(msg: &proto::Message, topic: &str) -> Result<(Properties, i32), proto::Status> {
    let sp = msg
        .system_properties
        .as_ref()
        .ok_or_else(|| status(Code::BadRequest, "message has no system properties"))?;
    if sp.message_id.trim().is_empty() {
        return Err(status(Code::IllegalMessageId, "message id cannot be empty"));
    }
    let mut props = Properties::new();
    let bad = |e: sluice_core::message::EncodeError| {
        status(Code::IllegalMessagePropertyKey, e.to_string())
    };
    for (k, v) in &msg.user_properties {
        if is_system_key(k) {
            return Err(status(
                Code::IllegalMessagePropertyKey,
                format!("property is used by system: {k}"),
            ));
        }
        props.insert(k, v).map_err(bad)?;
    }
    if let Some(tag) = sp.tag.as_deref().filter(|t| !t.is_empty()) {
        props.insert(keys::TAGS, tag).map_err(bad)?;
    }
    if !sp.keys.is_empty() {
        props.insert(keys::KEYS, &sp.keys.join(" ")).map_err(bad)?;
    }
    props.insert(keys::UNIQ_KEY, &sp.message_id).map_err(bad)?;
    if let Some(group) = sp.message_group.as_deref().filter(|g| !g.is_empty()) {
        if group.len() >= MESSAGE_GROUP_BYTES_MAX {
            return Err(status(
                Code::IllegalMessageGroup,
                format!(
                    "message group is longer than {} bytes",
                    MESSAGE_GROUP_BYTES_MAX - 1
                ),
            ));
        }
        props.insert(keys::SHARDING_KEY, group).map_err(bad)?;
    }
    if let Some(at) = sp.delivery_timestamp {
        let ms = if at.seconds > SECONDS_THAT_ARE_MILLIS {
            at.seconds
        } else {
            at.as_millis()
        };
        props
            .insert(keys::TIMER_DELIVER_MS, &ms.to_string())
            .map_err(bad)?;
    }
    let mut flag = 0;
    if sp.message_type == MessageType::Transaction as i32 {
        props.insert(keys::TRAN_MSG, "true").map_err(bad)?;
        flag |= sys_flag::TRANSACTION_PREPARED;
    }
    if sp.body_encoding == Encoding::Gzip as i32 {
        flag |= sys_flag::COMPRESSED;
    }
    props.insert(keys::PGROUP, topic).map_err(bad)?;
    Ok((props, flag))
}

/// The `SEND_MESSAGE_V2` a v2 message is, for queue `queue_id`.
pub(super) fn send_command(
    msg: &proto::Message,
    queue_id: i32,
    now_ms: i64,
) -> Result<RemotingCommand, proto::Status> {
    let topic = msg
        .topic
        .as_ref()
        .map(|t| t.name.clone())
        .filter(|t| !t.is_empty())
        .ok_or_else(|| status(Code::IllegalTopic, "topic name cannot be empty"))?;
    if msg.body.is_empty() {
        return Err(status(
            Code::MessageBodyEmpty,
            "message body cannot be empty",
        ));
    }
    let (props, flag) = properties_of(msg, &topic)?;
    let born = msg
        .system_properties
        .as_ref()
        .and_then(|sp| sp.born_timestamp)
        .map_or(now_ms, |t| t.as_millis());
    let properties = String::from_utf8(props.encode())
        .map_err(|_| status(Code::IllegalMessagePropertyKey, "properties are not UTF-8"))?;
    let header = SendMessageRequestHeaderV2 {
        a: topic.clone(),
        b: topic,
        c: crate::broker::DEFAULT_TOPIC.to_owned(),
        d: 4,
        e: queue_id,
        f: flag,
        g: born,
        h: 0,
        i: Some(properties),
        j: Some(0),
        k: Some(false),
        l: None,
        m: Some(false),
        n: None,
    };
    Ok(
        RemotingCommand::request_with_header(rc::SEND_MESSAGE_V2, &header)
            .with_body(msg.body.clone()),
    )
}

/// One delivery of a stored message to a 5.x consumer.
pub(super) struct Delivery {
    pub handle: Handle,
    pub attempt: u32,
}

fn message_type_of(props: &Properties) -> MessageType {
    if props.get(keys::TRAN_MSG) == Some("true") {
        MessageType::Transaction
    } else if [
        keys::DELAY,
        keys::TIMER_DELIVER_MS,
        keys::TIMER_DELAY_SEC,
        keys::TIMER_DELAY_MS,
    ]
    .iter()
    .any(|k| props.get(k).is_some())
    {
        MessageType::Delay
    } else if props.get(keys::SHARDING_KEY).is_some() {
        MessageType::Fifo
    } else {
        MessageType::Normal
    }
}

/// A stored record as a v2 message (what a receive or a check-back
/// carries); `delivery` adds the receipt handle and attempt.
pub(super) fn to_message(rec: &StoredRecord, delivery: Option<&Delivery>) -> proto::Message {
    let props = Properties::parse(strip_seal(&rec.properties)).unwrap_or_default();
    let user_properties = props
        .iter()
        .filter(|(k, _)| !is_system_key(k))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    let message_id = props.uniq_key().map_or_else(
        || offset_msg_id(rec.store_host, rec.phys_offset),
        str::to_owned,
    );
    let dead_letter_queue = match (
        props.get(keys::DLQ_ORIGIN_TOPIC),
        props.get(keys::DLQ_ORIGIN_MESSAGE_ID),
    ) {
        (Some(topic), Some(id)) => Some(proto::DeadLetterQueue {
            topic: topic.to_owned(),
            message_id: id.to_owned(),
        }),
        _ => None,
    };
    let (body, encoding) = body_of(rec);
    let sp = proto::SystemProperties {
        tag: props.tags().map(str::to_owned),
        keys: props.keys().map(str::to_owned).collect(),
        message_id,
        body_digest: Some(proto::Digest {
            r#type: DigestType::Crc32 as i32,
            checksum: format!("{:08X}", crc32fast::hash(&body)),
        }),
        body_encoding: encoding as i32,
        message_type: message_type_of(&props) as i32,
        born_timestamp: Some(proto::Timestamp::from_millis(rec.born_timestamp_ms)),
        born_host: rec.born_host.ip().to_string(),
        store_timestamp: Some(proto::Timestamp::from_millis(rec.store_timestamp_ms)),
        store_host: rec.store_host.to_string(),
        delivery_timestamp: props
            .get(keys::TIMER_DELIVER_MS)
            .and_then(|v| v.parse().ok())
            .map(proto::Timestamp::from_millis),
        receipt_handle: delivery.map(|d| d.handle.encode()),
        queue_id: rec.queue_id,
        queue_offset: Some(rec.queue_offset),
        delivery_attempt: Some(delivery.map_or(rec.reconsume_times.saturating_add(1), |d| {
            i32::try_from(d.attempt).unwrap_or(i32::MAX)
        })),
        message_group: props.get(keys::SHARDING_KEY).map(str::to_owned),
        dead_letter_queue,
        ..Default::default()
    };
    proto::Message {
        topic: Some(proto::Resource {
            resource_namespace: String::new(),
            name: rec.topic.clone(),
        }),
        user_properties,
        system_properties: Some(sp),
        body,
    }
}

/// The body a 5.x client gets: a 4.x producer's zlib-compressed body
/// inflated (5.x clients decode only GZIP), anything else as stored.
fn body_of(rec: &StoredRecord) -> (bytes::Bytes, Encoding) {
    if rec.sys_flag & sys_flag::COMPRESSED == 0 {
        return (rec.body.clone(), Encoding::Identity);
    }
    let mut inflated = Vec::new();
    let mut decoder = flate2::read::ZlibDecoder::new(&rec.body[..]);
    match std::io::Read::read_to_end(&mut decoder, &mut inflated) {
        Ok(_) => (bytes::Bytes::from(inflated), Encoding::Identity),
        // Not zlib: a 5.x producer's GZIP body, handed back as it came.
        Err(_) => (rec.body.clone(), Encoding::Gzip),
    }
}

#[cfg(test)]
mod tests;
