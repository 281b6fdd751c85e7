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
use crate::broker::transaction::records;
use crate::broker::Broker;
use crate::dispatch::{Refusal, Reply};

/// Sends straight to the transaction topics are refused: a forged op
/// record would resolve someone else's transaction.
pub(super) fn refuse_reserved(topic: &str) -> Result<(), Refusal> {
    if [HALF_TOPIC, OP_HALF_TOPIC, records::CHECK_MAX_TOPIC].contains(&topic) {
        return Err(Refusal::new(
            response_code::NO_PERMISSION,
            format!("[sluice] topic {topic} is reserved for transactional messages; send with sysFlag PREPARED instead"),
        ));
    }
    Ok(())
}

/// Stores the PREPARED send `req` (its header already read into
/// `template`) as a half.
pub(super) async fn send_half<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    req: &RemotingCommand,
    template: MessageInput,
    group: &str,
    wait: bool,
) -> Reply {
    if req.code == request_code::SEND_BATCH_MESSAGE {
        return Err(Refusal::new(
            response_code::MESSAGE_ILLEGAL,
            "[sluice] a batch cannot hold transactional (PREPARED) messages",
        ));
    }
    let mut msg = MessageInput {
        body: req.body.clone(),
        ..template
    };
    let queue_id = msg.queue_id;
    let transaction_id = Properties::parse(&msg.properties)
        .ok()
        .and_then(|p| records::transaction_id(&p));
    records::into_half(&mut msg, group).map_err(|e| {
        Refusal::new(
            response_code::MESSAGE_ILLEGAL,
            format!("[sluice] cannot store the half message: {}", e.0),
        )
    })?;
    let traffic = b.stats().topic_in(&msg.topic);
    let a = b.store().put(msg, wait).await?;
    b.stats().message_in(&traffic, u64::from(a.size));
    let id = offset_msg_id(b.store_host(), a.phys_offset.to_wire());
    let q = a.queue_offset.to_wire();
    let mut header = SendMessageResponseHeader::new(id, queue_id, q);
    header.transaction_id = transaction_id;
    let stored = RemotingCommand::success().with_header(&header);
    Ok(replicated(b, a.end(), wait, stored).await)
}
