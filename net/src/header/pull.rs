//! `PULL_MESSAGE` (11) request and response headers and the pull sys-flag bits.

use super::command_header;

/// Pull sys flag: also commit `commitOffset` (master only).
pub const PULL_FLAG_COMMIT_OFFSET: i32 = 0x1;
/// Pull sys flag: long polling allowed.
pub const PULL_FLAG_SUSPEND: i32 = 0x2;
/// Pull sys flag: use the subscription carried in the header.
pub const PULL_FLAG_SUBSCRIPTION: i32 = 0x4;
/// Pull sys flag: class filter.
pub const PULL_FLAG_CLASS_FILTER: i32 = 0x8;
/// Pull sys flag: lite pull consumer.
pub const PULL_FLAG_LITE_PULL: i32 = 0x10;

command_header! {
    /// `PULL_MESSAGE` request header.
    PullMessageRequestHeader {
        /// Consumer group.
        consumer_group: String = "consumerGroup",
        /// Topic.
        topic: String = "topic",
        /// Queue.
        queue_id: i32 = "queueId",
        /// Logical queue offset to read from.
        queue_offset: i64 = "queueOffset",
        /// Most messages to return (client default 32).
        max_msg_nums: i32 = "maxMsgNums",
        /// `PULL_FLAG_*` bits.
        sys_flag: i32 = "sysFlag",
        /// Offset to commit when `PULL_FLAG_COMMIT_OFFSET` is set.
        commit_offset: i64 = "commitOffset",
        /// Long-poll hold time, ms (push consumers send 15000).
        suspend_timeout_millis: i64 = "suspendTimeoutMillis",
        /// Subscription expression.
        subscription: Option<String> = "subscription",
        /// Subscription version.
        sub_version: i64 = "subVersion",
        /// `TAG` or `SQL92`.
        expression_type: Option<String> = "expressionType",
        /// 5.x: most bytes to return.
        max_msg_bytes: Option<i32> = "maxMsgBytes",
    }
}

command_header! {
    /// `PULL_MESSAGE` response header.
    PullMessageResponseHeader {
        /// Broker ID the client should pull from next (0 = master).
        suggest_which_broker_id: i64 = "suggestWhichBrokerId",
        /// Next logical offset to pull.
        next_begin_offset: i64 = "nextBeginOffset",
        /// Queue's min offset.
        min_offset: i64 = "minOffset",
        /// Queue's max offset.
        max_offset: i64 = "maxOffset",
        /// 5.x: logical-to-physical offset delta of a static-topic queue.
        offset_delta: Option<i64> = "offsetDelta",
        /// 5.x: the topic's sys flag (Apache's 5.x broker fills it on every
        /// pull it serves).
        topic_sys_flag: Option<i32> = "topicSysFlag",
        /// 5.x: the consumer group's sys flag (filled like `topicSysFlag`).
        group_sys_flag: Option<i32> = "groupSysFlag",
        /// 5.x: why a pull was refused (`ForbiddenType`), on `NO_PERMISSION`.
        forbidden_type: Option<i32> = "forbiddenType",
    }
}
