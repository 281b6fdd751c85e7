//! The name server's routing state: broker sets by name, clusters, per-topic
//! queue data (set only by masters), and live-broker records keyed by address.
//! Invariant: every broker name in a cluster or a topic has a broker set.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use sluice_core::Clock;
use sluice_net::body::{
    BrokerData, ClusterInfo, DataVersion, QueueData, TopicConfigSerializeWrapper, TopicRouteData,
    MASTER_ID,
};
use sluice_net::rpc::ConnectionId;

/// One broker's registration, as decoded from `REGISTER_BROKER`.
#[derive(Debug, Clone, Default)]
pub struct Registration {
    /// Cluster name.
    pub cluster: String,
    /// Broker set name (shared by a master and its slaves).
    pub broker_name: String,
    /// `ip:port` clients use.
    pub broker_addr: String,
    /// 0 for the master, positive for slaves.
    pub broker_id: i64,
    /// `ip:port` of the broker's HA service.
    pub ha_server_addr: String,
    /// The broker's topics and their version; only a master's are routed.
    pub topics: TopicConfigSerializeWrapper,
    /// Filter servers attached to the broker.
    pub filter_servers: Vec<String>,
    /// The connection the registration arrived on; closing it drops the broker.
    pub connection: ConnectionId,
    /// A controller-managed master's epoch: a master registering with a
    /// lower epoch than one already seen for its broker name is deposed,
    /// and is not routed.
    pub master_epoch: Option<i64>,
}

/// What a registering broker learns: its master, if it is a slave.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RegisterOutcome {
    /// The master's address, for a slave whose master is registered.
    pub master_addr: Option<String>,
    /// The master's HA address, for a slave whose master is live.
    pub master_ha_server_addr: Option<String>,
}

/// A broker dropped by expiry or a closed connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemovedBroker {
    /// The broker's address.
    pub broker_addr: String,
    /// The connection it last registered on.
    pub connection: ConnectionId,
}

/// What the name server remembers about a live broker.
#[derive(Debug, Clone)]
struct LiveBroker {
    /// Monotonic time of the last registration or version query.
    last_update: Duration,
    data_version: DataVersion,
    connection: ConnectionId,
    ha_server_addr: String,
}

/// Brokers, clusters and topic routes, with liveness read from clock `C`.
#[derive(Debug)]
pub struct RouteTable<C: Clock> {
    clock: C,
    /// Broker name → cluster and `brokerId → addr`.
    brokers: BTreeMap<String, BrokerData>,
    /// Cluster name → broker names.
    clusters: BTreeMap<String, BTreeSet<String>>,
    /// Topic → broker name → that broker's queues of the topic.
    topics: BTreeMap<String, BTreeMap<String, QueueData>>,
    /// Broker address → liveness.
    live: BTreeMap<String, LiveBroker>,
    /// Broker address → filter servers.
    filter_servers: BTreeMap<String, Vec<String>>,
    /// Broker name → the highest master epoch registered.
    master_epochs: BTreeMap<String, i64>,
}

impl<C: Clock> RouteTable<C> {
    /// An empty table reading time from `clock`.
    pub fn new(clock: C) -> Self {
        Self {
            clock,
            brokers: BTreeMap::new(),
            clusters: BTreeMap::new(),
            topics: BTreeMap::new(),
            live: BTreeMap::new(),
            filter_servers: BTreeMap::new(),
            master_epochs: BTreeMap::new(),
        }
    }

