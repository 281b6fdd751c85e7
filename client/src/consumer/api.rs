//! The broker calls every consumer makes: pull, consumer offsets, queue
//! bounds, the group's member list, send-back and queue locks.

use std::time::Duration;

use bytes::Bytes;
use sluice_core::Clock;
use sluice_net::body::{self, ConsumerListBody, LockBatchRequestBody, LockBatchResponseBody};
use sluice_net::header::{
    ConsumerSendMsgBackRequestHeader, GetConsumerListByGroupRequestHeader, OffsetResponseHeader,
    PullMessageRequestHeader, PullMessageResponseHeader, QueryConsumerOffsetRequestHeader,
    QueueRequestHeader, SearchOffsetRequestHeader, UpdateConsumerOffsetRequestHeader,
    PULL_FLAG_COMMIT_OFFSET, PULL_FLAG_SUBSCRIPTION, PULL_FLAG_SUSPEND,
};
use sluice_net::remoting::{request_code, response_code};
use sluice_net::{RemotingCommand, Transport};

use super::subscription::Subscription;
use crate::error::{Error, Result};
use crate::instance::{expect_success, response_header, ClientInstance};
use crate::message::{decode_messages, MessageExt, MessageQueue};

/// Most messages one pull asks for by default (RocketMQ: 32).
pub const PULL_BATCH_DEFAULT: i32 = 32;

/// What a pull found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PullStatus {
    /// Messages were returned.
    Found,
    /// Nothing at or after the offset (yet).
    NoNewMessage,
    /// Messages exist but none matched the filter; continue at the next offset.
    NoMatchedMessage,
    /// The offset is outside the queue; continue at the next offset.
    OffsetIllegal,
}

/// One pull's answer.
#[derive(Clone, Debug)]
pub struct PullResult {
    /// What happened.
    pub status: PullStatus,
    /// Where to pull next.
    pub next_begin_offset: i64,
    /// The queue's smallest offset.
    pub min_offset: i64,
    /// The queue's next offset to be written.
    pub max_offset: i64,
    /// Broker the next pull should go to (0 = master).
    pub suggest_broker_id: i64,
    /// The messages (after the client-side tag re-check).
    pub messages: Vec<MessageExt>,
}

/// Pull options.
#[derive(Clone, Debug)]
pub struct PullOptions {
    /// Most messages.
    pub max: i32,
    /// How long the broker may hold the pull waiting for a message.
    pub hold: Option<Duration>,
    /// Commit this offset with the pull.
    pub commit_offset: Option<i64>,
    /// Broker ID to read from (0 = master).
    pub broker_id: i64,
}

impl Default for PullOptions {
    fn default() -> Self {
        Self {
            max: PULL_BATCH_DEFAULT,
            hold: None,
            commit_offset: None,
            broker_id: 0,
        }
    }
}

async fn broker_of<T: Transport, C: Clock>(
    client: &ClientInstance<T, C>,
    mq: &MessageQueue,
    id: i64,
) -> Result<String> {
    if let Some(addr) = client.broker_addr(&mq.broker_name, id) {
        return Ok(addr);
    }
    client.refresh_route(&mq.topic).await?;
    client
        .broker_addr(&mq.broker_name, id)
        .ok_or_else(|| Error::InvalidArgument(format!("unknown broker `{}`", mq.broker_name)))
}

