//! Wire requests the admin API lacks, sent through a session's client (so
//! signed with its keys): per-queue offsets, a group's members and the
//! groups of every master, one message by queue offset, and a copy of a
//! dead letter into its group's retry topic.

use std::collections::BTreeSet;

use bytes::Bytes;
use sluice_client::message::decode_messages;
use sluice_client::{Error, MessageExt, Result};
use sluice_core::message::{keys, Properties};
use sluice_core::Clock;
use sluice_net::body::{self, ConsumerListBody, SubscriptionGroupWrapper};
use sluice_net::header::{
    GetConsumerListByGroupRequestHeader, OffsetResponseHeader, PullMessageRequestHeader,
    QueueRequestHeader, SendMessageRequestHeaderV2, SendMessageResponseHeader,
};
use sluice_net::remoting::{request_code, response_code};
use sluice_net::RemotingCommand;

use super::session::WireAdmin;

/// Most queues per broker the dashboard reads offsets of.
const QUEUES_SHOWN_MAX: i32 = 256;

/// The group the dashboard pulls single messages as (RocketMQ's admin
/// tools use the same name); it never commits an offset.
pub const TOOLS_GROUP: &str = "TOOLS_CONSUMER";

/// One queue of a topic on one broker.
pub struct QueueRow {
    pub broker: String,
    pub queue: i32,
    pub min: i64,
    pub max: i64,
}

/// The masters (broker name, address) registered with the name servers.
pub async fn masters(admin: &WireAdmin) -> Result<Vec<(String, String)>> {
    let info = admin.cluster_info().await?;
    Ok(info
        .broker_addr_table
        .into_iter()
        .filter_map(|(name, b)| b.broker_addrs.get(&0).cloned().map(|a| (name, a)))
        .collect())
}

/// The sum of `figures`, saturating: the figures come from the wire,
/// and a hostile or broken answer must not overflow (and panic).
pub fn total(figures: impl IntoIterator<Item = i64>) -> i64 {
    figures.into_iter().fold(0, i64::saturating_add)
}

/// Messages written and not yet committed by the group (never negative;
/// saturating, as [`total`]).
pub fn lag(p: &sluice_client::admin::QueueProgress) -> i64 {
    p.broker_offset.saturating_sub(p.consumer_offset).max(0)
}

/// Whether the brokers accept the session's keys: a request every valid
/// account may make (`GET_MAX_OFFSET`) to the first master; an ACL refusal
/// is an error, any other answer means the signature was accepted.
pub async fn check_keys(admin: &WireAdmin) -> Result<()> {
    let Some((_, addr)) = masters(admin).await?.into_iter().next() else {
        return Err(Error::InvalidArgument(
            "no master broker is registered".to_owned(),
        ));
    };
    let header = QueueRequestHeader {
        topic: sluice_core::message::DEFAULT_TOPIC.to_owned(),
        queue_id: 0,
    };
    let request = RemotingCommand::request_with_header(request_code::GET_MAX_OFFSET, &header);
    let response = admin.client().invoke(&addr, request).await?;
    let remark = response.remark.unwrap_or_default();
    if response.code == response_code::NO_PERMISSION && remark.starts_with("[ACL]") {
        return Err(Error::Broker {
            server: addr,
            code: response.code,
            remark,
        });
    }
    Ok(())
}

/// Min and max offsets of every read queue of `topic`, by broker.
pub async fn queue_offsets(admin: &WireAdmin, topic: &str) -> Result<Vec<QueueRow>> {
    let route = admin.route(topic).await?;
    let mut out = Vec::new();
    for qd in &route.queue_datas {
        let Some(addr) = route
            .broker_datas
            .iter()
            .find(|b| b.broker_name == qd.broker_name)
            .and_then(|b| {
                b.broker_addrs
                    .get(&0)
                    .or_else(|| b.broker_addrs.values().next())
            })
        else {
            continue;
        };
        for queue in 0..qd.read_queue_nums.clamp(0, QUEUES_SHOWN_MAX) {
            let min = offset(admin, addr, request_code::GET_MIN_OFFSET, topic, queue).await?;
            let max = offset(admin, addr, request_code::GET_MAX_OFFSET, topic, queue).await?;
            out.push(QueueRow {
                broker: qd.broker_name.clone(),
                queue,
                min,
                max,
            });
        }
    }
    Ok(out)
}

async fn offset(admin: &WireAdmin, addr: &str, code: i32, topic: &str, queue: i32) -> Result<i64> {
    let header = QueueRequestHeader {
        topic: topic.to_owned(),
        queue_id: queue,
    };
    let response = admin
        .client()
        .invoke_ok(addr, RemotingCommand::request_with_header(code, &header))
        .await?;
    let h: OffsetResponseHeader = response
        .header()
        .map_err(|e| Error::InvalidArgument(format!("bad offset answer from {addr}: {e}")))?;
    Ok(h.offset)
}

/// Client ids of `group`'s live consumers, from every master.
pub async fn members(admin: &WireAdmin, group: &str) -> Result<BTreeSet<String>> {
    let mut out = BTreeSet::new();
    for (_, addr) in masters(admin).await? {
        let header = GetConsumerListByGroupRequestHeader {
            consumer_group: group.to_owned(),
        };
        let request =
            RemotingCommand::request_with_header(request_code::GET_CONSUMER_LIST_BY_GROUP, &header);
        let response = admin.client().invoke(&addr, request).await?;
        // A broker without members answers an error: nobody there.
        if response.code == response_code::SUCCESS {
            if let Ok(list) = body::decode::<ConsumerListBody>(&response.body, "ConsumerListBody") {
                out.extend(list.consumer_id_list);
            }
        }
    }
    Ok(out)
}

