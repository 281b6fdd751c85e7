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
use sluice_net::remoting::{request_code as rc, response_code};
use sluice_net::RemotingCommand;

use crate::broker::response::{bad_request, fail, store_error_response};
use crate::broker::Broker;

/// How long a consumer has to answer a forwarded call.
const CONSUMER_CALL_TIMEOUT: Duration = Duration::from_secs(5);

pub(super) async fn handle<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    req: &RemotingCommand,
) -> RemotingCommand {
    let (group, client_id, forward) = if req.code == rc::GET_CONSUMER_RUNNING_INFO {
        let h: GetConsumerRunningInfoRequestHeader = match req.header() {
            Ok(h) => h,
            Err(e) => return bad_request(&e),
        };
        let forward = RemotingCommand::request_with_header(rc::GET_CONSUMER_RUNNING_INFO, &h);
        (h.consumer_group, h.client_id, forward)
    } else {
        let mut h: ConsumeMessageDirectlyRequestHeader = match req.header() {
            Ok(h) => h,
            Err(e) => return bad_request(&e),
        };
        let Some(client_id) = h.client_id.clone() else {
            return fail(response_code::SYSTEM_ERROR, "[sluice] clientId is required");
        };
        let Some(offset) = h
            .msg_id
            .as_deref()
            .and_then(|id| decode_offset_msg_id(id).ok())
            .and_then(|(_, offset)| u64::try_from(offset).ok())
        else {
            return fail(
                response_code::SYSTEM_ERROR,
                format!("[sluice] msgId {:?} is not an offset message id", h.msg_id),
            );
        };
        let raw = match b.store().read_at(CommitLogOffset(offset)) {
            Ok(Some(raw)) => raw,
            Ok(None) => {
                return fail(
                    response_code::SYSTEM_ERROR,
                    format!("[sluice] no message at offset {offset}"),
                )
            }
            Err(e) => return store_error_response(&e),
        };
        h.broker_name = Some(b.config().broker_name.clone());
        let forward =
            RemotingCommand::request_with_header(rc::CONSUME_MESSAGE_DIRECTLY, &h).with_body(raw);
        (h.consumer_group, client_id, forward)
    };
    let Some(conn) = b.clients().consumer_by_client_id(&group, &client_id) else {
        return fail(
            response_code::SYSTEM_ERROR,
            format!("The Consumer <{group}> <{client_id}> not online"),
        );
    };
    match conn
        .invoke_keeping_open(forward, CONSUMER_CALL_TIMEOUT)
        .await
    {
        Ok(answer) => answer,
        Err(e) => fail(
            response_code::SYSTEM_ERROR,
            format!("[sluice] consumer <{client_id}> did not answer: {e}"),
        ),
    }
}
