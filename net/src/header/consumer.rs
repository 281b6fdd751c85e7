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
    }
}
