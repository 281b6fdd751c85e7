//! `GET_CONSUME_STATS`: per queue, the queue's max offset, the group's
//! committed offset and the store time of the last consumed message, for
//! one topic or (topic empty) every topic the group has offsets for or
//! subscribes to, plus its retry topic — RocketMQ's rules, including
//! skipping topics a live group does not subscribe to. The body is written
//! in fastjson's object-keyed form (see `ConsumeStats`).

use std::collections::BTreeSet;

use sluice_core::disk::Disk;
use sluice_core::message::{retry_topic, stored_store_timestamp_ms};
use sluice_core::store::TagsFilter;
use sluice_core::{Clock, QueueOffset};
use sluice_net::body::{ConsumeStats, MessageQueue, OffsetWrapper};
use sluice_net::header::GetConsumeStatsRequestHeader;
use sluice_net::{RemotingCommand, RequestContext};

use crate::broker::Broker;
use crate::dispatch::Reply;

pub(super) async fn handle<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    _: &RequestContext,
    req: &RemotingCommand,
) -> Reply {
    let h: GetConsumeStatsRequestHeader = req.header()?;
    let group = h.consumer_group.as_str();
    let retry = retry_topic(group);
    let subscribed = b.clients().subscribed_topics(group);
    let topics: BTreeSet<String> = if let Some(topic) = h.topic.filter(|t| !t.trim().is_empty()) {
        BTreeSet::from([topic])
    } else {
        let mut all: BTreeSet<String> = b.offsets().topics_of_group(group).into_iter().collect();
        all.extend(subscribed.iter().cloned());
        all.insert(retry.clone());
        all
    };
    let mut stats = ConsumeStats::default();
    for topic in topics {
        let Some(tc) = b.topics().get(&topic) else {
            continue;
        };
        // RocketMQ skips a topic the group does not subscribe to while it
        // subscribes to others (its retry topic is always reported).
        if topic != retry && !subscribed.is_empty() && !subscribed.contains(&topic) {
            continue;
        }
        for queue_id in 0..tc.read_queue_nums.max(0) {
            let broker_offset = b.store().max_offset(&topic, queue_id).to_wire();
            let consumer_offset = b.offsets().get(&topic, group, queue_id).unwrap_or(0).max(0);
            let offsets = OffsetWrapper {
                broker_offset,
                consumer_offset,
                // Sluice keeps no separate pull position; Apache reports
                // the committed offset when it has none either.
                pull_offset: consumer_offset,
                last_timestamp: last_consumed_timestamp(b, &topic, queue_id, consumer_offset),
            };
            let mq = MessageQueue {
                topic: topic.clone(),
                broker_name: b.config().broker_name.clone(),
                queue_id,
            };
            stats.offset_table.insert(mq, offsets);
        }
    }
    Ok(RemotingCommand::success().with_body(stats.to_fastjson()))
}

/// Store time of the message just before `consumer_offset`, or 0 when
/// there is none (nothing consumed, or removed by retention).
fn last_consumed_timestamp<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    topic: &str,
    queue_id: i32,
    consumer_offset: i64,
) -> i64 {
    let Some(last) = consumer_offset
        .checked_sub(1)
        .and_then(|o| u64::try_from(o).ok())
    else {
        return 0;
    };
    let Ok(got) = b.store().get(
        topic,
        queue_id,
        QueueOffset::new(last),
        1,
        usize::MAX,
        &TagsFilter::default(),
    ) else {
        return 0;
    };
    got.messages
        .first()
        .and_then(|raw| stored_store_timestamp_ms(raw).ok())
        .unwrap_or(0)
}
