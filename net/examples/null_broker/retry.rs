//! Sent-back messages: a consumer that fails a message hands it back
//! (`CONSUMER_SEND_MSG_BACK`) and, as from a real broker, gets it again
//! from its group's retry topic `%RETRY%group` once the delay level's time
//! has passed (10 s for a first failure). Only references are kept: which
//! backlog message it is and how often it was reconsumed.

use std::collections::BTreeMap;

use bytes::BytesMut;

use crate::record::{self, Fields};

/// Topic prefix of a group's retry topic.
pub const RETRY_PREFIX: &str = "%RETRY%";
/// Physical offsets of retry records start here, far above the backlog's.
pub const RETRY_PHYS_BASE: i64 = 1 << 50;
/// Most messages one group's retry topic holds (bounds what clients can
/// make this broker remember).
const RETRY_ENTRIES_MAX: usize = 1 << 22;
/// RocketMQ's delay levels 1..=18, ms (`1s 5s 10s 30s 1m 2m ... 1h 2h`).
const DELAY_LEVELS_MS: [i64; 18] = [
    1_000, 5_000, 10_000, 30_000, 60_000, 120_000, 180_000, 240_000, 300_000, 360_000, 420_000,
    480_000, 540_000, 600_000, 1_200_000, 1_800_000, 3_600_000, 7_200_000,
];

/// A backlog message as a consumer last saw it.
#[derive(Clone, Copy, Debug)]
pub struct Origin {
    /// Index in the whole backlog: `queue offset × queues + queue`; names
    /// its `UNIQ_KEY` and its physical offset.
    pub index: u64,
    /// Times it has been reconsumed.
    pub reconsume_times: i32,
}

/// One group's retry topic (one queue).
#[derive(Default)]
pub struct RetryLog {
    /// Waiting out their delay, by due time (ms) and arrival.
    pending: BTreeMap<(i64, u64), Origin>,
    /// Delivered to the retry queue: the index is the queue offset.
    visible: Vec<Origin>,
    arrivals: u64,
}

/// What became of a sent-back message.
pub enum Outcome {
    /// Will be in the retry topic once its delay has passed.
    Retry,
    /// Retries used up (or asked for): a dead letter, dropped here.
    DeadLetter,
    /// The retry topic is full.
    Full,
}

impl RetryLog {
    /// Takes back `origin` as RocketMQ does: a dead letter once it has
    /// been reconsumed `max_reconsume_times` times or when `delay_level`
    /// is negative, else due after `delay_level` (0: level 3 + times).
    pub fn send_back(
        &mut self,
        origin: Origin,
        delay_level: i32,
        max_reconsume_times: i32,
        now_ms: i64,
    ) -> Outcome {
        if delay_level < 0 || origin.reconsume_times >= max_reconsume_times {
            return Outcome::DeadLetter;
        }
        if self.pending.len() + self.visible.len() >= RETRY_ENTRIES_MAX {
            return Outcome::Full;
        }
        let level = if delay_level == 0 {
            origin.reconsume_times.saturating_add(3)
        } else {
            delay_level
        };
        let slot = usize::try_from(level.clamp(1, 18) - 1).unwrap_or_default();
        let again = Origin {
            reconsume_times: origin.reconsume_times.saturating_add(1),
            ..origin
        };
        self.arrivals += 1;
        self.pending
            .insert((now_ms + DELAY_LEVELS_MS[slot], self.arrivals), again);
        Outcome::Retry
    }

    /// Messages still waiting out their delay.
    pub fn waiting(&self) -> usize {
        self.pending.len()
    }

    /// Delivers what is due and answers the queue's max offset.
    pub fn max_offset(&mut self, now_ms: i64) -> i64 {
        while let Some(entry) = self.pending.first_entry() {
            if entry.key().0 > now_ms {
                break;
            }
            self.visible.push(entry.remove());
        }
        i64::try_from(self.visible.len()).unwrap_or(i64::MAX)
    }

    /// The message at a physical offset of this retry topic.
    pub fn at_phys(&self, phys_offset: i64) -> Option<Origin> {
        let at = usize::try_from(phys_offset.checked_sub(RETRY_PHYS_BASE)?).ok()?;
        self.visible.get(at).copied()
    }

    /// Appends the records at `offset..end` (both within the max offset).
    pub fn put(&self, out: &mut BytesMut, topic: &str, range: (i64, i64), look: &Look<'_>) {
        for offset in range.0..range.1 {
            let Some(origin) = usize::try_from(offset)
                .ok()
                .and_then(|at| self.visible.get(at))
            else {
                return;
            };
            put_retry(out, topic, offset, origin, look);
        }
    }
}

/// How retry records look: the body, the original topic and store details.
pub struct Look<'a> {
    pub body: &'a [u8],
    pub crc: i32,
    pub origin_topic: &'a str,
    pub store_ms: i64,
    pub store_host: ([u8; 4], u16),
    /// Bytes per backlog record (the original's physical offset is its
    /// index times this).
    pub record_len: i64,
}

/// One retry record as a real broker stores it after the delay: topic
/// `%RETRY%group`, queue 0, the original `UNIQ_KEY` and the properties the
/// client uses to restore the original topic.
fn put_retry(out: &mut BytesMut, topic: &str, offset: i64, origin: &Origin, look: &Look<'_>) {
    let key = record::uniq_key(origin.index);
    let origin_phys = i64::try_from(origin.index)
        .unwrap_or_default()
        .saturating_mul(look.record_len);
    let origin_id = crate::offset_msg_id(origin_phys);
    let props = record::properties(&[
        ("UNIQ_KEY", &key),
        ("TAGS", "peerdrv"),
        ("WAIT", "false"),
        ("RETRY_TOPIC", look.origin_topic),
        ("ORIGIN_MESSAGE_ID", &origin_id),
        ("REAL_TOPIC", topic),
        ("REAL_QID", "0"),
    ]);
    let fields = Fields {
        topic,
        queue_id: 0,
        queue_offset: offset,
        phys_offset: RETRY_PHYS_BASE + offset,
        reconsume_times: origin.reconsume_times,
        store_ms: look.store_ms,
        store_host: look.store_host,
        properties: &props,
    };
    record::encode(out, &fields, look.body, look.crc);
}
