//! Producers and consumers known to the broker through heartbeats: their
//! groups, client ids, connections and (for consumers) subscriptions. A
//! connection that closes or stays silent past the idle limit is dropped.
//! Ordered maps keep every walk deterministic.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::Duration;

use sluice_net::body::{ConsumerData, SubscriptionData};
use sluice_net::remoting::LanguageCode;
use sluice_net::rpc::ConnectionId;
use sluice_net::ConnectionHandle;

/// One client connection in a group.
#[derive(Clone)]
pub struct Channel {
    /// `clientIP@instance`.
    pub client_id: String,
    /// The connection heartbeats arrive on (for broker→client calls).
    pub connection: ConnectionHandle,
    /// Monotonic time of the last heartbeat.
    pub last_seen: Duration,
    /// The client's language, from its heartbeat's header: bodies the
    /// broker pushes take the form that language's client parses.
    pub language: LanguageCode,
}

/// A consumer group's registration.
#[derive(Clone, Default)]
pub struct ConsumerGroup {
    /// `CLUSTERING` or `BROADCASTING`.
    pub message_model: String,
    /// `CONSUME_PASSIVELY` (push) or `CONSUME_ACTIVELY` (pull).
    pub consume_type: String,
    /// Subscriptions by topic (the latest heartbeat wins).
    pub subscriptions: BTreeMap<String, SubscriptionData>,
    /// Live connections.
    pub channels: BTreeMap<ConnectionId, Channel>,
    /// Connections whose latest registration consumes by POP (5.x
    /// clients, consume type `CONSUME_POP`); may name closed ones.
    pub pop_members: BTreeSet<ConnectionId>,
}

/// The consume type of POP (5.x) consumers.
pub const CONSUME_POP: &str = "CONSUME_POP";

/// The registry.
#[derive(Default)]
pub struct ClientRegistry {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    producers: BTreeMap<String, BTreeMap<ConnectionId, Channel>>,
    consumers: BTreeMap<String, ConsumerGroup>,
}

impl ClientRegistry {
    /// Registers a producer group member.
    pub fn register_producer(&self, group: &str, channel: Channel) {
        self.lock()
            .producers
            .entry(group.to_owned())
            .or_default()
            .insert(channel.connection.id(), channel);
    }

    /// Registers a consumer group member; true when the group's membership
    /// changed (its members must be told to rebalance).
    pub fn register_consumer(&self, data: &ConsumerData, channel: Channel) -> bool {
        let mut inner = self.lock();
        let group = inner.consumers.entry(data.group_name.clone()).or_default();
        group.message_model.clone_from(&data.message_model);
        group.consume_type.clone_from(&data.consume_type);
        for sub in &data.subscription_data_set {
            group.subscriptions.insert(sub.topic.clone(), sub.clone());
        }
        let id = channel.connection.id();
        if data.consume_type == CONSUME_POP {
            group.pop_members.insert(id);
        } else {
            group.pop_members.remove(&id);
        }
        let changed = group
            .channels
            .get(&id)
            .is_none_or(|c| c.client_id != channel.client_id);
        group.channels.insert(id, channel);
        changed
    }

    /// Removes a client from the named groups; returns the consumer groups
    /// whose membership changed.
    pub fn unregister(
        &self,
        client_id: &str,
        producer_group: Option<&str>,
        consumer_group: Option<&str>,
    ) -> Vec<String> {
        let mut inner = self.lock();
        if let Some(g) = producer_group {
            if let Some(chs) = inner.producers.get_mut(g) {
                chs.retain(|_, c| c.client_id != client_id);
            }
        }
        let mut changed = Vec::new();
        if let Some(g) = consumer_group {
            if let Some(group) = inner.consumers.get_mut(g) {
                let before = group.channels.len();
                group.channels.retain(|_, c| c.client_id != client_id);
                if group.channels.len() != before {
                    changed.push(g.to_owned());
                }
            }
        }
        changed
    }

    /// Drops every registration made over `connection`; returns the consumer
    /// groups whose membership changed.
    pub fn remove_connection(&self, connection: ConnectionId) -> Vec<String> {
        self.remove_where(|id, _| *id == connection)
    }

    /// Drops channels silent since before `cutoff`; returns changed groups.
    pub fn expire(&self, cutoff: Duration) -> Vec<String> {
        self.remove_where(|_, c| c.last_seen < cutoff || c.connection.is_closed())
    }

