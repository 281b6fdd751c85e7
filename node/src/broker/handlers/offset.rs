//! Offsets: `QUERY_CONSUMER_OFFSET`, `UPDATE_CONSUMER_OFFSET`, `GET_MAX_OFFSET`,
//! `GET_MIN_OFFSET`, `SEARCH_OFFSET_BY_TIMESTAMP`, `GET_EARLIEST_MSG_STORETIME`.

use sluice_core::disk::Disk;
use sluice_core::Clock;
use sluice_net::header::{
    EarliestMsgStoretimeResponseHeader, OffsetResponseHeader, QueryConsumerOffsetRequestHeader,
    QueueRequestHeader, SearchOffsetRequestHeader, UpdateConsumerOffsetRequestHeader,
};
use sluice_net::remoting::response_code;
use sluice_net::{RemotingCommand, RequestContext};

use crate::broker::Broker;
use crate::dispatch::{Refusal, Reply};

pub(super) async fn query<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    _: &RequestContext,
    req: &RemotingCommand,
) -> Reply {
    let h: QueryConsumerOffsetRequestHeader = req.header()?;
    if let Some(o) = b.offsets().get(&h.topic, &h.consumer_group, h.queue_id) {
        return Ok(offset_response(o));
    }
    // RocketMQ's rule: a new group reads from 0 while the queue still
    // starts at 0; otherwise "not found" lets the client's ConsumeFromWhere
    // decide. A client that sends `setZeroIfNotFound=false` (5.x, and the
    // Sluice client) always decides itself.
    let min = b.store().min_offset(&h.topic, h.queue_id);
    if b.config().query_offset_zero_for_new_group
        && h.set_zero_if_not_found != Some(false)
        && min.get() == 0
    {
        return Ok(offset_response(0));
    }
    Err(Refusal::new(
        response_code::QUERY_NOT_FOUND,
        "[sluice] no committed offset for this group",
    ))
}

pub(super) async fn update<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    _: &RequestContext,
    req: &RemotingCommand,
) -> Reply {
    let h: UpdateConsumerOffsetRequestHeader = req.header()?;
    b.offsets().commit(
        &h.topic,
        &h.consumer_group,
        h.queue_id,
        h.commit_offset,
        b.now_ms(),
    );
    Ok(RemotingCommand::success())
}

pub(super) async fn max<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    _: &RequestContext,
    req: &RemotingCommand,
) -> Reply {
    let h: QueueRequestHeader = req.header()?;
    let max = b.store().max_offset(&h.topic, h.queue_id);
    Ok(offset_response(max.to_wire()))
}

pub(super) async fn min<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    _: &RequestContext,
    req: &RemotingCommand,
) -> Reply {
    let h: QueueRequestHeader = req.header()?;
    let min = b.store().min_offset(&h.topic, h.queue_id);
    Ok(offset_response(min.to_wire()))
}

pub(super) async fn search_by_time<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    _: &RequestContext,
    req: &RemotingCommand,
) -> Reply {
    let h: SearchOffsetRequestHeader = req.header()?;
    let q = b
        .store()
        .search_offset_by_time(&h.topic, h.queue_id, h.timestamp)?;
    Ok(offset_response(q.to_wire()))
}

pub(super) async fn earliest_time<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    _: &RequestContext,
    req: &RemotingCommand,
) -> Reply {
    let h: QueueRequestHeader = req.header()?;
    match b.store().earliest_store_time(&h.topic, h.queue_id)? {
        Some(timestamp) => Ok(RemotingCommand::success()
            .with_header(&EarliestMsgStoretimeResponseHeader { timestamp })),
        None => Err(Refusal::system_error("[sluice] no message in the queue")),
    }
}

fn offset_response(offset: i64) -> RemotingCommand {
    RemotingCommand::success().with_header(&OffsetResponseHeader { offset })
}
