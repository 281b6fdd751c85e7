//! `ReceiveMessage`, `AckMessage`, `ChangeInvisibleDuration` and
//! `ForwardMessageToDeadLetterQueue` over the broker's POP consumption
//! (see `broker::pop`).

use std::time::Duration;

use sluice_core::disk::Disk;
use sluice_core::message::StoredRecord;
use sluice_core::Clock;
use sluice_net::remoting::request_code as rc;
use sluice_net::{RemotingCommand, Transport};

use super::convert::{self, Delivery};
use super::proto::{self, receive_message_response::Content, Code};
use super::{auth, ok, status, Caller, Messaging};
use crate::broker::pop::{self, Handle, PopError};

/// Invisible duration of a receive that names none (a push consumer
/// with `auto_renew`), as Apache's default.
const DEFAULT_INVISIBLE: Duration = Duration::from_secs(60);
/// Shortest and longest invisible duration accepted.
const INVISIBLE_MIN: Duration = Duration::from_secs(1);
const INVISIBLE_MAX: Duration = Duration::from_secs(12 * 3600);
/// Long-poll hold when the request names none.
const DEFAULT_POLL: Duration = Duration::from_secs(20);
/// Answer this long before the client's deadline.
const DEADLINE_MARGIN: Duration = Duration::from_millis(1_500);
/// Most messages one receive returns.
const RECEIVE_BATCH_MAX: usize = 1_024;

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

fn stale_status(e: &PopError) -> proto::Status {
    match e {
        PopError::Stale(_) | PopError::BadHandle => status(
            Code::InvalidReceiptHandle,
            format!("receipt handle is expired or invalid: {e}"),
        ),
        PopError::Store(_) => status(Code::InternalServerError, e.to_string()),
    }
}

fn refusal_status(why: &pop::Refused) -> proto::Status {
    let code = match why {
        pop::Refused::NoGroup(_) => Code::ConsumerGroupNotFound,
        pop::Refused::Filter(_) => Code::IllegalFilterExpression,
        _ => Code::Forbidden,
    };
    status(code, why.to_string())
}

/// The names of a request's group and topic ("" where absent).
fn names(group: Option<&proto::Resource>, topic: Option<&proto::Resource>) -> (String, String) {
    let name = |r: Option<&proto::Resource>| r.map(|r| r.name.clone()).unwrap_or_default();
    (name(group), name(topic))
}

/// The remoting pull a receive stands for (what ACL checks).
fn pull_equivalent(group: &str, topic: &str) -> RemotingCommand {
    let mut cmd = RemotingCommand::request(rc::PULL_MESSAGE);
    cmd.ext_fields.insert("consumerGroup", group);
    cmd.ext_fields.insert("topic", topic);
    cmd
}

fn answer(
    status: proto::Status,
    messages: Vec<proto::Message>,
    now_ms: i64,
) -> Vec<proto::ReceiveMessageResponse> {
    let mut out = vec![proto::ReceiveMessageResponse {
        content: Some(Content::Status(status)),
    }];
    out.extend(messages.into_iter().map(|m| proto::ReceiveMessageResponse {
        content: Some(Content::Message(m)),
    }));
    out.push(proto::ReceiveMessageResponse {
        content: Some(Content::DeliveryTimestamp(proto::Timestamp::from_millis(
            now_ms,
        ))),
    });
    out
}

/// The parts of a receive request, checked.
struct Asked {
    group: String,
    topic: String,
    queue_id: Option<i32>,
    invisible: Duration,
    hold: Duration,
    batch: usize,
}

