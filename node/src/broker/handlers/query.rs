//! Message lookup: `QUERY_MESSAGE` (by key, or by unique key with
//! `_UNIQUE_KEY_QUERY`) and `VIEW_MESSAGE_BY_ID` (by CommitLog offset).

use bytes::BytesMut;
use sluice_core::disk::Disk;
use sluice_core::{Clock, CommitLogOffset};
use sluice_net::header::{
    QueryMessageRequestHeader, QueryMessageResponseHeader, ViewMessageRequestHeader,
    UNIQUE_KEY_QUERY,
};
use sluice_net::remoting::{request_code as rc, response_code};
use sluice_net::RemotingCommand;

use crate::broker::response::{bad_request, fail, store_error_response};
use crate::broker::Broker;

/// Most messages one query returns.
const QUERY_MESSAGES_MAX: usize = 64;

pub(super) fn handle<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    req: &RemotingCommand,
) -> RemotingCommand {
    if req.code == rc::VIEW_MESSAGE_BY_ID {
        return match req.header::<ViewMessageRequestHeader>() {
            Ok(h) => match b
                .store()
                .read_at(CommitLogOffset(u64::try_from(h.offset).unwrap_or(u64::MAX)))
            {
                Ok(Some(raw)) => RemotingCommand::success().with_body(raw),
                Ok(None) => fail(
                    response_code::SYSTEM_ERROR,
                    format!("[sluice] no message at offset {}", h.offset),
                ),
                Err(e) => store_error_response(&e),
            },
            Err(e) => bad_request(&e),
        };
    }
    let h = match req.header::<QueryMessageRequestHeader>() {
        Ok(h) => h,
        Err(e) => return bad_request(&e),
    };
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
    match b
        .store()
        .query_by_key(&h.topic, &h.key, max, h.begin_timestamp, end)
    {
        Ok(found) if found.is_empty() => fail(
            response_code::QUERY_NOT_FOUND,
            format!(
                "[sluice] no message of topic {} with key {}",
                h.topic, h.key
            ),
        ),
        Ok(found) => {
            let mut body = BytesMut::new();
            for m in &found {
                body.extend_from_slice(m);
            }
            let visible = b.store().visible_offset().0;
            RemotingCommand::success()
                .with_header(&QueryMessageResponseHeader {
                    index_last_update_timestamp: b.now_ms(),
                    index_last_update_phyoffset: i64::try_from(visible).unwrap_or(i64::MAX),
                })
                .with_body(body.freeze())
        }
        Err(e) => store_error_response(&e),
    }
}
