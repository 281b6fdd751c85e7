//! The send path's use of the dedupe window (`broker::dedupe`): a producer
//! send whose `UNIQ_KEY` was stored within the window is answered with the
//! original's `msgId`, queue and offset and not stored again; a batch is
//! deduplicated message by message (only its new messages are stored; the
//! answer lists every message's id in the batch's order and carries the
//! first message's queue and offset, original or new). A retry that comes
//! while the first attempt is still being stored waits for it.
//!
//! A send stamped with a producer id and sequence number (the Sluice
//! client's `__SLUICE_PID` / `__SLUICE_SEQ`) is first looked up by its
//! number, which is exact beyond the window (`dedupe::sequences`): a number
//! stored before is answered with the original, or — when its answer is no
//! longer kept — `SEND_OK` without a position (`msgId` empty, offset -1).
//!
//! Never deduplicated: a send without `UNIQ_KEY`, a send to a retry or
//! dead-letter topic (consumers' send-backs), transactional halves (they
//! return before this), and any send to a broker that is not its group's
//! writer (a deposed master's window is stale; its store refuses anyway).

use std::collections::BTreeSet;
use std::time::Duration;

use sluice_core::disk::Disk;
use sluice_core::message::indexed_properties::for_each_pair;
use sluice_core::message::{keys, MessageInput};
use sluice_core::{Clock, CommitLogOffset, Wait};
use sluice_net::header::SendMessageResponseHeader;
use sluice_net::remoting::response_code;
use sluice_net::RemotingCommand;

use crate::broker::dedupe::sequences::{Seen, Stamp};
use crate::broker::dedupe::{dedupes_topic, Claim, DedupeWindow, Original, Ticket};
use crate::broker::Broker;
use crate::dispatch::{Refusal, Reply};

/// How often a retry polls a claim still being stored.
const IN_FLIGHT_POLL: Duration = Duration::from_millis(10);
/// Polls before a retry gives up on a claim in flight (about 3 s): it is
/// answered `SYSTEM_BUSY`, which producers retry.
const IN_FLIGHT_POLLS: u32 = 300;

/// What to do with one message of a send.
pub(super) enum Once<'a> {
    /// A retry of a message stored within the window: answer with it.
    Duplicate(Original),
    /// A stamped number stored long ago, its answer no longer kept.
    Forgotten,
    /// Store it, then record it with the claim (if deduplicated).
    Store(Option<Claimed<'a>>),
}

/// A key claimed in the window, released unless it is recorded as stored.
/// It keeps the claim's ticket, not the key: the topic only for a stamped
/// send (its number is recorded under it).
pub(super) struct Claimed<'a> {
    window: &'a DedupeWindow,
    ticket: Ticket,
    stamped: Option<(String, Stamp)>,
    done: bool,
}

impl Claimed<'_> {
    /// The claimed message was stored and answered as `original`.
    pub(super) fn stored(mut self, original: Original, stored_ms: i64) {
        let stamped = self.stamped.as_ref().map(|(t, s)| (t.as_str(), s));
        self.window
            .stored_claim(self.ticket, stamped, original, stored_ms);
        self.done = true;
    }
}

impl Drop for Claimed<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.window.release_claim(self.ticket);
        }
    }
}

/// Whether a send of `key` (stamped `stamp`) to `topic` is a duplicate,
/// claiming it when it is new; `Store(None)` when it is not deduplicated.
pub(super) async fn claim<'a, D: Disk, C: Clock>(
    b: &'a Broker<D, C>,
    topic: &str,
    key: Option<&str>,
    stamp: Option<Stamp>,
    to_dlq: bool,
) -> Result<Once<'a>, Refusal> {
    let window = b.dedupe();
    let Some(key) = key.filter(|k| !k.is_empty()) else {
        return Ok(Once::Store(None));
    };
    if to_dlq || !window.enabled() || !dedupes_topic(topic) || !b.is_writer() {
        return Ok(Once::Store(None));
    }
    for _ in 0..IN_FLIGHT_POLLS {
        match window.seen(topic, stamp.as_ref()) {
            Seen::Known(original) => return Ok(Once::Duplicate(original)),
            Seen::Forgotten => return Ok(Once::Forgotten),
            Seen::New => {}
        }
        let log_at = b.store().commit_log().written().get();
        match window.claim_at(topic, key, b.now_ms(), log_at) {
            Claim::Stored(original) => return Ok(Once::Duplicate(original)),
            Claim::Claimed(ticket) => {
                return Ok(Once::Store(Some(Claimed {
                    window,
                    ticket,
                    stamped: stamp.map(|s| (topic.to_owned(), s)),
                    done: false,
                })))
            }
            Claim::InFlight => tokio::time::sleep(IN_FLIGHT_POLL).await,
        }
    }
    Err(Refusal::new(
        response_code::SYSTEM_BUSY,
        "[sluice] a send with this UNIQ_KEY is still being stored; retry",
    ))
}