fn asked(
    request: &proto::ReceiveMessageRequest,
    deadline: Option<Duration>,
) -> Result<Asked, proto::Status> {
    let group = request
        .group
        .as_ref()
        .map(|g| g.name.clone())
        .unwrap_or_default();
    let mq = request.message_queue.as_ref();
    let topic = mq
        .and_then(|q| q.topic.as_ref())
        .map(|t| t.name.clone())
        .unwrap_or_default();
    if group.is_empty() || topic.is_empty() {
        return Err(status(
            Code::BadRequest,
            "group and message_queue.topic are required",
        ));
    }
    let invisible = match request.invisible_duration {
        Some(d) => Duration::from_millis(u64::try_from(d.as_millis()).unwrap_or(0)),
        None => DEFAULT_INVISIBLE,
    };
    if !(INVISIBLE_MIN..=INVISIBLE_MAX).contains(&invisible) {
        return Err(status(
            Code::IllegalInvisibleTime,
            format!("invisible duration must be within [{INVISIBLE_MIN:?}, {INVISIBLE_MAX:?}]"),
        ));
    }
    let asked_hold = request.long_polling_timeout.map_or(DEFAULT_POLL, |d| {
        Duration::from_millis(u64::try_from(d.as_millis()).unwrap_or(0))
    });
    let hold = match deadline {
        Some(d) => asked_hold.min(d.saturating_sub(DEADLINE_MARGIN)),
        None => asked_hold,
    };
    Ok(Asked {
        group,
        topic,
        queue_id: mq.map(|q| q.id).filter(|id| *id >= 0),
        invisible,
        hold,
        batch: usize::try_from(request.batch_size)
            .unwrap_or(1)
            .clamp(1, RECEIVE_BATCH_MAX),
    })
}

/// `ReceiveMessage`: the whole answer stream (status, messages, time).
pub(super) async fn receive<D: Disk, C: Clock, T: Transport>(
    endpoint: &Messaging<D, C, T>,
    caller: &Caller,
    request: proto::ReceiveMessageRequest,
    deadline: Option<Duration>,
) -> Vec<proto::ReceiveMessageResponse> {
    let broker = &endpoint.broker;
    let refused = |s| answer(s, Vec::new(), broker.now_ms());
    let ask = match asked(&request, deadline) {
        Ok(ask) => ask,
        Err(s) => return refused(s),
    };
    if let Err(remark) = auth::permit(broker, caller, &pull_equivalent(&ask.group, &ask.topic)) {
        return refused(status(Code::Forbidden, remark));
    }
    let (kind, text) = convert::filter_of(request.filter_expression.as_ref());
    let (group, filter) = match pop::admit(broker, &ask.group, &ask.topic, kind, &text) {
        Ok(admitted) => admitted,
        Err(why) => return refused(refusal_status(&why)),
    };
    let fifo = group.consume_message_orderly;
    let wanted = pop::Receive {
        group: &ask.group,
        topic: &ask.topic,
        queue_id: ask.queue_id.filter(|_| fifo),
        batch: ask.batch,
        invisible_ms: millis(ask.invisible),
        filter: &filter,
        fifo,
        max_attempts: u32::try_from(group.retry_max_times.saturating_add(1)).unwrap_or(1),
    };
    match pop::receive_waiting(broker, &wanted, ask.hold).await {
        Ok(got) if got.is_empty() => refused(status(Code::MessageNotFound, "no new message")),
        Ok(got) => {
            let messages = got
                .iter()
                .filter_map(|g| {
                    let rec = StoredRecord::decode(&g.raw).ok()?;
                    let delivery = Delivery {
                        handle: g.handle,
                        attempt: g.attempt,
                    };
                    Some(convert::to_message(&rec, Some(&delivery)))
                })
                .collect();
            answer(ok(), messages, broker.now_ms())
        }
        Err(e) => refused(status(Code::InternalServerError, e.to_string())),
    }
}

