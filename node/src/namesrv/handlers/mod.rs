//! Name-server request handlers, one file per request family with the same
//! shape: `fn(&State, &RequestContext, &RemotingCommand) -> Reply`. Bad input
//! is answered with an error code and a remark naming what was wrong.

mod kv;
mod register;
mod route;

use std::sync::Arc;

use sluice_core::Clock;
use sluice_net::header::CommandHeader;
use sluice_net::remoting::{request_code, response_code};
use sluice_net::{HandlerTable, RemotingCommand, RequestContext};

use super::state::State;

/// A handler's answer: `Err` carries an error response built early.
type Reply = Result<RemotingCommand, RemotingCommand>;

type HandlerFn<C> = fn(&State<C>, &RequestContext, &RemotingCommand) -> Reply;

/// Every name-server request code routed to its handler; other codes are
/// answered `REQUEST_CODE_NOT_SUPPORTED` by the table.
pub(super) fn handler_table<C: Clock>(state: &Arc<State<C>>) -> HandlerTable {
    let routes: [(i32, HandlerFn<C>); 11] = [
        (request_code::REGISTER_BROKER, register::register_broker),
        (request_code::UNREGISTER_BROKER, register::unregister_broker),
        (
            request_code::QUERY_DATA_VERSION,
            register::query_data_version,
        ),
        (request_code::GET_ROUTEINFO_BY_TOPIC, route::route_by_topic),
        (request_code::GET_BROKER_CLUSTER_INFO, route::cluster_info),
        (
            request_code::GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
            route::all_topics,
        ),
        (
            request_code::GET_TOPICS_BY_CLUSTER,
            route::topics_by_cluster,
        ),
        (request_code::DELETE_TOPIC_IN_NAMESRV, route::delete_topic),
        (request_code::PUT_KV_CONFIG, kv::put),
        (request_code::GET_KV_CONFIG, kv::get),
        (request_code::DELETE_KV_CONFIG, kv::delete),
    ];
    let mut table = HandlerTable::new();
    for (code, handler) in routes {
        let state = Arc::clone(state);
        table.register(
            code,
            move |ctx: RequestContext, request: RemotingCommand| {
                let response = handler(&state, &ctx, &request).unwrap_or_else(|error| error);
                std::future::ready(Some(response))
            },
        );
    }
    table
}

/// Decodes a typed header, or answers `SYSTEM_ERROR` naming the bad field.
fn decode_header<H: CommandHeader>(
    request: &RemotingCommand,
    what: &str,
) -> Result<H, RemotingCommand> {
    request
        .header::<H>()
        .map_err(|error| system_error(format!("bad {what} request header: {error}")))
}

/// A `SYSTEM_ERROR` response, as Java answers malformed requests.
fn system_error(remark: impl Into<String>) -> RemotingCommand {
    RemotingCommand::response(response_code::SYSTEM_ERROR, remark)
}

/// Serializes a body, or answers `SYSTEM_ERROR`.
fn encoded(body: sluice_net::Result<Vec<u8>>) -> Result<Vec<u8>, RemotingCommand> {
    body.map_err(|error| system_error(format!("response body cannot be encoded: {error}")))
}
