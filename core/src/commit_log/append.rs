//! Appending under the put lock, in runs: the records that fit the current
//! segment are encoded side by side into one buffer and handed to the disk
//! in one write (on the production disk one `pwrite` per run instead of one
//! per record; a batch of 64 records paid 64 system calls and 64 partial
//! page updates before).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::fresh::Fresh;
use super::{is_dispatchable, Appended, CommitLog, Writer, BLANK_RECORD_BYTES};
use crate::clock::Clock;
use crate::disk::Disk;
use crate::error::{Error, Result};
use crate::message::record_seal::encode_sealed;
use crate::message::{encode_blank, MessageInput, RecordStamp};
use crate::offset::{CommitLogOffset, QueueOffset};

/// Most bytes encoded for one write: a larger batch is written in several
/// runs, so the staging buffer stays bounded (the mapped disk keeps up to
/// this much between writes).
pub(super) const RUN_BYTES_MAX: u64 = 1 << 20;

/// A record to append: the message, its sealed length and its body CRC.
pub(super) type Sized<'a> = (&'a MessageInput, usize, u32);

impl<D: Disk, C: Clock> CommitLog<D, C> {
    /// Appends `msgs` in order, pushing where each landed onto `out`. Stops
    /// at the first error: records of earlier runs stay written (and in
    /// `out`), the failed run's are not counted and its queue offsets are
    /// given back. `defer`: leave the records in the writer's `pending`
    /// (see [`CommitLog::append_deferred`]); otherwise anything pending is
    /// written with them.
    pub(super) fn append_runs(
        &self,
        w: &mut Writer,
        msgs: &[Sized<'_>],
        out: &mut Vec<Appended>,
        defer: bool,
    ) -> Result<()> {
        let mut rest = msgs;
        while let Some(&(_, first_len, _)) = rest.first() {
            self.roll_if_full(w, first_len as u64)?;
            let take = self.run_len(w.pos, rest);
            let (run, later) = rest.split_at(take);
            if defer || !w.pending.is_empty() {
                self.append_pending(w, run, out);
                if !defer {
                    self.write_pending(w)?;
                }
            } else {
                self.append_run(w, run, out)?;
            }
            rest = later;
        }
        Ok(())
    }

    /// [`CommitLog::append_runs`] of one record, placed through the
    /// writer's reused one-slot buffer (a send allocates nothing for it).
    pub(super) fn append_one(
        &self,
        w: &mut Writer,
        msg: Sized<'_>,
        defer: bool,
    ) -> Result<Appended> {
        let mut out = std::mem::take(&mut w.one);
        out.clear();
        let appended = self.append_runs(w, &[msg], &mut out, defer);
        let placed = out.pop();
        w.one = out;
        appended?;
        placed.ok_or_else(|| Error::MessageRejected {
            reason: "invariant: an append that succeeded placed its record".to_owned(),
        })
    }

    /// Ends the current segment with a blank record when a record of `len`
    /// bytes (and the blank after it) would not fit, moving to the next.
    fn roll_if_full(&self, w: &mut Writer, len: u64) -> Result<()> {
        let seg = self.chain.segment_bytes();
        let rel = w.pos % seg;
        if rel + len + BLANK_RECORD_BYTES <= seg {
            return Ok(());
        }
        // Deferred records end this segment: they are written first.
        self.write_pending(w)?;
        // Create the next segment first: on ENOSPC nothing has changed.
        let next = w.pos - rel + seg;
        self.chain.get_or_create(next)?;
        let remaining = u32::try_from(seg - rel).map_err(|_| Error::MessageRejected {
            reason: "segment size exceeds 4 GiB".to_owned(),
        })?;
        self.chain.write(w.pos, &encode_blank(remaining))?;
        self.fresh.push([Fresh::skip(w.pos, next - w.pos)]);
        w.pos = next;
        Ok(())
    }

    /// How many of `msgs` (at least one: the caller made room for the
    /// first) fit from `pos` in its segment and within [`RUN_BYTES_MAX`].
    fn run_len(&self, pos: u64, msgs: &[Sized<'_>]) -> usize {
        let room = self.chain.segment_bytes() - pos % self.chain.segment_bytes();
        let mut bytes = 0u64;
        let mut take = 0;
        for &(_, len, _) in msgs {
            let next = bytes + len as u64;
            let fits = next + BLANK_RECORD_BYTES <= room && next <= RUN_BYTES_MAX;
            if take > 0 && !fits {
                break;
            }
            bytes = next;
            take += 1;
        }
        take
    }

    /// Encodes `run` (all within the current segment) into one write.
    fn append_run(&self, w: &mut Writer, run: &[Sized<'_>], out: &mut Vec<Appended>) -> Result<()> {
        let total: usize = run.iter().map(|&(_, len, _)| len).sum();
        let wall = i64::try_from(self.clock.wall_ms()).unwrap_or(i64::MAX);
        // Store time never goes backwards, even when the wall clock does, so
        // search-by-time and retention stay monotonic over the log.
        let store_ms = wall.max(w.last_store_ms);
        let start = w.pos;
        let counted = out.len();
        let mut filled = false;
        // Encoded once, where the segment chooses (on a mapped disk, into a
        // staging buffer written with one `pwrite`).
        let wrote = self.chain.write_with(start, total, &mut |buf| {
            filled = true;
            encode_run(&mut w.queue_next, run, start, store_ms, buf, out);
        });
        if let Err(e) = wrote {
            if filled {
                for &(msg, _, _) in run.iter().rev() {
                    give_back_queue_offset(&mut w.queue_next, msg);
                }
                out.truncate(counted);
            }
            return Err(e);
        }
        self.appended_run(w, run, start + total as u64, store_ms, &out[counted..]);
        Ok(())
    }

    /// As `append_run`, into the writer's `pending` (no disk write).
    fn append_pending(&self, w: &mut Writer, run: &[Sized<'_>], out: &mut Vec<Appended>) {
        let total: usize = run.iter().map(|&(_, len, _)| len).sum();
        let wall = i64::try_from(self.clock.wall_ms()).unwrap_or(i64::MAX);
        let store_ms = wall.max(w.last_store_ms);
        let start = w.pos;
        let counted = out.len();
        let mut pending = std::mem::take(&mut w.pending);
        let base = pending.len();
        pending.resize(base + total, 0);
        encode_run(
            &mut w.queue_next,
            run,
            start,
            store_ms,
            &mut pending[base..],
            out,
        );
        w.pending = pending;
        self.appended_run(w, run, start + total as u64, store_ms, &out[counted..]);
    }

    /// Moves the writer past a run encoded up to `end` and leaves its
    /// notes for dispatch.
    fn appended_run(
        &self,
        w: &mut Writer,
        run: &[Sized<'_>],
        end: u64,
        store_ms: i64,
        placed: &[Appended],
    ) {
        w.pos = end;
        w.last_store_ms = store_ms;
        let mut topic: Option<Arc<str>> = None;
        self.fresh
            .push(run.iter().zip(placed).map(|(&(msg, _, _), a)| Fresh {
                phys: a.phys_offset.0,
                size: a.size,
                skip: false,
                queue_id: msg.queue_id,
                queue_offset: a.queue_offset.0,
                sys_flag: msg.effective_sys_flag(),
                store_ms,
                topic: shared_topic(&mut topic, &msg.topic),
                properties: msg.properties.clone(),
            }));
        self.warm_ahead(w);
    }
}

/// `topic` as the `Arc` of the note before when they match (a batch's
/// records share their topic), else a new one kept for the next.
fn shared_topic(last: &mut Option<Arc<str>>, topic: &str) -> Arc<str> {
    match last {
        Some(shared) if **shared == *topic => Arc::clone(shared),
        _ => Arc::clone(last.insert(Arc::from(topic))),
    }
}

/// Encodes `run` into `buf` (exactly its length) as records from `start`,
/// taking each record's queue offset and pushing where it landed.
fn encode_run(
    queue_next: &mut BTreeMap<String, BTreeMap<i32, u64>>,
    run: &[Sized<'_>],
    start: u64,
    store_ms: i64,
    buf: &mut [u8],
    out: &mut Vec<Appended>,
) {
    let mut at = 0;
    for &(msg, len, crc) in run {
        let queue_offset = take_queue_offset(queue_next, msg);
        let phys = start + at as u64;
        let stamp = RecordStamp {
            queue_offset: i64::try_from(queue_offset).unwrap_or(i64::MAX),
            phys_offset: i64::try_from(phys).unwrap_or(i64::MAX),
            store_timestamp_ms: store_ms,
        };
        encode_sealed(msg, &stamp, crc, &mut buf[at..at + len]);
        out.push(Appended {
            phys_offset: CommitLogOffset(phys),
            size: u32::try_from(len).expect("invariant: record fits a segment < 4 GiB"),
            queue_offset: QueueOffset(queue_offset),
            store_timestamp_ms: store_ms,
        });
        at += len;
    }
}

/// The next queue offset of `msg`'s queue, counted as taken (0, and
/// nothing taken, for a record no queue lists: a prepared or rolled-back
/// transaction half).
fn take_queue_offset(
    queue_next: &mut BTreeMap<String, BTreeMap<i32, u64>>,
    msg: &MessageInput,
) -> u64 {
    if !is_dispatchable(msg.sys_flag) {
        return 0;
    }
    let next = if let Some(q) = queue_next.get_mut(msg.topic.as_str()) {
        q.entry(msg.queue_id).or_insert(0)
    } else {
        queue_next
            .entry(msg.topic.clone())
            .or_default()
            .entry(msg.queue_id)
            .or_insert(0)
    };
    *next += 1;
    *next - 1
}

/// Undoes [`take_queue_offset`] for a record that was not written; a queue
/// (and a topic) left with no offset taken is forgotten again.
fn give_back_queue_offset(
    queue_next: &mut BTreeMap<String, BTreeMap<i32, u64>>,
    msg: &MessageInput,
) {
    if !is_dispatchable(msg.sys_flag) {
        return;
    }
    let Some(q) = queue_next.get_mut(msg.topic.as_str()) else {
        return;
    };
    if let Some(next) = q.get_mut(&msg.queue_id) {
        *next = next.saturating_sub(1);
        if *next == 0 {
            q.remove(&msg.queue_id);
        }
    }
    if q.is_empty() {
        queue_next.remove(msg.topic.as_str());
    }
}
