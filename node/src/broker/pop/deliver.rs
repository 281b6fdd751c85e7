//! The POP operations on one queue: hand out (under the queue's lock),
//! acknowledge, renew, and move to the dead-letter queue.

use bytes::Bytes;
use sluice_core::disk::Disk;
use sluice_core::message::{stored_queue_offset, StoredRecord};
use sluice_core::store::TagsFilter;
use sluice_core::{Clock, QueueOffset};
use sluice_net::header::ConsumerSendMsgBackRequestHeader;
use sluice_net::remoting::response_code;

use super::{
    ensure_loaded, write, Handle, PopError, QueueKey, Receive, Received, Record, RECEIVE_BYTES_MAX,
};
use crate::broker::Broker;

/// A message handed out: its offset, delivery attempt and record.
type Handed = (i64, u32, Bytes);

fn key(group: &str, topic: &str, queue_id: i32) -> QueueKey {
    QueueKey {
        group: group.to_owned(),
        topic: topic.to_owned(),
        queue_id,
    }
}

/// The stored record at `offset` of a queue, if it is still there.
fn read_one<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    topic: &str,
    queue_id: i32,
    offset: i64,
) -> Result<Option<Bytes>, PopError> {
    let Ok(at) = QueueOffset::from_wire("offset", offset) else {
        return Ok(None);
    };
    let got = b.store().get(
        topic,
        queue_id,
        at,
        1,
        RECEIVE_BYTES_MAX,
        &TagsFilter::default(),
    )?;
    Ok(got
        .messages
        .into_iter()
        .next()
        .filter(|raw| stored_queue_offset(raw).is_ok_and(|o| o == offset)))
}

/// Hands out up to `want` messages of one queue.
pub(super) async fn receive_queue<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    r: &Receive<'_>,
    queue_id: i32,
    want: usize,
) -> Result<Vec<Received>, PopError> {
    let key = key(r.group, r.topic, queue_id);
    let lock = b.pop().queue_lock(&key);
    let _held = lock.lock().await;
    let floor = b.store().min_offset(r.topic, queue_id).to_wire();
    let now = b.now_ms();
    // The mutant's leases never reach their expiry.
    let expiry_now = if b.config().mutant_pop_never_revives {
        i64::MIN
    } else {
        now
    };
    let plan = b
        .pop()
        .lock_state()
        .plan(&key, floor, expiry_now, want, r.fifo);
    let mut handed: Vec<Handed> = Vec::new();
    for (offset, attempt) in plan.expired {
        let Some(raw) = read_one(b, r.topic, queue_id, offset)? else {
            continue; // deleted by retention: nothing left to deliver
        };
        if attempt >= r.max_attempts {
            tracing::debug!(
                offset,
                group = r.group,
                "POP delivery attempts used up: to the DLQ"
            );
            dead_letter(b, r.group, &key, offset, &raw).await?;
            continue;
        }
        handed.push((offset, attempt + 1, raw));
    }
    let mut next = None;
    if let Some(from) = plan.fresh_from.filter(|_| handed.len() < want) {
        let (fresh, reached) = read_fresh(b, r, queue_id, from, want - handed.len())?;
        handed.extend(fresh);
        next = Some(reached);
    }
    let visible_at_ms = now.saturating_add(r.invisible_ms.max(0));
    let granted: Vec<(i64, u32)> = handed.iter().map(|(o, a, _)| (*o, *a)).collect();
    let token = lease(b, &key, &granted, visible_at_ms, next).await?;
    b.pop()
        .lock_state()
        .grant(&key, &granted, token, visible_at_ms, next);
    Ok(handed
        .into_iter()
        .map(|(offset, attempt, raw)| Received {
            raw,
            attempt,
            handle: Handle {
                queue_id,
                offset,
                token,
                visible_at_ms,
            },
        })
        .collect())
}

