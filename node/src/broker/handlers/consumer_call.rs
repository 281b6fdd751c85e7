//! `GET_CONSUMER_RUNNING_INFO` (307) and `CONSUME_MESSAGE_DIRECTLY` (309)
//! from an admin tool: the broker forwards the request to the named
//! consumer's connection and answers with the consumer's own reply, as
//! Apache's broker does (`mqadmin consumerStatus`, `consumeMessage`, the
//! dashboard). For a direct consumption the broker first attaches the
//! stored message the id names, byte for byte.

use std::time::Duration;

use sluice_core::disk::Disk;
use sluice_core::message::decode_offset_msg_id;
use sluice_core::{Clock, CommitLogOffset};
use sluice_net::header::{
    ConsumeMessageDirectlyRequestHeader, GetConsumerRunningInfoRequestHeader,
};
use sluice_net::remoting::request_code as rc;
use sluice_net::{RemotingCommand, RequestContext};

use crate::broker::Broker;
use crate::dispatch::{Refusal, Reply};

/// How long a consumer has to answer a forwarded call.
const CONSUMER_CALL_TIMEOUT: Duration = Duration::from_secs(5);

pub(super) async fn running_info<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    _: &RequestContext,
    req: &RemotingCommand,
) -> Reply {
    let h: GetConsumerRunningInfoRequestHeader = req.header()?;
    let forward = RemotingCommand::request_with_header(rc::GET_CONSUMER_RUNNING_INFO, &h);
    forward_to(b, &h.consumer_group, &h.client_id, forward).await
}

pub(super) async fn consume_directly<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    _: &RequestContext,
    req: &RemotingCommand,
) -> Reply {
    let mut h: ConsumeMessageDirectlyRequestHeader = req.header()?;
    let Some(client_id) = h.client_id.clone() else {
        return Err(Refusal::system_error("[sluice] clientId is required"));
    };
    let Some(offset) = h
        .msg_id
        .as_deref()
        .and_then(|id| decode_offset_msg_id(id).ok())
        .and_then(|(_, offset)| u64::try_from(offset).ok())
    else {
        return Err(Refusal::system_error(format!(
            "[sluice] msgId {:?} is not an offset message id",
            h.msg_id
        )));
    };
    let Some(raw) = b.store().read_at(CommitLogOffset::new(offset))? else {
        return Err(Refusal::system_error(format!(
            "[sluice] no message at offset {offset}"
        )));
    };
    h.broker_name = Some(b.config().broker_name.clone());
    let forward =
        RemotingCommand::request_with_header(rc::CONSUME_MESSAGE_DIRECTLY, &h).with_body(raw);
    forward_to(b, &h.consumer_group, &client_id, forward).await
}

/// Sends `forward` to the consumer and answers with its reply as is.
async fn forward_to<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    group: &str,
    client_id: &str,
    forward: RemotingCommand,
) -> Reply {
    let Some(conn) = b.clients().consumer_by_client_id(group, client_id) else {
        return Err(Refusal::system_error(format!(
            "The Consumer <{group}> <{client_id}> not online"
        )));
    };
    conn.invoke_keeping_open(forward, CONSUMER_CALL_TIMEOUT)
        .await
        .map_err(|e| {
            Refusal::system_error(format!(
                "[sluice] consumer <{client_id}> did not answer: {e}"
            ))
        })
}
