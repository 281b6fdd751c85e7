//! Consumer-group headers: `UNREGISTER_CLIENT`, `GET_CONSUMER_LIST_BY_GROUP`,
//! `NOTIFY_CONSUMER_IDS_CHANGED`, `CONSUMER_SEND_MSG_BACK` and the broker-to-client
//! running-info and consume-directly requests.

use super::command_header;

command_header! {
    /// `UNREGISTER_CLIENT` (35) request header.
    UnregisterClientRequestHeader {
        /// `ip@instance`.
        client_id: String = "clientID",
        /// Producer group being left.
        producer_group: Option<String> = "producerGroup",
        /// Consumer group being left.
        consumer_group: Option<String> = "consumerGroup",
    }
}

command_header! {
    /// `GET_CONSUMER_LIST_BY_GROUP` (38) request header.
    GetConsumerListByGroupRequestHeader {
        /// Consumer group.
        consumer_group: String = "consumerGroup",
    }
}

command_header! {
    /// `NOTIFY_CONSUMER_IDS_CHANGED` (40) request header (oneway, broker to client).
    NotifyConsumerIdsChangedRequestHeader {
        /// Consumer group whose membership changed.
        consumer_group: String = "consumerGroup",
    }
}

command_header! {
    /// `CONSUMER_SEND_MSG_BACK` (36) request header.
    ConsumerSendMsgBackRequestHeader {
        /// Commit-log offset of the message.
        offset: i64 = "offset",
        /// Consumer group.
        group: String = "group",
        /// Delay level (0 = by reconsume times, < 0 = straight to the DLQ).
        delay_level: i32 = "delayLevel",
        /// Original message ID.
        origin_msg_id: Option<String> = "originMsgId",
        /// Original topic.
        origin_topic: Option<String> = "originTopic",
        /// Unit mode.
        unit_mode: Option<bool> = "unitMode",
        /// Reconsume limit.
        max_reconsume_times: Option<i32> = "maxReconsumeTimes",
    }
}

command_header! {
    /// `GET_CONSUMER_RUNNING_INFO` (307) request header (broker to client).
    GetConsumerRunningInfoRequestHeader {
        /// Consumer group.
        consumer_group: String = "consumerGroup",
        /// Client ID.
        client_id: String = "clientId",
        /// Include a thread dump.
        jstack_enable: Option<bool> = "jstackEnable",
    }
}

command_header! {
    /// `CONSUME_MESSAGE_DIRECTLY` (309) request header (broker to client).
    ConsumeMessageDirectlyRequestHeader {
        /// Consumer group.
        consumer_group: String = "consumerGroup",
        /// Client ID.
        client_id: Option<String> = "clientId",
        /// Message ID.
        msg_id: Option<String> = "msgId",
        /// Broker name.
        broker_name: Option<String> = "brokerName",
        /// 5.x: the message's topic.
        topic: Option<String> = "topic",
        /// 5.x: the topic's sys flag.
        topic_sys_flag: Option<i32> = "topicSysFlag",
        /// 5.x: the group's sys flag.
        group_sys_flag: Option<i32> = "groupSysFlag",
    }
}

/// extFields key of a `HEART_BEAT` answer: whether the broker takes 5.x's
/// heartbeat V2 (a heartbeat that repeats only a subscription fingerprint).
pub const IS_SUPPORT_HEART_BEAT_V2: &str = "IS_SUPPORT_HEART_BEAT_V2";
/// extFields key of a `HEART_BEAT` answer: whether a subscription changed.
pub const IS_SUB_CHANGE: &str = "IS_SUB_CHANGE";

command_header! {
    /// `HEART_BEAT` (34) response header. Apache's 5.x broker always answers
    /// with both keys, and 5.x clients that use heartbeat V2 read them
    /// without a null check; 4.9.x answers with no header.
    HeartbeatResponseHeader {
        /// The broker takes heartbeat V2 (fingerprint-only heartbeats).
        is_support_heart_beat_v2: Option<bool> = "IS_SUPPORT_HEART_BEAT_V2",
        /// A consumer group's subscription changed with this heartbeat.
        is_sub_change: Option<bool> = "IS_SUB_CHANGE",
    }
}

impl HeartbeatResponseHeader {
    /// The answer of a broker that only takes full heartbeats: V2 is not
    /// supported, so clients keep sending subscriptions and `IS_SUB_CHANGE`
    /// is `true` as Apache writes it for a full heartbeat.
    pub fn full_heartbeats_only() -> Self {
        Self {
            is_support_heart_beat_v2: Some(false),
            is_sub_change: Some(true),
        }
    }
}
