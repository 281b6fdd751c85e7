//! Request handlers, one file per request family with the same shape:
//! `async fn handle(broker, ctx, request) -> Option<RemotingCommand>`.
//! `BrokerHandler` routes by request code; unknown codes are answered
//! `REQUEST_CODE_NOT_SUPPORTED`.

mod admin;
mod client;
mod consume_stats;
mod consumer_call;
mod end_transaction;
mod group;
mod lock;
mod offset;
mod pull;
mod query;
mod reply;
mod reset;
mod send;
mod send_back;
mod send_half;

use std::sync::Arc;
use std::time::Duration;

use sluice_core::disk::Disk;
use sluice_core::Clock;
use sluice_net::header::NotifyConsumerIdsChangedRequestHeader;
use sluice_net::remoting::{request_code as rc, response_code};
use sluice_net::rpc::HandlerFuture;
use sluice_net::{Handler, RemotingCommand, RequestContext};

pub use reply::reply_topic;

use super::Broker;

/// Routes requests to the broker's handlers.
pub struct BrokerHandler<D: Disk, C: Clock> {
    broker: Arc<Broker<D, C>>,
}

impl<D: Disk, C: Clock> Clone for BrokerHandler<D, C> {
    fn clone(&self) -> Self {
        Self {
            broker: Arc::clone(&self.broker),
        }
    }
}

impl<D: Disk, C: Clock> BrokerHandler<D, C> {
    /// A handler serving `broker`.
    pub fn new(broker: Arc<Broker<D, C>>) -> Self {
        Self { broker }
    }
}

impl<D: Disk, C: Clock> Handler for BrokerHandler<D, C> {
    fn handle(&self, ctx: RequestContext, request: RemotingCommand) -> HandlerFuture {
        let b = Arc::clone(&self.broker);
        Box::pin(async move {
            let response = match request.code {
                rc::SEND_MESSAGE | rc::SEND_MESSAGE_V2 | rc::SEND_BATCH_MESSAGE => {
                    send::handle(&b, &ctx, &request).await
                }
                rc::SEND_REPLY_MESSAGE | rc::SEND_REPLY_MESSAGE_V2 => {
                    reply::handle(&b, &ctx, &request).await
                }
                rc::PULL_MESSAGE | rc::LITE_PULL_MESSAGE => pull::handle(&b, &request).await,
                rc::QUERY_CONSUMER_OFFSET
                | rc::UPDATE_CONSUMER_OFFSET
                | rc::GET_MAX_OFFSET
                | rc::GET_MIN_OFFSET
                | rc::SEARCH_OFFSET_BY_TIMESTAMP
                | rc::GET_EARLIEST_MSG_STORETIME => offset::handle(&b, &request),
                rc::HEART_BEAT
                | rc::UNREGISTER_CLIENT
                | rc::GET_CONSUMER_LIST_BY_GROUP
                | rc::CHECK_CLIENT_CONFIG => client::handle(&b, &ctx, &request).await,
                rc::QUERY_MESSAGE | rc::VIEW_MESSAGE_BY_ID => query::handle(&b, &request),
                rc::CONSUMER_SEND_MSG_BACK => send_back::handle(&b, &request).await,
                rc::LOCK_BATCH_MQ | rc::UNLOCK_BATCH_MQ => lock::handle(&b, &request),
                rc::UPDATE_AND_CREATE_TOPIC
                | rc::DELETE_TOPIC_IN_BROKER
                | rc::GET_BROKER_RUNTIME_INFO => admin::handle(&b, &request).await,
                rc::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP
                | rc::GET_ALL_SUBSCRIPTIONGROUP_CONFIG
                | rc::DELETE_SUBSCRIPTIONGROUP => group::handle(&b, &request).await,
                rc::GET_CONSUME_STATS => consume_stats::handle(&b, &request),
                rc::GET_CONSUMER_RUNNING_INFO | rc::CONSUME_MESSAGE_DIRECTLY => {
                    consumer_call::handle(&b, &request).await
                }
                rc::INVOKE_BROKER_TO_RESET_OFFSET => reset::handle(&b, &request),
                rc::END_TRANSACTION => end_transaction::handle(&b, &request).await,
                code => RemotingCommand::response(
                    response_code::REQUEST_CODE_NOT_SUPPORTED,
                    format!("[sluice] request code {code} is not supported"),
                ),
            };
            if response.code != response_code::SUCCESS {
                tracing::debug!(
                    request = request.code,
                    code = response.code,
                    remark = response.remark.as_deref().unwrap_or(""),
                    "request not successful"
                );
            }
            Some(response)
        })
    }
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