/// Up to `room` messages of one queue from `from` that pass the filter,
/// and the offset reading reached (past what the filter skipped).
fn read_fresh<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    r: &Receive<'_>,
    queue_id: i32,
    from: i64,
    room: usize,
) -> Result<(Vec<Handed>, i64), PopError> {
    let at = QueueOffset::from_wire("offset", from).unwrap_or(QueueOffset::new(0));
    let got = b
        .store()
        .get(r.topic, queue_id, at, room, RECEIVE_BYTES_MAX, r.filter)?;
    let fresh = got
        .messages
        .into_iter()
        .filter_map(|raw| Some((stored_queue_offset(&raw).ok()?, 1, raw)))
        .collect();
    Ok((fresh, got.next_begin_offset.to_wire()))
}

/// Writes the lease record granting `granted` (offset, attempt) until
/// `visible_at_ms`; its token (0 when nothing is granted: no record).
async fn lease<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    key: &QueueKey,
    granted: &[(i64, u32)],
    visible_at_ms: i64,
    next: Option<i64>,
) -> Result<i64, PopError> {
    if granted.is_empty() {
        return Ok(0);
    }
    let record = Record::Lease {
        g: key.group.clone(),
        t: key.topic.clone(),
        q: key.queue_id,
        o: granted.iter().map(|g| g.0).collect(),
        a: granted.iter().map(|g| g.1).collect(),
        v: visible_at_ms,
        n: next,
    };
    Ok(write(b, vec![record], false).await?[0])
}

/// Stores a copy of `raw` in the group's dead-letter queue, then closes
/// its lease durably.
async fn dead_letter<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    group: &str,
    key: &QueueKey,
    offset: i64,
    raw: &Bytes,
) -> Result<(), PopError> {
    let rec = StoredRecord::decode(raw).map_err(|e| PopError::Store(e.to_string()))?;
    let h = ConsumerSendMsgBackRequestHeader {
        offset: rec.phys_offset,
        group: group.to_owned(),
        delay_level: -1,
        origin_msg_id: None,
        origin_topic: Some(rec.topic.clone()),
        unit_mode: None,
        max_reconsume_times: None,
    };
    let answer = crate::broker::handlers::send_back::send_back(b, &h)
        .await
        .map_err(|r| PopError::Store(format!("to the DLQ: code {}", r.code())))?;
    if answer.code != response_code::SUCCESS {
        return Err(PopError::Store(format!("to the DLQ: code {}", answer.code)));
    }
    let token = b.pop().lock_state().lease(key, offset).map(|l| l.token);
    if let Some(token) = token {
        close(b, key, &[(offset, token)]).await?;
    }
    Ok(())
}

/// Writes ack records for `leases` of one queue (durably), then closes
/// them; the committed offset follows. Returns each one's outcome.
async fn close<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    key: &QueueKey,
    leases: &[(i64, i64)],
) -> Result<Vec<Result<(), PopError>>, PopError> {
    let records = leases
        .iter()
        .map(|&(o, k)| Record::Ack {
            g: key.group.clone(),
            t: key.topic.clone(),
            q: key.queue_id,
            o,
            k,
        })
        .collect();
    write(b, records, !b.config().mutant_pop_ack_not_durable).await?;
    let mut outcomes = Vec::with_capacity(leases.len());
    let mut committed = None;
    {
        let mut state = b.pop().lock_state();
        for &(o, k) in leases {
            match state.ack(key, o, k) {
                Ok(c) => {
                    committed = Some(c);
                    outcomes.push(Ok(()));
                }
                Err(why) => outcomes.push(Err(PopError::Stale(why))),
            }
        }
    }
    if let Some(c) = committed {
        b.offsets()
            .commit(&key.topic, &key.group, key.queue_id, c, b.now_ms());
    }
    // A closed lease may free the queue (a FIFO group's next message):
    // wake the receives held on it.
    b.arrivals().notify(&key.topic, key.queue_id);
    Ok(outcomes)
}

