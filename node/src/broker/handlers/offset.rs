//! Offsets: `QUERY_CONSUMER_OFFSET`, `UPDATE_CONSUMER_OFFSET`, `GET_MAX_OFFSET`,
//! `GET_MIN_OFFSET`, `SEARCH_OFFSET_BY_TIMESTAMP`, `GET_EARLIEST_MSG_STORETIME`.

use sluice_core::disk::Disk;
use sluice_core::Clock;
use sluice_net::header::{
    EarliestMsgStoretimeResponseHeader, OffsetResponseHeader, QueryConsumerOffsetRequestHeader,
    QueueRequestHeader, SearchOffsetRequestHeader, UpdateConsumerOffsetRequestHeader,
};
use sluice_net::remoting::{request_code as rc, response_code};
use sluice_net::RemotingCommand;

use crate::broker::response::{bad_request, fail, store_error_response};
use crate::broker::Broker;

pub(super) fn handle<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    req: &RemotingCommand,
) -> RemotingCommand {
    let result = match req.code {
        rc::QUERY_CONSUMER_OFFSET => req.header().map(|h| query(b, &h)),
        rc::UPDATE_CONSUMER_OFFSET => req.header().map(|h: UpdateConsumerOffsetRequestHeader| {
            b.offsets().commit(
                &h.topic,
                &h.consumer_group,
                h.queue_id,
                h.commit_offset,
                b.now_ms(),
            );
            RemotingCommand::success()
        }),
        rc::GET_MAX_OFFSET => req.header().map(|h: QueueRequestHeader| {
            offset_response(
                i64::try_from(b.store().max_offset(&h.topic, h.queue_id).0).unwrap_or(i64::MAX),
            )
        }),
        rc::GET_MIN_OFFSET => req.header().map(|h: QueueRequestHeader| {
            offset_response(
                i64::try_from(b.store().min_offset(&h.topic, h.queue_id).0).unwrap_or(i64::MAX),
            )
        }),
        rc::SEARCH_OFFSET_BY_TIMESTAMP => req.header().map(|h: SearchOffsetRequestHeader| match b
            .store()
            .search_offset_by_time(&h.topic, h.queue_id, h.timestamp)
        {
            Ok(q) => offset_response(i64::try_from(q.0).unwrap_or(i64::MAX)),
            Err(e) => store_error_response(&e),
        }),
        _ => req.header().map(|h: QueueRequestHeader| {
            match b.store().earliest_store_time(&h.topic, h.queue_id) {
                Ok(Some(ts)) => RemotingCommand::success()
                    .with_header(&EarliestMsgStoretimeResponseHeader { timestamp: ts }),
                Ok(None) => fail(
                    response_code::SYSTEM_ERROR,
                    "[sluice] no message in the queue",
                ),
                Err(e) => store_error_response(&e),
            }
        }),
    };
    result.unwrap_or_else(|e| bad_request(&e))
}

fn query<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    h: &QueryConsumerOffsetRequestHeader,
) -> RemotingCommand {
    if let Some(o) = b.offsets().get(&h.topic, &h.consumer_group, h.queue_id) {
        return offset_response(o);
    }
    // RocketMQ's rule: a new group reads from 0 while the queue still
    // starts at 0; otherwise "not found" lets the client's ConsumeFromWhere
    // decide. A client that sends `setZeroIfNotFound=false` (5.x, and the
    // Sluice client) always decides itself.
    let min = b.store().min_offset(&h.topic, h.queue_id);
    if b.config().query_offset_zero_for_new_group
        && h.set_zero_if_not_found != Some(false)
        && min.0 == 0
    {
        return offset_response(0);
    }
    fail(
        response_code::QUERY_NOT_FOUND,
        "[sluice] no committed offset for this group",
    )
}

fn offset_response(offset: i64) -> RemotingCommand {
    RemotingCommand::success().with_header(&OffsetResponseHeader { offset })
}
