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
use sluice_net::{RemotingCommand, RequestContext};

use super::notify_ids_changed;
use super::pull::subscription_filter;
use crate::broker::{Broker, Channel, PERM_READ, PERM_WRITE};
use crate::dispatch::{Refusal, Reply};

pub(super) async fn unregister<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    _: &RequestContext,
    req: &RemotingCommand,
) -> Reply {
    let h: UnregisterClientRequestHeader = req.header()?;
    let changed = b.clients().unregister(
        &h.client_id,
        h.producer_group.as_deref(),
        h.consumer_group.as_deref(),
    );
    for g in changed {
        notify_ids_changed(b, &g);
    }
    Ok(RemotingCommand::success())
}

pub(super) async fn consumer_list<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    _: &RequestContext,
    req: &RemotingCommand,
) -> Reply {
    let h: GetConsumerListByGroupRequestHeader = req.header()?;
    let ids = b.clients().consumer_ids(&h.consumer_group);
    if ids.is_empty() {
        return Err(Refusal::system_error("no consumer for this group"));
    }
    let list = ConsumerListBody {
        consumer_id_list: ids,
    };
    Ok(RemotingCommand::success().with_body(body::encode(&list, "ConsumerListBody")?))
}

pub(super) async fn heartbeat<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    ctx: &RequestContext,
    req: &RemotingCommand,
) -> Reply {
    let hb: HeartbeatData = body::decode(&req.body, "HeartbeatData").inspect_err(|_| {
        tracing::debug!(body = %String::from_utf8_lossy(&req.body), "undecodable heartbeat");
    })?;
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
    Ok(RemotingCommand::success().with_header(&HeartbeatResponseHeader::full_heartbeats_only()))
}

/// Answers whether a consumer's subscription would be served: tag
/// subscriptions always are; SQL92 ones when property filtering is on and
/// the expression compiles (the compiled form is cached for its pulls).
pub(super) async fn check_client_config<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    _: &RequestContext,
    req: &RemotingCommand,
) -> Reply {
    let body: CheckClientRequestBody = body::decode(&req.body, "CheckClientRequestBody")?;
    if let Some(sub) = body.subscription_data {
        subscription_filter(
            b,
            &body.group,
            &sub.topic,
            &sub.sub_string,
            sub.expression_type.as_deref(),
        )?;
    }
    Ok(RemotingCommand::success())
}
