//! Transactional (half) messages with check-back (RocketMQ 4.x semantics,
//! see `docs/transactions.md`).
//!
//! - A PREPARED send is stored as a *half* in `RMQ_SYS_TRANS_HALF_TOPIC`
//!   queue 0 ([`records::into_half`]); consumers of the real topic never
//!   see it.
//! - `END_TRANSACTION` (`handlers/end_transaction.rs`) commits (the real
//!   message, then an op record, in one append) or rolls back (an op
//!   record only). Op records live in `RMQ_SYS_TRANS_OP_HALF_TOPIC`, tag
//!   `d`, body = the transaction's *origin* (the half-queue offset of its
//!   first copy), plus the outcome.
//! - The [`Tracker`] follows both queues and knows which transactions are
//!   open. It is derived from the queues only, so replicas run it too and a
//!   promoted replica knows what its master knew. Its snapshot
//!   (`config/transactions.json`) only saves re-reading: it is written
//!   after a store flush, checked against the queues on load (a snapshot
//!   ahead of, or diverged from, the store is dropped for a fresh scan),
//!   and re-applying entries it already covers changes nothing.
//! - The check-back task (master only, [`check`]) asks a live producer of
//!   the group about halves open longer than `transaction_timeout_ms`. Each
//!   check first re-puts the half at the tail of the half queue with
//!   `TRANSACTION_CHECK_TIMES + 1` and a link to its origin, so old copies
//!   are dead weight the scan passes over. After `transaction_check_max`
//!   checks the half is parked in `TRANS_CHECK_MAX_TIME_TOPIC`.
//! - Memory: one [`OpenHalf`] per open transaction, plus at most
//!   [`RESOLVED_REMEMBERED_MAX`] remembered outcomes.
//! - Exactly once: an END, a duplicate END, or a late END naming any copy
//!   resolves the *origin*; a transaction being resolved or re-put is
//!   *claimed*, and every other END waits for the claim, then finds it
//!   resolved and stores nothing. A commit whose op record a crash lost is
//!   found through the real topic's index ([`committed`]) before anything
//!   is committed or checked again.

pub(crate) mod check;
mod committed;
pub mod records;
pub mod tracker;

pub use records::CHECK_MAX_TOPIC;
pub use tracker::{HalfCopy, OpenHalf, Outcome, Tracker, TxState, RESOLVED_REMEMBERED_MAX};

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, MutexGuard};

use sluice_core::disk::Disk;
use sluice_core::message::topic::{HALF_TOPIC, OP_HALF_TOPIC};
use sluice_core::message::StoredRecord;
use sluice_core::store::{GetStatus, TagsFilter};
use sluice_core::{Clock, MessageStore, QueueOffset};

use super::Broker;

/// The tracker's snapshot, relative to the disk root.
pub const TRANSACTIONS_FILE: &str = "config/transactions.json";

/// Queue entries read per store get while catching up.
const CATCH_UP_BATCH_MAX: usize = 64;
const CATCH_UP_BYTES_MAX: usize = 4 * 1024 * 1024;

/// The broker's transaction state: the tracker and the claims.
pub struct Transactions {
    inner: Mutex<Inner>,
    persist: tokio::sync::Mutex<()>,
    timeout_ms: u64,
}

struct Inner {
    tracker: Tracker,
    /// Origins being resolved or re-put right now (never persisted).
    claims: BTreeSet<u64>,
    /// Whether the tracker came from a snapshot.
    from_snapshot: bool,
    /// Whether the tracker was checked against the store since loading.
    verified: bool,
    persisted_version: u64,
}

/// Why a transaction could not be claimed.
#[derive(Debug, PartialEq, Eq)]
pub enum Claim {
    /// Claimed: the caller resolves it and then calls
    /// [`Transactions::release`].
    Granted(OpenHalf),
    /// Someone else holds it; try again shortly.
    Busy,
    /// Not open: here is what is known.
    NotOpen(TxState),
}

