//! The figures read from the broker's state when they are asked for (a
//! scrape, `GET_BROKER_RUNTIME_INFO`), not counted on the hot path:
//! storage, flush and dispatch progress, consumer lag and in-flight
//! messages per group and queue, replication, timers, transactions, ACL
//! refusals and connections.

use serde::Serialize;
use sluice_core::disk::Disk;
use sluice_core::{Clock, QueueOffset};

use super::BrokerStatsSnapshot;
use crate::broker::{Broker, Role};

/// The broker's state figures at one moment.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Gauges {
    /// CommitLog bytes retained (from the oldest kept to the last written).
    pub storage_size_bytes: u64,
    /// Written but not yet fsynced.
    pub flush_behind_bytes: u64,
    /// Written but not yet in the ConsumeQueues (not yet visible).
    pub dispatch_behind_bytes: u64,
    /// Per group, topic and queue with a committed offset (the first
    /// `cap` of them, ascending; the rest summed under `other`).
    pub lag: Vec<QueueLag>,
    /// Queues of the lag family past the cap.
    pub lag_dropped: u64,
    /// Replication, for a broker in a replicated group.
    pub replication: Option<ReplicationGauges>,
    /// Timer messages parked, not yet due.
    pub timers_pending: u64,
    /// Transactional halves neither committed nor rolled back.
    pub halves_open: u64,
    /// Requests the ACL refused (`None`: ACL off).
    pub acl_refused_total: Option<u64>,
    /// Requests a permissive ACL would have refused.
    pub acl_would_refuse_total: Option<u64>,
    /// Open client connections on the broker's ports.
    pub connections: u64,
    /// Topics in the topic table.
    pub topics: u64,
}

/// One consumer group's position in one queue.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct QueueLag {
    /// The topic.
    pub topic: String,
    /// The consumer group.
    pub group: String,
    /// The queue (`None`: the sum of the queues past the cap).
    pub queue_id: Option<i32>,
    /// Messages stored and not yet committed by the group.
    pub lag_messages: u64,
    /// Age of the oldest of them, milliseconds (0 without lag).
    pub lag_latency_ms: u64,
    /// Pulled by the group and not yet committed.
    pub inflight_messages: u64,
}

/// A replicated broker's view of its group.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ReplicationGauges {
    /// RocketMQ's role name: `SYNC_MASTER`, `ASYNC_MASTER`, `SLAVE`, `UNKNOWN`.
    pub role: String,
    /// The last master epoch this broker knows.
    pub epoch: u32,
    /// In-sync replicas, the master included (masters only; else 0).
    pub in_sync: u64,
    /// Bytes the furthest-behind replica still lacks (masters only).
    pub lag_bytes: u64,
    /// The controller leader last heard of (controller mode).
    pub controller_leader: Option<String>,
}

impl<D: Disk, C: Clock> Broker<D, C> {
    /// Every figure: the stats snapshot plus the state gauges, the lag
    /// family capped at `cap` queues.
    pub fn figures(&self, cap: usize) -> BrokerStatsSnapshot {
        let mut snap = self.stats().snapshot();
        let log = self.store().commit_log();
        let written = log.written();
        let (lag, lag_dropped) = self.lag(&snap, cap);
        let acl = self.config().acl.as_ref();
        snap.gauges = Gauges {
            storage_size_bytes: written.bytes_since(log.min_offset()),
            flush_behind_bytes: written.bytes_since(log.durable()),
            dispatch_behind_bytes: written.bytes_since(self.store().visible_offset()),
            lag,
            lag_dropped,
            replication: self.replication_gauges(),
            timers_pending: self.timers().pending(),
            halves_open: self
                .transactions()
                .pending_by_topic(self.store())
                .values()
                .sum(),
            acl_refused_total: acl.map(|a| a.refused()),
            acl_would_refuse_total: acl.map(|a| a.would_refuse()),
            connections: self.stats().connections(),
            topics: self.topics().names().len() as u64,
        };
        snap
    }

    /// Lag per (topic, group, queue) with a committed offset, ascending;
    /// past `cap` queues the rest are summed into one `other` entry.
    fn lag(&self, snap: &BrokerStatsSnapshot, cap: usize) -> (Vec<QueueLag>, u64) {
        let now_ms = self.now_ms();
        let mut out = Vec::new();
        let mut other = QueueLag {
            topic: super::OTHER_LABEL.to_owned(),
            group: super::OTHER_LABEL.to_owned(),
            ..QueueLag::default()
        };
        let mut dropped = 0;
        for topic in self.topics().names() {
            for (group, queues) in self.offsets().groups_of(&topic) {
                for (queue_id, committed) in queues {
                    let entry = self.queue_lag(snap, &topic, &group, queue_id, committed, now_ms);
                    if out.len() < cap {
                        out.push(entry);
                    } else {
                        dropped += 1;
                        other.lag_messages += entry.lag_messages;
                        other.inflight_messages += entry.inflight_messages;
                        other.lag_latency_ms = other.lag_latency_ms.max(entry.lag_latency_ms);
                    }
                }
            }
        }
        if dropped > 0 {
            out.push(other);
        }
        (out, dropped)
    }

    fn queue_lag(
        &self,
        snap: &BrokerStatsSnapshot,
        topic: &str,
        group: &str,
        queue_id: i32,
        committed: i64,
        now_ms: i64,
    ) -> QueueLag {
        let store = self.store();
        let max = store.max_offset(topic, queue_id).to_wire();
        let lag = u64::try_from(max.saturating_sub(committed)).unwrap_or(0);
        let oldest_ms = if lag == 0 {
            None
        } else {
            u64::try_from(committed).ok().and_then(|o| {
                store
                    .store_time_of(topic, queue_id, QueueOffset::new(o))
                    .ok()
                    .flatten()
            })
        };
        let pulled_to = snap
            .pull_positions
            .iter()
            .find(|(t, g, q, _)| t == topic && g == group && *q == queue_id)
            .map_or(committed, |p| p.3);
        QueueLag {
            topic: topic.to_owned(),
            group: group.to_owned(),
            queue_id: Some(queue_id),
            lag_messages: lag,
            lag_latency_ms: oldest_ms
                .map_or(0, |t| u64::try_from(now_ms.saturating_sub(t)).unwrap_or(0)),
            inflight_messages: u64::try_from(pulled_to.min(max).saturating_sub(committed))
                .unwrap_or(0),
        }
    }

    fn replication_gauges(&self) -> Option<ReplicationGauges> {
        use crate::broker::ReplicationMode;
        let ha = self.replication()?;
        let written = self.store().commit_log().written();
        let mut g = ReplicationGauges {
            epoch: ha.epochs().last_epoch(),
            controller_leader: ha.controller_leader(),
            ..ReplicationGauges::default()
        };
        let role = match ha.role() {
            Role::Master { .. } => {
                g.in_sync = ha.in_sync().len() as u64 + 1;
                g.lag_bytes = ha
                    .replica_acks()
                    .values()
                    .map(|a| written.bytes_since(*a))
                    .max()
                    .unwrap_or(0);
                match ha.config().mode {
                    ReplicationMode::Sync => "SYNC_MASTER",
                    ReplicationMode::Async => "ASYNC_MASTER",
                }
            }
            Role::Replica { .. } => "SLAVE",
            Role::Unknown => "UNKNOWN",
        };
        role.clone_into(&mut g.role);
        Some(g)
    }
}
