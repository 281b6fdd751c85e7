//! `SLUICE_POP_RECEIVE`, `SLUICE_POP_ACK`, `SLUICE_POP_RENEW`: the
//! broker's POP consumption (see `broker::pop`) over remoting, the same
//! operations the 5.x gRPC endpoint serves. A receive answers its records
//! as a pull does (the stored bytes, one chunk each) with one receipt
//! handle and delivery attempt per record in its header.

use std::time::Duration;

use sluice_core::disk::Disk;
use sluice_core::Clock;
use sluice_net::header::{
    SluicePopAckRequestHeader, SluicePopReceiveRequestHeader, SluicePopReceiveResponseHeader,
    SluicePopRenewHeader,
};
use sluice_net::remoting::response_code;
use sluice_net::{RemotingCommand, RequestContext};

use crate::broker::filter::EXPRESSION_TYPE_TAG;
use crate::broker::pop::{self, Handle, PopError, Refused};
use crate::broker::Broker;
use crate::dispatch::{Refusal, Reply};

/// Most messages one receive hands out.
const RECEIVE_MAX: usize = 1_024;

fn refusal(why: &Refused) -> Refusal {
    let code = match why {
        Refused::NoGroup(_) => response_code::SUBSCRIPTION_GROUP_NOT_EXIST,
        Refused::Filter(_) => response_code::SUBSCRIPTION_PARSE_FAILED,
        Refused::Replica => response_code::SERVICE_NOT_AVAILABLE,
        Refused::ConsumeDisabled(_) | Refused::OffsetConsumers(_) => response_code::NO_PERMISSION,
    };
    Refusal::new(code, why.to_string())
}

fn pop_refusal(e: &PopError) -> Refusal {
    match e {
        PopError::Stale(_) | PopError::BadHandle => {
            Refusal::new(response_code::NO_MESSAGE, format!("[sluice] {e}"))
        }
        PopError::Store(_) => Refusal::system_error(format!("[sluice] {e}")),
    }
}

pub(super) async fn receive<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    _: &RequestContext,
    req: &RemotingCommand,
) -> Reply {
    let h: SluicePopReceiveRequestHeader = req.header()?;
    let kind = h.expression_type.as_deref().unwrap_or(EXPRESSION_TYPE_TAG);
    let expression = h.expression.as_deref().unwrap_or("*");
    let (group, filter) =
        pop::admit(b, &h.consumer_group, &h.topic, kind, expression).map_err(|w| refusal(&w))?;
    let fifo = group.consume_message_orderly;
    let wanted = pop::Receive {
        group: &h.consumer_group,
        topic: &h.topic,
        queue_id: h.queue_id.filter(|q| fifo && *q >= 0),
        batch: usize::try_from(h.max_msg_nums)
            .unwrap_or(1)
            .clamp(1, RECEIVE_MAX),
        invisible_ms: h.invisible_time.max(0),
        filter: &filter,
        fifo,
        max_attempts: u32::try_from(group.retry_max_times.saturating_add(1)).unwrap_or(1),
    };
    let hold = Duration::from_millis(
        u64::try_from(h.poll_time)
            .unwrap_or(0)
            .min(b.config().long_poll_max_ms),
    );
    let got = pop::receive_waiting(b, &wanted, hold)
        .await
        .map_err(|e| pop_refusal(&e))?;
    if got.is_empty() {
        return Ok(RemotingCommand::response(
            response_code::PULL_NOT_FOUND,
            "no new message",
        ));
    }
    let join = |f: &dyn Fn(&pop::Received) -> String| -> String {
        got.iter().map(f).collect::<Vec<_>>().join(",")
    };
    let header = SluicePopReceiveResponseHeader {
        receipt_handles: join(&|g| g.handle.encode()),
        attempts: join(&|g| g.attempt.to_string()),
    };
    let chunks = got.iter().map(|g| g.raw.clone()).collect();
    Ok(RemotingCommand::success()
        .with_header(&header)
        .with_body_chunks(chunks))
}

pub(super) async fn ack<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    _: &RequestContext,
    req: &RemotingCommand,
) -> Reply {
    let h: SluicePopAckRequestHeader = req.header()?;
    let handle =
        Handle::parse(&h.receipt_handle).ok_or_else(|| pop_refusal(&PopError::BadHandle))?;
    match pop::ack(b, &h.consumer_group, &h.topic, &[handle])
        .await
        .pop()
    {
        Some(Ok(())) => Ok(RemotingCommand::success()),
        Some(Err(e)) => Err(pop_refusal(&e)),
        None => Err(pop_refusal(&PopError::BadHandle)),
    }
}

pub(super) async fn renew<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    _: &RequestContext,
    req: &RemotingCommand,
) -> Reply {
    let h: SluicePopRenewHeader = req.header()?;
    let handle =
        Handle::parse(&h.receipt_handle).ok_or_else(|| pop_refusal(&PopError::BadHandle))?;
    let renewed = pop::renew(b, &h.consumer_group, &h.topic, &handle, h.invisible_time)
        .await
        .map_err(|e| pop_refusal(&e))?;
    Ok(
        RemotingCommand::success().with_header(&SluicePopRenewHeader {
            receipt_handle: renewed.encode(),
            ..h
        }),
    )
}
