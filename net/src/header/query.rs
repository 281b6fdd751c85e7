//! Message lookup headers: `QUERY_MESSAGE` (by key or unique key) and
//! `VIEW_MESSAGE_BY_ID` (by commit-log offset).

use super::command_header;

/// extField that turns `QUERY_MESSAGE` into a `UNIQ_KEY` lookup.
pub const UNIQUE_KEY_QUERY: &str = "_UNIQUE_KEY_QUERY";

command_header! {
    /// `QUERY_MESSAGE` (12) request header.
    QueryMessageRequestHeader {
        /// Topic.
        topic: String = "topic",
        /// Key (or unique key with `_UNIQUE_KEY_QUERY=true`).
        key: String = "key",
        /// Most messages to return.
        max_num: i32 = "maxNum",
        /// Lower store-time bound, ms.
        begin_timestamp: i64 = "beginTimestamp",
        /// Upper store-time bound, ms.
        end_timestamp: i64 = "endTimestamp",
    }
}

command_header! {
    /// `QUERY_MESSAGE` response header.
    QueryMessageResponseHeader {
        /// Last index update time, ms.
        index_last_update_timestamp: i64 = "indexLastUpdateTimestamp",
        /// Last indexed commit-log offset.
        index_last_update_phyoffset: i64 = "indexLastUpdatePhyoffset",
    }
}

command_header! {
    /// `VIEW_MESSAGE_BY_ID` (33) request header.
    ViewMessageRequestHeader {
        /// Commit-log offset decoded from the offset message ID.
        offset: i64 = "offset",
        /// 5.x: the topic.
        topic: Option<String> = "topic",
    }
}
