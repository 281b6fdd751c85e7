//! `PULL_MESSAGE`: check the group may consume, read a queue from an offset
//! through the subscription's filter (tags, or SQL92 over properties) and
//! answer the stored records byte-for-byte; records the filter skips still
//! advance `nextBeginOffset`. With the suspend flag, a pull that finds
//! nothing is held until a message for that queue is dispatched (an event)
//! or the hold times out, then answered once more.

use std::time::Duration;

use sluice_core::disk::Disk;
use sluice_core::store::{GetResult, GetStatus};
use sluice_core::{Clock, QueueOffset};
use sluice_net::header::{
    PullMessageRequestHeader, PullMessageResponseHeader, PULL_FLAG_COMMIT_OFFSET,
    PULL_FLAG_SUBSCRIPTION, PULL_FLAG_SUSPEND,
};
use sluice_net::remoting::response_code;
use sluice_net::{RemotingCommand, RequestContext};

use crate::broker::filter::{
    is_sql92_type, is_tag_type, tag_filter, PullFilter, EXPRESSION_TYPE_SQL92,
};
use crate::broker::{Broker, PERM_READ};
use crate::dispatch::{Refusal, Reply};

/// Most messages one pull returns, whatever the client asks.
const PULL_MESSAGES_MAX: usize = 1_024;
/// Most bytes one pull returns (at least one message is always returned).
const PULL_BYTES_MAX: usize = 4 << 20;

pub(super) async fn handle<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    _: &RequestContext,
    req: &RemotingCommand,
) -> Reply {
    let h: PullMessageRequestHeader = req.header()?;
    let (topic_sys_flag, group_sys_flag) = readable(b, &h)?;
    let filter = filter_for(b, &h)?;
    if h.sys_flag & PULL_FLAG_COMMIT_OFFSET != 0 && h.commit_offset >= 0 {
        b.offsets().commit(
            &h.topic,
            &h.consumer_group,
            h.queue_id,
            h.commit_offset,
            b.now_ms(),
        );
    }
    let Ok(offset) = QueueOffset::from_wire("queueOffset", h.queue_offset) else {
        // As Apache: an offset below the queue's minimum is "too small",
        // answered PULL_OFFSET_MOVED with the minimum as the next offset.
        return Ok(below_minimum(b, &h, topic_sys_flag, group_sys_flag));
    };
    let max = usize::try_from(h.max_msg_nums)
        .unwrap_or(1)
        .clamp(1, PULL_MESSAGES_MAX);
    let suspend = h.sys_flag & PULL_FLAG_SUSPEND != 0 && h.suspend_timeout_millis > 0;
    let hold = Duration::from_millis(
        u64::try_from(h.suspend_timeout_millis)
            .unwrap_or(0)
            .min(b.config().long_poll_max_ms),
    );
    let deadline = tokio::time::Instant::now() + hold;
    loop {
        // Register for wake-ups before looking, so no arrival is missed.
        let signal = b.arrivals().signal(&h.topic, h.queue_id);
        let arrived = signal.notified();
        tokio::pin!(arrived);
        arrived.as_mut().enable();
        let got = b
            .store()
            .get(&h.topic, h.queue_id, offset, max, PULL_BYTES_MAX, &filter)?;
        let code = status_code(got.status, offset);
        if code == response_code::PULL_NOT_FOUND
            && suspend
            && tokio::time::Instant::now() < deadline
            // A legal rare answer: the hold ends early with nothing found.
            && !sluice_core::buggify!()
        {
            let _held = b.stats().pull_suspended();
            tokio::select! {
                () = &mut arrived => continue,
                () = tokio::time::sleep_until(deadline) => continue,
            }
        }
        let bytes: usize = got.messages.iter().map(bytes::Bytes::len).sum();
        b.stats().messages_out(
            &h.topic,
            &h.consumer_group,
            h.queue_id,
            got.next_begin_offset.to_wire(),
            (got.messages.len() as u64, bytes as u64),
        );
        return Ok(respond(code, &got, topic_sys_flag, group_sys_flag));
    }
}

