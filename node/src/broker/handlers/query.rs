//! Message lookup: `QUERY_MESSAGE` (by key, or by unique key with
//! `_UNIQUE_KEY_QUERY`) and `VIEW_MESSAGE_BY_ID` (by CommitLog offset).

use bytes::BytesMut;
use sluice_core::disk::Disk;
use sluice_core::{Clock, CommitLogOffset};
use sluice_net::header::{
    QueryMessageRequestHeader, QueryMessageResponseHeader, ViewMessageRequestHeader,
    UNIQUE_KEY_QUERY,
};
use sluice_net::remoting::response_code;
use sluice_net::{RemotingCommand, RequestContext};

use crate::broker::Broker;
use crate::dispatch::{Refusal, Reply};

/// Most messages one query returns.
const QUERY_MESSAGES_MAX: usize = 64;

pub(super) async fn view_by_id<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    _: &RequestContext,
    req: &RemotingCommand,
) -> Reply {
    let h: ViewMessageRequestHeader = req.header()?;
    let at = CommitLogOffset::from_wire("offset", h.offset)?;
    match b.store().read_at(at)? {
        Some(raw) => Ok(RemotingCommand::success().with_body(raw)),
        None => Err(Refusal::system_error(format!(
            "[sluice] no message at offset {}",
            h.offset
        ))),
    }
}

pub(super) async fn by_key<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    _: &RequestContext,
    req: &RemotingCommand,
) -> Reply {
    let h: QueryMessageRequestHeader = req.header()?;
    let unique = req
        .ext_fields
        .get(UNIQUE_KEY_QUERY)
        .is_some_and(|v| v == "true");
    let max = if unique {
        32
    } else {
        usize::try_from(h.max_num)
            .unwrap_or(1)
            .clamp(1, QUERY_MESSAGES_MAX)
    };
    let end = if h.end_timestamp <= 0 {
        i64::MAX
    } else {
        h.end_timestamp
    };
    let found = b
        .store()
        .query_by_key(&h.topic, &h.key, max, h.begin_timestamp, end)?;
    if found.is_empty() {
        return Err(Refusal::new(
            response_code::QUERY_NOT_FOUND,
            format!(
                "[sluice] no message of topic {} with key {}",
                h.topic, h.key
            ),
        ));
    }
    let mut body = BytesMut::new();
    for m in &found {
        body.extend_from_slice(m);
    }
    let visible = b.store().visible_offset().get();
    Ok(RemotingCommand::success()
        .with_header(&QueryMessageResponseHeader {
            index_last_update_timestamp: b.now_ms(),
            index_last_update_phyoffset: i64::try_from(visible).unwrap_or(i64::MAX),
        })
        .with_body(body.freeze()))
}
