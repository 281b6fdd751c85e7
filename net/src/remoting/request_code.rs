//! Request codes: the `code` of a request command, one named constant per
//! request with its explicit wire number (spec §2).

// Client–broker requests.
/// Send one message with the V1 header.
pub const SEND_MESSAGE: i32 = 10;
/// Pull messages from one queue (may long-poll).
pub const PULL_MESSAGE: i32 = 11;
/// Query messages by key.
pub const QUERY_MESSAGE: i32 = 12;
/// Query the broker's offset (legacy).
pub const QUERY_BROKER_OFFSET: i32 = 13;
/// Read a group's committed consumer offset.
pub const QUERY_CONSUMER_OFFSET: i32 = 14;
/// Commit a consumer offset (oneway from clients).
pub const UPDATE_CONSUMER_OFFSET: i32 = 15;
/// Create or update a topic on a broker.
pub const UPDATE_AND_CREATE_TOPIC: i32 = 17;
/// Broker runtime statistics.
pub const GET_BROKER_RUNTIME_INFO: i32 = 28;
/// Find the queue offset for a store time.
pub const SEARCH_OFFSET_BY_TIMESTAMP: i32 = 29;
/// A queue's next logical offset.
pub const GET_MAX_OFFSET: i32 = 30;
/// A queue's first logical offset.
pub const GET_MIN_OFFSET: i32 = 31;
/// Store time of a queue's first message.
pub const GET_EARLIEST_MSG_STORETIME: i32 = 32;
/// Read one message by commit-log offset.
pub const VIEW_MESSAGE_BY_ID: i32 = 33;
/// Client heartbeat with producer and consumer data.
pub const HEART_BEAT: i32 = 34;
/// A client leaves a group.
pub const UNREGISTER_CLIENT: i32 = 35;
/// Return a message for retry or to the DLQ.
pub const CONSUMER_SEND_MSG_BACK: i32 = 36;
/// Commit or roll back a half message.
pub const END_TRANSACTION: i32 = 37;
/// Client IDs of a consumer group.
pub const GET_CONSUMER_LIST_BY_GROUP: i32 = 38;
/// Lock queues for orderly consumption.
pub const LOCK_BATCH_MQ: i32 = 41;
/// Unlock queues.
pub const UNLOCK_BATCH_MQ: i32 = 42;
/// Ask whether the broker accepts a consumer's (non-tag) subscription.
pub const CHECK_CLIENT_CONFIG: i32 = 46;
/// Admin: reset a group's offsets to a time and tell its live consumers.
pub const INVOKE_BROKER_TO_RESET_OFFSET: i32 = 222;

// Broker-to-client requests.
/// Ask a producer for a half message's state.
pub const CHECK_TRANSACTION_STATE: i32 = 39;
/// Tell consumers to rebalance.
pub const NOTIFY_CONSUMER_IDS_CHANGED: i32 = 40;
/// Reset a client's offsets.
pub const RESET_CONSUMER_CLIENT_OFFSET: i32 = 220;
/// Ask a client for its offsets.
pub const GET_CONSUMER_STATUS_FROM_CLIENT: i32 = 221;
/// Ask a client for its running info.
pub const GET_CONSUMER_RUNNING_INFO: i32 = 307;
/// Ask a client to consume one message now.
pub const CONSUME_MESSAGE_DIRECTLY: i32 = 309;
/// Push a reply message to a requester.
pub const PUSH_REPLY_MESSAGE_TO_CLIENT: i32 = 326;

// Name-server requests.
/// Store a KV config entry.
pub const PUT_KV_CONFIG: i32 = 100;
/// Read a KV config entry.
pub const GET_KV_CONFIG: i32 = 101;
/// Delete a KV config entry.
pub const DELETE_KV_CONFIG: i32 = 102;
/// A broker registers (every 30 s).
pub const REGISTER_BROKER: i32 = 103;
/// A broker leaves.
pub const UNREGISTER_BROKER: i32 = 104;
/// A topic's route.
pub const GET_ROUTEINFO_BY_TOPIC: i32 = 105;
/// All clusters and brokers.
pub const GET_BROKER_CLUSTER_INFO: i32 = 106;
/// Every topic the name server knows.
pub const GET_ALL_TOPIC_LIST_FROM_NAMESERVER: i32 = 206;
/// Drop a topic's route.
pub const DELETE_TOPIC_IN_NAMESRV: i32 = 216;
/// Topics served by one cluster.
pub const GET_TOPICS_BY_CLUSTER: i32 = 224;
/// Has the broker's topic config changed?
pub const QUERY_DATA_VERSION: i32 = 322;

// Send variants.
/// Send one message with the letter-named V2 header.
pub const SEND_MESSAGE_V2: i32 = 310;
/// Send a batch (V2 header).
pub const SEND_BATCH_MESSAGE: i32 = 320;
/// Send a reply message (V1 header).
pub const SEND_REPLY_MESSAGE: i32 = 324;
/// Send a reply message (V2 header).
pub const SEND_REPLY_MESSAGE_V2: i32 = 325;