/// The topic's and the group's sys flags when the group may read the
/// queue the pull names; else the refusal.
fn readable<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    h: &PullMessageRequestHeader,
) -> Result<(i32, i32), Refusal> {
    let Some(group) = b.subscription_group(&h.consumer_group) else {
        return Err(Refusal::new(
            response_code::SUBSCRIPTION_GROUP_NOT_EXIST,
            format!(
                "[sluice] subscription group [{}] does not exist (and is not auto-created here)",
                h.consumer_group
            ),
        ));
    };
    if !group.consume_enable {
        return Err(Refusal::new(
            response_code::NO_PERMISSION,
            format!(
                "[sluice] subscription group [{}] may not consume (consumeEnable=false)",
                h.consumer_group
            ),
        ));
    }
    if b.clients().consume_modes(&h.consumer_group).1 {
        return Err(Refusal::new(
            response_code::NO_PERMISSION,
            format!(
                "[sluice] group [{}] consumes by POP here (5.x clients are connected); \
                 a group consumes by POP or by offsets, not both: use another group",
                h.consumer_group
            ),
        ));
    }
    let Some(tc) = b
        .topics()
        .get(&h.topic)
        .or_else(|| replicated_topic(b, &h.topic))
    else {
        return Err(Refusal::new(
            response_code::TOPIC_NOT_EXIST,
            format!("[sluice] topic[{}] not exist", h.topic),
        ));
    };
    if tc.perm & PERM_READ == 0 {
        return Err(Refusal::new(
            response_code::NO_PERMISSION,
            format!("[sluice] topic[{}] is not readable", h.topic),
        ));
    }
    if h.queue_id < 0 || h.queue_id >= tc.read_queue_nums {
        return Err(Refusal::system_error(format!(
            "[sluice] queueId[{}] is illegal, topic[{}] has {} read queues",
            h.queue_id, h.topic, tc.read_queue_nums
        )));
    }
    Ok((tc.topic_sys_flag, group.group_sys_flag))
}

/// The answer to a pull from a negative offset: moved to the minimum.
fn below_minimum<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    h: &PullMessageRequestHeader,
    topic_sys_flag: i32,
    group_sys_flag: i32,
) -> RemotingCommand {
    let min = b.store().min_offset(&h.topic, h.queue_id);
    let got = GetResult {
        status: GetStatus::OffsetTooSmall,
        messages: Vec::new(),
        next_begin_offset: min,
        min_offset: min,
        max_offset: b.store().max_offset(&h.topic, h.queue_id),
    };
    respond(
        response_code::PULL_OFFSET_MOVED,
        &got,
        topic_sys_flag,
        group_sys_flag,
    )
}

/// RocketMQ's mapping of store results to pull response codes.
fn status_code(status: GetStatus, offset: QueueOffset) -> i32 {
    match status {
        GetStatus::Found => response_code::SUCCESS,
        GetStatus::NoMatchedMessage | GetStatus::MessageWasRemoving => {
            response_code::PULL_RETRY_IMMEDIATELY
        }
        GetStatus::NoMessageInQueue | GetStatus::NoMatchedLogicQueue => {
            if offset.get() == 0 {
                response_code::PULL_NOT_FOUND
            } else {
                response_code::PULL_OFFSET_MOVED
            }
        }
        GetStatus::OffsetFoundNull | GetStatus::OffsetOverflowOne => response_code::PULL_NOT_FOUND,
        GetStatus::OffsetOverflowBadly | GetStatus::OffsetTooSmall => {
            response_code::PULL_OFFSET_MOVED
        }
    }
}

/// The answer to a pull; like Apache's 5.x broker it names the topic's and
/// the group's sys flags.
fn respond(
    code: i32,
    got: &GetResult,
    topic_sys_flag: i32,
    group_sys_flag: i32,
) -> RemotingCommand {
    let header = PullMessageResponseHeader {
        suggest_which_broker_id: 0,
        next_begin_offset: got.next_begin_offset.to_wire(),
        min_offset: got.min_offset.to_wire(),
        max_offset: got.max_offset.to_wire(),
        offset_delta: None,
        topic_sys_flag: Some(topic_sys_flag),
        group_sys_flag: Some(group_sys_flag),
        forbidden_type: None,
    };
    let mut cmd = RemotingCommand::response(code, "").with_header(&header);
    cmd.remark = None;
    // Each stored record goes out as its own chunk, a view of the store:
    // the body is never copied into one buffer (vectored writes send it).
    cmd.with_body_chunks(got.messages.clone())
}

