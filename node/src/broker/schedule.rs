//! Delayed delivery (RocketMQ 4.x `ScheduleMessageService`). A message with
//! `DELAY` > 0 is diverted on arrival into `SCHEDULE_TOPIC_XXXX`, queue
//! `level − 1`, with its real topic and queue saved in `REAL_TOPIC` /
//! `REAL_QID`. One task per level reads its queue in order from a progress
//! offset and re-puts each message to its real queue once the record's
//! store timestamp plus the level's delay has passed on the broker's wall
//! clock — never earlier. Progress is written to `config/delayOffset.json`
//! after deliveries (once the re-put records are flushed) and at shutdown,
//! so a restart resumes where delivery stopped; a message delivered after
//! the last persisted progress may be delivered again (at-least-once).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use sluice_core::disk::Disk;
use sluice_core::message::topic::SCHEDULE_TOPIC;
use sluice_core::message::{
    keys, real_destination, save_real_destination, strip_seal, MessageInput, Properties,
    StoredRecord,
};
use sluice_core::store::{GetStatus, TagsFilter};
use sluice_core::{Clock, Error as StoreError, QueueOffset};
use tokio::task::JoinHandle;

use super::{Broker, PERM_READ, PERM_WRITE};

/// Where per-level progress is kept, relative to the disk root.
pub const DELAY_OFFSETS_FILE: &str = "config/delayOffset.json";

/// Longest a level task sleeps before looking at its queue again.
const POLL_INTERVAL_MS_MAX: u64 = 100;
/// Pause after a failed re-put (RocketMQ backs off 10 s; the store is
/// usually fenced or shutting down then).
const ERROR_BACKOFF_MS: u64 = 1_000;
/// Records read from a level queue per pass.
const BATCH_MESSAGES_MAX: usize = 32;
const BATCH_BYTES_MAX: usize = 1024 * 1024;

/// `delayOffset.json` in RocketMQ's shape: level → next queue offset.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct ProgressFile {
    offset_table: BTreeMap<i32, i64>,
}

/// Per-level delivery progress.
#[derive(Default)]
pub struct DelayProgress {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    file: ProgressFile,
    /// Bumped on every change; the persisted state is clean when the
    /// version written last equals it.
    version: u64,
    persisted_version: u64,
}

