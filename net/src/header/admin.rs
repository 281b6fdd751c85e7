//! Admin headers: create and delete topics, consume stats, delete
//! subscription groups.

use super::command_header;

command_header! {
    /// `UPDATE_AND_CREATE_TOPIC` (17) request header.
    CreateTopicRequestHeader {
        /// Topic.
        topic: String = "topic",
        /// Template topic.
        default_topic: String = "defaultTopic",
        /// Read queue count.
        read_queue_nums: i32 = "readQueueNums",
        /// Write queue count.
        write_queue_nums: i32 = "writeQueueNums",
        /// Permission bits (INHERIT 1, WRITE 2, READ 4).
        perm: i32 = "perm",
        /// `SINGLE_TAG` or `MULTI_TAG`.
        topic_filter_type: String = "topicFilterType",
        /// Topic sys flag.
        topic_sys_flag: Option<i32> = "topicSysFlag",
        /// Ordered topic.
        order: bool = "order",
    }
}

command_header! {
    /// `DELETE_TOPIC_IN_BROKER` (215) and `DELETE_TOPIC_IN_NAMESRV` (216) request header.
    DeleteTopicRequestHeader {
        /// Topic.
        topic: String = "topic",
    }
}

command_header! {
    /// `GET_CONSUME_STATS` (208) request header.
    GetConsumeStatsRequestHeader {
        /// Consumer group.
        consumer_group: String = "consumerGroup",
        /// Restrict to one topic.
        topic: Option<String> = "topic",
    }
}

command_header! {
    /// `DELETE_SUBSCRIPTIONGROUP` (207) request header.
    DeleteSubscriptionGroupRequestHeader {
        /// The group to delete.
        group_name: String = "groupName",
        /// 5.x: also drop the group's committed offsets.
        clean_offset: Option<bool> = "cleanOffset",
    }
}

command_header! {
    /// `INVOKE_BROKER_TO_RESET_OFFSET` (222, admin to broker) and
    /// `RESET_CONSUMER_CLIENT_OFFSET` (220, broker to consumers) header.
    ResetOffsetRequestHeader {
        /// Topic.
        topic: String = "topic",
        /// Consumer group.
        group: String = "group",
        /// Reset to the first message stored at or after this time, ms
        /// (`-1`: the end of each queue).
        timestamp: i64 = "timestamp",
        /// Also move offsets forward (otherwise only back). Required by the
        /// 4.9.x Java client when the broker pushes the reset, so a pushed
        /// header must carry it.
        is_force: Option<bool> = "isForce",
        /// 5.x: reset one queue only (`-1`: every queue, Apache's default).
        queue_id: Option<i32> = "queueId",
        /// 5.x: reset to this offset instead of by timestamp.
        offset: Option<i64> = "offset",
    }
}

command_header! {
    /// `SLUICE_ACL_CHECK` (3500) request header: what `access_key_to_check`
    /// may do on `topic` and `group` (the signer's own key is `AccessKey`).
    AclCheckRequestHeader {
        /// The key asked about.
        access_key_to_check: String = "accessKeyToCheck",
        /// A topic to check publish and subscribe on.
        topic: Option<String> = "topic",
        /// A group to check subscribe on.
        group: Option<String> = "group",
    }
}