    /// Records a registration (or a periodic re-registration). A master whose
    /// topic data version changed, or that registers for the first time,
    /// replaces its queue data for every topic it reports.
    pub fn register(&mut self, registration: Registration) -> RegisterOutcome {
        let Registration {
            cluster,
            broker_name,
            broker_addr,
            broker_id,
            ha_server_addr,
            topics,
            filter_servers,
            connection,
            master_epoch,
        } = registration;
        if broker_id == MASTER_ID {
            if let Some(epoch) = master_epoch {
                let highest = self
                    .master_epochs
                    .entry(broker_name.clone())
                    .or_insert(epoch);
                if epoch < *highest {
                    tracing::warn!(
                        broker = %broker_name, addr = %broker_addr, epoch, highest = *highest,
                        "registration of a deposed master ignored"
                    );
                    return RegisterOutcome::default();
                }
                *highest = epoch;
            }
        }
        self.clusters
            .entry(cluster.clone())
            .or_default()
            .insert(broker_name.clone());
        let mut first_registration = !self.brokers.contains_key(&broker_name);
        let set = self
            .brokers
            .entry(broker_name.clone())
            .or_insert_with(|| BrokerData {
                broker_addrs: BTreeMap::new(),
                broker_name: broker_name.clone(),
                cluster: cluster.clone(),
                enable_acting_master: false,
            });
        set.cluster.clone_from(&cluster);
        // A broker that changes role keeps its address: one address, one ID.
        set.broker_addrs
            .retain(|id, addr| *id == broker_id || *addr != broker_addr);
        let previous = set.broker_addrs.insert(broker_id, broker_addr.clone());
        first_registration |= previous.is_none();

        if broker_id == MASTER_ID
            && (first_registration || self.version_changed(&broker_addr, &topics.data_version))
        {
            for (key, config) in &topics.topic_config_table {
                let topic = if config.topic_name.is_empty() {
                    key
                } else {
                    &config.topic_name
                };
                let queues = QueueData {
                    broker_name: broker_name.clone(),
                    read_queue_nums: config.read_queue_nums,
                    write_queue_nums: config.write_queue_nums,
                    perm: config.perm,
                    topic_sys_flag: config.topic_sys_flag,
                };
                self.topics
                    .entry(topic.clone())
                    .or_default()
                    .insert(broker_name.clone(), queues);
            }
        }

        let now = self.clock.monotonic();
        let live = LiveBroker {
            last_update: now,
            data_version: topics.data_version,
            connection,
            ha_server_addr,
        };
        if self.live.insert(broker_addr.clone(), live).is_none() {
            tracing::info!(%cluster, %broker_name, %broker_addr, broker_id, "broker registered");
        }
        if filter_servers.is_empty() {
            self.filter_servers.remove(&broker_addr);
        } else {
            self.filter_servers
                .insert(broker_addr.clone(), filter_servers);
        }

        let mut outcome = RegisterOutcome::default();
        if broker_id != MASTER_ID {
            let master_addr = self
                .brokers
                .get(&broker_name)
                .and_then(|set| set.broker_addrs.get(&MASTER_ID));
            if let Some(master_addr) = master_addr {
                outcome.master_ha_server_addr = self
                    .live
                    .get(master_addr)
                    .map(|live| live.ha_server_addr.clone());
                outcome.master_addr = Some(master_addr.clone());
            }
        }
        outcome
    }

    /// True when `version` differs from the one `broker_addr` last
    /// registered with, or the broker is not live.
    pub fn version_changed(&self, broker_addr: &str, version: &DataVersion) -> bool {
        self.live
            .get(broker_addr)
            .is_none_or(|live| live.data_version != *version)
    }

    /// The data version `broker_addr` last registered with.
    pub fn data_version(&self, broker_addr: &str) -> Option<DataVersion> {
        self.live.get(broker_addr).map(|live| live.data_version)
    }

    /// Marks a live broker as heard from now; false if it is not live.
    pub fn touch(&mut self, broker_addr: &str) -> bool {
        let now = self.clock.monotonic();
        self.live
            .get_mut(broker_addr)
            .map(|live| live.last_update = now)
            .is_some()
    }

    /// Removes the broker at `broker_addr` with ID `broker_id` from set
    /// `broker_name`, as `UNREGISTER_BROKER` asks. An ID now held by another
    /// address is left alone.
    pub fn unregister(&mut self, broker_name: &str, broker_addr: &str, broker_id: i64) {
        self.live.remove(broker_addr);
        self.filter_servers.remove(broker_addr);
        let Some(set) = self.brokers.get_mut(broker_name) else {
            return;
        };
        if set.broker_addrs.get(&broker_id).map(String::as_str) == Some(broker_addr) {
            set.broker_addrs.remove(&broker_id);
            tracing::info!(%broker_name, %broker_addr, broker_id, "broker unregistered");
        }
        self.drop_empty_set(broker_name);
    }

    /// Drops every broker that last registered on `connection` (it closed).
    pub fn remove_connection(&mut self, connection: ConnectionId) -> Vec<RemovedBroker> {
        let gone: Vec<String> = self
            .live
            .iter()
            .filter(|(_, live)| live.connection == connection)
            .map(|(addr, _)| addr.clone())
            .collect();
        gone.into_iter()
            .map(|addr| {
                tracing::info!(broker_addr = %addr, connection, "broker connection closed");
                self.remove_addr(&addr, connection)
            })
            .collect()
    }