/// Acknowledges `handles` of `group` on `topic`: each answer says whether
/// its lease was still held (and is now closed, durably).
pub async fn ack<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    group: &str,
    topic: &str,
    handles: &[Handle],
) -> Vec<Result<(), PopError>> {
    if let Err(e) = ensure_loaded(b).await {
        return handles
            .iter()
            .map(|_| Err(PopError::Store(e.to_string())))
            .collect();
    }
    let mut outcomes: Vec<Option<Result<(), PopError>>> = handles.iter().map(|_| None).collect();
    // Per queue, the handles still valid now (checked again after the write).
    let mut by_queue: std::collections::BTreeMap<i32, Vec<(usize, i64, i64)>> =
        std::collections::BTreeMap::new();
    {
        let state = b.pop().lock_state();
        for (i, h) in handles.iter().enumerate() {
            match state.check(&key(group, topic, h.queue_id), h.offset, h.token) {
                Ok(_) => by_queue
                    .entry(h.queue_id)
                    .or_default()
                    .push((i, h.offset, h.token)),
                Err(why) => outcomes[i] = Some(Err(PopError::Stale(why))),
            }
        }
    }
    for (queue_id, items) in by_queue {
        let leases: Vec<(i64, i64)> = items.iter().map(|&(_, o, k)| (o, k)).collect();
        match close(b, &key(group, topic, queue_id), &leases).await {
            Ok(results) => {
                for ((i, _, _), r) in items.iter().zip(results) {
                    outcomes[*i] = Some(r);
                }
            }
            Err(e) => {
                for (i, _, _) in &items {
                    outcomes[*i] = Some(Err(PopError::Store(e.to_string())));
                }
            }
        }
    }
    outcomes
        .into_iter()
        .map(|o| o.unwrap_or(Err(PopError::BadHandle)))
        .collect()
}

/// Extends (or shortens) the lease `handle` names to `invisible_ms` from
/// now; the old handle stops working, the returned one replaces it.
pub async fn renew<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    group: &str,
    topic: &str,
    handle: &Handle,
    invisible_ms: i64,
) -> Result<Handle, PopError> {
    ensure_loaded(b).await?;
    let key = key(group, topic, handle.queue_id);
    let lock = b.pop().queue_lock(&key);
    let _held = lock.lock().await;
    let lease = b
        .pop()
        .lock_state()
        .check(&key, handle.offset, handle.token)
        .map_err(PopError::Stale)?;
    let visible_at_ms = b.now_ms().saturating_add(invisible_ms.max(0));
    let record = Record::Lease {
        g: group.to_owned(),
        t: topic.to_owned(),
        q: handle.queue_id,
        o: vec![handle.offset],
        a: vec![lease.attempt],
        v: visible_at_ms,
        n: None,
    };
    let token = write(b, vec![record], false).await?[0];
    b.pop().lock_state().grant(
        &key,
        &[(handle.offset, lease.attempt)],
        token,
        visible_at_ms,
        None,
    );
    // A shorter lease expires before the held receives planned to look.
    b.arrivals().notify(topic, handle.queue_id);
    Ok(Handle {
        token,
        visible_at_ms,
        ..*handle
    })
}

/// Moves the message `handle` names to `group`'s dead-letter queue and
/// closes its lease (a client that gave up on it).
pub async fn forward_to_dead_letter<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    group: &str,
    topic: &str,
    handle: &Handle,
) -> Result<(), PopError> {
    ensure_loaded(b).await?;
    let key = key(group, topic, handle.queue_id);
    let lock = b.pop().queue_lock(&key);
    let _held = lock.lock().await;
    b.pop()
        .lock_state()
        .check(&key, handle.offset, handle.token)
        .map_err(PopError::Stale)?;
    match read_one(b, topic, handle.queue_id, handle.offset)? {
        Some(raw) => dead_letter(b, group, &key, handle.offset, &raw).await,
        None => close(b, &key, &[(handle.offset, handle.token)])
            .await
            .map(|_| ()),
    }
}
