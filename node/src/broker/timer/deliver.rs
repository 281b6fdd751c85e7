//! The timer's two tasks: the enqueue (every role) tails the timer queue
//! into the log and the wheel; the dequeue (the writer only) re-puts the
//! messages of every slot whose span has passed, then persists progress
//! once the re-puts are flushed. Invariant: a slot is taken only when its
//! end is at or before both the clock and the enqueue's caught-up time.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use sluice_core::disk::{Disk, Segment};
use sluice_core::message::{
    keys, strip_seal, take_real_destination, MessageInput, Properties, RealDestinationError,
    StoredRecord,
};
use sluice_core::{Clock, Error as StoreError, QueueOffset};
use tokio::task::JoinHandle;

use super::log::{Unit, NO_PREV};
use super::wheel::SlotHead;
use super::{parked_record, ProgressFile, REPUT_DROPPED_KEYS, TIMER_PROGRESS_FILE, TIMER_TOPIC};
use crate::broker::Broker;

/// Messages of a slot re-put in one store batch.
const REPUT_BATCH_MAX: usize = 64;
/// Queue entries the enqueue reads per pass.
const ENQUEUE_BATCH_MAX: usize = 1_024;
/// Longest either task sleeps before looking again.
const POLL_INTERVAL_MS_MAX: u64 = 20;
/// Pause after a failed re-put or log write.
const ERROR_BACKOFF_MS: u64 = 1_000;
/// Unsynced timer log bytes the enqueue lets accumulate before it syncs
/// (progress persistence syncs the rest first).
const SYNC_BYTES_MIN: u64 = 1 << 20;
/// Progress that moved only through empty time is persisted this often.
const IDLE_PERSIST_INTERVAL_MS: u64 = 1_000;

/// Spawns the enqueue and dequeue tasks; they run until aborted.
pub(crate) fn spawn<D: Disk, C: Clock>(broker: &Arc<Broker<D, C>>) -> Vec<JoinHandle<()>> {
    vec![
        tokio::spawn(run_enqueue(Arc::clone(broker))),
        tokio::spawn(run_dequeue(Arc::clone(broker))),
    ]
}

async fn run_enqueue<D: Disk, C: Clock>(b: Arc<Broker<D, C>>) {
    loop {
        let pause_ms = match enqueue_batch(&b).await {
            Ok(0) => POLL_INTERVAL_MS_MAX,
            Ok(_) => 0,
            Err(e) => {
                tracing::error!(error = %e, "timer enqueue failed");
                ERROR_BACKOFF_MS
            }
        };
        tokio::time::sleep(Duration::from_millis(pause_ms)).await;
    }
}

