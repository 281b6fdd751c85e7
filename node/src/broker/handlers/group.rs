//! Subscription groups: `UPDATE_AND_CREATE_SUBSCRIPTIONGROUP` (body: one
//! `SubscriptionGroupConfig`), `GET_ALL_SUBSCRIPTIONGROUP_CONFIG` (answers
//! the table with its version) and `DELETE_SUBSCRIPTIONGROUP` (header
//! `groupName`, and 5.x's `cleanOffset` to drop the group's offsets too).
//! A change is answered `SUCCESS` only once it is on disk.

use sluice_core::disk::Disk;
use sluice_core::Clock;
use sluice_net::body::{self, SubscriptionGroupConfig};
use sluice_net::header::DeleteSubscriptionGroupRequestHeader;
use sluice_net::remoting::{request_code as rc, response_code};
use sluice_net::RemotingCommand;

use crate::broker::groups::{validate, SUBSCRIPTION_GROUPS_MAX};
use crate::broker::response::{bad_request, fail};
use crate::broker::Broker;

pub(super) async fn handle<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    req: &RemotingCommand,
) -> RemotingCommand {
    match req.code {
        rc::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP => {
            match body::decode::<SubscriptionGroupConfig>(&req.body, "SubscriptionGroupConfig") {
                Ok(config) => update(b, config).await,
                Err(e) => bad_request(&e),
            }
        }
        rc::DELETE_SUBSCRIPTIONGROUP => {
            match req.header::<DeleteSubscriptionGroupRequestHeader>() {
                Ok(h) => delete(b, &h).await,
                Err(e) => bad_request(&e),
            }
        }
        _ => match body::encode(
            &b.subscription_groups().snapshot(),
            "SubscriptionGroupWrapper",
        ) {
            Ok(json) => RemotingCommand::success().with_body(json),
            Err(e) => bad_request(&e),
        },
    }
}

async fn update<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    config: SubscriptionGroupConfig,
) -> RemotingCommand {
    if let Err(reason) = validate(&config) {
        return fail(
            response_code::INVALID_PARAMETER,
            format!("[sluice] subscription group refused: {reason}"),
        );
    }
    let name = config.group_name.clone();
    if !b.subscription_groups().put(config, b.now_ms()) {
        return fail(
            response_code::SYSTEM_ERROR,
            format!("[sluice] cannot create group {name}: the broker already has {SUBSCRIPTION_GROUPS_MAX} subscription groups"),
        );
    }
    tracing::info!(group = %name, "subscription group updated");
    persisted(b).await
}

async fn delete<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    h: &DeleteSubscriptionGroupRequestHeader,
) -> RemotingCommand {
    b.subscription_groups().remove(&h.group_name, b.now_ms());
    if h.clean_offset == Some(true) && b.offsets().remove_group(&h.group_name) {
        b.persist_offsets().await;
    }
    tracing::info!(group = %h.group_name, "subscription group deleted");
    persisted(b).await
}

async fn persisted<D: Disk, C: Clock>(b: &Broker<D, C>) -> RemotingCommand {
    if b.persist_subscription_groups().await {
        RemotingCommand::success()
    } else {
        fail(
            response_code::SYSTEM_ERROR,
            "[sluice] the change is in effect but could not be written to disk yet; it will be retried",
        )
    }
}
