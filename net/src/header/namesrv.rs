//! Name-server headers: broker registration, routes, topics by cluster, data
//! version and KV config.

use super::command_header;

command_header! {
    /// `REGISTER_BROKER` (103) request header.
    RegisterBrokerRequestHeader {
        /// Broker name (shared by master and slaves).
        broker_name: String = "brokerName",
        /// `ip:port` clients use.
        broker_addr: String = "brokerAddr",
        /// Cluster name.
        cluster_name: String = "clusterName",
        /// `ip:port` of the HA service.
        ha_server_addr: String = "haServerAddr",
        /// 0 = master.
        broker_id: i64 = "brokerId",
        /// Body is compressed.
        compressed: Option<bool> = "compressed",
        /// CRC32 of the body, checked when non-zero.
        body_crc32: Option<i32> = "bodyCrc32",
        /// Sluice: the master epoch of a controller-managed master. A
        /// name server keeps the master with the highest epoch, so a
        /// deposed master still registering cannot take the route back.
        master_epoch: Option<i64> = "sluiceMasterEpoch",
    }
}

command_header! {
    /// `REGISTER_BROKER` response header: how a slave finds its master.
    RegisterBrokerResponseHeader {
        /// Master's HA address.
        ha_server_addr: Option<String> = "haServerAddr",
        /// Master's address.
        master_addr: Option<String> = "masterAddr",
    }
}

command_header! {
    /// `UNREGISTER_BROKER` (104) and `QUERY_DATA_VERSION` (322) request header.
    BrokerIdentityRequestHeader {
        /// Broker name.
        broker_name: String = "brokerName",
        /// Broker address.
        broker_addr: String = "brokerAddr",
        /// Cluster name.
        cluster_name: String = "clusterName",
        /// Broker ID.
        broker_id: i64 = "brokerId",
    }
}

command_header! {
    /// `QUERY_DATA_VERSION` response header.
    QueryDataVersionResponseHeader {
        /// The broker's topic config changed since it was registered.
        changed: bool = "changed",
    }
}

command_header! {
    /// `GET_ROUTEINFO_BY_TOPIC` (105) request header.
    GetRouteInfoRequestHeader {
        /// Topic.
        topic: String = "topic",
        /// 5.x: the client only parses standard (quoted-key) JSON.
        accept_standard_json_only: Option<bool> = "acceptStandardJsonOnly",
    }
}

command_header! {
    /// `GET_TOPICS_BY_CLUSTER` (224) request header.
    GetTopicsByClusterRequestHeader {
        /// Cluster name.
        cluster: String = "cluster",
    }
}

command_header! {
    /// `PUT_KV_CONFIG` (100) request header.
    PutKvConfigRequestHeader {
        /// Namespace.
        namespace: String = "namespace",
        /// Key.
        key: String = "key",
        /// Value.
        value: String = "value",
    }
}

command_header! {
    /// `GET_KV_CONFIG` (101) and `DELETE_KV_CONFIG` (102) request header.
    KvConfigKeyRequestHeader {
        /// Namespace.
        namespace: String = "namespace",
        /// Key.
        key: String = "key",
    }
}

command_header! {
    /// `GET_KV_CONFIG` response header.
    GetKvConfigResponseHeader {
        /// The value, if any.
        value: Option<String> = "value",
    }
}
