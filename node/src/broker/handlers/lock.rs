//! `LOCK_BATCH_MQ` and `UNLOCK_BATCH_MQ`: orderly consumers lock the queues
//! they consume so one client at a time processes a queue (see
//! `broker::locks`). Lock answers the queues now held; unlock answers
//! nothing but success.

use sluice_core::disk::Disk;
use sluice_core::Clock;
use sluice_net::body::{self, LockBatchRequestBody, LockBatchResponseBody};
use sluice_net::remoting::{request_code as rc, response_code};
use sluice_net::RemotingCommand;

use crate::broker::response::{bad_request, fail};
use crate::broker::Broker;

/// Most queues one lock or unlock request may name.
pub const QUEUES_PER_REQUEST_MAX: usize = 4_096;

pub(super) fn handle<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    req: &RemotingCommand,
) -> RemotingCommand {
    let request: LockBatchRequestBody = match body::decode(&req.body, "LockBatchRequestBody") {
        Ok(r) => r,
        Err(e) => return bad_request(&e),
    };
    if request.mq_set.len() > QUEUES_PER_REQUEST_MAX {
        return fail(
            response_code::SYSTEM_ERROR,
            format!(
                "[sluice] {} queues in one request, more than {QUEUES_PER_REQUEST_MAX}",
                request.mq_set.len()
            ),
        );
    }
    if req.code == rc::UNLOCK_BATCH_MQ {
        b.locks()
            .unlock_batch(&request.consumer_group, &request.client_id, &request.mq_set);
        return RemotingCommand::success();
    }
    let granted = b.locks().lock_batch(
        &request.consumer_group,
        &request.client_id,
        &request.mq_set,
        b.clock().monotonic(),
    );
    let answer = LockBatchResponseBody {
        lock_ok_mq_set: granted,
    };
    match body::encode(&answer, "LockBatchResponseBody") {
        Ok(json) => RemotingCommand::success().with_body(json),
        Err(e) => bad_request(&e),
    }
}
