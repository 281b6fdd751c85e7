//! POP consumption (RocketMQ 5's server-side assignment): a receive hands
//! out messages of a topic's queues on this broker under leases that
//! hide them for an invisible duration; an ack by receipt handle closes a
//! lease; an expired lease makes its message receivable again with one
//! more delivery attempt, and past the group's attempt limit it goes to
//! the group's dead-letter queue instead.
//!
//! Durability: every lease and ack is a record of the POP log (see
//! [`records`]) in the CommitLog; an ack is answered only once its record
//! is as durable as a send would be (flushed and replicated per the
//! broker's modes), so an acked message is never delivered again after a
//! crash or a failover. Leases are written without waiting: a lease lost
//! in a crash only makes its message receivable again early. The state
//! is rebuilt from the log on first use after start-up or a role change.
//!
//! Groups: a group consumes either by POP (5.x clients) or by offsets
//! (4.x pull/push clients), not both at once. POP keeps the group's
//! committed offset in the offset table (so lag and the dashboard see it),
//! but a 4.x consumer of the same group would read and commit past
//! unacknowledged POP leases; the gRPC endpoint refuses to receive for a
//! group that has live 4.x consumers on this broker.

mod records;
mod state;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use sluice_core::disk::Disk;
use sluice_core::message::{MessageInput, StoredRecord};
use sluice_core::store::{MessageFilter, TagsFilter};
use sluice_core::Clock;

pub use records::{Handle, Record, POP_TOPIC};
pub use state::{Lease, Plan, PopState, QueueKey, Stale};

use sluice_net::body::SubscriptionGroupConfig;

use super::filter::PullFilter;
use super::handlers::pull::subscription_filter;
use super::{Broker, PERM_READ, PERM_WRITE};

/// Most bytes one receive reads from one queue.
const RECEIVE_BYTES_MAX: usize = 4 << 20;
/// Most POP log records one replay step reads.
const REPLAY_STEP: usize = 512;

/// The broker's POP state, its per-queue receive locks, and whether it
/// was rebuilt from the log since the last role change.
#[derive(Default)]
pub struct Pop {
    state: Mutex<PopState>,
    loaded: AtomicBool,
    loading: tokio::sync::Mutex<()>,
    locks: Mutex<BTreeMap<QueueKey, Arc<tokio::sync::Mutex<()>>>>,
    turn: AtomicU64,
}

/// Why a POP request failed.
#[derive(Debug, thiserror::Error)]
pub enum PopError {
    /// The handle names no lease this group holds (acked, redelivered,
    /// renewed, or never ours).
    #[error("receipt handle is expired or unknown ({0:?})")]
    Stale(Stale),
    /// The handle is not one this broker issued.
    #[error("receipt handle is not one of this broker's")]
    BadHandle,
    /// The store refused or failed.
    #[error("store: {0}")]
    Store(String),
}

impl From<sluice_core::Error> for PopError {
    fn from(e: sluice_core::Error) -> Self {
        Self::Store(e.to_string())
    }
}

/// One receive: up to `batch` messages of `topic` for `group`.
pub struct Receive<'a> {
    /// Consumer group.
    pub group: &'a str,
    /// Topic.
    pub topic: &'a str,
    /// Queue to read, or every readable queue of the topic (`None`).
    pub queue_id: Option<i32>,
    /// Most messages handed out.
    pub batch: usize,
    /// How long handed-out messages stay invisible.
    pub invisible_ms: i64,
    /// Which messages the group wants (others are passed over for good).
    pub filter: &'a (dyn MessageFilter + Sync),
    /// Hand out a queue's next message only once the previous is acked.
    pub fifo: bool,
    /// Deliveries after which an unacked message goes to the DLQ.
    pub max_attempts: u32,
}

/// One handed-out message.
#[derive(Debug, Clone)]
pub struct Received {
    /// The stored record, as the store holds it.
    pub raw: Bytes,
    /// Which delivery this is (1 for the first).
    pub attempt: u32,
    /// Acknowledges (or renews) this delivery.
    pub handle: Handle,
}

impl Pop {
    fn lock_state(&self) -> std::sync::MutexGuard<'_, PopState> {
        self.state
            .lock()
            .expect("invariant: POP state lock not poisoned")
    }

    fn queue_lock(&self, key: &QueueKey) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self
            .locks
            .lock()
            .expect("invariant: POP locks not poisoned");
        Arc::clone(locks.entry(key.clone()).or_default())
    }

    /// Forgets the state; the next POP request rebuilds it from the log
    /// (a role change: a new master's log may hold records this broker
    /// never applied, a replica serves no POP).
    pub fn reset(&self) {
        self.loaded.store(false, Ordering::SeqCst);
        self.lock_state().clear();
    }
}

