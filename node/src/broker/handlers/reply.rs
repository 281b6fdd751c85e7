//! `SEND_REPLY_MESSAGE` (324) / `SEND_REPLY_MESSAGE_V2` (325): a responder
//! replies to a request message. The broker pushes the reply to the
//! requester's connection (`PUSH_REPLY_MESSAGE_TO_CLIENT`, found by the
//! `REPLY_TO_CLIENT` property among the producers that heartbeat here) and
//! stores it in the reply topic like any send, as Apache's broker does with
//! `storeReplyMessageEnable` (its default): the answer is the store's.

use std::time::Duration;

use sluice_core::disk::Disk;
use sluice_core::message::{keys, Properties};
use sluice_core::Clock;
use sluice_net::header::{ReplyMessageRequestHeader, SendMessageRequestHeader};
use sluice_net::remoting::{request_code as rc, response_code};
use sluice_net::{RemotingCommand, RequestContext};

use crate::broker::Broker;
use crate::dispatch::Reply;

/// How long the requester has to take a pushed reply (Apache: 3 s).
const PUSH_TIMEOUT: Duration = Duration::from_secs(3);

/// The topic replies of `cluster` go to (Apache's `{cluster}_REPLY_TOPIC`).
pub fn reply_topic(cluster: &str) -> String {
    format!("{cluster}_REPLY_TOPIC")
}

pub(super) async fn handle<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    ctx: &RequestContext,
    req: &RemotingCommand,
) -> Reply {
    let h = SendMessageRequestHeader::from_request(req)?;
    if let Err(remark) = push(b, ctx, req, &h).await {
        // Apache stores the reply even when the push fails, and answers with
        // the store's result; the requester may still find it by topic.
        tracing::warn!(topic = %h.topic, "{remark}");
    }
    super::send::handle(b, ctx, req).await
}

/// Hands the reply to the requester's connection.
async fn push<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    ctx: &RequestContext,
    req: &RemotingCommand,
    h: &SendMessageRequestHeader,
) -> Result<(), String> {
    let properties = h.properties.as_deref().unwrap_or_default();
    let requester = Properties::parse(properties.as_bytes())
        .ok()
        .and_then(|p| p.get(keys::REPLY_TO_CLIENT).map(str::to_owned))
        .ok_or_else(|| {
            format!(
                "push reply message fail, property[{}] is missing",
                keys::REPLY_TO_CLIENT
            )
        })?;
    let Some(conn) = b.clients().producer_by_client_id(&requester) else {
        return Err(format!(
            "push reply message fail, channel of <{requester}> not found"
        ));
    };
    let header = ReplyMessageRequestHeader {
        producer_group: h.producer_group.clone(),
        topic: h.topic.clone(),
        default_topic: h.default_topic.clone(),
        default_topic_queue_nums: h.default_topic_queue_nums,
        queue_id: h.queue_id,
        sys_flag: h.sys_flag,
        born_timestamp: h.born_timestamp,
        flag: h.flag,
        properties: h.properties.clone(),
        reconsume_times: h.reconsume_times,
        unit_mode: Some(h.unit_mode.unwrap_or(false)),
        born_host: ctx.peer_addr().to_string(),
        store_host: b.store_host().to_string(),
        store_timestamp: b.now_ms(),
    };
    let cmd = RemotingCommand::request_with_header(rc::PUSH_REPLY_MESSAGE_TO_CLIENT, &header)
        .with_body(req.body.clone());
    match conn.invoke_keeping_open(cmd, PUSH_TIMEOUT).await {
        Ok(r) if r.code == response_code::SUCCESS => Ok(()),
        Ok(r) => Err(format!(
            "push reply message to <{requester}> failed: code {} {}",
            r.code,
            r.remark.as_deref().unwrap_or("")
        )),
        Err(e) => Err(format!("push reply message to <{requester}> failed: {e}")),
    }
}
