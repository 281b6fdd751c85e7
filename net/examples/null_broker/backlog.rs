//! `--backlog N`: `DrainTopic` holds N synthetic 1 KiB messages, spread
//! evenly over its queues, served from memory. Nothing is stored: a
//! message is its position, `(queue, offset)`, and its record is a copy of
//! one template with that position patched in. This module serves pulls
//! and offsets; `clients` the consumer-group requests.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use bytes::BytesMut;
use sluice_net::header::{
    OffsetResponseHeader, PullMessageRequestHeader, PullMessageResponseHeader,
    QueryConsumerOffsetRequestHeader, QueueRequestHeader, SearchOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader, PULL_FLAG_COMMIT_OFFSET, PULL_FLAG_SUSPEND,
};
use sluice_net::remoting::response_code;
use sluice_net::RemotingCommand;
use tokio::sync::Notify;

use crate::record::{body_crc, Template};
use crate::retry::{Look, RetryLog, RETRY_PREFIX};
use crate::QUEUES;

/// The topic that holds the backlog.
pub const DRAIN_TOPIC: &str = "DrainTopic";
/// The other registered topic: its sends are answered, never stored.
const BENCH_TOPIC: &str = "BenchTopic";
/// Bytes of every message body (as `peerdrv produce --size 1024` sends).
const BODY_LEN: usize = 1024;
/// Most messages one pull returns, whatever the client asks (as Sluice).
const PULL_MESSAGES_MAX: i64 = 1_024;
/// A pull that finds nothing with the suspend flag waits at most this
/// long for a retry to come due (a real broker holds up to 15 s).
const HOLD_MAX: Duration = Duration::from_secs(1);
const HOLD_STEP: Duration = Duration::from_millis(100);

/// The backlog and what consumers told this broker.
pub struct Backlog {
    /// Messages per `DrainTopic` queue.
    counts: Vec<i64>,
    body: Vec<u8>,
    crc: i32,
    template: Template,
    /// Every message's store time (and its born time minus 1 ms).
    store_ms: i64,
    store_host: ([u8; 4], u16),
    pub(crate) groups: Mutex<Groups>,
    /// Committed offsets by `(topic, group, queue)`.
    offsets: Mutex<BTreeMap<(String, String, i32), i64>>,
    /// A retry topic was created: register again at once.
    pub(crate) topics_changed: Notify,
    /// Messages served by pulls.
    pub served: AtomicU64,
    /// Messages sent back, and of them dead letters.
    pub(crate) sent_back: AtomicU64,
    pub(crate) dead_letters: AtomicU64,
}

/// Consumer groups: their clients and their retry topics.
#[derive(Default)]
pub struct Groups {
    pub clients: BTreeMap<String, BTreeSet<String>>,
    pub retries: BTreeMap<String, RetryLog>,
}

/// The queue a request names.
enum Source {
    Drain(i32),
    Empty,
    Retry(String),
}

impl Backlog {
    /// `total` messages over `QUEUES` queues (the first queues take one
    /// more each when it does not divide), stored by the broker at
    /// `store_host`.
    pub fn new(total: u64, store_host: ([u8; 4], u16)) -> Self {
        let queues = u64::from(QUEUES.unsigned_abs());
        let counts = (0..queues)
            .map(|q| i64::try_from(total / queues + u64::from(q < total % queues)).unwrap_or(0))
            .collect();
        let body = vec![b'a'; BODY_LEN];
        let store_ms = crate::now_ms();
        let extra = [("TAGS", "peerdrv"), ("WAIT", "true")];
        let template = Template::new(DRAIN_TOPIC, &body, store_ms, store_host, &extra);
        Self {
            counts,
            crc: body_crc(&body),
            body,
            template,
            store_ms,
            store_host,
            groups: Mutex::default(),
            offsets: Mutex::default(),
            topics_changed: Notify::new(),
            served: AtomicU64::new(0),
            sent_back: AtomicU64::new(0),
            dead_letters: AtomicU64::new(0),
        }
    }

    pub(crate) fn lock_groups(&self) -> MutexGuard<'_, Groups> {
        self.groups.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn lock_offsets(&self) -> MutexGuard<'_, BTreeMap<(String, String, i32), i64>> {
        self.offsets.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Bytes per backlog record; its physical offset is its index times this.
    pub(crate) fn record_len(&self) -> i64 {
        i64::try_from(self.template.len()).unwrap_or(i64::MAX)
    }

    /// The index of the backlog message at a physical offset.
    pub(crate) fn at_phys(&self, phys_offset: i64) -> Option<u64> {
        let len = self.record_len();
        if phys_offset < 0 || phys_offset % len != 0 {
            return None;
        }
        let index = phys_offset / len;
        let queue = i32::try_from(index % i64::from(QUEUES)).ok()?;
        let offset = index / i64::from(QUEUES);
        let count = *self.counts.get(usize::try_from(queue).ok()?)?;
        (offset < count).then(|| u64::try_from(index).unwrap_or(0))
    }

