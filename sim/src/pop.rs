//! POP consumers of the simulation: each asks the broker for messages of
//! the topic under short leases (`SLUICE_POP_RECEIVE`), records what it
//! was handed, and acknowledges each delivery by its receipt handle —
//! except a seeded fifth of first deliveries, left unacked so the broker
//! must hand them out again once their lease expires. It stops once the
//! producers are done and every acknowledged send was acked by the group
//! (or, after that, when nothing new arrives for a long while: the oracle
//! then names what the group never got).

use std::cell::Cell;
use std::collections::BTreeSet;
use std::rc::Rc;
use std::time::Duration;

use scenarios::Workload;
use sluice_client::message::decode_messages;
use sluice_net::header::{
    SluicePopAckRequestHeader, SluicePopReceiveRequestHeader, SluicePopReceiveResponseHeader,
};
use sluice_net::remoting::{request_code as rc, response_code};
use sluice_net::RemotingCommand;

use crate::client::{await_broker, client_of, SimClient};
use crate::harness::BROKER_NAME;
use crate::history::{Event, History};
use crate::workload::TOPIC;

/// The POP consumers' group.
pub const POP_GROUP: &str = "sim-pop";
/// How long a delivery stays invisible.
pub const INVISIBLE_MS: i64 = 2_000;
/// Longest a receive is held when nothing is receivable.
const POLL_MS: i64 = 1_000;
/// Messages per receive.
const BATCH: i32 = 8;
/// Share of first deliveries left unacked, in percent.
const SKIP_ACK_PERCENT: u64 = 20;
/// Pause after a failed request.
const BACKOFF: Duration = Duration::from_millis(200);
/// With the producers done, a consumer that got nothing new this long
/// gives up (a broker that never hands some messages out again).
const GIVE_UP_AFTER_MS: u64 = 30_000;

/// Whether consumer logic leaves delivery `attempt` of `id` unacked.
pub fn skips_ack(seed: u64, id: &str, attempt: u32) -> bool {
    let h = id.bytes().fold(0xcbf2_9ce4_8422_2325_u64 ^ seed, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    attempt == 1 && h % 100 < SKIP_ACK_PERCENT
}

/// Every acknowledged send has been acked by the group (or had an ack
/// whose outcome is unknown: it may have taken effect, so it may never
/// come back).
fn all_acked(history: &History) -> bool {
    let mut sent = BTreeSet::new();
    let mut acked = BTreeSet::new();
    for e in history.events() {
        match e {
            Event::SendOk { id, .. } => {
                sent.insert(id);
            }
            Event::PopAcked { id, .. } | Event::PopAckUnknown { id, .. } => {
                acked.insert(id);
            }
            _ => {}
        }
    }
    sent.is_subset(&acked)
}

fn now_ms() -> u64 {
    turmoil::sim_elapsed().map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// One receive: the records handed out with their handles and attempts
/// (empty when nothing was receivable or the request failed).
async fn receive(client: &SimClient, addr: &str) -> Vec<(i32, u64, String, u32, String)> {
    let header = SluicePopReceiveRequestHeader {
        consumer_group: POP_GROUP.to_owned(),
        topic: TOPIC.to_owned(),
        max_msg_nums: BATCH,
        invisible_time: INVISIBLE_MS,
        poll_time: POLL_MS,
        expression_type: None,
        expression: None,
        queue_id: None,
    };
    let cmd = RemotingCommand::request_with_header(rc::SLUICE_POP_RECEIVE, &header);
    let answer = match client.invoke(addr, cmd).await {
        Ok(a) if a.code == response_code::SUCCESS => a,
        Ok(a) if a.code == response_code::PULL_NOT_FOUND => return Vec::new(),
        // Down, or no longer the master (a failover): look the master up
        // again before the next try.
        _ => {
            tokio::time::sleep(BACKOFF).await;
            let _ = client.refresh_route(TOPIC).await;
            return Vec::new();
        }
    };
    let (Ok(h), Ok(messages)) = (
        answer.header::<SluicePopReceiveResponseHeader>(),
        decode_messages(&answer.body, BROKER_NAME),
    ) else {
        return Vec::new();
    };
    let handles = h.receipt_handles.split(',');
    let attempts = h.attempts.split(',').map(|a| a.parse().unwrap_or(0));
    messages
        .into_iter()
        .zip(handles.zip(attempts))
        .map(|(m, (handle, attempt))| {
            let offset = u64::try_from(m.queue_offset).unwrap_or(0);
            let id = String::from_utf8_lossy(&m.body).into_owned();
            (m.queue_id, offset, id, attempt, handle.to_owned())
        })
        .collect()
}

/// Acknowledges one delivery: `Some(true)` when the broker said it is
/// acked, `Some(false)` when it refused, `None` without an answer.
async fn ack(client: &SimClient, addr: &str, handle: &str) -> Option<bool> {
    let header = SluicePopAckRequestHeader {
        consumer_group: POP_GROUP.to_owned(),
        topic: TOPIC.to_owned(),
        receipt_handle: handle.to_owned(),
    };
    let cmd = RemotingCommand::request_with_header(rc::SLUICE_POP_ACK, &header);
    client
        .invoke(addr, cmd)
        .await
        .ok()
        .map(|a| a.code == response_code::SUCCESS)
}

/// POP consumer `consumer` of the group.
pub async fn pop_consume(
    seed: u64,
    consumer: u32,
    workload: Workload,
    finished: Rc<Cell<u32>>,
    history: History,
) -> turmoil::Result {
    let namesrvs = crate::harness::namesrv_addrs(workload.namesrvs);
    let client = client_of(&format!("pop{consumer}"), 400 + consumer, &namesrvs, |_| {});
    await_broker(&client).await;
    let mut last_news_ms = now_ms();
    loop {
        let producers_done = finished.get() >= workload.producers;
        if producers_done
            && (all_acked(&history) || now_ms().saturating_sub(last_news_ms) > GIVE_UP_AFTER_MS)
        {
            return Ok(());
        }
        let Ok(addr) = client.master_addr_for(BROKER_NAME, TOPIC).await else {
            tokio::time::sleep(BACKOFF).await;
            continue;
        };
        let got = receive(&client, &addr).await;
        if got.is_empty() {
            continue;
        }
        last_news_ms = now_ms();
        history.record(Event::PopDelivered {
            consumer,
            records: got
                .iter()
                .map(|(q, o, id, a, _)| (*q, *o, id.clone(), *a))
                .collect(),
        });
        for (queue, offset, id, attempt, handle) in got {
            if skips_ack(seed, &id, attempt) {
                continue;
            }
            match ack(&client, &addr, &handle).await {
                Some(true) => history.record(Event::PopAcked {
                    consumer,
                    queue,
                    offset,
                    id,
                }),
                Some(false) => {}
                None => history.record(Event::PopAckUnknown { consumer, id }),
            }
        }
    }
}