// Admin.
/// Create or update a subscription group.
pub const UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: i32 = 200;
/// Every subscription group's config.
pub const GET_ALL_SUBSCRIPTIONGROUP_CONFIG: i32 = 201;
/// Delete a subscription group.
pub const DELETE_SUBSCRIPTIONGROUP: i32 = 207;
/// Consume statistics of a group.
pub const GET_CONSUME_STATS: i32 = 208;
/// Delete a topic from a broker.
pub const DELETE_TOPIC_IN_BROKER: i32 = 215;
/// Re-check a half message now.
pub const RESUME_CHECK_HALF_MESSAGE: i32 = 323;

/// The constant name of a request code, for logs.
pub fn name(code: i32) -> Option<&'static str> {
    Some(match code {
        SEND_MESSAGE => "SEND_MESSAGE",
        PULL_MESSAGE => "PULL_MESSAGE",
        QUERY_MESSAGE => "QUERY_MESSAGE",
        QUERY_BROKER_OFFSET => "QUERY_BROKER_OFFSET",
        QUERY_CONSUMER_OFFSET => "QUERY_CONSUMER_OFFSET",
        UPDATE_CONSUMER_OFFSET => "UPDATE_CONSUMER_OFFSET",
        UPDATE_AND_CREATE_TOPIC => "UPDATE_AND_CREATE_TOPIC",
        GET_BROKER_RUNTIME_INFO => "GET_BROKER_RUNTIME_INFO",
        SEARCH_OFFSET_BY_TIMESTAMP => "SEARCH_OFFSET_BY_TIMESTAMP",
        GET_MAX_OFFSET => "GET_MAX_OFFSET",
        GET_MIN_OFFSET => "GET_MIN_OFFSET",
        GET_EARLIEST_MSG_STORETIME => "GET_EARLIEST_MSG_STORETIME",
        VIEW_MESSAGE_BY_ID => "VIEW_MESSAGE_BY_ID",
        HEART_BEAT => "HEART_BEAT",
        UNREGISTER_CLIENT => "UNREGISTER_CLIENT",
        CONSUMER_SEND_MSG_BACK => "CONSUMER_SEND_MSG_BACK",
        END_TRANSACTION => "END_TRANSACTION",
        GET_CONSUMER_LIST_BY_GROUP => "GET_CONSUMER_LIST_BY_GROUP",
        LOCK_BATCH_MQ => "LOCK_BATCH_MQ",
        UNLOCK_BATCH_MQ => "UNLOCK_BATCH_MQ",
        CHECK_CLIENT_CONFIG => "CHECK_CLIENT_CONFIG",
        INVOKE_BROKER_TO_RESET_OFFSET => "INVOKE_BROKER_TO_RESET_OFFSET",
        CHECK_TRANSACTION_STATE => "CHECK_TRANSACTION_STATE",
        NOTIFY_CONSUMER_IDS_CHANGED => "NOTIFY_CONSUMER_IDS_CHANGED",
        RESET_CONSUMER_CLIENT_OFFSET => "RESET_CONSUMER_CLIENT_OFFSET",
        GET_CONSUMER_STATUS_FROM_CLIENT => "GET_CONSUMER_STATUS_FROM_CLIENT",
        GET_CONSUMER_RUNNING_INFO => "GET_CONSUMER_RUNNING_INFO",
        CONSUME_MESSAGE_DIRECTLY => "CONSUME_MESSAGE_DIRECTLY",
        PUSH_REPLY_MESSAGE_TO_CLIENT => "PUSH_REPLY_MESSAGE_TO_CLIENT",
        PUT_KV_CONFIG => "PUT_KV_CONFIG",
        GET_KV_CONFIG => "GET_KV_CONFIG",
        DELETE_KV_CONFIG => "DELETE_KV_CONFIG",
        REGISTER_BROKER => "REGISTER_BROKER",
        UNREGISTER_BROKER => "UNREGISTER_BROKER",
        GET_ROUTEINFO_BY_TOPIC => "GET_ROUTEINFO_BY_TOPIC",
        GET_BROKER_CLUSTER_INFO => "GET_BROKER_CLUSTER_INFO",
        GET_ALL_TOPIC_LIST_FROM_NAMESERVER => "GET_ALL_TOPIC_LIST_FROM_NAMESERVER",
        DELETE_TOPIC_IN_NAMESRV => "DELETE_TOPIC_IN_NAMESRV",
        GET_TOPICS_BY_CLUSTER => "GET_TOPICS_BY_CLUSTER",
        QUERY_DATA_VERSION => "QUERY_DATA_VERSION",
        SEND_MESSAGE_V2 => "SEND_MESSAGE_V2",
        SEND_BATCH_MESSAGE => "SEND_BATCH_MESSAGE",
        SEND_REPLY_MESSAGE => "SEND_REPLY_MESSAGE",
        SEND_REPLY_MESSAGE_V2 => "SEND_REPLY_MESSAGE_V2",
        UPDATE_AND_CREATE_SUBSCRIPTIONGROUP => "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP",
        GET_ALL_SUBSCRIPTIONGROUP_CONFIG => "GET_ALL_SUBSCRIPTIONGROUP_CONFIG",
        DELETE_SUBSCRIPTIONGROUP => "DELETE_SUBSCRIPTIONGROUP",
        GET_CONSUME_STATS => "GET_CONSUME_STATS",
        DELETE_TOPIC_IN_BROKER => "DELETE_TOPIC_IN_BROKER",
        RESUME_CHECK_HALF_MESSAGE => "RESUME_CHECK_HALF_MESSAGE",
        _ => return None,
    })
}
