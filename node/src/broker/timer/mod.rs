//! Arbitrary-time delivery (RocketMQ 5.x timer messages). A message with
//! `TIMER_DELIVER_MS` (absolute wall ms), `TIMER_DELAY_MS` or
//! `TIMER_DELAY_SEC` (checked in that order; any of them wins over a
//! `DELAY` level, which is then dropped) is parked on arrival in
//! `rmq_sys_wheel_timer` queue 0 with `REAL_TOPIC`/`REAL_QID` and its due
//! time in `TIMER_OUT_MS`. A due time already reached stores the message
//! straight to its real topic; one further than `timer_max_delay_ms` ahead
//! or an unparsable value is refused (`MESSAGE_ILLEGAL`).
//!
//! The index has two parts. The *timer log* (`timerlog/`, [`log`]) holds
//! one fixed-size unit per parked message — due time, CommitLog offset and
//! size, timer-queue offset, the slot it was linked into and a pointer to
//! the previous unit of that slot — so per-timer data lives on disk. The
//! *wheel* ([`wheel`]) keeps in memory, per non-empty slot of
//! `timer_precision_ms`, only the head of that backward list and a count:
//! O(slots in the window), not O(timers).
//!
//! An enqueue task (masters and replicas alike: it derives everything
//! from the replicated timer queue) tails the timer queue into the log. A
//! dequeue task (the writer only) takes a slot once its whole span has
//! passed on the broker's clock, so a message is never early and, with
//! the enqueue keeping up, at most one precision (plus a poll) late; it
//! re-puts each message to its real topic and queue with the timer
//! properties stripped. Progress — the slot time below which everything
//! is delivered — goes to `config/timerProgress.json` after the re-puts
//! are flushed and to replicas through the HA metadata, adopted forward
//! only once the replica holds the CommitLog the master had when it wrote
//! it. Recovery rescans the log, drops a torn tail (and units whose queue
//! entries did not survive), resumes the enqueue after the last valid
//! unit and relinks every unit at or after the persisted progress.
//! Delivery is at-least-once: a crash or a failover repeats the slots
//! delivered after the last persisted progress.

mod deliver;
pub mod log;
pub mod wheel;

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use sluice_core::disk::Disk;
use sluice_core::message::{
    keys, save_real_destination, strip_seal, MessageInput, Properties, StoredRecord,
};
use sluice_core::{Clock, CommitLogOffset, MessageStore};

pub(crate) use deliver::spawn;

use self::log::{TimerLog, Unit};
use self::wheel::Wheel;
use super::config::BrokerConfig;
use super::schedule::DivertError;
use super::{Broker, PERM_READ, PERM_WRITE};

/// The topic parked timer messages wait in (queue 0).
pub const TIMER_TOPIC: &str = "rmq_sys_wheel_timer";
/// Where dequeue progress is kept, relative to the disk root.
pub const TIMER_PROGRESS_FILE: &str = "config/timerProgress.json";

/// Checks the timer settings against each other and the store's
/// retention: a parked message must outlive its wait.
pub fn check_config(c: &BrokerConfig) -> Result<(), String> {
    if c.timer_precision_ms == 0 || c.timer_precision_ms > 60_000 {
        return Err(format!(
            "timer_precision_ms must be within 1..=60000, not {}",
            c.timer_precision_ms
        ));
    }
    if c.timer_max_delay_ms > c.store.file_reserved_ms {
        return Err(format!(
            "timer_max_delay_ms ({}) exceeds the CommitLog retention file_reserved_ms ({}): \
             a parked message could be deleted before it is due",
            c.timer_max_delay_ms, c.store.file_reserved_ms
        ));
    }
    if c.timer_log_segment_bytes < log::UNIT_BYTES
        || c.timer_log_segment_bytes % log::UNIT_BYTES != 0
    {
        return Err(format!(
            "timer_log_segment_bytes must be a positive multiple of {}",
            log::UNIT_BYTES
        ));
    }
    Ok(())
}

/// `timerProgress.json`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct ProgressFile {
    /// Every slot starting before this (wall ms) is delivered.
    dequeued_ms: u64,
    /// The master's CommitLog end when it was written: the re-puts it
    /// covers lie below. A replica adopts it only once it holds as much.
    log_offset: u64,
}

/// In a replicated group, how many slots below the progress a broker keeps
/// indexed although they count as delivered. A unit whose parked record
/// became visible only after its slot was dequeued is linked by the master
/// into a later slot, but a replica that enqueued it before adopting that
/// progress holds it in its due slot: dropped with that slot, a promotion
/// would never deliver it. Kept, a promoted replica (or a restarted broker
/// of the group) delivers these slots again — at-least-once instead of
/// never.
pub const REPLICA_KEEP_SLOTS: u64 = 3;