impl DelayProgress {
    /// Loads `config/delayOffset.json` contents (if any).
    pub fn load(json: Option<&[u8]>) -> Result<Self, String> {
        let file = match json {
            Some(raw) => {
                serde_json::from_slice(raw).map_err(|e| format!("delayOffset.json: {e}"))?
            }
            None => ProgressFile::default(),
        };
        Ok(Self {
            inner: Mutex::new(Inner {
                file,
                ..Inner::default()
            }),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().expect("invariant: lock not poisoned")
    }

    /// The next schedule-queue offset of `level` to deliver.
    pub fn next(&self, level: i32) -> i64 {
        self.lock()
            .file
            .offset_table
            .get(&level)
            .copied()
            .unwrap_or(0)
    }

    /// Records that `level` continues at `next` (never moving backwards).
    pub fn advance(&self, level: i32, next: i64) {
        let mut g = self.lock();
        let at = g.file.offset_table.entry(level).or_insert(0);
        if next > *at {
            *at = next;
            g.version += 1;
        }
    }

    /// The progress as `delayOffset.json` content.
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(&self.lock().file).unwrap_or_default()
    }

    /// A replica adopts its master's progress (`delayOffset.json` content),
    /// each level only forward, so a promoted replica does not deliver
    /// again what its master delivered.
    pub fn adopt(&self, json: &[u8]) -> Result<(), String> {
        let file: ProgressFile =
            serde_json::from_slice(json).map_err(|e| format!("delayOffset.json: {e}"))?;
        for (level, next) in file.offset_table {
            self.advance(level, next);
        }
        Ok(())
    }

    /// Moves `level` to `next` even backwards (the queue lost its tail).
    fn reset(&self, level: i32, next: i64) {
        let mut g = self.lock();
        g.file.offset_table.insert(level, next);
        g.version += 1;
    }

    /// The version and JSON to persist, if anything changed since the last
    /// successful write. Stays dirty until [`Self::persisted`] is called, so
    /// a write cancelled half-way is retried at shutdown.
    fn unpersisted_json(&self) -> Option<(u64, Vec<u8>)> {
        let g = self.lock();
        (g.version != g.persisted_version).then(|| {
            let json = serde_json::to_vec_pretty(&g.file)
                .expect("invariant: a map of integers serializes");
            (g.version, json)
        })
    }

    fn persisted(&self, version: u64) {
        let mut g = self.lock();
        g.persisted_version = g.persisted_version.max(version);
    }
}

/// Why a message could not be diverted.
#[derive(Debug)]
pub(crate) struct DivertError(pub String);

impl<D: Disk, C: Clock> Broker<D, C> {
    /// Rewrites `msg` into the schedule topic when it carries `DELAY` > 0
    /// and is not a prepared or rolled-back transaction half; levels above
    /// the highest are clamped. Creates the schedule topic on first use.
    /// `props` are the message's properties, parsed once by the caller;
    /// a diverted message's are changed there and re-encoded into `msg`.
    pub(crate) async fn divert_delayed(
        &self,
        msg: &mut MessageInput,
        props: &mut Properties,
    ) -> Result<(), DivertError> {
        // Halves and rollbacks are never delayed (they get no queue entry).
        if !sluice_core::commit_log::is_dispatchable(msg.sys_flag) {
            return Ok(());
        }
        let requested = props
            .get(keys::DELAY)
            .and_then(|d| d.trim().parse::<i32>().ok());
        let Some(level) = requested.and_then(|l| self.delay_levels().clamp(l)) else {
            return Ok(());
        };
        let bad = |e: sluice_core::message::EncodeError| DivertError(e.to_string());
        props.insert(keys::DELAY, &level.to_string()).map_err(bad)?;
        save_real_destination(props, &msg.topic, msg.queue_id).map_err(bad)?;
        let queues = self.delay_levels().count();
        let (_, created) = self.topics().ensure(
            SCHEDULE_TOPIC,
            queues,
            PERM_READ | PERM_WRITE,
            self.now_ms(),
        );
        if created {
            self.topics_updated().await;
        }
        SCHEDULE_TOPIC.clone_into(&mut msg.topic);
        msg.queue_id = level - 1;
        msg.properties = Bytes::from(props.encode());
        Ok(())
    }

