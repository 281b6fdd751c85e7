//! Admin: `UPDATE_AND_CREATE_TOPIC`, `DELETE_TOPIC_IN_BROKER`,
//! `GET_BROKER_RUNTIME_INFO`.

use sluice_core::disk::Disk;
use sluice_core::message::validate_topic;
use sluice_core::Clock;
use sluice_net::body::{self, KvTable, TopicConfig};
use sluice_net::header::{CreateTopicRequestHeader, DeleteTopicRequestHeader};
use sluice_net::remoting::{request_code as rc, response_code};
use sluice_net::RemotingCommand;

use crate::broker::response::{bad_request, fail};
use crate::broker::topics::QUEUES_PER_TOPIC_MAX;
use crate::broker::Broker;

pub(super) async fn handle<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    req: &RemotingCommand,
) -> RemotingCommand {
    match req.code {
        rc::UPDATE_AND_CREATE_TOPIC => match req.header::<CreateTopicRequestHeader>() {
            Ok(h) => create_topic(b, h).await,
            Err(e) => bad_request(&e),
        },
        rc::DELETE_TOPIC_IN_BROKER => match req.header::<DeleteTopicRequestHeader>() {
            Ok(h) => {
                if b.topics().remove(&h.topic, b.now_ms()) {
                    b.topics_updated().await;
                }
                RemotingCommand::success()
            }
            Err(e) => bad_request(&e),
        },
        _ => runtime_info(b),
    }
}

async fn create_topic<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    h: CreateTopicRequestHeader,
) -> RemotingCommand {
    if let Err(e) = validate_topic(&h.topic) {
        return fail(
            response_code::SYSTEM_ERROR,
            format!("[sluice] invalid topic {:?}: {e}", h.topic),
        );
    }
    let valid = 1..=QUEUES_PER_TOPIC_MAX;
    if !valid.contains(&h.read_queue_nums) || !valid.contains(&h.write_queue_nums) {
        return fail(
            response_code::SYSTEM_ERROR,
            format!("[sluice] queue counts must be within 1..={QUEUES_PER_TOPIC_MAX}"),
        );
    }
    let config = TopicConfig {
        topic_name: h.topic,
        read_queue_nums: h.read_queue_nums,
        write_queue_nums: h.write_queue_nums,
        perm: h.perm,
        topic_filter_type: h.topic_filter_type,
        topic_sys_flag: h.topic_sys_flag.unwrap_or(0),
        order: h.order,
    };
    if b.topics().put(config, b.now_ms()) {
        b.topics_updated().await;
    }
    RemotingCommand::success()
}

fn runtime_info<D: Disk, C: Clock>(b: &Broker<D, C>) -> RemotingCommand {
    let log = b.store().commit_log();
    let mut table = KvTable::default();
    let mut put = |k: &str, v: String| {
        table.table.insert(k.to_owned(), v);
    };
    put(
        "brokerVersionDesc",
        format!("sluice {}", env!("CARGO_PKG_VERSION")),
    );
    put("commitLogMinOffset", log.min_offset().0.to_string());
    put("commitLogMaxOffset", log.written().0.to_string());
    put("commitLogDurableOffset", log.durable().0.to_string());
    put("groupCommitSyncs", log.sync_count().to_string());
    put("topicCount", b.topics().names().len().to_string());
    put(
        "consumerGroupCount",
        b.clients().consumer_groups().len().to_string(),
    );
    match body::encode(&table, "KvTable") {
        Ok(json) => RemotingCommand::success().with_body(json),
        Err(e) => bad_request(&e),
    }
}