    /// The names of the retry topics consumers made so far.
    pub fn retry_topics(&self) -> Vec<String> {
        let groups = self.lock_groups();
        groups
            .retries
            .keys()
            .map(|g| format!("{RETRY_PREFIX}{g}"))
            .collect()
    }

    /// What consumers did so far, for the status line.
    pub fn summary(&self) -> String {
        let waiting: usize = self
            .lock_groups()
            .retries
            .values()
            .map(RetryLog::waiting)
            .sum();
        format!(
            "{} messages pulled, {} sent back ({} dead letters), {waiting} waiting to be retried",
            self.served.load(Ordering::Relaxed),
            self.sent_back.load(Ordering::Relaxed),
            self.dead_letters.load(Ordering::Relaxed),
        )
    }

    /// Waits until a new retry topic wants registering.
    pub async fn topics_changed(&self) {
        self.topics_changed.notified().await;
    }

    fn source(&self, topic: &str, queue_id: i32) -> Result<Source, RemotingCommand> {
        let illegal = || {
            refuse(
                response_code::SYSTEM_ERROR,
                format!("queueId[{queue_id}] is illegal, topic[{topic}]"),
            )
        };
        if topic == DRAIN_TOPIC || topic == BENCH_TOPIC {
            if !(0..QUEUES).contains(&queue_id) {
                return Err(illegal());
            }
            return Ok(if topic == DRAIN_TOPIC {
                Source::Drain(queue_id)
            } else {
                Source::Empty
            });
        }
        if let Some(group) = topic.strip_prefix(RETRY_PREFIX) {
            if self.lock_groups().retries.contains_key(group) {
                return if queue_id == 0 {
                    Ok(Source::Retry(group.to_owned()))
                } else {
                    Err(illegal())
                };
            }
        }
        Err(refuse(
            response_code::TOPIC_NOT_EXIST,
            format!("topic[{topic}] not exist"),
        ))
    }

    fn max_offset(&self, source: &Source) -> i64 {
        match source {
            Source::Drain(q) => usize::try_from(*q)
                .ok()
                .and_then(|q| self.counts.get(q))
                .copied()
                .unwrap_or(0),
            Source::Empty => 0,
            Source::Retry(group) => self
                .lock_groups()
                .retries
                .get_mut(group)
                .map_or(0, |log| log.max_offset(crate::now_ms())),
        }
    }

    /// The records at `offset..end` of a queue (within its max offset).
    fn records(&self, source: &Source, topic: &str, offset: i64, end: i64) -> BytesMut {
        let count = usize::try_from(end - offset).unwrap_or(0);
        let mut out = BytesMut::with_capacity(count * self.template.len());
        match source {
            Source::Drain(q) => {
                for o in offset..end {
                    let index = o * i64::from(QUEUES) + i64::from(*q);
                    let phys = index * self.record_len();
                    let index = u64::try_from(index).unwrap_or(0);
                    self.template.put(&mut out, *q, o, phys, index);
                }
            }
            Source::Empty => {}
            Source::Retry(group) => {
                let look = Look {
                    body: &self.body,
                    crc: self.crc,
                    origin_topic: DRAIN_TOPIC,
                    store_ms: self.store_ms,
                    store_host: self.store_host,
                    record_len: self.record_len(),
                };
                if let Some(log) = self.lock_groups().retries.get(group) {
                    log.put(&mut out, topic, (offset, end), &look);
                }
            }
        }
        out
    }

    /// `PULL_MESSAGE` and `LITE_PULL_MESSAGE`: up to `maxMsgNums` records
    /// from `queueOffset`, or what Apache answers at or past the end.
    pub async fn pull(self: Arc<Self>, request: RemotingCommand) -> RemotingCommand {
        let h: PullMessageRequestHeader = match request.header() {
            Ok(h) => h,
            Err(e) => return bad_request(&e),
        };
        let source = match self.source(&h.topic, h.queue_id) {
            Ok(s) => s,
            Err(refusal) => return refusal,
        };
        if h.sys_flag & PULL_FLAG_COMMIT_OFFSET != 0 && h.commit_offset >= 0 {
            self.commit(&h.topic, &h.consumer_group, h.queue_id, h.commit_offset);
        }
        let hold = if h.sys_flag & PULL_FLAG_SUSPEND == 0 {
            Duration::ZERO
        } else {
            Duration::from_millis(u64::try_from(h.suspend_timeout_millis).unwrap_or(0))
                .min(HOLD_MAX)
        };
        let deadline = tokio::time::Instant::now() + hold;
        loop {
            let max = self.max_offset(&source);
            let want = i64::from(h.max_msg_nums).clamp(1, PULL_MESSAGES_MAX);
            let (code, next) = look_up(h.queue_offset, max, want);
            let now = tokio::time::Instant::now();
            if code == response_code::PULL_NOT_FOUND && now < deadline {
                tokio::time::sleep(HOLD_STEP.min(deadline - now)).await;
                continue;
            }
            let header = PullMessageResponseHeader {
                suggest_which_broker_id: 0,
                next_begin_offset: next,
                min_offset: 0,
                max_offset: max,
                offset_delta: None,
                topic_sys_flag: Some(0),
                group_sys_flag: Some(0),
                forbidden_type: None,
            };
            let mut response = RemotingCommand::response(code, "").with_header(&header);
            response.remark = None;
            if code == response_code::SUCCESS {
                let body = self.records(&source, &h.topic, h.queue_offset, next);
                let served = u64::try_from(next - h.queue_offset).unwrap_or(0);
                self.served.fetch_add(served, Ordering::Relaxed);
                response = response.with_body(body.freeze());
            }
            return response;
        }
    }

