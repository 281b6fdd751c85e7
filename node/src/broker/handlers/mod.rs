//! Request handlers, one file per request family, one function per request
//! code, each of the one shape `async fn(&Broker, &RequestContext,
//! &RemotingCommand) -> Reply` (see `crate::dispatch`), and [`routes`], the
//! table that routes every code the broker serves to its handler.

mod acl;
mod admin;
mod client;
mod consume_stats;
mod consumer_call;
mod end_transaction;
mod group;
mod lock;
mod offset;
mod pop;
pub(crate) mod pull;
mod query;
mod reply;
mod reset;
mod send;
pub(crate) mod send_back;
mod send_dedupe;
mod send_half;

use std::sync::Arc;
use std::time::Duration;

use sluice_core::disk::Disk;
use sluice_core::{Clock, MessageStore};
use sluice_net::header::NotifyConsumerIdsChangedRequestHeader;
use sluice_net::remoting::request_code as rc;
use sluice_net::RemotingCommand;

pub use reply::reply_topic;

use super::{Broker, BrokerStats};
use crate::acl::Server;
use crate::dispatch::{route, Observer, Route, Routes};

/// The broker's request table.
pub type BrokerRoutes<D, C> = Routes<Broker<D, C>>;

/// The broker's request table serving `broker`; every answer's latency
/// and response code go to the broker's stats.
pub fn routes<D: Disk, C: Clock>(broker: Arc<Broker<D, C>>) -> BrokerRoutes<D, C> {
    let guarded = broker.config().acl.is_some();
    let routes = unguarded_routes(broker);
    if !guarded {
        return routes;
    }
    routes.guarded(|b: &Broker<D, C>, ctx, request| match &b.config().acl {
        Some(acl) => acl.check(
            Server::Broker,
            ctx.peer_addr().ip(),
            request,
            b.clock().monotonic(),
        ),
        None => Ok(()),
    })
}

/// The broker's request table without the ACL guard, for front ends that
/// authenticate and authorise by their own protocol first (the 5.x gRPC
/// endpoint); answers are still timed in the broker's stats.
pub fn unguarded_routes<D: Disk, C: Clock>(broker: Arc<Broker<D, C>>) -> BrokerRoutes<D, C> {
    let observer = Observer {
        now: |b: &Broker<D, C>| b.clock().monotonic(),
        record: |b: &Broker<D, C>, code, response, elapsed| {
            b.stats().request(code, response, elapsed);
        },
    };
    let routes = if broker.stats().is_recording() {
        Routes::observed("broker", broker, &table(), observer)
    } else {
        Routes::new("broker", broker, &table())
    };
    routes.with_barrier(|b: &Broker<D, C>| match b.store().write_deferred() {
        Ok(()) => true,
        Err(e) => {
            tracing::warn!(error = %e, "answers withheld: the store cannot hold what they acknowledge");
            false
        }
    })
}

/// Stats timing every code the broker serves, reading the store's
/// figures from `store`, each labelled family admitting `cap` label sets.
pub(super) fn stats<D: Disk, C: Clock>(
    store: &MessageStore<D, C>,
    config: &super::BrokerConfig,
) -> BrokerStats {
    let codes = table::<D, C>().into_iter().map(|(code, _)| code);
    let store = Arc::clone(store.commit_log().stats());
    BrokerStats::with_cap(codes, store, config.metrics_series_cap).recording(config.stats)
}