/// The timer index and its progress.
pub struct Timers<D: Disk> {
    state: Mutex<State<D>>,
    persist: tokio::sync::Mutex<()>,
}

struct State<D: Disk> {
    log: TimerLog<D>,
    wheel: Wheel,
    pending_by_topic: BTreeMap<String, u64>,
    /// Latest slot linked from each log segment, for deleting segments
    /// whose units are all delivered.
    segment_slot_max: BTreeMap<u64, u64>,
    /// Next timer-queue offset the enqueue reads.
    next_queue_offset: u64,
    /// Slots starting before this were taken by the dequeue.
    dequeued_ms: u64,
    /// In a replicated group, delivered slots this close below the
    /// progress stay indexed (see [`REPLICA_KEEP_SLOTS`]); 0 for a lone
    /// broker.
    keep_ms: u64,
    /// The enqueue had read the whole timer queue as it stood at this time.
    caught_up_ms: u64,
    /// Log bytes below this are synced.
    synced_to: u64,
    /// The slot being delivered (taken from the wheel, not yet done): a
    /// shutdown that aborts its delivery must not count it delivered.
    delivering: Option<u64>,
    persisted: ProgressFile,
    persisted_json: Vec<u8>,
}

impl<D: Disk> Timers<D> {
    /// Opens the timer log and progress and rebuilds the wheel from the
    /// log's valid units (the store must be recovered already).
    pub fn open<C: Clock>(
        disk: D,
        store: &MessageStore<D, C>,
        config: &BrokerConfig,
        progress_json: Option<&[u8]>,
    ) -> Result<Self, String> {
        check_config(config)?;
        let persisted: ProgressFile = match progress_json {
            Some(raw) => {
                serde_json::from_slice(raw).map_err(|e| format!("timerProgress.json: {e}"))?
            }
            None => ProgressFile::default(),
        };
        let log =
            TimerLog::open(disk, config.timer_log_segment_bytes).map_err(|e| e.to_string())?;
        let mut state = State {
            log,
            wheel: Wheel::new(config.timer_precision_ms),
            pending_by_topic: BTreeMap::new(),
            segment_slot_max: BTreeMap::new(),
            next_queue_offset: 0,
            dequeued_ms: persisted.dequeued_ms,
            keep_ms: if config.replication.is_some() {
                REPLICA_KEEP_SLOTS.saturating_mul(config.timer_precision_ms)
            } else {
                0
            },
            caught_up_ms: 0,
            synced_to: 0,
            delivering: None,
            persisted,
            persisted_json: serde_json::to_vec(&persisted).unwrap_or_default(),
        };
        let queue_end = store.max_offset(TIMER_TOPIC, 0).get();
        state.rebuild(store, queue_end)?;
        Ok(Self {
            state: Mutex::new(state),
            persist: tokio::sync::Mutex::new(()),
        })
    }