impl Transactions {
    /// Loads the snapshot (a damaged one is ignored: a fresh scan is
    /// always correct). The first [`Transactions::catch_up`] checks it
    /// against the store.
    pub fn load(snapshot: Option<&[u8]>, timeout_ms: u64) -> Self {
        let tracker = snapshot.and_then(|json| {
            let t = Tracker::from_snapshot(json);
            if t.is_none() {
                tracing::warn!("transactions.json is damaged; rescanning the half and op queues");
            }
            t
        });
        Self {
            inner: Mutex::new(Inner {
                from_snapshot: tracker.is_some(),
                tracker: tracker.unwrap_or_default(),
                claims: BTreeSet::new(),
                verified: false,
                persisted_version: 0,
            }),
            persist: tokio::sync::Mutex::new(()),
            timeout_ms,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().expect("invariant: lock not poisoned")
    }

    /// The check timeout in force.
    pub fn timeout_ms(&self) -> u64 {
        self.timeout_ms
    }

    /// Reads whatever the half and op queues gained since the last call.
    pub fn catch_up<D: Disk, C: Clock>(&self, store: &MessageStore<D, C>) {
        let mut g = self.lock();
        let keep = if g.verified {
            let ok = !diverged(store, &g.tracker);
            if !ok {
                tracing::warn!(
                    "the half or op queue changed underneath the transaction tracker; rescanning"
                );
            }
            ok
        } else {
            g.from_snapshot && !diverged(store, &g.tracker)
        };
        if !keep {
            g.tracker = Tracker::fresh(
                store.min_offset(HALF_TOPIC, 0).get(),
                store.min_offset(OP_HALF_TOPIC, 0).get(),
            );
        }
        g.verified = true;
        scan_halves(store, &mut g.tracker, self.timeout_ms);
        scan_ops(store, &mut g.tracker);
    }

    /// Claims the open transaction `origin` (after catching up).
    pub fn claim<D: Disk, C: Clock>(&self, store: &MessageStore<D, C>, origin: u64) -> Claim {
        self.catch_up(store);
        let mut g = self.lock();
        if g.claims.contains(&origin) {
            return Claim::Busy;
        }
        match g.tracker.state(origin) {
            TxState::Open(open) => {
                g.claims.insert(origin);
                Claim::Granted(open)
            }
            other => Claim::NotOpen(other),
        }
    }

    /// Ends a claim; `resolved` records the outcome just stored.
    pub fn release(&self, origin: u64, resolved: Option<Outcome>) {
        let mut g = self.lock();
        if let Some(outcome) = resolved {
            g.tracker.note_resolved(origin, outcome);
        }
        g.claims.remove(&origin);
    }

    /// Records a re-put copy of a claimed transaction.
    pub fn note_copy(&self, copy: &HalfCopy) {
        self.lock().tracker.note_copy(copy, self.timeout_ms);
    }

    /// Postpones a check.
    pub fn defer(&self, origin: u64, due_ms: u64) {
        self.lock().tracker.defer(origin, due_ms);
    }

    /// Drops a transaction whose half is gone.
    pub fn forget(&self, origin: u64) {
        self.lock().tracker.forget(origin);
    }

    /// Up to `max` unclaimed open transactions due at `now_ms`.
    pub fn due(&self, now_ms: u64, max: usize) -> Vec<(u64, OpenHalf)> {
        let g = self.lock();
        let mut due = g.tracker.due(now_ms, max.saturating_add(g.claims.len()));
        due.retain(|(origin, _)| !g.claims.contains(origin));
        due.truncate(max);
        due
    }

    /// Open transactions per real topic (for `GET_BROKER_RUNTIME_INFO`),
    /// after catching up with the queues.
    pub fn pending_by_topic<D: Disk, C: Clock>(
        &self,
        store: &MessageStore<D, C>,
    ) -> BTreeMap<String, u64> {
        self.catch_up(store);
        self.lock().tracker.pending_by_topic()
    }

    fn unpersisted(&self) -> Option<(u64, Vec<u8>)> {
        let g = self.lock();
        (g.verified && g.tracker.version() != g.persisted_version)
            .then(|| (g.tracker.version(), g.tracker.to_snapshot()))
    }

    fn persisted(&self, version: u64) {
        let mut g = self.lock();
        g.persisted_version = g.persisted_version.max(version);
    }
}

/// True when the entries just before the tracker's cursors are not the
/// ones it read (the queue lost its tail or was rewritten), or the
/// cursors are beyond the queues' ends.
fn diverged<D: Disk, C: Clock>(store: &MessageStore<D, C>, t: &Tracker) -> bool {
    let moved = |topic: &str, (next, last): (u64, Option<u64>)| {
        if next > store.max_offset(topic, 0).get() {
            return true;
        }
        let (Some(last), Some(prev)) = (last, next.checked_sub(1)) else {
            return false;
        };
        if prev < store.min_offset(topic, 0).get() {
            return false;
        }
        let Some(cq) = store.consume_queues().get(topic, 0) else {
            return true;
        };
        match cq.entries(QueueOffset::new(prev), 1) {
            Ok(e) => e.first().is_none_or(|e| e.phys_offset.get() != last),
            Err(_) => false,
        }
    };
    moved(HALF_TOPIC, t.half_cursor()) || moved(OP_HALF_TOPIC, t.op_cursor())
}

/// Reads a queue from `from` until its end, handing each record (or its
/// offsets when undecodable) to `apply`; `skip` jumps over gaps.
fn scan_queue<D: Disk, C: Clock>(
    store: &MessageStore<D, C>,
    topic: &str,
    mut from: u64,
    mut apply: impl FnMut(u64, u64, Option<StoredRecord>),
    mut skip: impl FnMut(u64),
) {
    loop {
        let got = match store.get(
            topic,
            0,
            QueueOffset::new(from),
            CATCH_UP_BATCH_MAX,
            CATCH_UP_BYTES_MAX,
            &TagsFilter::default(),
        ) {
            Ok(got) => got,
            Err(e) => {
                tracing::warn!(error = %e, topic, "transaction queue read failed");
                return;
            }
        };
        match got.status {
            GetStatus::Found => {
                for raw in &got.messages {
                    let rec = StoredRecord::decode(raw).ok();
                    let q = sluice_core::message::stored_queue_offset(raw).unwrap_or(-1);
                    let phys = sluice_core::message::stored_phys_offset(raw).unwrap_or(-1);
                    let (Ok(q), Ok(phys)) = (u64::try_from(q), u64::try_from(phys)) else {
                        tracing::error!(topic, from, "unreadable transaction record skipped");
                        continue;
                    };
                    apply(q, phys, rec);
                }
            }
            GetStatus::OffsetTooSmall
            | GetStatus::MessageWasRemoving
            | GetStatus::OffsetFoundNull
            | GetStatus::NoMatchedMessage => {}
            _ => return,
        }
        if got.next_begin_offset.get() <= from {
            return;
        }
        skip(got.next_begin_offset.get());
        from = got.next_begin_offset.get();
    }
}

fn scan_halves<D: Disk, C: Clock>(store: &MessageStore<D, C>, t: &mut Tracker, timeout_ms: u64) {
    let from = t.half_cursor().0;
    let cell = std::cell::RefCell::new(t);
    scan_queue(
        store,
        HALF_TOPIC,
        from,
        |q, phys, rec| {
            let mut t = cell.borrow_mut();
            match rec.as_ref().map(records::half_copy) {
                Some(Ok(copy)) => t.scan_half(&copy, timeout_ms),
                other => {
                    tracing::error!(q, reason = ?other.map(Result::err), "half-queue record skipped");
                    t.skip_halves_to(q + 1, Some(phys));
                }
            }
        },
        |next| {
            let mut t = cell.borrow_mut();
            if next > t.half_cursor().0 {
                t.skip_halves_to(next, None);
            }
        },
    );
}

fn scan_ops<D: Disk, C: Clock>(store: &MessageStore<D, C>, t: &mut Tracker) {
    let from = t.op_cursor().0;
    let cell = std::cell::RefCell::new(t);
    scan_queue(
        store,
        OP_HALF_TOPIC,
        from,
        |q, phys, rec| {
            let mut t = cell.borrow_mut();
            if let Some((origin, outcome)) = rec.as_ref().and_then(records::op_entry) {
                t.scan_op(q, phys, origin, outcome);
            } else {
                tracing::error!(q, "op record skipped");
                t.skip_ops_to(q + 1, Some(phys));
            }
        },
        |next| {
            let mut t = cell.borrow_mut();
            if next > t.op_cursor().0 {
                t.skip_ops_to(next, None);
            }
        },
    );
}

impl<D: Disk, C: Clock> Broker<D, C> {
    /// Writes the tracker snapshot if it changed, after flushing the store
    /// so the snapshot never covers records that are not durable.
    pub async fn persist_transactions(&self) {
        let txs = self.transactions();
        let _one_writer = txs.persist.lock().await;
        txs.catch_up(self.store());
        let Some((version, json)) = txs.unpersisted() else {
            return;
        };
        let written = match self.store().flush().await {
            Ok(()) => self
                .disk()
                .replace_atomically(TRANSACTIONS_FILE, &json)
                .await
                .map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        match written {
            Ok(()) => txs.persisted(version),
            Err(e) => tracing::warn!(error = %e, "could not persist the transaction snapshot"),
        }
    }
}