/// Rebuilds the POP state from the log once after start-up or a role
/// change.
async fn ensure_loaded<D: Disk, C: Clock>(b: &Broker<D, C>) -> Result<(), PopError> {
    let pop = b.pop();
    if pop.loaded.load(Ordering::SeqCst) {
        return Ok(());
    }
    let _loading = pop.loading.lock().await;
    if pop.loaded.load(Ordering::SeqCst) {
        return Ok(());
    }
    pop.lock_state().clear();
    let store = b.store();
    let mut at = store.min_offset(POP_TOPIC, 0);
    let end = store.max_offset(POP_TOPIC, 0);
    let mut replayed = 0_u64;
    while at < end {
        let got = store.get(
            POP_TOPIC,
            0,
            at,
            REPLAY_STEP,
            usize::MAX,
            &TagsFilter::default(),
        )?;
        for raw in &got.messages {
            let Ok(rec) = StoredRecord::decode(raw) else {
                continue;
            };
            if let Some(r) = Record::decode(&rec.body) {
                apply(&mut pop.lock_state(), &r, rec.phys_offset);
                replayed += 1;
            }
        }
        if got.next_begin_offset <= at {
            break;
        }
        at = got.next_begin_offset;
    }
    tracing::debug!(replayed, "POP state rebuilt from the log");
    pop.loaded.store(true, Ordering::SeqCst);
    Ok(())
}

/// Applies one replayed record written at CommitLog offset `token`.
fn apply(state: &mut PopState, record: &Record, token: i64) {
    match record {
        Record::Lease {
            g,
            t,
            q,
            o,
            a,
            v,
            n,
        } => {
            let key = QueueKey {
                group: g.clone(),
                topic: t.clone(),
                queue_id: *q,
            };
            let granted: Vec<(i64, u32)> = o.iter().copied().zip(a.iter().copied()).collect();
            state.grant(&key, &granted, token, *v, *n);
        }
        Record::Ack { g, t, q, o, k } => {
            let key = QueueKey {
                group: g.clone(),
                topic: t.clone(),
                queue_id: *q,
            };
            // A stale ack (its lease was renewed or redelivered before the
            // ack landed) closes nothing, as it did when it was written.
            let _ = state.ack(&key, *o, *k);
        }
    }
}

/// Appends `records` to the POP log; `durable` waits as a send does
/// (flushed per the flush mode, replicated per the replication mode).
async fn write<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    records: Vec<Record>,
    durable: bool,
) -> Result<Vec<i64>, PopError> {
    if records.is_empty() {
        return Ok(Vec::new());
    }
    let (_, created) = b
        .topics()
        .ensure(POP_TOPIC, 1, PERM_READ | PERM_WRITE, b.now_ms());
    if created {
        b.topics_updated().await;
    }
    let host = b.store_host();
    let now = b.now_ms();
    let msgs: Vec<MessageInput> = records
        .iter()
        .map(|r| MessageInput {
            topic: POP_TOPIC.to_owned(),
            queue_id: 0,
            flag: 0,
            sys_flag: 0,
            born_timestamp_ms: now,
            born_host: host,
            store_host: host,
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body: Bytes::from(r.encode()),
            properties: Bytes::new(),
        })
        .collect();
    let appended = b.store().put_batch(msgs, durable).await?;
    // Durable as a send: with SYNC replication, held by the in-sync
    // replicas too (a new master rebuilds the state from its own log).
    if let (true, Some(ha), Some(last)) = (durable, b.replication(), appended.last()) {
        let written = b.store().commit_log().written();
        ha.await_replicated(last.end(), written)
            .await
            .map_err(|e| PopError::Store(format!("not replicated: {e:?}")))?;
    }
    Ok(appended.iter().map(|a| a.phys_offset.to_wire()).collect())
}