    /// Counts one message of each of `topics` delivered (no longer pending).
    fn count_delivered(&self, topics: &[String]) {
        let mut g = self.lock();
        for t in topics {
            g.count(t, false);
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<D>> {
        self.state.lock().expect("invariant: lock not poisoned")
    }

    /// Pending timers per real topic.
    pub fn pending_by_topic(&self) -> BTreeMap<String, u64> {
        self.lock().pending_by_topic.clone()
    }

    /// Pending timers in the wheel.
    pub fn pending(&self) -> u64 {
        self.lock().wheel.units()
    }

    /// Bytes the in-memory index holds (wheel and per-topic counts).
    pub fn bytes_held(&self) -> usize {
        let g = self.lock();
        g.wheel.bytes_held()
            + g.segment_slot_max.len() * 32
            + g.pending_by_topic
                .keys()
                .map(|k| k.len() + 48)
                .sum::<usize>()
    }

    /// The progress last persisted, as `timerProgress.json` content (what
    /// a master hands its replicas).
    pub fn persisted_json(&self) -> Vec<u8> {
        self.lock().persisted_json.clone()
    }

    /// A replica adopts its master's progress, forward only, once its own
    /// CommitLog holds `written` ≥ the master's end at the time (so the
    /// re-puts it covers are here too).
    pub fn adopt(&self, json: &[u8], written: u64) -> Result<(), String> {
        let theirs: ProgressFile =
            serde_json::from_slice(json).map_err(|e| format!("timerProgress.json: {e}"))?;
        if written >= theirs.log_offset {
            let mut g = self.lock();
            g.dequeued_ms = g.dequeued_ms.max(theirs.dequeued_ms);
        }
        Ok(())
    }
}

impl<D: Disk> State<D> {
    /// Rescans the log from its start, keeps the units that are intact and
    /// whose queue entry survived (`queue offset < queue_end`), truncates
    /// the rest, and relinks the pending ones.
    fn rebuild<C: Clock>(
        &mut self,
        store: &MessageStore<D, C>,
        queue_end: u64,
    ) -> Result<(), String> {
        let Self {
            log,
            wheel,
            pending_by_topic,
            segment_slot_max,
            dequeued_ms,
            keep_ms,
            ..
        } = self;
        let keep_ms = *keep_ms;
        *wheel = Wheel::new(wheel.precision_ms());
        pending_by_topic.clear();
        segment_slot_max.clear();
        let seg_bytes = log.segment_bytes();
        let mut next = None;
        let end = log.scan(|pos, unit| {
            if unit.queue_offset >= queue_end || next.is_some_and(|n| unit.queue_offset < n) {
                return false;
            }
            next = Some(unit.queue_offset + 1);
            let seg = segment_slot_max.entry(pos - pos % seg_bytes).or_insert(0);
            *seg = (*seg).max(unit.slot_ms);
            if unit.slot_ms.saturating_add(keep_ms) >= *dequeued_ms {
                // The heads rebuild to the newest unit of each slot; the
                // `prev` pointers on disk already chain the older ones.
                wheel.link(unit.slot_ms, pos);
                if let Some(t) = real_topic(store, unit) {
                    *pending_by_topic.entry(t).or_insert(0) += 1;
                }
            }
            true
        });
        log.truncate(end).map_err(|e| e.to_string())?;
        self.next_queue_offset = next.unwrap_or(self.next_queue_offset.min(queue_end));
        self.synced_to = self.synced_to.min(end);
        tracing::info!(
            pending = self.wheel.units(),
            slots = self.wheel.slots(),
            next = self.next_queue_offset,
            "timer index rebuilt"
        );
        Ok(())
    }

    fn count(&mut self, topic: &str, up: bool) {
        if up {
            *self.pending_by_topic.entry(topic.to_owned()).or_insert(0) += 1;
        } else if let Some(n) = self.pending_by_topic.get_mut(topic) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.pending_by_topic.remove(topic);
            }
        }
    }

    /// The slot time everything before which is delivered: the dequeue's
    /// position, held back by a slot being delivered or put back after a
    /// failed re-put.
    fn watermark_ms(&self) -> u64 {
        let first = self.wheel.first().map_or(u64::MAX, |(s, _)| s);
        let delivering = self.delivering.unwrap_or(u64::MAX);
        self.dequeued_ms.min(first).min(delivering)
    }
}

/// The parked record a unit points to, checked to be that unit's (the
/// CommitLog may have been truncated and rewritten since).
fn parked_record<D: Disk, C: Clock>(
    store: &MessageStore<D, C>,
    unit: &Unit,
) -> Option<StoredRecord> {
    let raw = store
        .read_at(CommitLogOffset::new(unit.phys_offset))
        .ok()??;
    let rec = StoredRecord::decode(&raw).ok()?;
    let same = rec.topic == TIMER_TOPIC
        && u64::try_from(rec.queue_offset).ok() == Some(unit.queue_offset)
        && rec.total_size == unit.size;
    same.then_some(rec)
}

fn real_topic<D: Disk, C: Clock>(store: &MessageStore<D, C>, unit: &Unit) -> Option<String> {
    let rec = parked_record(store, unit)?;
    let props = Properties::parse(strip_seal(&rec.properties)).ok()?;
    props.get(keys::REAL_TOPIC).map(str::to_owned)
}

/// The requested due time of a message, if it asks for one.
fn requested_due_ms(props: &Properties, now_ms: u64) -> Option<Result<u64, String>> {
    let parse = |key: &str| {
        props.get(key).map(|v| {
            v.trim()
                .parse::<u64>()
                .map_err(|_| format!("{key}={v:?} is not a non-negative integer"))
        })
    };
    if let Some(at) = parse(keys::TIMER_DELIVER_MS) {
        return Some(at);
    }
    if let Some(ms) = parse(keys::TIMER_DELAY_MS) {
        return Some(ms.map(|ms| now_ms.saturating_add(ms)));
    }
    parse(keys::TIMER_DELAY_SEC).map(|s| s.map(|s| now_ms.saturating_add(s.saturating_mul(1_000))))
}