/// The answer to a duplicate: the original's position, once it is as
/// replicated as a stored send's answer would wait for.
pub(super) async fn answer<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    original: &Original,
    wait: bool,
) -> RemotingCommand {
    let header =
        SendMessageResponseHeader::new(original.msg_id(), original.queue_id, original.queue_offset);
    let cmd = RemotingCommand::success().with_header(&header);
    super::send::replicated(b, CommitLogOffset::new(original.end), wait, cmd).await
}

/// The answer to a duplicate whose position is forgotten: `SEND_OK` (it
/// was stored) with an empty `msgId` and queue offset -1, and a remark.
pub(super) fn forgotten(queue_id: i32) -> RemotingCommand {
    let header = SendMessageResponseHeader::new(String::new(), queue_id, -1);
    let mut cmd = RemotingCommand::success().with_header(&header);
    cmd.remark = Some(FORGOTTEN_REMARK.to_owned());
    cmd
}

/// The remark of [`forgotten`].
pub const FORGOTTEN_REMARK: &str =
    "[sluice] duplicate of a message stored before; its position is no longer kept";

/// A message's `UNIQ_KEY` and producer stamp, read from its encoded
/// properties without parsing them into a map (a batch has one per message).
fn dedupe_keys_of(raw: &[u8]) -> (Option<&str>, Option<Stamp>) {
    let (mut key, mut producer, mut sequence) = (None, None, None);
    for_each_pair(raw, |k, v| match k {
        keys::UNIQ_KEY => key = Some(v),
        keys::SLUICE_PRODUCER_ID => producer = Some(v),
        keys::SLUICE_SEQUENCE => sequence = Some(v),
        _ => {}
    });
    (key, Stamp::from_values(producer, sequence))
}

/// Stores the new messages of a batch to `queue_id` of `topic` and answers
/// for all of them (see the module's doc).
pub(super) async fn store_batch<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    topic: &str,
    queue_id: i32,
    msgs: Vec<MessageInput>,
    wait: Wait,
) -> Reply {
    let mut onces = Vec::with_capacity(msgs.len());
    let mut keys_seen = BTreeSet::new();
    for m in &msgs {
        let (key, stamp) = dedupe_keys_of(&m.properties);
        // A key twice in one batch: the later copies are stored as sent.
        let key = key.filter(|k| keys_seen.insert(*k));
        onces.push(claim(b, topic, key, stamp, false).await?);
    }
    let fresh: Vec<MessageInput> = msgs
        .into_iter()
        .zip(&onces)
        .filter(|(_, o)| matches!(o, Once::Store(_)))
        .map(|(m, _)| m)
        .collect();
    let traffic = b.stats().topic_in(topic);
    let appended = if fresh.is_empty() {
        Vec::new()
    } else {
        b.store().put_batch(fresh, wait).await?
    };
    let host = b.store_host();
    let mut stored = appended.iter();
    // Every message's id, comma-separated (a forgotten duplicate's empty).
    let mut ids = String::with_capacity(onces.len() * 33);
    let mut first = None;
    let mut end = 0;
    for (i, once) in onces.into_iter().enumerate() {
        if i > 0 {
            ids.push(',');
        }
        let original = match once {
            Once::Duplicate(original) => original,
            Once::Forgotten => continue,
            Once::Store(claimed) => {
                let Some(a) = stored.next() else {
                    return Err(Refusal::system_error("[sluice] batch store count mismatch"));
                };
                b.stats().message_in(&traffic, u64::from(a.size));
                let original = Original {
                    store_host: host,
                    phys_offset: a.phys_offset.to_wire(),
                    queue_id,
                    queue_offset: a.queue_offset.to_wire(),
                    end: a.end().get(),
                };
                if let Some(c) = claimed {
                    c.stored(original, a.store_timestamp_ms);
                }
                original
            }
        };
        end = end.max(original.end);
        first.get_or_insert((original.queue_id, original.queue_offset));
        original.push_msg_id(&mut ids);
    }
    let (qid, offset) = first.unwrap_or((queue_id, -1));
    let header = SendMessageResponseHeader::new(ids, qid, offset);
    let cmd = RemotingCommand::success().with_header(&header);
    Ok(super::send::replicated(b, CommitLogOffset::new(end), wait.durable(), cmd).await)
}
