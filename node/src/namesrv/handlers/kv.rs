//! KV config: `PUT_KV_CONFIG` (100), `GET_KV_CONFIG` (101) and
//! `DELETE_KV_CONFIG` (102). A missing key answers `QUERY_NOT_FOUND`.

use sluice_core::Clock;
use sluice_net::header::{
    GetKvConfigResponseHeader, KvConfigKeyRequestHeader, PutKvConfigRequestHeader,
};
use sluice_net::remoting::response_code;
use sluice_net::{RemotingCommand, RequestContext};

use super::decode_header;
use crate::dispatch::{Refusal, Reply};
use crate::namesrv::state::State;

/// Sets a key.
pub(super) async fn put<C: Clock>(
    state: &State<C>,
    _ctx: &RequestContext,
    request: &RemotingCommand,
) -> Reply {
    let header: PutKvConfigRequestHeader = decode_header(request, "PUT_KV_CONFIG")?;
    state
        .kv()
        .put(&header.namespace, &header.key, &header.value);
    Ok(RemotingCommand::success())
}

/// Reads a key into the response header's `value`.
pub(super) async fn get<C: Clock>(
    state: &State<C>,
    _ctx: &RequestContext,
    request: &RemotingCommand,
) -> Reply {
    let header: KvConfigKeyRequestHeader = decode_header(request, "GET_KV_CONFIG")?;
    let value = state
        .kv()
        .get(&header.namespace, &header.key)
        .map(str::to_owned);
    match value {
        Some(value) => Ok(RemotingCommand::success()
            .with_header(&GetKvConfigResponseHeader { value: Some(value) })),
        None => Err(Refusal::new(
            response_code::QUERY_NOT_FOUND,
            format!(
                "No config item, Namespace: {} Key: {}",
                header.namespace, header.key
            ),
        )),
    }
}

/// Removes a key; removing a missing key succeeds.
pub(super) async fn delete<C: Clock>(
    state: &State<C>,
    _ctx: &RequestContext,
    request: &RemotingCommand,
) -> Reply {
    let header: KvConfigKeyRequestHeader = decode_header(request, "DELETE_KV_CONFIG")?;
    state.kv().delete(&header.namespace, &header.key);
    Ok(RemotingCommand::success())
}