/// Every subscription group any master knows.
pub async fn groups(admin: &WireAdmin) -> Result<BTreeSet<String>> {
    let mut out = BTreeSet::new();
    for (_, addr) in masters(admin).await? {
        let request = RemotingCommand::request(request_code::GET_ALL_SUBSCRIPTIONGROUP_CONFIG);
        let response = admin.client().invoke_ok(&addr, request).await?;
        let table: SubscriptionGroupWrapper =
            body::decode(&response.body, "SubscriptionGroupWrapper")
                .map_err(|e| Error::InvalidArgument(format!("bad group table: {e}")))?;
        out.extend(table.subscription_group_table.into_keys());
    }
    Ok(out)
}

/// The message at `offset` of `topic`'s queue `queue` on `broker` (the
/// first broker of the route when empty); `None` when there is none.
pub async fn message_at(
    admin: &WireAdmin,
    topic: &str,
    broker: &str,
    queue: i32,
    offset: i64,
) -> Result<Option<MessageExt>> {
    let route = admin.route(topic).await?;
    let Some(data) = route
        .broker_datas
        .iter()
        .find(|b| broker.is_empty() || b.broker_name == broker)
    else {
        return Err(Error::InvalidArgument(format!(
            "broker `{broker}` does not serve `{topic}`"
        )));
    };
    let Some(addr) = data
        .broker_addrs
        .get(&0)
        .or_else(|| data.broker_addrs.values().next())
    else {
        return Ok(None);
    };
    let header = PullMessageRequestHeader {
        consumer_group: TOOLS_GROUP.to_owned(),
        topic: topic.to_owned(),
        queue_id: queue,
        queue_offset: offset,
        max_msg_nums: 1,
        sys_flag: 0,
        commit_offset: 0,
        suspend_timeout_millis: 0,
        subscription: Some("*".to_owned()),
        sub_version: 0,
        expression_type: Some("TAG".to_owned()),
        max_msg_bytes: None,
    };
    let request = RemotingCommand::request_with_header(request_code::PULL_MESSAGE, &header);
    let response = admin.client().invoke(addr, request).await?;
    match response.code {
        response_code::SUCCESS => {
            let found = decode_messages(&response.body, &data.broker_name)?;
            Ok(found.into_iter().find(|m| m.queue_offset == offset))
        }
        response_code::PULL_NOT_FOUND
        | response_code::PULL_OFFSET_MOVED
        | response_code::PULL_RETRY_IMMEDIATELY => Ok(None),
        code => Err(Error::Broker {
            server: addr.clone(),
            code,
            remark: response.remark.unwrap_or_default(),
        }),
    }
}

/// Stores a copy of `msg` (read from `%DLQ%group`) in `%RETRY%group` on
/// the master of the broker that holds it, so the group consumes it
/// again; returns the retry topic and the copy's queue offset.
pub async fn resend_to_retry(
    admin: &WireAdmin,
    msg: &MessageExt,
    group: &str,
) -> Result<(String, i64)> {
    let retry = sluice_core::message::retry_topic(group);
    let addr = masters(admin)
        .await?
        .into_iter()
        .find(|(name, _)| *name == msg.broker_name)
        .map_or_else(|| msg.store_host.to_string(), |(_, a)| a);
    let mut props = Properties::new();
    let original = msg
        .property(keys::RETRY_TOPIC)
        .or_else(|| msg.property(keys::DLQ_ORIGIN_TOPIC))
        .map(str::to_owned);
    for (k, v) in msg.properties.iter() {
        // Not delayed again; the broker sets its own bookkeeping.
        if k == keys::DELAY
            || k.starts_with("TIMER_")
            || k == keys::REAL_TOPIC
            || k == keys::REAL_QID
        {
            continue;
        }
        props
            .insert(k, v)
            .map_err(|e| Error::InvalidArgument(format!("property {k}: {e}")))?;
    }
    if let Some(original) = original {
        let _ = props.insert(keys::RETRY_TOPIC, &original);
    }
    let _ = props.insert(keys::ORIGIN_MESSAGE_ID, &msg.offset_msg_id);
    let header = SendMessageRequestHeaderV2 {
        a: "sluice-dashboard".to_owned(),
        b: retry.clone(),
        c: sluice_core::message::DEFAULT_TOPIC.to_owned(),
        d: 1,
        e: 0,
        f: 0,
        g: i64::try_from(admin.client().clock().wall_ms()).unwrap_or(i64::MAX),
        h: msg.flag,
        i: Some(String::from_utf8_lossy(&props.encode()).into_owned()),
        j: Some(0),
        k: Some(false),
        l: None,
        m: Some(false),
        n: Some(msg.broker_name.clone()),
    };
    let request = RemotingCommand::request_with_header(request_code::SEND_MESSAGE_V2, &header)
        .with_body(Bytes::copy_from_slice(&msg.body));
    let response = admin.client().invoke_ok(&addr, request).await?;
    let offset = response
        .header::<SendMessageResponseHeader>()
        .map_or(-1, |h| h.queue_offset);
    Ok((retry, offset))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_client::admin::QueueProgress;
    use sluice_client::MessageQueue;

    #[test]
    fn sums_and_lags_of_wire_figures_saturate_instead_of_overflowing() {
        assert_eq!(total([1, 2, 3]), 6);
        assert_eq!(total([i64::MAX, 5]), i64::MAX);
        let progress = |broker_offset, consumer_offset| QueueProgress {
            queue: MessageQueue::default(),
            broker_offset,
            consumer_offset,
            last_timestamp_ms: 0,
        };
        assert_eq!(lag(&progress(5, 2)), 3);
        assert_eq!(lag(&progress(2, 5)), 0);
        assert_eq!(lag(&progress(i64::MAX, i64::MIN)), i64::MAX);
    }
}
