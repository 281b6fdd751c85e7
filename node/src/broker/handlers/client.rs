//! Clients: `HEART_BEAT` (register producer and consumer groups, create the
//! group's retry topic, announce membership changes), `UNREGISTER_CLIENT`,
//! `GET_CONSUMER_LIST_BY_GROUP`.

use sluice_core::disk::Disk;
use sluice_core::message::retry_topic;
use sluice_core::Clock;
use sluice_net::body::{self, ConsumerListBody, HeartbeatData};
use sluice_net::header::{GetConsumerListByGroupRequestHeader, UnregisterClientRequestHeader};
use sluice_net::remoting::{request_code as rc, response_code};
use sluice_net::{RemotingCommand, RequestContext};

use super::notify_ids_changed;
use crate::broker::response::{bad_request, fail};
use crate::broker::{Broker, Channel, PERM_READ, PERM_WRITE};

pub(super) async fn handle<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    ctx: &RequestContext,
    req: &RemotingCommand,
) -> RemotingCommand {
    match req.code {
        rc::HEART_BEAT => heartbeat(b, ctx, req).await,
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
    };
    for p in &hb.producer_data_set {
        b.clients()
            .register_producer(&p.group_name, channel.clone());
    }
    let mut topics_changed = false;
    for c in &hb.consumer_data_set {
        let (_, created) = b.topics().ensure(
            &retry_topic(&c.group_name),
            1,
            PERM_READ | PERM_WRITE,
            b.now_ms(),
        );
        topics_changed |= created;
        if b.clients().register_consumer(c, channel.clone()) {
            notify_ids_changed(b, &c.group_name);
        }
    }
    if topics_changed {
        b.topics_updated().await;
    }
    RemotingCommand::success()
}
