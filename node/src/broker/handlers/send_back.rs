//! `CONSUMER_SEND_MSG_BACK`: a consumer hands back a message it failed to
//! consume. The broker loads it from the CommitLog, counts one more
//! reconsume, and stores a copy either in the group's retry topic with a
//! delay level (so it waits in the schedule topic first) or, once the
//! retries are used up or the consumer asks for it, in the group's
//! dead-letter topic at once. The retry limit is the client's
//! `maxReconsumeTimes` when it sends one (as RocketMQ does for clients
//! since 3.4.9), else the subscription group's `retryMaxTimes`.

use bytes::Bytes;
use sluice_core::disk::Disk;
use sluice_core::message::{
    dlq_topic, keys, offset_msg_id, retry_topic, strip_seal, validate_topic, EncodeError,
    MessageInput, Properties, StoredRecord,
};
use sluice_core::{Clock, CommitLogOffset};
use sluice_net::header::ConsumerSendMsgBackRequestHeader;
use sluice_net::remoting::response_code;
use sluice_net::{RemotingCommand, RequestContext};

use crate::broker::{Broker, PERM_READ, PERM_WRITE};
use crate::dispatch::{Refusal, Reply};

/// Where a sent-back message goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SendBackTarget {
    /// `%RETRY%group` through the schedule topic at this delay level.
    Retry {
        /// Delay level (1-based; clamped to the highest when stored).
        delay_level: i32,
    },
    /// `%DLQ%group`, immediately.
    DeadLetter,
}

/// The decision for a message that has been reconsumed `reconsume_times`
/// times before this failure: once that count has reached
/// `max_reconsume_times`, or when the consumer asks with a negative level,
/// the message is a dead letter. Otherwise it is retried at
/// `delay_level`, or at `3 + reconsume_times` when the level is 0 (10 s,
/// 30 s, 1 m … with RocketMQ's levels).
pub(crate) fn decide(
    reconsume_times: i32,
    max_reconsume_times: i32,
    delay_level: i32,
) -> SendBackTarget {
    // As RocketMQ: the count before this failure is compared, so a
    // message is retried `max_reconsume_times` times before the DLQ.
    if delay_level < 0 || reconsume_times >= max_reconsume_times {
        SendBackTarget::DeadLetter
    } else if delay_level == 0 {
        SendBackTarget::Retry {
            delay_level: reconsume_times.saturating_add(3),
        }
    } else {
        SendBackTarget::Retry { delay_level }
    }
}

pub(super) async fn handle<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    _: &RequestContext,
    req: &RemotingCommand,
) -> Reply {
    let h: ConsumerSendMsgBackRequestHeader = req.header()?;
    send_back(b, &h).await
}

/// Stores the message `h` names as the retry or dead letter its group's
/// limits make it (also how a POP consumer's exhausted message reaches
/// the DLQ: a negative delay level).
pub(crate) async fn send_back<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    h: &ConsumerSendMsgBackRequestHeader,
) -> Reply {
    let retry = retry_topic(&h.group);
    if let Err(e) = validate_topic(&retry) {
        return Err(Refusal::system_error(format!(
            "[sluice] invalid consumer group {:?}: {e}",
            h.group
        )));
    }
    let Some(group) = b.subscription_group(&h.group) else {
        return Err(Refusal::new(
            response_code::SUBSCRIPTION_GROUP_NOT_EXIST,
            format!("[sluice] subscription group [{}] does not exist", h.group),
        ));
    };
    let rec = load(b, h.offset).map_err(Refusal::system_error)?;
    let max = h.max_reconsume_times.unwrap_or(group.retry_max_times);
    let target = decide(rec.reconsume_times, max, h.delay_level);
    let mut props = Properties::parse(strip_seal(&rec.properties)).map_err(|e| {
        Refusal::system_error(format!(
            "[sluice] message at offset {} has bad properties: {e}",
            h.offset
        ))
    })?;
    let origin_id = h
        .origin_msg_id
        .clone()
        .filter(|id| !id.is_empty())
        .unwrap_or_else(|| offset_msg_id(rec.store_host, rec.phys_offset));
    mark(&mut props, &rec.topic, &origin_id, target)
        .map_err(|e| Refusal::system_error(format!("[sluice] {e}")))?;
    let (topic, queues) = match target {
        SendBackTarget::Retry { .. } => (retry, group.retry_queue_nums.max(1)),
        SendBackTarget::DeadLetter => (dlq_topic(&h.group), 1),
    };
    let (_, created) = b
        .topics()
        .ensure(&topic, queues, PERM_READ | PERM_WRITE, b.now_ms());
    if created {
        b.topics_updated().await;
    }
    let mut msg = MessageInput {
        reconsume_times: rec.reconsume_times.saturating_add(1),
        ..MessageInput::from_stored(&rec, topic, 0, Bytes::from(props.encode()), b.store_host())
    };
    b.divert_delayed(&mut msg, &mut props)
        .await
        .map_err(|e| Refusal::system_error(format!("[sluice] {}", e.0)))?;
    let a = b.store().put(msg, true).await?;
    if target == SendBackTarget::DeadLetter {
        b.stats().sent_to_dlq(&h.group, u64::from(a.size));
    }
    Ok(RemotingCommand::success())
}