    fn remove_where(&self, doomed: impl Fn(&ConnectionId, &Channel) -> bool) -> Vec<String> {
        let mut inner = self.lock();
        for chs in inner.producers.values_mut() {
            chs.retain(|id, c| !doomed(id, c));
        }
        inner.producers.retain(|_, chs| !chs.is_empty());
        let mut changed = Vec::new();
        for (name, group) in &mut inner.consumers {
            let before = group.channels.len();
            group.channels.retain(|id, c| !doomed(id, c));
            if group.channels.len() != before {
                changed.push(name.clone());
            }
        }
        changed
    }

    /// Client ids of a consumer group, sorted.
    pub fn consumer_ids(&self, group: &str) -> Vec<String> {
        let inner = self.lock();
        let mut ids: Vec<String> = inner
            .consumers
            .get(group)
            .map(|g| g.channels.values().map(|c| c.client_id.clone()).collect())
            .unwrap_or_default();
        ids.sort();
        ids.dedup();
        ids
    }

    /// Connections of a consumer group.
    pub fn consumer_connections(&self, group: &str) -> Vec<ConnectionHandle> {
        self.lock()
            .consumers
            .get(group)
            .map(|g| g.channels.values().map(|c| c.connection.clone()).collect())
            .unwrap_or_default()
    }

    /// The live connection of the producer with client id `client_id` (the
    /// requester a reply is pushed to), if it has heartbeated here.
    pub fn producer_by_client_id(&self, client_id: &str) -> Option<ConnectionHandle> {
        self.lock()
            .producers
            .values()
            .flat_map(BTreeMap::values)
            .find(|c| c.client_id == client_id && !c.connection.is_closed())
            .map(|c| c.connection.clone())
    }

    /// The connection of consumer `client_id` in `group`, if it is live here.
    pub fn consumer_by_client_id(&self, group: &str, client_id: &str) -> Option<ConnectionHandle> {
        self.lock()
            .consumers
            .get(group)?
            .channels
            .values()
            .find(|c| c.client_id == client_id && !c.connection.is_closed())
            .map(|c| c.connection.clone())
    }

    /// Connections of a consumer group with each client's language.
    pub fn consumer_channels(&self, group: &str) -> Vec<(ConnectionHandle, LanguageCode)> {
        self.lock()
            .consumers
            .get(group)
            .map(|g| {
                g.channels
                    .values()
                    .map(|c| (c.connection.clone(), c.language))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// A live connection of a producer group (for transaction check-back):
    /// the `turn`-th modulo the live ones, so successive checks rotate over
    /// the group and one member that never answers (hung, or gone without
    /// closing its connection) cannot starve them.
    pub fn producer_connection(&self, group: &str, turn: u64) -> Option<ConnectionHandle> {
        let inner = self.lock();
        let live: Vec<&Channel> = inner
            .producers
            .get(group)?
            .values()
            .filter(|c| !c.connection.is_closed())
            .collect();
        let n = u64::try_from(live.len()).ok().filter(|&n| n > 0)?;
        let at = usize::try_from(turn % n).ok()?;
        live.get(at).map(|c| c.connection.clone())
    }

    /// The subscription a consumer group registered for `topic`.
    pub fn subscription(&self, group: &str, topic: &str) -> Option<SubscriptionData> {
        self.lock()
            .consumers
            .get(group)?
            .subscriptions
            .get(topic)
            .cloned()
    }

    /// Topics a consumer group subscribes to (by its latest heartbeats).
    pub fn subscribed_topics(&self, group: &str) -> Vec<String> {
        self.lock()
            .consumers
            .get(group)
            .map(|g| g.subscriptions.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// How the live members of `group` consume: `(by offsets, by POP)`,
    /// each true if any member does (a group should do one or the other).
    pub fn consume_modes(&self, group: &str) -> (bool, bool) {
        let inner = self.lock();
        let Some(g) = inner.consumers.get(group) else {
            return (false, false);
        };
        let pop = g
            .channels
            .keys()
            .filter(|id| g.pop_members.contains(id))
            .count();
        (g.channels.len() > pop, pop > 0)
    }

    /// Names of every consumer group with at least one member.
    pub fn consumer_groups(&self) -> Vec<String> {
        self.lock()
            .consumers
            .iter()
            .filter(|(_, g)| !g.channels.is_empty())
            .map(|(n, _)| n.clone())
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .expect("invariant: client registry lock not poisoned")
    }
}
