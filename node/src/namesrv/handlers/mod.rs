//! Name-server request handlers, one file per request family, one function
//! per code, each of the one shape `async fn(&State, &RequestContext,
//! &RemotingCommand) -> Reply` (see `crate::dispatch`). Bad input is
//! answered with an error code and a remark naming what was wrong.

mod kv;
mod register;
mod route;

use std::sync::Arc;

use sluice_core::Clock;
use sluice_net::header::CommandHeader;
use sluice_net::remoting::request_code;
use sluice_net::RemotingCommand;

use super::state::State;
use crate::acl::Server;
use crate::dispatch::{route, Refusal, Route, Routes};

/// Every name-server request code routed to its handler; other codes are
/// answered `REQUEST_CODE_NOT_SUPPORTED` by the table.
pub(super) fn routes<C: Clock>(state: &Arc<State<C>>) -> Routes<State<C>> {
    let table: &[(i32, Route<State<C>>)] = &[
        (
            request_code::REGISTER_BROKER,
            route!(register::register_broker),
        ),
        (
            request_code::UNREGISTER_BROKER,
            route!(register::unregister_broker),
        ),
        (
            request_code::QUERY_DATA_VERSION,
            route!(register::query_data_version),
        ),
        (
            request_code::GET_ROUTEINFO_BY_TOPIC,
            route!(route::route_by_topic),
        ),
        (
            request_code::GET_BROKER_CLUSTER_INFO,
            route!(route::cluster_info),
        ),
        (
            request_code::GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
            route!(route::all_topics),
        ),
        (
            request_code::GET_TOPICS_BY_CLUSTER,
            route!(route::topics_by_cluster),
        ),
        (
            request_code::DELETE_TOPIC_IN_NAMESRV,
            route!(route::delete_topic),
        ),
        (request_code::PUT_KV_CONFIG, route!(kv::put)),
        (request_code::GET_KV_CONFIG, route!(kv::get)),
        (request_code::DELETE_KV_CONFIG, route!(kv::delete)),
    ];
    let routes = Routes::new("namesrv", Arc::clone(state), table);
    if state.config.acl.is_some() {
        return routes.guarded(|state, ctx, request| match &state.config.acl {
            Some(acl) => acl.check(
                Server::NameServer,
                ctx.peer_addr().ip(),
                request,
                state.clock.monotonic(),
            ),
            None => Ok(()),
        });
    }
    routes
}

/// Decodes a typed header, or answers `SYSTEM_ERROR` naming the bad field.
fn decode_header<H: CommandHeader>(request: &RemotingCommand, what: &str) -> Result<H, Refusal> {
    request
        .header::<H>()
        .map_err(|error| system_error(format!("bad {what} request header: {error}")))
}

/// A `SYSTEM_ERROR` refusal, as Java answers malformed requests.
fn system_error(remark: impl Into<String>) -> Refusal {
    Refusal::system_error(remark)
}

/// Serializes a body, or answers `SYSTEM_ERROR`.
fn encoded(body: sluice_net::Result<Vec<u8>>) -> Result<Vec<u8>, Refusal> {
    body.map_err(|error| system_error(format!("response body cannot be encoded: {error}")))
}