    /// Writes delay progress if it changed, after flushing the store so no
    /// progress is durable before the deliveries it covers.
    pub async fn persist_delay_offsets(&self) {
        let _one_writer = self.delay_persist_lock().lock().await;
        let Some((version, json)) = self.delay_progress().unpersisted_json() else {
            return;
        };
        let written = match self.store().flush().await {
            Ok(()) => self
                .disk()
                .replace_atomically(DELAY_OFFSETS_FILE, &json)
                .await
                .map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        match written {
            Ok(()) => self.delay_progress().persisted(version),
            Err(e) => tracing::warn!(error = %e, "could not persist delay offsets"),
        }
    }
}

/// Spawns one delivery task per level; they run until aborted (the caller
/// awaits the aborted handles so no delivery outlives the shutdown).
pub(crate) fn spawn<D: Disk, C: Clock>(broker: &Arc<Broker<D, C>>) -> Vec<JoinHandle<()>> {
    (1..=broker.delay_levels().count())
        .map(|level| tokio::spawn(run_level(Arc::clone(broker), level)))
        .collect()
}

async fn run_level<D: Disk, C: Clock>(b: Arc<Broker<D, C>>, level: i32) {
    let delay_ms = b
        .delay_levels()
        .delay_ms(level)
        .expect("invariant: level within 1..=count");
    loop {
        if !b.is_writer() {
            // A replica delivers nothing: its master's deliveries arrive
            // through replication.
            tokio::time::sleep(Duration::from_millis(500)).await;
            continue;
        }
        let mut pause_ms = deliver_due(&b, level, delay_ms).await;
        if sluice_core::buggify!() {
            // A legal rare path: the level's task runs late (a busy broker).
            pause_ms += sluice_core::buggify::amount(1_000);
        }
        tokio::time::sleep(Duration::from_millis(pause_ms)).await;
    }
}

/// Delivers the due head of `level`'s queue; returns how long to wait.
async fn deliver_due<D: Disk, C: Clock>(b: &Broker<D, C>, level: i32, delay_ms: u64) -> u64 {
    let queue_id = level - 1;
    let from = b.delay_progress().next(level);
    let got = match b.store().get(
        SCHEDULE_TOPIC,
        queue_id,
        QueueOffset::new(u64::try_from(from).unwrap_or(0)),
        BATCH_MESSAGES_MAX,
        BATCH_BYTES_MAX,
        &TagsFilter::default(),
    ) {
        Ok(got) => got,
        Err(e) => {
            tracing::warn!(error = %e, level, "schedule queue read failed");
            return ERROR_BACKOFF_MS;
        }
    };
    if got.status == GetStatus::OffsetTooSmall || got.status == GetStatus::OffsetOverflowBadly {
        // Retention removed the head, or the queue is shorter than the
        // progress (a lost tail after a crash): continue where it is valid.
        tracing::warn!(
            level,
            from,
            to = got.next_begin_offset.get(),
            "schedule progress corrected"
        );
        b.delay_progress()
            .reset(level, got.next_begin_offset.to_wire());
        return 0;
    }
    let mut pause_ms = POLL_INTERVAL_MS_MAX;
    let mut head_not_due = false;
    let mut delivered = false;
    for (index, raw) in (0_i64..).zip(&got.messages) {
        let rec = match StoredRecord::decode(raw) {
            Ok(rec) => rec,
            Err(e) => {
                tracing::error!(error = %e, level, "undecodable schedule record skipped");
                b.delay_progress().advance(level, from + index + 1);
                continue;
            }
        };
        let due_ms = u64::try_from(rec.store_timestamp_ms)
            .unwrap_or(0)
            .saturating_add(delay_ms);
        let now_ms = b.clock().wall_ms();
        if now_ms < due_ms {
            pause_ms = (due_ms - now_ms).min(POLL_INTERVAL_MS_MAX);
            head_not_due = true;
            break;
        }
        match redeliver(b, &rec).await {
            Ok(()) => delivered = true,
            Err(Retry::Later(e)) => {
                tracing::warn!(error = %e, level, "delayed delivery failed; retrying");
                pause_ms = ERROR_BACKOFF_MS;
                break;
            }
            Err(Retry::Never(e)) => {
                tracing::error!(error = %e, level, offset = rec.queue_offset, "delayed message dropped");
            }
        }
        b.delay_progress().advance(level, rec.queue_offset + 1);
    }
    if delivered {
        b.persist_delay_offsets().await;
    }
    if !head_not_due && pause_ms == POLL_INTERVAL_MS_MAX && got.status == GetStatus::Found {
        // The whole batch went: more may be waiting behind it. (A head
        // that is not due yet waits its pause — found by the simulation:
        // this once spun re-reading the head whenever it was ≥ 100 ms off.)
        pause_ms = 0;
    }
    pause_ms
}

enum Retry {
    Later(String),
    Never(String),
}

/// Re-puts a due schedule record to its real topic and queue.
async fn redeliver<D: Disk, C: Clock>(b: &Broker<D, C>, rec: &StoredRecord) -> Result<(), Retry> {
    let mut props = Properties::parse(strip_seal(&rec.properties))
        .map_err(|e| Retry::Never(format!("properties: {e}")))?;
    // RocketMQ leaves REAL_TOPIC/REAL_QID on a delivered delayed message.
    let (topic, queue_id) = real_destination(&props).map_err(|e| Retry::Never(e.to_string()))?;
    props.remove(keys::DELAY);
    let msg = MessageInput::from_stored(
        rec,
        topic,
        queue_id,
        Bytes::from(props.encode()),
        b.store_host(),
    );
    match b.store().put(msg, false).await {
        Ok(_) => Ok(()),
        Err(e @ (StoreError::MessageRejected { .. } | StoreError::Encode(_))) => {
            Err(Retry::Never(e.to_string()))
        }
        Err(e) => Err(Retry::Later(e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_only_moves_forward_and_round_trips_through_json() {
        let p = DelayProgress::load(None).expect("empty");
        assert_eq!(p.next(3), 0);
        assert!(p.unpersisted_json().is_none());
        p.advance(3, 5);
        p.advance(3, 2);
        assert_eq!(p.next(3), 5);
        let (version, json) = p.unpersisted_json().expect("dirty after advance");
        // Not written yet (say the write was cancelled): still dirty.
        assert!(p.unpersisted_json().is_some());
        p.persisted(version);
        assert!(p.unpersisted_json().is_none());
        let back = DelayProgress::load(Some(&json)).expect("parses");
        assert_eq!(back.next(3), 5);
        assert_eq!(back.next(1), 0);
    }
}