/// Links the next batch of parked messages; returns how many.
pub(crate) async fn enqueue_batch<D: Disk, C: Clock>(b: &Broker<D, C>) -> Result<usize, String> {
    let now_ms = b.clock().wall_ms();
    let store = b.store();
    let timers = b.timers();
    let Some(cq) = store.consume_queues().get(TIMER_TOPIC, 0) else {
        timers.lock().caught_up_ms = now_ms;
        return Ok(0);
    };
    let (queue_min, queue_end) = (cq.min_offset().get(), cq.max_offset().get());
    let from = {
        let mut g = timers.lock();
        if g.next_queue_offset > queue_end {
            // The queue lost its tail (a replica truncated to its master's
            // history): forget the units past it.
            tracing::warn!(
                next = g.next_queue_offset,
                queue_end,
                "timer queue shrank; rebuilding the timer index"
            );
            g.rebuild(store, queue_end)?;
        }
        if g.next_queue_offset < queue_min {
            tracing::error!(
                next = g.next_queue_offset,
                queue_min,
                "parked timer messages were removed by retention before being indexed"
            );
            g.next_queue_offset = queue_min;
        }
        g.next_queue_offset
    };
    let entries = cq
        .entries(QueueOffset::new(from), ENQUEUE_BATCH_MAX)
        .map_err(|e| e.to_string())?;
    let mut units = Vec::with_capacity(entries.len());
    for (q, e) in (from..).zip(&entries) {
        let Some(raw) = store.read_at(e.phys_offset).map_err(|e| e.to_string())? else {
            if e.phys_offset < store.commit_log().min_offset() {
                // Retention removed the parked record: link a unit anyway
                // (the queue offsets stay contiguous); its delivery finds
                // the record gone and reports it dropped.
                units.push((q, e.phys_offset.get(), e.size, 0, None));
                continue;
            }
            // Not visible yet.
            break;
        };
        let (due_ms, topic) = match StoredRecord::decode(&raw) {
            Ok(rec) => due_and_topic(&rec),
            Err(err) => {
                tracing::error!(error = %err, q, "undecodable timer record; delivering at once");
                (0, None)
            }
        };
        units.push((q, e.phys_offset.get(), e.size, due_ms, topic));
    }
    let appended = units.len();
    let dirty = {
        let mut g = timers.lock();
        for (q, phys, size, due_ms, topic) in units {
            let slot = g.wheel.slot_of(due_ms).max(g.dequeued_ms);
            let pos = g.log.end();
            let prev = g.wheel.head(slot).map_or(NO_PREV, |h| h.last_pos);
            let unit = Unit {
                due_ms,
                slot_ms: slot,
                phys_offset: phys,
                size,
                queue_offset: q,
                prev_pos: prev,
            };
            g.log.append(unit).map_err(|e| e.to_string())?;
            g.wheel.link(slot, pos);
            let seg = pos - pos % g.log.segment_bytes();
            let max = g.segment_slot_max.entry(seg).or_insert(0);
            *max = (*max).max(slot);
            if let Some(t) = topic {
                g.count(&t, true);
            }
            g.next_queue_offset = q + 1;
        }
        if g.next_queue_offset >= queue_end {
            g.caught_up_ms = g.caught_up_ms.max(now_ms);
        }
        g.log.end() - g.synced_to >= SYNC_BYTES_MIN
    };
    if dirty {
        b.sync_timer_log().await;
    }
    Ok(appended)
}

/// A parked record's due time (`TIMER_OUT_MS`; at once when missing) and
/// real topic.
fn due_and_topic(rec: &StoredRecord) -> (u64, Option<String>) {
    let props = Properties::parse(strip_seal(&rec.properties)).unwrap_or_default();
    let due = props
        .get(keys::TIMER_OUT_MS)
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0);
    (due, props.get(keys::REAL_TOPIC).map(str::to_owned))
}

async fn run_dequeue<D: Disk, C: Clock>(b: Arc<Broker<D, C>>) {
    let mut since_persist_ms = 0;
    loop {
        if !b.is_writer() {
            // A replica delivers nothing; it drops what its master has
            // delivered (adopted progress) and persists that.
            drop_adopted(&b);
            b.persist_timer_progress().await;
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        }
        let (delivered, mut pause_ms) = dequeue_due(&b).await;
        if sluice_core::buggify!() {
            // A legal rare path: the wheel turns late (a busy broker).
            pause_ms += sluice_core::buggify::amount(1_000);
        }
        since_persist_ms += pause_ms.max(1);
        if delivered || since_persist_ms >= IDLE_PERSIST_INTERVAL_MS {
            b.persist_timer_progress().await;
            since_persist_ms = 0;
        }
        tokio::time::sleep(Duration::from_millis(pause_ms)).await;
    }
}