/// Pulls from `mq` at `offset` for `group`.
pub async fn pull<T: Transport, C: Clock>(
    client: &ClientInstance<T, C>,
    group: &str,
    mq: &MessageQueue,
    sub: &Subscription,
    offset: i64,
    options: &PullOptions,
) -> Result<PullResult> {
    let addr = broker_of(client, mq, options.broker_id).await?;
    let mut flags = PULL_FLAG_SUBSCRIPTION;
    if options.hold.is_some() {
        flags |= PULL_FLAG_SUSPEND;
    }
    if options.commit_offset.is_some() {
        flags |= PULL_FLAG_COMMIT_OFFSET;
    }
    let hold = options.hold.unwrap_or_default();
    let header = PullMessageRequestHeader {
        consumer_group: group.to_owned(),
        topic: mq.topic.clone(),
        queue_id: mq.queue_id,
        queue_offset: offset,
        max_msg_nums: options.max,
        sys_flag: flags,
        commit_offset: options.commit_offset.unwrap_or(0),
        suspend_timeout_millis: i64::try_from(hold.as_millis()).unwrap_or(i64::MAX),
        subscription: Some(sub.expression.clone()),
        sub_version: 0,
        expression_type: Some(sub.kind.as_str().to_owned()),
        max_msg_bytes: None,
    };
    let request = RemotingCommand::request_with_header(request_code::PULL_MESSAGE, &header);
    let timeout = client.config().request_timeout + hold;
    let response = client.invoke_with_timeout(&addr, request, timeout).await?;
    let status = match response.code {
        response_code::SUCCESS => PullStatus::Found,
        response_code::PULL_NOT_FOUND => PullStatus::NoNewMessage,
        response_code::PULL_RETRY_IMMEDIATELY => PullStatus::NoMatchedMessage,
        response_code::PULL_OFFSET_MOVED => PullStatus::OffsetIllegal,
        _ => {
            return Err(expect_success(&addr, response)
                .err()
                .unwrap_or(Error::NotRunning))
        }
    };
    let h: PullMessageResponseHeader = response_header(&response, "pull response")?;
    let messages = if status == PullStatus::Found {
        let mut all = decode_messages(&response.body, &mq.broker_name)?;
        all.retain(|m| sub.matches(m));
        all
    } else {
        Vec::new()
    };
    Ok(PullResult {
        status,
        next_begin_offset: h.next_begin_offset,
        min_offset: h.min_offset,
        max_offset: h.max_offset,
        suggest_broker_id: h.suggest_which_broker_id,
        messages,
    })
}

/// The group's committed offset of `mq`; `None` when it has none.
pub async fn committed_offset<T: Transport, C: Clock>(
    client: &ClientInstance<T, C>,
    group: &str,
    mq: &MessageQueue,
) -> Result<Option<i64>> {
    let addr = client.master_addr_for(&mq.broker_name, &mq.topic).await?;
    let header = QueryConsumerOffsetRequestHeader {
        consumer_group: group.to_owned(),
        topic: mq.topic.clone(),
        queue_id: mq.queue_id,
        set_zero_if_not_found: Some(false),
    };
    let request =
        RemotingCommand::request_with_header(request_code::QUERY_CONSUMER_OFFSET, &header);
    let response = client.invoke(&addr, request).await?;
    if response.code == response_code::QUERY_NOT_FOUND {
        return Ok(None);
    }
    let response = expect_success(&addr, response)?;
    let h: OffsetResponseHeader = response_header(&response, "offset response")?;
    Ok(Some(h.offset))
}

/// Commits the group's offset of `mq` (the next offset to consume).
pub async fn commit_offset<T: Transport, C: Clock>(
    client: &ClientInstance<T, C>,
    group: &str,
    mq: &MessageQueue,
    offset: i64,
) -> Result<()> {
    let addr = client.master_addr_for(&mq.broker_name, &mq.topic).await?;
    let header = UpdateConsumerOffsetRequestHeader {
        consumer_group: group.to_owned(),
        topic: mq.topic.clone(),
        queue_id: mq.queue_id,
        commit_offset: offset,
    };
    let request =
        RemotingCommand::request_with_header(request_code::UPDATE_CONSUMER_OFFSET, &header);
    client.invoke_ok(&addr, request).await?;
    Ok(())
}

async fn queue_offset<T: Transport, C: Clock>(
    client: &ClientInstance<T, C>,
    mq: &MessageQueue,
    code: i32,
) -> Result<i64> {
    let addr = client.master_addr_for(&mq.broker_name, &mq.topic).await?;
    let header = QueueRequestHeader {
        topic: mq.topic.clone(),
        queue_id: mq.queue_id,
    };
    let response = client
        .invoke_ok(&addr, RemotingCommand::request_with_header(code, &header))
        .await?;
    let h: OffsetResponseHeader = response_header(&response, "offset response")?;
    Ok(h.offset)
}

/// The next offset to be written in `mq`.
pub async fn max_offset<T: Transport, C: Clock>(
    client: &ClientInstance<T, C>,
    mq: &MessageQueue,
) -> Result<i64> {
    queue_offset(client, mq, request_code::GET_MAX_OFFSET).await
}

