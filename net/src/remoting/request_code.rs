//! Request codes: the `code` of a request command, declared once each in
//! [`request_codes!`] with its wire number (spec §2); the constants, their
//! names and [`ALL`] come from that one table, so they cannot drift.

/// Declares each request code once: its doc, constant and wire number.
/// Generates the constants, [`name`] and [`ALL`].
macro_rules! request_codes {
    ($( $(#[$doc:meta])* $name:ident = $value:literal; )*) => {
        $( $(#[$doc])* pub const $name: i32 = $value; )*

        /// Every request code Sluice knows by name, in declaration order.
        pub const ALL: &[(i32, &str)] = &[ $( ($value, stringify!($name)) ),* ];

        /// The constant name of a request code, for logs.
        pub fn name(code: i32) -> Option<&'static str> {
            match code {
                $( $value => Some(stringify!($name)), )*
                _ => None,
            }
        }
    };
}

request_codes! {

    // Client–broker requests.
    /// Send one message with the V1 header.
    SEND_MESSAGE = 10;
    /// Pull messages from one queue (may long-poll).
    PULL_MESSAGE = 11;
    /// Query messages by key.
    QUERY_MESSAGE = 12;
    /// Query the broker's offset (legacy).
    QUERY_BROKER_OFFSET = 13;
    /// Read a group's committed consumer offset.
    QUERY_CONSUMER_OFFSET = 14;
    /// Commit a consumer offset (oneway from clients).
    UPDATE_CONSUMER_OFFSET = 15;
    /// Create or update a topic on a broker.
    UPDATE_AND_CREATE_TOPIC = 17;
    /// Every topic config on a broker, with the table's version
    /// (`mqadmin`, the dashboard, a slave syncing its topics).
    GET_ALL_TOPIC_CONFIG = 21;
    /// Broker runtime statistics.
    GET_BROKER_RUNTIME_INFO = 28;
    /// Find the queue offset for a store time.
    SEARCH_OFFSET_BY_TIMESTAMP = 29;
    /// A queue's next logical offset.
    GET_MAX_OFFSET = 30;
    /// A queue's first logical offset.
    GET_MIN_OFFSET = 31;
    /// Store time of a queue's first message.
    GET_EARLIEST_MSG_STORETIME = 32;
    /// Read one message by commit-log offset.
    VIEW_MESSAGE_BY_ID = 33;
    /// Client heartbeat with producer and consumer data.
    HEART_BEAT = 34;
    /// A client leaves a group.
    UNREGISTER_CLIENT = 35;
    /// Return a message for retry or to the DLQ.
    CONSUMER_SEND_MSG_BACK = 36;
    /// Commit or roll back a half message.
    END_TRANSACTION = 37;
    /// Client IDs of a consumer group.
    GET_CONSUMER_LIST_BY_GROUP = 38;
    /// Lock queues for orderly consumption.
    LOCK_BATCH_MQ = 41;
    /// Unlock queues.
    UNLOCK_BATCH_MQ = 42;
    /// Ask whether the broker accepts a consumer's (non-tag) subscription.
    CHECK_CLIENT_CONFIG = 46;
    /// Admin: reset a group's offsets to a time and tell its live consumers.
    INVOKE_BROKER_TO_RESET_OFFSET = 222;

    // Broker-to-client requests.
    /// Ask a producer for a half message's state.
    CHECK_TRANSACTION_STATE = 39;
    /// Tell consumers to rebalance.
    NOTIFY_CONSUMER_IDS_CHANGED = 40;
    /// Reset a client's offsets.
    RESET_CONSUMER_CLIENT_OFFSET = 220;
    /// Ask a client for its offsets.
    GET_CONSUMER_STATUS_FROM_CLIENT = 221;
    /// Ask a client for its running info.
    GET_CONSUMER_RUNNING_INFO = 307;
    /// Ask a client to consume one message now.
    CONSUME_MESSAGE_DIRECTLY = 309;
    /// Push a reply message to a requester.
    PUSH_REPLY_MESSAGE_TO_CLIENT = 326;

    // Name-server requests.
    /// Store a KV config entry.
    PUT_KV_CONFIG = 100;
    /// Read a KV config entry.
    GET_KV_CONFIG = 101;
    /// Delete a KV config entry.
    DELETE_KV_CONFIG = 102;
    /// A broker registers (every 30 s).
    REGISTER_BROKER = 103;
    /// A broker leaves.
    UNREGISTER_BROKER = 104;
    /// A topic's route.
    GET_ROUTEINFO_BY_TOPIC = 105;
    /// All clusters and brokers.
    GET_BROKER_CLUSTER_INFO = 106;
    /// Every topic the name server knows.
    GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206;
    /// Drop a topic's route.
    DELETE_TOPIC_IN_NAMESRV = 216;
    /// Topics served by one cluster.
    GET_TOPICS_BY_CLUSTER = 224;
    /// Has the broker's topic config changed?
    QUERY_DATA_VERSION = 322;

    // Send variants.
    /// Send one message with the letter-named V2 header.
    SEND_MESSAGE_V2 = 310;
    /// Send a batch (V2 header).
    SEND_BATCH_MESSAGE = 320;
    /// Send a reply message (V1 header).
    SEND_REPLY_MESSAGE = 324;
    /// Send a reply message (V2 header).
    SEND_REPLY_MESSAGE_V2 = 325;

    // Admin.
    /// Create or update a subscription group.
    UPDATE_AND_CREATE_SUBSCRIPTIONGROUP = 200;
    /// Every subscription group's config.
    GET_ALL_SUBSCRIPTIONGROUP_CONFIG = 201;
    /// Delete a subscription group.
    DELETE_SUBSCRIPTIONGROUP = 207;
    /// Consume statistics of a group.
    GET_CONSUME_STATS = 208;
    /// Delete a topic from a broker.
    DELETE_TOPIC_IN_BROKER = 215;
    /// Re-check a half message now.
    RESUME_CHECK_HALF_MESSAGE = 323;

    /// Pull messages for a lite-pull consumer (served as `PULL_MESSAGE`).
    LITE_PULL_MESSAGE = 361;

    // Access control.
    /// The broker's ACL policy (Apache's `AclConfig` body; Sluice leaves
    /// the secrets out).
    GET_BROKER_CLUSTER_ACL_CONFIG = 54;
    /// Sluice: what an access key may do on a topic and a group.
    SLUICE_ACL_CHECK = 3_500;
    /// Sluice: hand out messages under POP leases (see `header::pop`).
    SLUICE_POP_RECEIVE = 3_510;
    /// Sluice: acknowledge one POP delivery by its receipt handle.
    SLUICE_POP_ACK = 3_511;
    /// Sluice: change the invisible time of one POP delivery.
    SLUICE_POP_RENEW = 3_512;

    // Further requests Java clients send in normal operation (listed in
    // node/tests/fixtures/java_client_request_codes.txt).
    /// Upload a class-filter source (4.x class filter mode).
    REGISTER_MESSAGE_FILTER_CLASS = 302;
    /// Time span of a group's consumed messages per queue.
    QUERY_CONSUME_TIME_SPAN = 303;
    /// 5.x: recall (cancel) a timer message by its recall handle.
    RECALL_MESSAGE = 370;
    /// 5.x: ask the broker which queues a client is assigned.
    QUERY_ASSIGNMENT = 400;
    /// 5.x: pop messages (broker-side rebalance).
    POP_MESSAGE = 200_050;
    /// 5.x: acknowledge one popped message.
    ACK_MESSAGE = 200_051;
    /// 5.x: extend a popped message's invisible time.
    CHANGE_MESSAGE_INVISIBLETIME = 200_053;
    /// 5.x: acknowledge popped messages in a batch.
    BATCH_ACK_MESSAGE = 200_151;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_is_declared_once_and_named_by_its_constant() {
        let mut values: Vec<i32> = ALL.iter().map(|(v, _)| *v).collect();
        values.sort_unstable();
        values.dedup();
        assert_eq!(values.len(), ALL.len(), "a wire number declared twice");
        for (value, constant) in ALL {
            assert_eq!(name(*value), Some(*constant));
        }
        assert_eq!(name(LITE_PULL_MESSAGE), Some("LITE_PULL_MESSAGE"));
        assert_eq!(name(-1), None);
    }
}