    fn commit(&self, topic: &str, group: &str, queue_id: i32, offset: i64) {
        let key = (topic.to_owned(), group.to_owned(), queue_id);
        self.lock_offsets().insert(key, offset);
    }

    /// `QUERY_CONSUMER_OFFSET`: the committed offset, else as Apache for a
    /// group new to a queue that starts at 0 (in memory, as everything
    /// is here): 0, unless the client asks for `QUERY_NOT_FOUND`.
    pub fn query_offset(&self, request: &RemotingCommand) -> RemotingCommand {
        let h: QueryConsumerOffsetRequestHeader = match request.header() {
            Ok(h) => h,
            Err(e) => return bad_request(&e),
        };
        let key = (h.topic, h.consumer_group, h.queue_id);
        if let Some(offset) = self.lock_offsets().get(&key) {
            return offset_response(*offset);
        }
        if h.set_zero_if_not_found == Some(false) {
            return refuse(
                response_code::QUERY_NOT_FOUND,
                "Not found, V3_0_6_SNAPSHOT maybe",
            );
        }
        offset_response(0)
    }

    /// `UPDATE_CONSUMER_OFFSET` (oneway from clients).
    pub fn update_offset(&self, request: &RemotingCommand) -> RemotingCommand {
        match request.header::<UpdateConsumerOffsetRequestHeader>() {
            Ok(h) => {
                self.commit(&h.topic, &h.consumer_group, h.queue_id, h.commit_offset);
                RemotingCommand::success()
            }
            Err(e) => bad_request(&e),
        }
    }

    /// `GET_MAX_OFFSET`: 0 for a queue this broker does not have, as Apache.
    pub fn get_max_offset(&self, request: &RemotingCommand) -> RemotingCommand {
        match request.header::<QueueRequestHeader>() {
            Ok(h) => offset_response(
                self.source(&h.topic, h.queue_id)
                    .map_or(0, |s| self.max_offset(&s)),
            ),
            Err(e) => bad_request(&e),
        }
    }

    /// `SEARCH_OFFSET_BY_TIMESTAMP`: every message has the same store time,
    /// so the first offset at or after `timestamp` is 0 or the end.
    pub fn search_offset(&self, request: &RemotingCommand) -> RemotingCommand {
        match request.header::<SearchOffsetRequestHeader>() {
            Ok(h) if h.timestamp <= self.store_ms => offset_response(0),
            Ok(h) => offset_response(
                self.source(&h.topic, h.queue_id)
                    .map_or(0, |s| self.max_offset(&s)),
            ),
            Err(e) => bad_request(&e),
        }
    }
}

/// Apache's answer to a pull at `offset` of a queue holding `0..max`:
/// the response code and `nextBeginOffset` (`want` messages at most).
fn look_up(offset: i64, max: i64, want: i64) -> (i32, i64) {
    if offset < 0 {
        (response_code::PULL_OFFSET_MOVED, 0)
    } else if offset == max {
        (response_code::PULL_NOT_FOUND, offset)
    } else if offset > max {
        // OFFSET_OVERFLOW_BADLY with the minimum at 0: back to 0.
        (response_code::PULL_OFFSET_MOVED, 0)
    } else {
        (response_code::SUCCESS, offset + want.min(max - offset))
    }
}

/// `GET_MIN_OFFSET`: every queue starts at 0.
pub(crate) fn get_min_offset(request: &RemotingCommand) -> RemotingCommand {
    match request.header::<QueueRequestHeader>() {
        Ok(_) => offset_response(0),
        Err(e) => bad_request(&e),
    }
}

pub(crate) fn refuse(code: i32, remark: impl Into<String>) -> RemotingCommand {
    RemotingCommand::response(code, remark)
}

/// A request whose header or body does not decode.
pub(crate) fn bad_request(e: &sluice_net::Error) -> RemotingCommand {
    refuse(
        response_code::SYSTEM_ERROR,
        format!("[null_broker] bad request: {e}"),
    )
}

fn offset_response(offset: i64) -> RemotingCommand {
    RemotingCommand::success().with_header(&OffsetResponseHeader { offset })
}
