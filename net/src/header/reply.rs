//! `PUSH_REPLY_MESSAGE_TO_CLIENT` (326): the broker hands a reply message to
//! the requester's connection, the message's fields in the header and its
//! body as the command body (Apache's `ReplyMessageRequestHeader`).

use super::command_header;

command_header! {
    /// `PUSH_REPLY_MESSAGE_TO_CLIENT` request header (broker to client).
    ReplyMessageRequestHeader {
        /// Producer group of the replier.
        producer_group: String = "producerGroup",
        /// Reply topic (`{cluster}_REPLY_TOPIC`).
        topic: String = "topic",
        /// Template topic for auto-creation.
        default_topic: String = "defaultTopic",
        /// Queue count for an auto-created topic.
        default_topic_queue_nums: i32 = "defaultTopicQueueNums",
        /// Queue of the reply.
        queue_id: i32 = "queueId",
        /// Message sys flag (the body may be compressed).
        sys_flag: i32 = "sysFlag",
        /// Replier-side timestamp, ms.
        born_timestamp: i64 = "bornTimestamp",
        /// User flag.
        flag: i32 = "flag",
        /// Encoded properties (`CORRELATION_ID`, `REPLY_TO_CLIENT`, ...).
        properties: Option<String> = "properties",
        /// Times reconsumed.
        reconsume_times: Option<i32> = "reconsumeTimes",
        /// Unit mode.
        unit_mode: Option<bool> = "unitMode",
        /// Replier address, `ip:port`.
        born_host: String = "bornHost",
        /// Broker address, `ip:port`.
        store_host: String = "storeHost",
        /// When the broker received the reply, ms.
        store_timestamp: i64 = "storeTimestamp",
    }
}