/// Properties a delivered or directly stored timer message loses; it
/// keeps (or gains) `TIMER_DELIVER_MS`, its due time, as Apache's timer
/// leaves it on delivered messages (5.x clients read it as the message's
/// delivery timestamp). A stored message already due is never parked
/// again, so the kept key delays nothing.
const TIMER_KEYS: [&str; 5] = [
    keys::TIMER_DELIVER_MS,
    keys::TIMER_DELAY_MS,
    keys::TIMER_DELAY_SEC,
    keys::TIMER_OUT_MS,
    keys::DELAY,
];

/// Properties a delivered timer message loses: [`TIMER_KEYS`] but its
/// due time.
const REPUT_DROPPED_KEYS: [&str; 4] = [
    keys::TIMER_DELAY_MS,
    keys::TIMER_DELAY_SEC,
    keys::TIMER_OUT_MS,
    keys::DELAY,
];

impl<D: Disk, C: Clock> Broker<D, C> {
    /// The timer index.
    pub fn timers(&self) -> &Timers<D> {
        &self.timers
    }

    /// Parks `msg` in the timer topic when it asks for a delivery time
    /// (see the module doc); a due time already reached leaves it for its
    /// real topic with the timer properties (and any `DELAY`) removed.
    ///
    /// `props` are the message's properties, parsed once by the caller;
    /// a diverted message's are changed there and re-encoded into `msg`.
    pub(crate) async fn divert_timer(
        &self,
        msg: &mut MessageInput,
        props: &mut Properties,
    ) -> Result<(), DivertError> {
        // Halves and rollbacks are never delayed (they get no queue entry).
        if !sluice_core::commit_log::is_dispatchable(msg.sys_flag) {
            return Ok(());
        }
        let now_ms = self.clock().wall_ms();
        let Some(due) = requested_due_ms(props, now_ms) else {
            return Ok(());
        };
        let due_ms = due.map_err(DivertError)?;
        let max_ms = self.config().timer_max_delay_ms;
        if due_ms.saturating_sub(now_ms) > max_ms {
            return Err(DivertError(format!(
                "delivery time {due_ms} is {} ms ahead, beyond timer_max_delay_ms {max_ms}",
                due_ms - now_ms
            )));
        }
        for key in TIMER_KEYS {
            props.remove(key);
        }
        let bad = |e: sluice_core::message::EncodeError| DivertError(e.to_string());
        props
            .insert(keys::TIMER_DELIVER_MS, &due_ms.to_string())
            .map_err(bad)?;
        if due_ms > now_ms {
            props
                .insert(keys::TIMER_OUT_MS, &due_ms.to_string())
                .map_err(bad)?;
            save_real_destination(props, &msg.topic, msg.queue_id).map_err(bad)?;
            let (_, created) =
                self.topics()
                    .ensure(TIMER_TOPIC, 1, PERM_READ | PERM_WRITE, self.now_ms());
            if created {
                self.topics_updated().await;
            }
            TIMER_TOPIC.clone_into(&mut msg.topic);
            msg.queue_id = 0;
        }
        msg.properties = Bytes::from(props.encode());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: &[(&str, &str)]) -> Properties {
        let mut p = Properties::new();
        for (k, v) in pairs {
            p.insert(k, v).expect("insert");
        }
        p
    }

    #[test]
    fn due_time_prefers_the_absolute_time_and_rejects_garbage() {
        let now = 1_000_000;
        assert_eq!(requested_due_ms(&props(&[]), now), None);
        assert_eq!(
            requested_due_ms(&props(&[(keys::TIMER_DELAY_SEC, "3")]), now),
            Some(Ok(1_003_000))
        );
        assert_eq!(
            requested_due_ms(&props(&[(keys::TIMER_DELAY_MS, "250")]), now),
            Some(Ok(1_000_250))
        );
        assert_eq!(
            requested_due_ms(
                &props(&[(keys::TIMER_DELAY_MS, "250"), (keys::TIMER_DELIVER_MS, "5")]),
                now
            ),
            Some(Ok(5)),
            "the absolute time wins"
        );
        assert!(matches!(
            requested_due_ms(&props(&[(keys::TIMER_DELAY_MS, "-1")]), now),
            Some(Err(_))
        ));
        assert!(matches!(
            requested_due_ms(&props(&[(keys::TIMER_DELIVER_MS, "soon")]), now),
            Some(Err(_))
        ));
    }

    #[test]
    fn config_rejects_a_max_delay_beyond_retention() {
        let mut c = BrokerConfig::default();
        assert_eq!(check_config(&c), Ok(()));
        c.timer_max_delay_ms = c.store.file_reserved_ms + 1;
        assert!(check_config(&c)
            .expect_err("beyond retention")
            .contains("file_reserved_ms"));
        c.timer_max_delay_ms = 1_000;
        c.timer_precision_ms = 0;
        assert!(check_config(&c).is_err());
    }
}
