//! `LOCK_BATCH_MQ` and `UNLOCK_BATCH_MQ`: orderly consumers lock the queues
//! they consume so one client at a time processes a queue (see
//! `broker::locks`). Lock answers the queues now held; unlock answers
//! nothing but success.

use sluice_core::disk::Disk;
use sluice_core::Clock;
use sluice_net::body::{self, LockBatchRequestBody, LockBatchResponseBody};
use sluice_net::{RemotingCommand, RequestContext};

use crate::broker::Broker;
use crate::dispatch::{Refusal, Reply};

/// Most queues one lock or unlock request may name.
pub const QUEUES_PER_REQUEST_MAX: usize = 4_096;

pub(super) async fn lock<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    _: &RequestContext,
    req: &RemotingCommand,
) -> Reply {
    let request = decode(req)?;
    let granted = b.locks().lock_batch(
        &request.consumer_group,
        &request.client_id,
        &request.mq_set,
        b.clock().monotonic(),
    );
    let answer = LockBatchResponseBody {
        lock_ok_mq_set: granted,
    };
    Ok(RemotingCommand::success().with_body(body::encode(&answer, "LockBatchResponseBody")?))
}

pub(super) async fn unlock<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    _: &RequestContext,
    req: &RemotingCommand,
) -> Reply {
    let request = decode(req)?;
    b.locks()
        .unlock_batch(&request.consumer_group, &request.client_id, &request.mq_set);
    Ok(RemotingCommand::success())
}

fn decode(req: &RemotingCommand) -> Result<LockBatchRequestBody, Refusal> {
    let request: LockBatchRequestBody = body::decode(&req.body, "LockBatchRequestBody")?;
    if request.mq_set.len() > QUEUES_PER_REQUEST_MAX {
        return Err(Refusal::system_error(format!(
            "[sluice] {} queues in one request, more than {QUEUES_PER_REQUEST_MAX}",
            request.mq_set.len()
        )));
    }
    Ok(request)
}