/// Hands out up to `r.batch` messages: expired leases first, then new
/// messages, queue by queue starting at a rotating one.
pub async fn receive<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    r: &Receive<'_>,
) -> Result<Vec<Received>, PopError> {
    ensure_loaded(b).await?;
    let queues: Vec<i32> = if let Some(q) = r.queue_id {
        vec![q]
    } else {
        let n = b
            .topics()
            .get(r.topic)
            .map_or(0, |t| t.read_queue_nums.max(0));
        (0..n).collect()
    };
    let mut out = Vec::new();
    if queues.is_empty() {
        return Ok(out);
    }
    let start = b.pop().turn.fetch_add(1, Ordering::Relaxed);
    let n = queues.len() as u64;
    for i in 0..n {
        let want = r.batch.saturating_sub(out.len());
        if want == 0 {
            break;
        }
        let queue_id = queues[usize::try_from((start + i) % n).unwrap_or(0)];
        out.extend(receive_queue(b, r, queue_id, want).await?);
    }
    Ok(out)
}

/// [`receive`], held until something is receivable or `hold` passes:
/// woken by a new message on the topic's queues or a lease's expiry.
pub async fn receive_waiting<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    r: &Receive<'_>,
    hold: Duration,
) -> Result<Vec<Received>, PopError> {
    let deadline = tokio::time::Instant::now() + hold;
    loop {
        let signal = b.arrivals().signal(r.topic, r.queue_id.unwrap_or(-1));
        let arrived = signal.notified();
        tokio::pin!(arrived);
        arrived.as_mut().enable();
        let got = receive(b, r).await?;
        let now = tokio::time::Instant::now();
        if !got.is_empty() || now >= deadline {
            return Ok(got);
        }
        // Sleep to the deadline or the next lease expiry, whichever is first.
        let wake = next_expiry(b, r.group, r.topic)
            .and_then(|at| u64::try_from(at - b.now_ms()).ok())
            .map_or(deadline, |ms| {
                (now + Duration::from_millis(ms.max(1))).min(deadline)
            });
        tokio::select! {
            () = &mut arrived => {}
            () = tokio::time::sleep_until(wake) => {}
        }
    }
}

fn next_expiry<D: Disk, C: Clock>(b: &Broker<D, C>, group: &str, topic: &str) -> Option<i64> {
    let n = b
        .topics()
        .get(topic)
        .map_or(0, |t| t.read_queue_nums.max(0));
    let state = b.pop().lock_state();
    (0..n)
        .filter_map(|queue_id| {
            state.next_expiry(&QueueKey {
                group: group.to_owned(),
                topic: topic.to_owned(),
                queue_id,
            })
        })
        .min()
}

/// Why a group may not receive here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// This broker is a replica: POP writes leases, only a master can.
    Replica,
    /// No such subscription group (and it is not auto-created).
    NoGroup(String),
    /// The group's `consumeEnable` is off.
    ConsumeDisabled(String),
    /// The group has 4.x (offset-based) consumers on this broker.
    OffsetConsumers(String),
    /// The filter expression is refused (its remark).
    Filter(String),
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Replica => write!(
                f,
                "[sluice] this broker is a replica; receive at its master"
            ),
            Self::NoGroup(g) => write!(f, "[sluice] subscription group [{g}] does not exist"),
            Self::ConsumeDisabled(g) => {
                write!(f, "[sluice] subscription group [{g}] may not consume")
            }
            Self::OffsetConsumers(g) => write!(
                f,
                "[sluice] group [{g}] has 4.x (offset-based) consumers on this broker; a group \
                 consumes by POP or by offsets, not both: use another group"
            ),
            Self::Filter(remark) => f.write_str(remark),
        }
    }
}

/// The group's settings and the filter of `expression` (of type `kind`),
/// if `group` may receive from `topic` here.
pub fn admit<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    group: &str,
    topic: &str,
    kind: &str,
    expression: &str,
) -> Result<(SubscriptionGroupConfig, PullFilter), Refused> {
    if !b.is_writer() {
        return Err(Refused::Replica);
    }
    let config = b
        .subscription_group(group)
        .ok_or_else(|| Refused::NoGroup(group.to_owned()))?;
    if !config.consume_enable {
        return Err(Refused::ConsumeDisabled(group.to_owned()));
    }
    if b.clients().consume_modes(group).0 {
        return Err(Refused::OffsetConsumers(group.to_owned()));
    }
    let filter = subscription_filter(b, group, topic, expression, Some(kind))
        .map_err(|r| Refused::Filter(r.into_response().remark.unwrap_or_default()))?;
    Ok((config, filter))
}

mod deliver;
use deliver::receive_queue;
pub use deliver::{ack, forward_to_dead_letter, renew};
