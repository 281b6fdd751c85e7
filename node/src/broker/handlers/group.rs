//! Subscription groups: `UPDATE_AND_CREATE_SUBSCRIPTIONGROUP` (body: one
//! `SubscriptionGroupConfig`), `GET_ALL_SUBSCRIPTIONGROUP_CONFIG` (answers
//! the table with its version) and `DELETE_SUBSCRIPTIONGROUP` (header
//! `groupName`, and 5.x's `cleanOffset` to drop the group's offsets too).
//! A change is answered `SUCCESS` only once it is on disk.

use sluice_core::disk::Disk;
use sluice_core::Clock;
use sluice_net::body::{self, SubscriptionGroupConfig};
use sluice_net::header::DeleteSubscriptionGroupRequestHeader;
use sluice_net::remoting::response_code;
use sluice_net::{RemotingCommand, RequestContext};

use crate::broker::groups::{validate, SUBSCRIPTION_GROUPS_MAX};
use crate::broker::Broker;
use crate::dispatch::{Refusal, Reply};

pub(super) async fn update<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    _: &RequestContext,
    req: &RemotingCommand,
) -> Reply {
    let config: SubscriptionGroupConfig = body::decode(&req.body, "SubscriptionGroupConfig")?;
    if let Err(reason) = validate(&config) {
        return Err(Refusal::new(
            response_code::INVALID_PARAMETER,
            format!("[sluice] subscription group refused: {reason}"),
        ));
    }
    let name = config.group_name.clone();
    if !b.subscription_groups().put(config, b.now_ms()) {
        return Err(Refusal::system_error(format!(
            "[sluice] cannot create group {name}: the broker already has {SUBSCRIPTION_GROUPS_MAX} subscription groups"
        )));
    }
    tracing::info!(group = %name, "subscription group updated");
    persisted(b).await
}

pub(super) async fn get_all<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    _: &RequestContext,
    _: &RemotingCommand,
) -> Reply {
    let json = body::encode(
        &b.subscription_groups().snapshot(),
        "SubscriptionGroupWrapper",
    )?;
    Ok(RemotingCommand::success().with_body(json))
}

pub(super) async fn delete<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    _: &RequestContext,
    req: &RemotingCommand,
) -> Reply {
    let h: DeleteSubscriptionGroupRequestHeader = req.header()?;
    b.subscription_groups().remove(&h.group_name, b.now_ms());
    if h.clean_offset == Some(true) && b.offsets().remove_group(&h.group_name) {
        b.persist_offsets().await;
    }
    tracing::info!(group = %h.group_name, "subscription group deleted");
    persisted(b).await
}

async fn persisted<D: Disk, C: Clock>(b: &Broker<D, C>) -> Reply {
    if b.persist_subscription_groups().await {
        Ok(RemotingCommand::success())
    } else {
        Err(Refusal::system_error(
            "[sluice] the change is in effect but could not be written to disk yet; it will be retried",
        ))
    }
}