/// The filter from the request's subscription (when flagged) or the
/// group's registered one; everything passes without either.
fn filter_for<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    h: &PullMessageRequestHeader,
) -> Result<PullFilter, Refusal> {
    let (expression, kind) = if h.sys_flag & PULL_FLAG_SUBSCRIPTION != 0 {
        (
            h.subscription.clone().unwrap_or_default(),
            h.expression_type.clone(),
        )
    } else if let Some(sub) = b.clients().subscription(&h.consumer_group, &h.topic) {
        (sub.sub_string, sub.expression_type)
    } else {
        (String::new(), None)
    };
    subscription_filter(b, &h.consumer_group, &h.topic, &expression, kind.as_deref())
}

/// The filter for a subscription, or the answer refusing it: an unknown
/// expression type or a malformed SQL92 expression is
/// `SUBSCRIPTION_PARSE_FAILED`, SQL92 with `enable_property_filter` off is
/// `SYSTEM_ERROR` (as RocketMQ). SQL92 expressions are compiled once per
/// group and topic (see `FilterCache`).
pub(crate) fn subscription_filter<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    group: &str,
    topic: &str,
    expression: &str,
    kind: Option<&str>,
) -> Result<PullFilter, Refusal> {
    if is_tag_type(kind) {
        return Ok(PullFilter::Tags(tag_filter(expression)));
    }
    if !is_sql92_type(kind) {
        return Err(Refusal::new(
            response_code::SUBSCRIPTION_PARSE_FAILED,
            format!(
                "[sluice] expression type {:?} is not supported (TAG or SQL92)",
                kind.unwrap_or_default()
            ),
        ));
    }
    if !b.config().enable_property_filter {
        return Err(Refusal::new(
            response_code::SYSTEM_ERROR,
            format!(
                "[sluice] The broker does not support consumer to filter message by {EXPRESSION_TYPE_SQL92} (enable_property_filter is off)"
            ),
        ));
    }
    b.filters()
        .sql92(group, topic, expression)
        .map(PullFilter::Sql92)
        .map_err(|e| {
            Refusal::new(
                response_code::SUBSCRIPTION_PARSE_FAILED,
                format!("[sluice] cannot parse the SQL92 expression {expression:?} {e}"),
            )
        })
}

/// On a replica, a topic whose messages arrived through replication before
/// its config did (topics are copied every few seconds): readable, with
/// the queues the store holds.
fn replicated_topic<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    topic: &str,
) -> Option<sluice_net::body::TopicConfig> {
    if b.is_writer() {
        return None;
    }
    let queues = b.store().consume_queues().queue_ids(topic);
    let count = queues.iter().max().map(|q| q + 1)?;
    Some(crate::broker::topic_config(
        topic,
        count,
        crate::broker::PERM_READ,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_statuses_map_to_rocketmq_pull_codes() {
        let q = QueueOffset::new;
        assert_eq!(status_code(GetStatus::Found, q(3)), response_code::SUCCESS);
        assert_eq!(
            status_code(GetStatus::OffsetOverflowOne, q(3)),
            response_code::PULL_NOT_FOUND
        );
        assert_eq!(
            status_code(GetStatus::NoMessageInQueue, q(0)),
            response_code::PULL_NOT_FOUND
        );
        assert_eq!(
            status_code(GetStatus::NoMessageInQueue, q(5)),
            response_code::PULL_OFFSET_MOVED
        );
        assert_eq!(
            status_code(GetStatus::OffsetTooSmall, q(0)),
            response_code::PULL_OFFSET_MOVED
        );
        assert_eq!(
            status_code(GetStatus::NoMatchedMessage, q(0)),
            response_code::PULL_RETRY_IMMEDIATELY
        );
    }
}
