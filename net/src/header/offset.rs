//! Offset headers: consumer offsets (QUERY/`UPDATE_CONSUMER_OFFSET`), queue
//! bounds (`GET_MAX`/`MIN_OFFSET`), `SEARCH_OFFSET_BY_TIMESTAMP` and
//! `GET_EARLIEST_MSG_STORETIME`.

use super::command_header;

command_header! {
    /// `QUERY_CONSUMER_OFFSET` (14) request header.
    QueryConsumerOffsetRequestHeader {
        /// Consumer group.
        consumer_group: String = "consumerGroup",
        /// Topic.
        topic: String = "topic",
        /// Queue.
        queue_id: i32 = "queueId",
        /// 5.x: `false` asks for `QUERY_NOT_FOUND` instead of the new-group 0.
        set_zero_if_not_found: Option<bool> = "setZeroIfNotFound",
    }
}

command_header! {
    /// `UPDATE_CONSUMER_OFFSET` (15) request header (oneway from clients).
    UpdateConsumerOffsetRequestHeader {
        /// Consumer group.
        consumer_group: String = "consumerGroup",
        /// Topic.
        topic: String = "topic",
        /// Queue.
        queue_id: i32 = "queueId",
        /// Offset to store.
        commit_offset: i64 = "commitOffset",
    }
}

command_header! {
    /// `GET_MAX_OFFSET` (30), `GET_MIN_OFFSET` (31) and `GET_EARLIEST_MSG_STORETIME`
    /// (32) request header.
    QueueRequestHeader {
        /// Topic.
        topic: String = "topic",
        /// Queue.
        queue_id: i32 = "queueId",
    }
}

command_header! {
    /// `SEARCH_OFFSET_BY_TIMESTAMP` (29) request header.
    SearchOffsetRequestHeader {
        /// Topic.
        topic: String = "topic",
        /// Queue.
        queue_id: i32 = "queueId",
        /// Store timestamp to search for, ms.
        timestamp: i64 = "timestamp",
    }
}

command_header! {
    /// Response header carrying one offset: `QUERY_CONSUMER_OFFSET`,
    /// `GET_MAX_OFFSET`, `GET_MIN_OFFSET` and `SEARCH_OFFSET_BY_TIMESTAMP`.
    OffsetResponseHeader {
        /// The offset.
        offset: i64 = "offset",
    }
}

command_header! {
    /// `GET_EARLIEST_MSG_STORETIME` response header.
    EarliestMsgStoretimeResponseHeader {
        /// Store time, ms.
        timestamp: i64 = "timestamp",
    }
}