/// The smallest offset still stored in `mq`.
pub async fn min_offset<T: Transport, C: Clock>(
    client: &ClientInstance<T, C>,
    mq: &MessageQueue,
) -> Result<i64> {
    queue_offset(client, mq, request_code::GET_MIN_OFFSET).await
}

/// The first offset of `mq` stored at or after `timestamp_ms`.
pub async fn offset_for_time<T: Transport, C: Clock>(
    client: &ClientInstance<T, C>,
    mq: &MessageQueue,
    timestamp_ms: i64,
) -> Result<i64> {
    let addr = client.master_addr_for(&mq.broker_name, &mq.topic).await?;
    let header = SearchOffsetRequestHeader {
        topic: mq.topic.clone(),
        queue_id: mq.queue_id,
        timestamp: timestamp_ms,
    };
    let request =
        RemotingCommand::request_with_header(request_code::SEARCH_OFFSET_BY_TIMESTAMP, &header);
    let response = client.invoke_ok(&addr, request).await?;
    let h: OffsetResponseHeader = response_header(&response, "offset response")?;
    Ok(h.offset)
}

/// The client IDs of `group` as the broker at `addr` knows them, sorted.
pub async fn consumer_ids<T: Transport, C: Clock>(
    client: &ClientInstance<T, C>,
    addr: &str,
    group: &str,
) -> Result<Vec<String>> {
    let header = GetConsumerListByGroupRequestHeader {
        consumer_group: group.to_owned(),
    };
    let request =
        RemotingCommand::request_with_header(request_code::GET_CONSUMER_LIST_BY_GROUP, &header);
    let response = client.invoke_ok(addr, request).await?;
    let list: ConsumerListBody = body::decode(&response.body, "ConsumerListBody")
        .map_err(|e| Error::decode("consumer list", e))?;
    let mut ids = list.consumer_id_list;
    ids.sort();
    ids.dedup();
    Ok(ids)
}

/// Hands a failed message back to its broker for redelivery through the
/// group's retry topic (or the DLQ after `max_reconsume_times`).
pub async fn send_back<T: Transport, C: Clock>(
    client: &ClientInstance<T, C>,
    group: &str,
    msg: &MessageExt,
    delay_level: i32,
    max_reconsume_times: i32,
) -> Result<()> {
    let addr = client.master_addr_for(&msg.broker_name, &msg.topic).await?;
    let header = ConsumerSendMsgBackRequestHeader {
        offset: msg.commit_log_offset,
        group: group.to_owned(),
        delay_level,
        origin_msg_id: Some(msg.msg_id().to_owned()),
        origin_topic: Some(msg.topic.clone()),
        unit_mode: Some(false),
        max_reconsume_times: Some(max_reconsume_times),
    };
    let request =
        RemotingCommand::request_with_header(request_code::CONSUMER_SEND_MSG_BACK, &header);
    client.invoke_ok(&addr, request).await?;
    Ok(())
}

/// Locks (or with `unlock`, releases) `queues` of one broker for `group`;
/// returns the queues now held.
pub async fn lock_queues<T: Transport, C: Clock>(
    client: &ClientInstance<T, C>,
    group: &str,
    broker_name: &str,
    topic: &str,
    queues: Vec<MessageQueue>,
    unlock: bool,
) -> Result<Vec<MessageQueue>> {
    let addr = client.master_addr_for(broker_name, topic).await?;
    let body = LockBatchRequestBody {
        consumer_group: group.to_owned(),
        client_id: client.client_id().to_owned(),
        only_this_broker: false,
        mq_set: queues,
    };
    let body = Bytes::from(
        body::encode(&body, "LockBatchRequestBody").map_err(|e| Error::decode("lock", e))?,
    );
    let code = if unlock {
        request_code::UNLOCK_BATCH_MQ
    } else {
        request_code::LOCK_BATCH_MQ
    };
    let response = client
        .invoke_ok(&addr, RemotingCommand::request(code).with_body(body))
        .await?;
    if unlock {
        return Ok(Vec::new());
    }
    let locked: LockBatchResponseBody = body::decode(&response.body, "LockBatchResponseBody")
        .map_err(|e| Error::decode("lock response", e))?;
    Ok(locked.lock_ok_mq_set)
}