/// Delivers every slot whose span has passed; returns whether anything
/// was delivered and how long to wait.
pub(crate) async fn dequeue_due<D: Disk, C: Clock>(b: &Broker<D, C>) -> (bool, u64) {
    let now_ms = b.clock().wall_ms();
    let mut delivered = false;
    loop {
        let taken = {
            let mut g = b.timers().lock();
            // A slot is complete only once the enqueue has read every
            // message stored before its end.
            let limit = now_ms.min(g.caught_up_ms);
            if let Some((slot, head)) = g.wheel.take_due(limit) {
                let after = slot + g.wheel.precision_ms();
                g.dequeued_ms = g.dequeued_ms.max(after);
                g.delivering = Some(slot);
                Some((slot, head))
            } else {
                let empty_to = g.wheel.slot_of(limit);
                let first = g.wheel.first().map_or(u64::MAX, |(s, _)| s);
                g.dequeued_ms = g.dequeued_ms.max(empty_to.min(first));
                None
            }
        };
        let Some((slot, head)) = taken else {
            break;
        };
        let outcome = deliver_slot(b, slot, head).await;
        b.timers().lock().delivering = None;
        match outcome {
            Ok(n) => delivered |= n > 0,
            Err(()) => return (delivered, ERROR_BACKOFF_MS),
        }
    }
    let g = b.timers().lock();
    let next_end = g
        .wheel
        .first()
        .map_or(u64::MAX, |(s, _)| s + g.wheel.precision_ms());
    (
        delivered,
        next_end
            .saturating_sub(now_ms)
            .clamp(1, POLL_INTERVAL_MS_MAX),
    )
}

/// Walks a slot's list from its newest unit and re-puts its messages in
/// batches. On a failure that may pass, the rest of the list (from the
/// failed batch on) goes back into the wheel.
async fn deliver_slot<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    slot: u64,
    head: SlotHead,
) -> Result<u64, ()> {
    let mut pos = head.last_pos;
    let mut left = head.units;
    let mut done = 0;
    while pos != NO_PREV && left > 0 {
        let resume = SlotHead {
            last_pos: pos,
            units: left,
        };
        let mut units = Vec::with_capacity(REPUT_BATCH_MAX);
        {
            let g = b.timers().lock();
            while pos != NO_PREV && left > 0 && units.len() < REPUT_BATCH_MAX {
                let Some(unit) = g.log.read(pos) else {
                    tracing::error!(
                        slot,
                        pos,
                        left,
                        "timer list broken; its older units are lost"
                    );
                    left = 0;
                    break;
                };
                pos = unit.prev_pos;
                left -= 1;
                units.push(unit);
            }
        }
        match redeliver_batch(b, &units).await {
            Ok(n) => done += n,
            Err(e) => {
                tracing::warn!(error = %e, slot, "timer delivery failed; retrying");
                b.timers().lock().wheel.restore(slot, resume);
                return Err(());
            }
        }
    }
    Ok(done)
}

/// Re-puts the messages of `units` in one batch (one by one if the batch
/// is refused); returns how many were delivered, or an error that may
/// pass (the whole batch is then retried: at-least-once).
async fn redeliver_batch<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    units: &[Unit],
) -> Result<u64, String> {
    let mut msgs = Vec::with_capacity(units.len());
    for unit in units {
        match reput_input(b, unit) {
            Ok(msg) => msgs.push(msg),
            Err((e, topic)) => {
                tracing::error!(error = %e, q = unit.queue_offset, "timer message dropped");
                if let Some(t) = topic {
                    b.timers().lock().count(&t, false);
                }
            }
        }
    }
    if msgs.is_empty() {
        return Ok(0);
    }
    let topics: Vec<String> = msgs.iter().map(|m| m.topic.clone()).collect();
    match b.store().put_batch(msgs.clone(), false).await {
        Ok(_) => {
            b.stats()
                .timers_delivered(b.clock().wall_ms(), units.iter().map(|u| u.due_ms));
            b.timers().count_delivered(&topics);
            Ok(topics.len() as u64)
        }
        Err(StoreError::MessageRejected { .. } | StoreError::Encode(_)) => {
            // One of them cannot be stored: find it, deliver the rest.
            let mut n = 0;
            for msg in msgs {
                let topic = msg.topic.clone();
                match b.store().put(msg, false).await {
                    Ok(_) => n += 1,
                    Err(e @ (StoreError::MessageRejected { .. } | StoreError::Encode(_))) => {
                        tracing::error!(error = %e, topic, "timer message dropped");
                    }
                    Err(e) => return Err(e.to_string()),
                }
                b.timers().lock().count(&topic, false);
            }
            Ok(n)
        }
        Err(e) => Err(e.to_string()),
    }
}

