//! The half send: a PREPARED message (sysFlag type 4, `TRAN_MSG=true`) is
//! stored in `RMQ_SYS_TRANS_HALF_TOPIC` queue 0 instead of its topic (see
//! `broker::transaction`). The answer is a normal send response for the
//! half: its offset message id, its half-queue offset and the transaction
//! id.

use sluice_core::disk::Disk;
use sluice_core::message::topic::{HALF_TOPIC, OP_HALF_TOPIC};
use sluice_core::message::{offset_msg_id, MessageInput, Properties};
use sluice_core::Clock;
use sluice_net::header::SendMessageResponseHeader;
use sluice_net::remoting::{request_code, response_code};
use sluice_net::RemotingCommand;

use super::send::replicated;
use crate::broker::response::{fail, store_error_response};
use crate::broker::transaction::records;
use crate::broker::Broker;

/// Sends straight to the transaction topics are refused: a forged op
/// record would resolve someone else's transaction.
pub(super) fn refuse_reserved(topic: &str) -> Option<RemotingCommand> {
    [HALF_TOPIC, OP_HALF_TOPIC, records::CHECK_MAX_TOPIC]
        .contains(&topic)
        .then(|| {
            fail(
                response_code::NO_PERMISSION,
                format!("[sluice] topic {topic} is reserved for transactional messages; send with sysFlag PREPARED instead"),
            )
        })
}

/// Stores the PREPARED send `req` (its header already read into
/// `template`) as a half.
pub(super) async fn send_half<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    req: &RemotingCommand,
    template: MessageInput,
    group: &str,
    wait: bool,
) -> RemotingCommand {
    if req.code == request_code::SEND_BATCH_MESSAGE {
        return fail(
            response_code::MESSAGE_ILLEGAL,
            "[sluice] a batch cannot hold transactional (PREPARED) messages",
        );
    }
    let mut msg = MessageInput {
        body: req.body.clone(),
        ..template
    };
    let queue_id = msg.queue_id;
    let transaction_id = Properties::parse(&msg.properties)
        .ok()
        .and_then(|p| records::transaction_id(&p));
    if let Err(e) = records::into_half(&mut msg, group) {
        return fail(
            response_code::MESSAGE_ILLEGAL,
            format!("[sluice] cannot store the half message: {}", e.0),
        );
    }
    match b.store().put(msg, wait).await {
        Ok(a) => {
            let id = offset_msg_id(
                b.store_host(),
                i64::try_from(a.phys_offset.0).unwrap_or(i64::MAX),
            );
            let q = i64::try_from(a.queue_offset.0).unwrap_or(i64::MAX);
            let mut header = SendMessageResponseHeader::new(id, queue_id, q);
            header.transaction_id = transaction_id;
            replicated(
                b,
                a.end(),
                wait,
                RemotingCommand::success().with_header(&header),
            )
            .await
        }
        Err(e) => store_error_response(&e),
    }
}