/// Sets the send-back properties: `RETRY_TOPIC` (the first topic, kept
/// once set), `ORIGIN_MESSAGE_ID`, `WAIT=false`, and `DELAY` for a retry
/// (none for a dead letter).
fn mark(
    props: &mut Properties,
    topic: &str,
    origin_id: &str,
    target: SendBackTarget,
) -> Result<(), EncodeError> {
    if props.get(keys::RETRY_TOPIC).is_none() {
        props.insert(keys::RETRY_TOPIC, topic)?;
    }
    props.insert(keys::ORIGIN_MESSAGE_ID, origin_id)?;
    props.insert(keys::WAIT, "false")?;
    if let SendBackTarget::Retry { delay_level } = target {
        props.insert(keys::DELAY, &delay_level.to_string())?;
    } else {
        props.remove(keys::DELAY);
    }
    Ok(())
}

/// The decoded record at a CommitLog offset, or a remark saying why not.
fn load<D: Disk, C: Clock>(b: &Broker<D, C>, offset: i64) -> Result<StoredRecord, String> {
    let missing = || format!("[sluice] no message at commit-log offset {offset}");
    let phys = u64::try_from(offset).map_err(|_| missing())?;
    let raw = match b.store().read_at(CommitLogOffset::new(phys)) {
        Ok(Some(raw)) => raw,
        Ok(None) => return Err(missing()),
        Err(e) => return Err(format!("[sluice] reading offset {offset}: {e}")),
    };
    StoredRecord::decode(&raw)
        .map_err(|e| format!("[sluice] message at offset {offset} is unreadable: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_failures_retry_at_three_plus_reconsume_times() {
        assert_eq!(decide(0, 16, 0), SendBackTarget::Retry { delay_level: 3 });
        assert_eq!(decide(5, 16, 0), SendBackTarget::Retry { delay_level: 8 });
    }

    #[test]
    fn an_explicit_level_is_kept() {
        assert_eq!(decide(0, 16, 7), SendBackTarget::Retry { delay_level: 7 });
    }

    #[test]
    fn reaching_max_reconsume_times_is_a_dead_letter() {
        // With a maximum of 2, the first send-back retries, the second is final.
        assert_eq!(decide(0, 2, 0), SendBackTarget::Retry { delay_level: 3 });
        assert_eq!(decide(1, 2, 0), SendBackTarget::Retry { delay_level: 4 });
        assert_eq!(decide(2, 2, 0), SendBackTarget::DeadLetter);
        assert_eq!(decide(15, 16, 0), SendBackTarget::Retry { delay_level: 18 });
        assert_eq!(decide(16, 16, 0), SendBackTarget::DeadLetter);
    }

    #[test]
    fn a_negative_level_is_a_dead_letter_at_once() {
        assert_eq!(decide(0, 16, -1), SendBackTarget::DeadLetter);
    }
}