/// The message to re-put for a parked unit: its real topic and queue,
/// the timer properties stripped. An error names the real topic if known.
fn reput_input<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    unit: &Unit,
) -> Result<MessageInput, (String, Option<String>)> {
    let rec = parked_record(b.store(), unit)
        .ok_or_else(|| ("parked record missing or replaced".to_owned(), None))?;
    let mut props = Properties::parse(strip_seal(&rec.properties))
        .map_err(|e| (format!("properties: {e}"), None))?;
    let (topic, queue_id) = take_real_destination(&mut props).map_err(|e| match e {
        RealDestinationError::NoQueue { topic } => ("no REAL_QID".to_owned(), Some(topic)),
        RealDestinationError::NoTopic => ("no REAL_TOPIC".to_owned(), None),
    })?;
    for key in REPUT_DROPPED_KEYS {
        props.remove(key);
    }
    Ok(MessageInput::from_stored(
        &rec,
        topic,
        queue_id,
        Bytes::from(props.encode()),
        b.store_host(),
    ))
}

/// A replica forgets the slots its master has delivered, but for the last
/// few (see `REPLICA_KEEP_SLOTS`), which a promotion delivers again.
fn drop_adopted<D: Disk, C: Clock>(b: &Broker<D, C>) {
    let mut g = b.timers().lock();
    let keep_from = g.dequeued_ms.saturating_sub(g.keep_ms);
    while let Some((slot, head)) = g.wheel.first() {
        if slot >= keep_from {
            break;
        }
        g.wheel.take(slot);
        let mut pos = head.last_pos;
        while pos != NO_PREV {
            let Some(unit) = g.log.read(pos) else { break };
            if let Some(t) = super::real_topic(b.store(), &unit) {
                g.count(&t, false);
            }
            pos = unit.prev_pos;
        }
    }
}

impl<D: Disk, C: Clock> Broker<D, C> {
    /// Syncs the timer log written since the last sync. A unit lost in a
    /// crash is re-derived from the timer queue, so a failed sync is only
    /// reported: at worst its messages are delivered again.
    async fn sync_timer_log(&self) {
        let dirty = {
            let mut g = self.timers().lock();
            let from = g.synced_to;
            g.synced_to = g.log.end();
            g.log.dirty_segments(from)
        };
        for (seg, off, len) in dirty {
            if let Err(e) = seg.sync(off, len).await {
                tracing::warn!(error = %e, "timer log sync failed");
            }
        }
    }