/// Every request code the broker serves, each routed to its handler once.
fn table<D: Disk, C: Clock>() -> Vec<(i32, Route<Broker<D, C>>)> {
    vec![
        (rc::SEND_MESSAGE, route!(send::handle)),
        (rc::SEND_MESSAGE_V2, route!(send::handle)),
        (rc::SEND_BATCH_MESSAGE, route!(send::handle)),
        (rc::SEND_REPLY_MESSAGE, route!(reply::handle)),
        (rc::SEND_REPLY_MESSAGE_V2, route!(reply::handle)),
        (rc::PULL_MESSAGE, route!(pull::handle)),
        (rc::LITE_PULL_MESSAGE, route!(pull::handle)),
        (rc::QUERY_CONSUMER_OFFSET, route!(offset::query)),
        (rc::UPDATE_CONSUMER_OFFSET, route!(offset::update)),
        (rc::GET_MAX_OFFSET, route!(offset::max)),
        (rc::GET_MIN_OFFSET, route!(offset::min)),
        (
            rc::SEARCH_OFFSET_BY_TIMESTAMP,
            route!(offset::search_by_time),
        ),
        (
            rc::GET_EARLIEST_MSG_STORETIME,
            route!(offset::earliest_time),
        ),
        (rc::HEART_BEAT, route!(client::heartbeat)),
        (rc::UNREGISTER_CLIENT, route!(client::unregister)),
        (
            rc::GET_CONSUMER_LIST_BY_GROUP,
            route!(client::consumer_list),
        ),
        (rc::CHECK_CLIENT_CONFIG, route!(client::check_client_config)),
        (rc::QUERY_MESSAGE, route!(query::by_key)),
        (rc::VIEW_MESSAGE_BY_ID, route!(query::view_by_id)),
        (rc::CONSUMER_SEND_MSG_BACK, route!(send_back::handle)),
        (rc::LOCK_BATCH_MQ, route!(lock::lock)),
        (rc::UNLOCK_BATCH_MQ, route!(lock::unlock)),
        (rc::UPDATE_AND_CREATE_TOPIC, route!(admin::create_topic)),
        (rc::DELETE_TOPIC_IN_BROKER, route!(admin::delete_topic)),
        (rc::GET_ALL_TOPIC_CONFIG, route!(admin::all_topic_config)),
        (rc::GET_BROKER_RUNTIME_INFO, route!(admin::runtime_info)),
        (
            rc::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
            route!(group::update),
        ),
        (rc::GET_ALL_SUBSCRIPTIONGROUP_CONFIG, route!(group::get_all)),
        (rc::DELETE_SUBSCRIPTIONGROUP, route!(group::delete)),
        (rc::GET_CONSUME_STATS, route!(consume_stats::handle)),
        (
            rc::GET_CONSUMER_RUNNING_INFO,
            route!(consumer_call::running_info),
        ),
        (
            rc::CONSUME_MESSAGE_DIRECTLY,
            route!(consumer_call::consume_directly),
        ),
        (rc::INVOKE_BROKER_TO_RESET_OFFSET, route!(reset::handle)),
        (rc::END_TRANSACTION, route!(end_transaction::handle)),
        (rc::GET_BROKER_CLUSTER_ACL_CONFIG, route!(acl::config)),
        (rc::SLUICE_ACL_CHECK, route!(acl::check)),
        (rc::SLUICE_POP_RECEIVE, route!(pop::receive)),
        (rc::SLUICE_POP_ACK, route!(pop::ack)),
        (rc::SLUICE_POP_RENEW, route!(pop::renew)),
    ]
}

/// Tells every member of a consumer group that membership changed, so they
/// rebalance at once (oneway, best effort). Called from connection-closed
/// hooks too, which also run while a server is torn down outside any
/// runtime (a crashed simulated host, a runtime dropped mid-serve): then
/// there is nobody to tell and nothing is sent.
pub fn notify_ids_changed<D: Disk, C: Clock>(broker: &Broker<D, C>, group: &str) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let header = NotifyConsumerIdsChangedRequestHeader {
        consumer_group: group.to_owned(),
    };
    for conn in broker.clients().consumer_connections(group) {
        let mut cmd =
            RemotingCommand::request_with_header(rc::NOTIFY_CONSUMER_IDS_CHANGED, &header);
        cmd.mark_oneway();
        runtime.spawn(async move {
            if let Err(e) = conn.invoke_oneway(cmd, Duration::from_secs(3)).await {
                tracing::debug!(error = %e, "consumer id change notification failed");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use sluice_core::disk::MmapDisk;
    use sluice_core::SystemClock;

    use super::*;

    #[test]
    fn every_routed_code_is_declared_once_with_its_name() {
        let codes: Vec<i32> = table::<MmapDisk, SystemClock>()
            .iter()
            .map(|(code, _)| *code)
            .collect();
        let unique: BTreeSet<i32> = codes.iter().copied().collect();
        assert_eq!(unique.len(), codes.len(), "a code is routed twice");
        for code in codes {
            assert!(rc::name(code).is_some(), "code {code} has no declared name");
        }
    }
}
