//! Admin: `UPDATE_AND_CREATE_TOPIC`, `DELETE_TOPIC_IN_BROKER`,
//! `GET_ALL_TOPIC_CONFIG`, `GET_BROKER_RUNTIME_INFO`.

use sluice_core::disk::Disk;
use sluice_core::message::validate_topic;
use sluice_core::Clock;
use sluice_net::body::{self, KvTable, TopicConfig};
use sluice_net::header::{CreateTopicRequestHeader, DeleteTopicRequestHeader};
use sluice_net::{RemotingCommand, RequestContext};

use crate::broker::topics::QUEUES_PER_TOPIC_MAX;
use crate::broker::Broker;
use crate::dispatch::{Refusal, Reply};

pub(super) async fn create_topic<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    _: &RequestContext,
    req: &RemotingCommand,
) -> Reply {
    let h: CreateTopicRequestHeader = req.header()?;
    if let Err(e) = validate_topic(&h.topic) {
        return Err(Refusal::system_error(format!(
            "[sluice] invalid topic {:?}: {e}",
            h.topic
        )));
    }
    let valid = 1..=QUEUES_PER_TOPIC_MAX;
    if !valid.contains(&h.read_queue_nums) || !valid.contains(&h.write_queue_nums) {
        return Err(Refusal::system_error(format!(
            "[sluice] queue counts must be within 1..={QUEUES_PER_TOPIC_MAX}"
        )));
    }
    let config = TopicConfig {
        topic_name: h.topic,
        read_queue_nums: h.read_queue_nums,
        write_queue_nums: h.write_queue_nums,
        perm: h.perm,
        topic_filter_type: h.topic_filter_type,
        topic_sys_flag: h.topic_sys_flag.unwrap_or(0),
        order: h.order,
        attributes: std::collections::BTreeMap::new(),
    };
    if b.topics().put(config, b.now_ms()) {
        b.topics_updated().await;
        b.register_topics_now().await;
    }
    Ok(RemotingCommand::success())
}

pub(super) async fn delete_topic<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    _: &RequestContext,
    req: &RemotingCommand,
) -> Reply {
    let h: DeleteTopicRequestHeader = req.header()?;
    if b.topics().remove(&h.topic, b.now_ms()) {
        b.topics_updated().await;
    }
    Ok(RemotingCommand::success())
}

/// Every topic config with the table's version, as Apache's
/// `TopicConfigSerializeWrapper`; Apache answers `SYSTEM_ERROR` for a table
/// that cannot be encoded, and so does `?` here.
pub(super) async fn all_topic_config<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    _: &RequestContext,
    _: &RemotingCommand,
) -> Reply {
    let json = body::encode(&b.topics().snapshot(), "TopicConfigSerializeWrapper")?;
    Ok(RemotingCommand::success().with_body(json))
}

pub(super) async fn runtime_info<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    _: &RequestContext,
    _: &RemotingCommand,
) -> Reply {
    let log = b.store().commit_log();
    let mut table = KvTable::default();
    let mut put = |k: &str, v: String| {
        table.table.insert(k.to_owned(), v);
    };
    put(
        "brokerVersionDesc",
        format!("sluice {}", env!("CARGO_PKG_VERSION")),
    );
    put("commitLogMinOffset", log.min_offset().get().to_string());
    put("commitLogMaxOffset", log.written().get().to_string());
    put("commitLogDurableOffset", log.durable().get().to_string());
    put("groupCommitSyncs", log.sync_count().to_string());
    put("topicCount", b.topics().names().len().to_string());
    put(
        "consumerGroupCount",
        b.clients().consumer_groups().len().to_string(),
    );
    put(
        "sluicePendingHalfMessages",
        serde_json::to_string(&b.transactions().pending_by_topic(b.store())).unwrap_or_default(),
    );
    put(
        "sluicePendingTimers",
        serde_json::to_string(&b.timers().pending_by_topic()).unwrap_or_default(),
    );
    if let Some(acl) = &b.config().acl {
        put("sluiceAclRefused", acl.refused().to_string());
        put("sluiceAclWouldRefuse", acl.would_refuse().to_string());
    }
    replication_info(b, &mut put);
    stats_info(b, &mut put);
    Ok(RemotingCommand::success().with_body(body::encode(&table, "KvTable")?))
}

/// The stats snapshot: the RocketMQ keys dashboards and `mqadmin
/// brokerStatus` read that we can fill truthfully (Apache's `...TodayNow`
/// totals also count since the broker started), and the whole snapshot
/// (lag summed over queues) as JSON under `sluiceStats`.
fn stats_info<D: Disk, C: Clock>(b: &Broker<D, C>, put: &mut impl FnMut(&str, String)) {
    // The state gauges with every queue's lag summed into one entry.
    let snap = b.figures(0);
    put("msgPutTotalTodayNow", snap.messages_in_total.to_string());
    put("msgGetTotalTodayNow", snap.messages_out_total.to_string());
    put("putMessageTimesTotal", snap.messages_in_total.to_string());
    put("putMessageSizeTotal", snap.bytes_in_total.to_string());
    #[expect(
        clippy::cast_precision_loss,
        reason = "an average for display; exact below 2^52 bytes"
    )]
    let average_bytes = if snap.messages_in_total == 0 {
        0.0
    } else {
        snap.bytes_in_total as f64 / snap.messages_in_total as f64
    };
    put("putMessageAverageSize", average_bytes.to_string());
    put(
        "sluiceStats",
        serde_json::to_string(&snap).unwrap_or_default(),
    );
}

/// The broker's role (RocketMQ's `brokerRole` names), epoch, in-sync set
/// and replication lag.
fn replication_info<D: Disk, C: Clock>(b: &Broker<D, C>, put: &mut impl FnMut(&str, String)) {
    use crate::broker::{ReplicationMode, Role};
    let Some(ha) = b.replication() else {
        put("brokerRole", "ASYNC_MASTER".to_owned());
        return;
    };
    let written = b.store().commit_log().written();
    put("haAddr", ha.ha_addr());
    put("masterEpoch", ha.epochs().last_epoch().to_string());
    match ha.role() {
        Role::Master { .. } => {
            let role = match ha.config().mode {
                ReplicationMode::Sync => "SYNC_MASTER",
                ReplicationMode::Async => "ASYNC_MASTER",
            };
            put("brokerRole", role.to_owned());
            let mut in_sync: Vec<u64> = ha.in_sync().into_iter().collect();
            in_sync.push(ha.me());
            in_sync.sort_unstable();
            put(
                "inSyncReplicas",
                in_sync
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(","),
            );
            let acks = ha.replica_acks();
            put(
                "replicaAckOffsets",
                acks.iter()
                    .map(|(id, off)| format!("{id}:{}", off.get()))
                    .collect::<Vec<_>>()
                    .join(","),
            );
            let lag = acks
                .values()
                .map(|a| written.bytes_since(*a))
                .max()
                .unwrap_or(0);
            put("replicaLagBytes", lag.to_string());
        }
        Role::Replica { master_ha } => {
            put("brokerRole", "SLAVE".to_owned());
            put("masterHaAddr", master_ha.unwrap_or_default());
        }
        Role::Unknown => put("brokerRole", "UNKNOWN".to_owned()),
    }
}