    /// Writes timer progress if it moved, after flushing the store so no
    /// progress is durable before the re-puts it covers; then deletes log
    /// segments whose units are all delivered.
    pub async fn persist_timer_progress(&self) {
        let _one_writer = self.timers().persist.lock().await;
        let (file, version_ms) = {
            let g = self.timers().lock();
            let file = ProgressFile {
                dequeued_ms: g.watermark_ms(),
                log_offset: self.store().commit_log().written().get(),
            };
            if file.dequeued_ms <= g.persisted.dequeued_ms {
                return;
            }
            (file, file.dequeued_ms)
        };
        let json = serde_json::to_vec(&file).expect("invariant: two integers serialize");
        // The units behind the progress go to disk first, so a recovery
        // does not re-derive (and deliver again) what was delivered.
        self.sync_timer_log().await;
        let written = match self.store().flush().await {
            Ok(()) => self
                .disk()
                .replace_atomically(TIMER_PROGRESS_FILE, &json)
                .await
                .map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        if let Err(e) = written {
            tracing::warn!(error = %e, "could not persist timer progress");
            return;
        }
        let mut g = self.timers().lock();
        if version_ms > g.persisted.dequeued_ms {
            g.persisted = file;
            g.persisted_json = json;
        }
        // Only the oldest segment goes, so the log stays contiguous.
        let tail = g.log.end() - g.log.end() % g.log.segment_bytes();
        loop {
            let start = g.log.start();
            let Some(&slot_max) = g.segment_slot_max.get(&start) else {
                break;
            };
            if start >= tail || slot_max.saturating_add(g.keep_ms) >= version_ms {
                break;
            }
            match g.log.remove_segment(start) {
                Ok(true) => {
                    g.segment_slot_max.remove(&start);
                }
                Ok(false) => break,
                Err(e) => {
                    tracing::warn!(error = %e, "could not delete a delivered timer log segment");
                    break;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use sluice_core::testing::{ManualClock, SimDisk};
    use sluice_core::StoreConfig;

    use super::*;
    use crate::broker::timer::REPLICA_KEEP_SLOTS;
    use crate::broker::BrokerConfig;

    const T0_MS: u64 = 1_700_000_000_000;
    const REAL: &str = "RealT";

    fn config() -> BrokerConfig {
        BrokerConfig {
            listen: "127.0.0.1:0".to_owned(),
            namesrv_addrs: Vec::new(),
            timer_precision_ms: 100,
            timer_max_delay_ms: 60_000,
            timer_log_segment_bytes: 56 * 8,
            store: StoreConfig {
                root: "store".to_owned(),
                flush_mode: sluice_core::FlushMode::Async,
                ..StoreConfig::for_tests()
            },
            ..BrokerConfig::default()
        }
    }

    type TestBroker = Arc<Broker<SimDisk, ManualClock>>;

    async fn open(disk: &SimDisk, clock: &ManualClock) -> TestBroker {
        Broker::open(disk.clone(), clock.clone(), config())
            .await
            .expect("open broker")
    }

    /// Sends a timer message due `delay_ms` from now through the send
    /// path's divert; its body is its due time.
    async fn send_timer(b: &TestBroker, delay_ms: u64) {
        let due = b.clock().wall_ms() + delay_ms;
        let mut props = Properties::new();
        props
            .insert(keys::TIMER_DELAY_MS, &delay_ms.to_string())
            .expect("prop");
        let mut msg = MessageInput {
            topic: REAL.to_owned(),
            queue_id: 0,
            flag: 0,
            sys_flag: 0,
            born_timestamp_ms: 0,
            born_host: "127.0.0.1:1".parse().expect("addr"),
            store_host: "127.0.0.1:2".parse().expect("addr"),
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body: Bytes::copy_from_slice(&due.to_be_bytes()),
            properties: Bytes::from(props.encode()),
        };
        b.divert_timer(&mut msg, &mut props).await.expect("divert");
        assert_eq!(msg.topic, TIMER_TOPIC, "parked");
        b.store().put(msg, false).await.expect("put");
    }

    /// Due times of everything delivered to the real topic, in order.
    fn delivered(b: &TestBroker) -> Vec<u64> {
        let got = b
            .store()
            .get(
                REAL,
                0,
                QueueOffset::new(0),
                10_000,
                1 << 24,
                &sluice_core::store::TagsFilter::default(),
            )
            .expect("get");
        got.messages
            .iter()
            .map(|raw| {
                let rec = StoredRecord::decode(raw).expect("record");
                u64::from_be_bytes(rec.body[..8].try_into().expect("8 bytes"))
            })
            .collect()
    }

    async fn step(b: &TestBroker) {
        enqueue_batch(b).await.expect("enqueue");
        dequeue_due(b).await;
    }

    #[tokio::test]
    async fn no_timer_is_delivered_before_its_due_time() {
        let disk = SimDisk::new(11);
        let clock = ManualClock::new(T0_MS);
        let b = open(&disk, &clock).await;
        for i in 0..40 {
            send_timer(&b, 50 + i * 37).await;
        }
        let mut seen = 0;
        for _ in 0..400 {
            step(&b).await;
            let now = clock.wall_ms();
            let got = delivered(&b);
            assert!(
                got.iter().all(|&due| due <= now),
                "delivered early at {now}: {got:?}"
            );
            // A slot goes as soon as it ended (its end is at most one
            // precision after any due time in it): late by at most that.
            let overdue = (0..40)
                .map(|i| T0_MS + 50 + i * 37)
                .filter(|&due| due - due % 100 + 100 <= now)
                .count();
            assert_eq!(got.len(), overdue, "at {now}");
            seen = got.len();
            clock.advance(Duration::from_millis(7));
        }
        assert_eq!(seen, 40, "all delivered in the end");
        assert_eq!(b.timers().pending(), 0);
        assert!(b.timers().pending_by_topic().is_empty());
    }

    /// A replica that adopted progress past a unit's slot before its master
    /// delivered it (the master linked it late, into a later slot) keeps
    /// it, and delivers it once promoted; without the keep window it would
    /// be dropped with the slot and never delivered.
    #[tokio::test]
    async fn a_replica_keeps_slots_just_below_adopted_progress_for_a_promotion() {
        for keep_slots in [0, REPLICA_KEEP_SLOTS] {
            let disk = SimDisk::new(5);
            let clock = ManualClock::new(T0_MS);
            let b = open(&disk, &clock).await;
            send_timer(&b, 150).await; // slot T0+100
            send_timer(&b, 650).await; // slot T0+600
            enqueue_batch(&b).await.expect("enqueue");
            assert_eq!(b.timers().pending(), 2);
            {
                // As a replica: the master's progress arrives, past both
                // slots, although its re-puts of them are not here.
                let mut g = b.timers().lock();
                g.keep_ms = keep_slots * 100;
                g.dequeued_ms = T0_MS + 700;
            }
            drop_adopted(&b);
            if keep_slots == 0 {
                assert_eq!(b.timers().pending(), 0, "both dropped: the old loss");
                continue;
            }
            // The slot within the window stays; the older one is dropped.
            assert_eq!(b.timers().pending(), 1);
            // Promoted: the kept slot is delivered, never early.
            clock.advance(Duration::from_millis(800));
            step(&b).await;
            assert_eq!(delivered(&b), vec![T0_MS + 650]);
            assert_eq!(b.timers().pending(), 0);
        }
    }

    #[tokio::test]
    async fn power_loss_tears_the_timer_log_and_every_timer_is_still_delivered_once() {
        let mut torn = 0;
        for seed in 0..6 {
            let disk = SimDisk::new(seed);
            let clock = ManualClock::new(T0_MS);
            let b = open(&disk, &clock).await;
            for i in 0..30 {
                send_timer(&b, 1_000 + i * 10).await;
            }
            step(&b).await;
            assert_eq!(b.timers().pending(), 30);
            // The parked records are durable; the timer log (4 files) is not.
            b.store().flush().await.expect("flush");
            drop(b);
            disk.power_loss();

            let b = open(&disk, &clock).await;
            if b.timers().pending() < 30 {
                torn += 1;
            }
            step(&b).await;
            assert_eq!(b.timers().pending(), 30, "seed {seed}: re-derived");
            assert_eq!(
                b.timers().pending_by_topic().get(REAL).copied(),
                Some(30),
                "seed {seed}"
            );
            clock.advance(Duration::from_millis(1_500));
            step(&b).await;
            let mut got = delivered(&b);
            got.sort_unstable();
            let want: Vec<u64> = (0..30).map(|i| T0_MS + 1_000 + i * 10).collect();
            assert_eq!(got, want, "seed {seed}: each delivered once");
            b.persist_timer_progress().await;
            drop(b);

            // Progress and the delivered units survive a crash: nothing again.
            disk.process_crash();
            let b = open(&disk, &clock).await;
            step(&b).await;
            clock.advance(Duration::from_millis(500));
            step(&b).await;
            assert_eq!(delivered(&b).len(), 30, "seed {seed}: delivered again");
            assert_eq!(b.timers().pending(), 0);
        }
        assert!(
            torn > 0,
            "no seed lost timer log units: the test tests nothing"
        );
    }
}