    /// Drops every broker not heard from for longer than `expiry`.
    pub fn remove_expired(&mut self, expiry: Duration) -> Vec<RemovedBroker> {
        let now = self.clock.monotonic();
        let expired: Vec<(String, ConnectionId)> = self
            .live
            .iter()
            .filter(|(_, live)| now.saturating_sub(live.last_update) > expiry)
            .map(|(addr, live)| (addr.clone(), live.connection))
            .collect();
        expired
            .into_iter()
            .map(|(addr, connection)| {
                tracing::warn!(broker_addr = %addr, expiry_ms = expiry.as_millis(), "broker expired");
                self.remove_addr(&addr, connection)
            })
            .collect()
    }

    /// Removes a whole topic's routes (`DELETE_TOPIC_IN_NAMESRV`).
    pub fn delete_topic(&mut self, topic: &str) -> bool {
        self.topics.remove(topic).is_some()
    }

    fn remove_addr(&mut self, broker_addr: &str, connection: ConnectionId) -> RemovedBroker {
        self.live.remove(broker_addr);
        self.filter_servers.remove(broker_addr);
        let names: Vec<String> = self
            .brokers
            .iter_mut()
            .filter_map(|(name, set)| {
                let before = set.broker_addrs.len();
                set.broker_addrs.retain(|_, addr| addr != broker_addr);
                (set.broker_addrs.len() != before).then(|| name.clone())
            })
            .collect();
        for name in &names {
            self.drop_empty_set(name);
        }
        RemovedBroker {
            broker_addr: broker_addr.to_owned(),
            connection,
        }
    }

    /// Forgets a broker set with no brokers left, with its cluster entry and
    /// its queues of every topic.
    fn drop_empty_set(&mut self, broker_name: &str) {
        let Some(set) = self.brokers.get(broker_name) else {
            return;
        };
        if !set.broker_addrs.is_empty() {
            return;
        }
        let cluster = set.cluster.clone();
        self.brokers.remove(broker_name);
        if let Some(names) = self.clusters.get_mut(&cluster) {
            names.remove(broker_name);
            if names.is_empty() {
                self.clusters.remove(&cluster);
            }
        }
        self.topics.retain(|_, queues| {
            queues.remove(broker_name);
            !queues.is_empty()
        });
        tracing::info!(%broker_name, %cluster, "broker set removed");
    }

    /// The route of `topic`, or `None` when no live broker set serves it.
    pub fn route(&self, topic: &str) -> Option<TopicRouteData> {
        let queues = self.topics.get(topic)?;
        let broker_datas: Vec<BrokerData> = queues
            .keys()
            .filter_map(|name| self.brokers.get(name).cloned())
            .collect();
        if broker_datas.is_empty() {
            return None;
        }
        let filter_server_table = broker_datas
            .iter()
            .flat_map(|set| set.broker_addrs.values())
            .filter_map(|addr| Some((addr.clone(), self.filter_servers.get(addr)?.clone())))
            .collect();
        Some(TopicRouteData {
            broker_datas,
            filter_server_table,
            order_topic_conf: None,
            queue_datas: queues.values().cloned().collect(),
        })
    }

    /// Every broker set and cluster.
    pub fn cluster_info(&self) -> ClusterInfo {
        ClusterInfo {
            broker_addr_table: self.brokers.clone(),
            cluster_addr_table: self
                .clusters
                .iter()
                .map(|(cluster, names)| (cluster.clone(), names.iter().cloned().collect()))
                .collect(),
        }
    }

    /// Every routed topic, in name order.
    pub fn topics(&self) -> Vec<String> {
        self.topics.keys().cloned().collect()
    }

    /// Topics served by at least one broker set of `cluster`, in name order.
    pub fn topics_by_cluster(&self, cluster: &str) -> Vec<String> {
        let Some(names) = self.clusters.get(cluster) else {
            return Vec::new();
        };
        self.topics
            .iter()
            .filter(|(_, queues)| queues.keys().any(|name| names.contains(name)))
            .map(|(topic, _)| topic.clone())
            .collect()
    }

    /// True while some live broker last registered on `connection`.
    pub fn connection_in_use(&self, connection: ConnectionId) -> bool {
        self.live.values().any(|live| live.connection == connection)
    }

    /// Addresses of the live brokers, in address order.
    pub fn live_brokers(&self) -> Vec<String> {
        self.live.keys().cloned().collect()
    }
}

#[cfg(test)]
mod tests;
