//! Clients: `HEART_BEAT` (register producer and consumer groups, find or
//! auto-create each consumer group's subscription group, create its retry
//! topic, announce membership changes), `UNREGISTER_CLIENT`,
//! `GET_CONSUMER_LIST_BY_GROUP`, and `CHECK_CLIENT_CONFIG` (does the broker
//! accept a SQL92 subscription? Java consumers ask before they start).

use sluice_core::disk::Disk;
use sluice_core::message::retry_topic;
use sluice_core::Clock;
use sluice_net::body::{self, CheckClientRequestBody, ConsumerListBody, HeartbeatData};
use sluice_net::header::{
    GetConsumerListByGroupRequestHeader, HeartbeatResponseHeader, UnregisterClientRequestHeader,
};
use sluice_net::remoting::{request_code as rc, response_code};
use sluice_net::{RemotingCommand, RequestContext};

use super::notify_ids_changed;
use super::pull::subscription_filter;
use crate::broker::response::{bad_request, fail};
use crate::broker::{Broker, Channel, PERM_READ, PERM_WRITE};

pub(super) async fn handle<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    ctx: &RequestContext,
    req: &RemotingCommand,
) -> RemotingCommand {
    match req.code {
        rc::HEART_BEAT => heartbeat(b, ctx, req).await,
        rc::CHECK_CLIENT_CONFIG => check_client_config(b, req),
        rc::UNREGISTER_CLIENT => match req.header::<UnregisterClientRequestHeader>() {
            Ok(h) => {
                let changed = b.clients().unregister(
                    &h.client_id,
                    h.producer_group.as_deref(),
                    h.consumer_group.as_deref(),
                );
                for g in changed {
                    notify_ids_changed(b, &g);
                }
                RemotingCommand::success()
            }
            Err(e) => bad_request(&e),
        },
        _ => match req.header::<GetConsumerListByGroupRequestHeader>() {
            Ok(h) => {
                let ids = b.clients().consumer_ids(&h.consumer_group);
                if ids.is_empty() {
                    return fail(response_code::SYSTEM_ERROR, "no consumer for this group");
                }
                match body::encode(
                    &ConsumerListBody {
                        consumer_id_list: ids,
                    },
                    "ConsumerListBody",
                ) {
                    Ok(json) => RemotingCommand::success().with_body(json),
                    Err(e) => bad_request(&e),
                }
            }
            Err(e) => bad_request(&e),
        },
    }
}

async fn heartbeat<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    ctx: &RequestContext,
    req: &RemotingCommand,
) -> RemotingCommand {
    let hb: HeartbeatData = match body::decode(&req.body, "HeartbeatData") {
        Ok(hb) => hb,
        Err(e) => {
            tracing::debug!(body = %String::from_utf8_lossy(&req.body), "undecodable heartbeat");
            return bad_request(&e);
        }
    };
    let channel = Channel {
        client_id: hb.client_id.clone(),
        connection: ctx.connection.clone(),
        last_seen: b.clock().monotonic(),
        language: req.language,
    };
    for p in &hb.producer_data_set {
        b.clients()
            .register_producer(&p.group_name, channel.clone());
    }
    let mut topics_changed = false;
    for c in &hb.consumer_data_set {
        // As RocketMQ: without a subscription group (auto-creation off, or
        // a name no retry topic can carry) the consumer is still
        // registered, but no retry topic is made.
        let group = b.subscription_group(&c.group_name);
        if let Some(g) = &group {
            let (_, created) = b.topics().ensure(
                &retry_topic(&c.group_name),
                g.retry_queue_nums,
                PERM_READ | PERM_WRITE,
                b.now_ms(),
            );
            topics_changed |= created;
        }
        let notify = group
            .as_ref()
            .is_none_or(|g| g.notify_consumer_ids_changed_enable);
        if b.clients().register_consumer(c, channel.clone()) && notify {
            notify_ids_changed(b, &c.group_name);
        }
    }
    if topics_changed {
        b.topics_updated().await;
    }
    // Apache 5.x always answers with both keys, and 5.x clients read them
    // unchecked; Sluice takes only full heartbeats (no V2 fingerprints).
    RemotingCommand::success().with_header(&HeartbeatResponseHeader::full_heartbeats_only())
}

/// Answers whether a consumer's subscription would be served: tag
/// subscriptions always are; SQL92 ones when property filtering is on and
/// the expression compiles (the compiled form is cached for its pulls).
fn check_client_config<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    req: &RemotingCommand,
) -> RemotingCommand {
    let body: CheckClientRequestBody = match body::decode(&req.body, "CheckClientRequestBody") {
        Ok(body) => body,
        Err(e) => return bad_request(&e),
    };
    let Some(sub) = body.subscription_data else {
        return RemotingCommand::success();
    };
    match subscription_filter(
        b,
        &body.group,
        &sub.topic,
        &sub.sub_string,
        sub.expression_type.as_deref(),
    ) {
        Ok(_) => RemotingCommand::success(),
        Err(refusal) => refusal,
    }
}