/// `AckMessage`: one result per entry; the top status is their one code
/// or `MULTIPLE_RESULTS`.
pub(super) async fn ack<D: Disk, C: Clock, T: Transport>(
    m: &Messaging<D, C, T>,
    caller: &Caller,
    request: &proto::AckMessageRequest,
) -> proto::AckMessageResponse {
    let (group, topic) = names(request.group.as_ref(), request.topic.as_ref());
    if let Err(remark) = auth::permit(&m.broker, caller, &pull_equivalent(&group, &topic)) {
        return proto::AckMessageResponse {
            status: Some(status(Code::Forbidden, remark)),
            entries: Vec::new(),
        };
    }
    let parsed: Vec<Option<Handle>> = request
        .entries
        .iter()
        .map(|e| Handle::parse(&e.receipt_handle))
        .collect();
    let valid: Vec<Handle> = parsed.iter().flatten().copied().collect();
    let mut outcomes = pop::ack(&m.broker, &group, &topic, &valid)
        .await
        .into_iter();
    let entries: Vec<proto::AckMessageResultEntry> = request
        .entries
        .iter()
        .zip(&parsed)
        .map(|(e, h)| {
            let s = match h.map(|_| outcomes.next()) {
                Some(Some(Ok(()))) => ok(),
                Some(Some(Err(err))) => stale_status(&err),
                _ => stale_status(&PopError::BadHandle),
            };
            proto::AckMessageResultEntry {
                message_id: e.message_id.clone(),
                receipt_handle: e.receipt_handle.clone(),
                status: Some(s),
            }
        })
        .collect();
    let mut codes: Vec<i32> = entries
        .iter()
        .map(|e| e.status.as_ref().map_or(0, |s| s.code))
        .collect();
    codes.sort_unstable();
    codes.dedup();
    let top = match (codes.len(), entries.first().and_then(|e| e.status.clone())) {
        (1, Some(s)) => s,
        (0, _) => status(Code::BadRequest, "no entry to acknowledge"),
        _ => status(Code::MultipleResults, "the entries had different results"),
    };
    proto::AckMessageResponse {
        status: Some(top),
        entries,
    }
}

/// `ChangeInvisibleDuration`: renews a lease; the answer always carries a
/// receipt handle (the new one, or the old one on failure: the Python
/// client copies it before it reads the status).
pub(super) async fn change_invisible_duration<D: Disk, C: Clock, T: Transport>(
    m: &Messaging<D, C, T>,
    caller: &Caller,
    request: &proto::ChangeInvisibleDurationRequest,
) -> proto::ChangeInvisibleDurationResponse {
    let (group, topic) = names(request.group.as_ref(), request.topic.as_ref());
    let failed = |s: proto::Status| proto::ChangeInvisibleDurationResponse {
        status: Some(s),
        receipt_handle: request.receipt_handle.clone(),
    };
    if let Err(remark) = auth::permit(&m.broker, caller, &pull_equivalent(&group, &topic)) {
        return failed(status(Code::Forbidden, remark));
    }
    let invisible = request.invisible_duration.map_or(0, |d| d.as_millis());
    if !(0..=millis(INVISIBLE_MAX)).contains(&invisible) {
        return failed(status(
            Code::IllegalInvisibleTime,
            "invisible duration must be within [0, 12 h]",
        ));
    }
    let Some(handle) = Handle::parse(&request.receipt_handle) else {
        return failed(stale_status(&PopError::BadHandle));
    };
    match pop::renew(&m.broker, &group, &topic, &handle, invisible).await {
        Ok(renewed) => proto::ChangeInvisibleDurationResponse {
            status: Some(ok()),
            receipt_handle: renewed.encode(),
        },
        Err(e) => failed(stale_status(&e)),
    }
}

/// `ForwardMessageToDeadLetterQueue`: a client gave up on a message.
pub(super) async fn forward_to_dead_letter<D: Disk, C: Clock, T: Transport>(
    m: &Messaging<D, C, T>,
    caller: &Caller,
    request: &proto::ForwardMessageToDeadLetterQueueRequest,
) -> proto::ForwardMessageToDeadLetterQueueResponse {
    let (group, topic) = names(request.group.as_ref(), request.topic.as_ref());
    let status =
        if let Err(remark) = auth::permit(&m.broker, caller, &pull_equivalent(&group, &topic)) {
            status(Code::Forbidden, remark)
        } else {
            match Handle::parse(&request.receipt_handle) {
                None => stale_status(&PopError::BadHandle),
                Some(h) => match pop::forward_to_dead_letter(&m.broker, &group, &topic, &h).await {
                    Ok(()) => ok(),
                    Err(e) => stale_status(&e),
                },
            }
        };
    proto::ForwardMessageToDeadLetterQueueResponse {
        status: Some(status),
    }
}
