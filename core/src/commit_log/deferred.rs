//! Deferred appends: records encoded into the writer's `pending` buffer and
//! handed to the disk later, together, in one write (issue 20: at 64
//! pipelining senders one `pwrite` per 1 KiB record was ~15 % of the
//! broker's CPU). `written` stays below deferred records, so nothing reads,
//! syncs, dispatches or replicates them before they are written.

use std::sync::atomic::Ordering;

use super::{Appended, CommitLog, Writer};
use crate::clock::Clock;
use crate::disk::Disk;
use crate::error::{Error, Result};
use crate::message::{body_crc, MessageInput};

/// Most bytes of deferred records held before they are written.
const PENDING_BYTES_MAX: usize = 256 << 10;

impl<D: Disk, C: Clock> CommitLog<D, C> {
    /// [`CommitLog::append`] whose record may stay in memory, unwritten
    /// and invisible (`written` stays below it), until the next append,
    /// sync or [`CommitLog::write_deferred`] writes it with whatever else
    /// waits: several sends a connection read together then cost one disk
    /// write. Nothing may acknowledge the record before a later
    /// [`CommitLog::write_deferred`] returns `Ok` (a process crash loses
    /// it; a failed write fences the log).
    pub fn append_deferred(&self, msg: &MessageInput) -> Result<Appended> {
        let len = self.checked_len(msg)?;
        let crc = body_crc(&msg.body);
        let mut w = self.lock_writer();
        self.durability.check()?;
        if self.follower.load(Ordering::Acquire) {
            return Err(Error::NotWriter);
        }
        if w.pending.len() + len > PENDING_BYTES_MAX {
            self.write_pending(&mut w)?;
        }
        let appended = self.append_one(&mut w, (msg, len, crc), true)?;
        self.deferring
            .store(!w.pending.is_empty(), Ordering::Release);
        Ok(appended)
    }

    /// Writes the records [`CommitLog::append_deferred`] left in memory
    /// (one disk write) and publishes them; true if there were any. `Err`
    /// once any deferred record was lost to a failed write (the log is
    /// fenced then): an answer that may acknowledge one must not leave.
    pub fn write_deferred(&self) -> Result<bool> {
        let wrote = if self.deferring.load(Ordering::Acquire) {
            self.write_pending(&mut self.lock_writer())?
        } else {
            false
        };
        if self.deferred_lost.load(Ordering::Acquire) {
            return Err(Error::Poisoned {
                reason: "deferred CommitLog records were lost to a failed write".to_owned(),
            });
        }
        Ok(wrote)
    }

    /// See [`CommitLog::write_deferred`]; under the put lock. A failed
    /// write fences the log: the records' appends already returned (their
    /// queue offsets were handed out, a dedupe window may name them), so
    /// nothing this log holds may be acknowledged any more.
    pub(super) fn write_pending(&self, w: &mut Writer) -> Result<bool> {
        if w.pending.is_empty() {
            return Ok(false);
        }
        let start = w.pos - w.pending.len() as u64;
        let wrote = self.chain.write(start, &w.pending);
        w.pending.clear();
        if w.pending.capacity() > PENDING_BYTES_MAX {
            w.pending = Vec::new();
        }
        self.deferring.store(false, Ordering::Release);
        match wrote {
            Ok(()) => {
                self.written.store(w.pos, Ordering::Release);
                Ok(true)
            }
            Err(e) => {
                w.pos = start;
                self.written.store(start, Ordering::Release);
                self.deferred_lost.store(true, Ordering::Release);
                self.poison(format!("a deferred CommitLog write failed: {e}"));
                Err(e)
            }
        }
    }

    /// Publishes the write position, less any deferred records.
    pub(super) fn publish(&self, w: &Writer) {
        self.written
            .store(w.pos - w.pending.len() as u64, Ordering::Release);
    }
}
