//! `INVOKE_BROKER_TO_RESET_OFFSET`: move a group's offsets on a topic to the
//! first message stored at or after a time, record them (an operator reset
//! may move offsets back, unlike a consumer's commit), and tell the group's
//! live consumers with `RESET_CONSUMER_CLIENT_OFFSET` so they restart their
//! queues there instead of committing their old position over the reset.

use std::time::Duration;

use bytes::Bytes;
use sluice_core::disk::Disk;
use sluice_core::Clock;
use sluice_net::body::{MessageQueue, ResetOffsetBody};
use sluice_net::header::ResetOffsetRequestHeader;
use sluice_net::remoting::{request_code as rc, response_code, LanguageCode};
use sluice_net::{RemotingCommand, RequestContext};

use crate::broker::Broker;
use crate::dispatch::{Refusal, Reply};

pub(super) async fn handle<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    _: &RequestContext,
    req: &RemotingCommand,
) -> Reply {
    let h: ResetOffsetRequestHeader = req.header()?;
    let force = h.is_force.unwrap_or(true);
    let body = reset_offsets(b, &h, force)?;
    let json = Bytes::from(body.to_fastjson());
    // Apache answers a C++ caller, and tells C++ consumers, in the list form
    // their parser reads; everyone else gets the map form Java parses.
    let list = Bytes::from(body.to_list_json());
    // The 4.9 Java client requires `isForce`; Apache 5.x pushes queueId -1
    // (every queue).
    let pushed = ResetOffsetRequestHeader {
        is_force: Some(force),
        queue_id: Some(-1),
        ..h.clone()
    };
    for (conn, language) in b.clients().consumer_channels(&h.group) {
        let form = if language == LanguageCode::Cpp {
            list.clone()
        } else {
            json.clone()
        };
        let mut cmd =
            RemotingCommand::request_with_header(rc::RESET_CONSUMER_CLIENT_OFFSET, &pushed)
                .with_body(form);
        cmd.mark_oneway();
        tokio::spawn(async move {
            if let Err(e) = conn.invoke_oneway(cmd, Duration::from_secs(3)).await {
                tracing::debug!(error = %e, "offset reset notification failed");
            }
        });
    }
    let answer = if req.language == LanguageCode::Cpp {
        list
    } else {
        json
    };
    Ok(RemotingCommand::success().with_body(answer))
}

/// Moves the group's offsets on every queue of the topic to the reset's
/// target (unless not forced and the group is already behind it).
fn reset_offsets<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    h: &ResetOffsetRequestHeader,
    force: bool,
) -> Result<ResetOffsetBody, Refusal> {
    let Some(topic) = b.topics().get(&h.topic) else {
        return Err(Refusal::new(
            response_code::TOPIC_NOT_EXIST,
            format!("[sluice] topic {} does not exist", h.topic),
        ));
    };
    let mut body = ResetOffsetBody::default();
    for queue_id in 0..topic.read_queue_nums {
        let target = if h.timestamp < 0 {
            b.store().max_offset(&h.topic, queue_id).get()
        } else {
            b.store()
                .search_offset_by_time(&h.topic, queue_id, h.timestamp)?
                .get()
        };
        let target = i64::try_from(target).unwrap_or(i64::MAX);
        let current = b.offsets().get(&h.topic, &h.group, queue_id);
        let offset = match current {
            Some(c) if !force && c < target => c,
            _ => target,
        };
        b.offsets()
            .reset(&h.topic, &h.group, queue_id, offset, b.now_ms());
        body.offset_table.insert(
            MessageQueue {
                topic: h.topic.clone(),
                broker_name: b.config().broker_name.clone(),
                queue_id,
            },
            offset,
        );
    }
    Ok(body)
}
