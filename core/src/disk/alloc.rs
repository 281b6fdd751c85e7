//! Allocating a segment file, and warming it so that a sync carries data
//! only.
//!
//! `posix_fallocate` reserves a segment's blocks as *unwritten* extents: the
//! file reads as zeros without the zeros ever being written. The first
//! writeback of each block then converts its extent to written, a metadata
//! change that makes that page's `msync` wait for a journal commit. On this
//! project's test machine (ext4) a sync that reaches a page never synced
//! before took 1.5–3.2 ms against 0.1–0.3 ms for one that only rewrites
//! synced pages, so a single `SYNC_FLUSH` writer paid the journal on two
//! syncs out of three (docs/benchmarks.md, issue 20).
//!
//! Warming faults each page in writable (`MADV_POPULATE_WRITE`, which
//! marks it dirty without changing a byte), unmaps it again (the page
//! stays cached and dirty) and syncs it, chunk by chunk:
//! the zeros reach the disk once, off the hot path, and every later sync of
//! the range is a plain data write — what RocketMQ's `warmMappedFile`
//! achieves by writing zeros. Neither step changes the mapping's contents,
//! so warming may run while the store appends to the same segment. The
//! CommitLog asks for a window ahead of its write position at a time.
//!
//! Only a store that syncs at every write warms: one flushed in the
//! background has no sync to protect (see `CommitLog::warm_ahead`).
#![allow(unsafe_code)]

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::Weak;

use memmap2::{Advice, MmapOptions, MmapRaw, UncheckedAdvice};

use super::mmap::invalid;

/// Bytes warmed per step: small enough that a sync of the hot path queued
/// behind one step waits only a few milliseconds.
const CHUNK_BYTES: usize = 8 << 20;

/// Alignment of `madvise` and `msync` ranges (memmap2 aligns offsets too;
/// rounding here keeps the first chunk's end on a chunk boundary).
const PAGE_BYTES: usize = 4096;

/// Warms `[from, from + len)` of a segment (`from` rounded down to a page),
/// unless the segment is dropped first. Runs on the allocator thread; a
/// failure only leaves the rest cold.
pub(super) fn warm_while_alive(map: &Weak<MmapRaw>, from: usize, len: usize) {
    let end = from + len;
    let mut off = from - from % PAGE_BYTES;
    while off < end {
        // Hold the mapping only for one step, so a dropped segment (rolled
        // away by retention, or a store shutting down) stops the warming.
        let Some(map) = map.upgrade() else { return };
        match warm_chunk(&map, off, end) {
            Ok(next) => off = next,
            Err(err) => {
                tracing::debug!(%err, "segment warming stopped; later syncs may be slower");
                return;
            }
        }
    }
}

/// How far from `off` one step goes: to the next chunk boundary, `end` or
/// the end of the mapping, whichever comes first.
fn chunk_len(map: &MmapRaw, off: usize, end: usize) -> usize {
    (CHUNK_BYTES - off % CHUNK_BYTES)
        .min(end - off)
        .min(map.len().saturating_sub(off))
}

/// Warms from `off` up to the chunk's end (see [`chunk_len`]),
/// returning where it stopped.
fn warm_chunk(map: &MmapRaw, off: usize, end: usize) -> io::Result<usize> {
    let len = chunk_len(map, off, end);
    if len == 0 {
        return Ok(end);
    }
    // Fault the pages in one by one (no readahead): the page cache would
    // otherwise build large folios here, and a store through the mapping
    // dirties a whole folio, so every later sync of a few KiB would write
    // up to 2 MiB. Back to normal readahead afterwards for later readers.
    let _ = map.advise_range(Advice::Random, off, len);
    // Older kernels lack the advice: the sync then converts only the pages
    // already dirty, which is still correct.
    let _ = map.advise_range(Advice::PopulateWrite, off, len);
    let _ = map.advise_range(Advice::Normal, off, len);
    // Then drop the page-table entries (the pages stay in the page cache,
    // dirty) before the sync. A page mapped writable costs a write-protect
    // and a TLB shootdown (an IPI to every core; a VM exit on a virtual
    // machine) each time writeback cleans it: here, and at every later sync
    // of the records `pwrite` puts there. Unmapped, writeback just writes.
    // Readers map pages again read-only, which writeback leaves alone.
    // SAFETY: the mapping is `MAP_SHARED` over a file, so `MADV_DONTNEED`
    // discards no data: the next access through any pointer or slice into
    // the range refaults the same page-cache page, bytes unchanged.
    let _ = unsafe { map.unchecked_advise_range(UncheckedAdvice::DontNeed, off, len) };
    map.flush_range(off, len)?;
    Ok(off + len)
}

/// A segment file and its mapping: records and long writes go through the
/// file (`pwrite`), short writes and reads through the mapping (see
/// `MmapSegment`).
pub(super) struct Mapped {
    pub(super) file: File,
    pub(super) map: MmapRaw,
}

/// Bytes at the head of a prepared segment that [`allocate`] warms: what
/// the CommitLog keeps warmed ahead of its writes, so the first appends
/// after a roll neither fault nor wait for an extent conversion. The rest
/// is warmed by the CommitLog's window as the writer approaches.
pub(super) const PREPARED_WARM_BYTES: usize = 64 << 20;

/// Creates `path` (which must not exist), allocates all `len` bytes so
/// writes never hit a hole, syncs it, maps it, and with `warm_head` (a
/// `SYNC_FLUSH` CommitLog's next segment) warms its head (the first
/// [`PREPARED_WARM_BYTES`]): its pages in the page cache and its extents
/// converted, as RocketMQ's warmMappedFile does for a whole file. An
/// `ASYNC_FLUSH` log's segments come cold: warming would write 64 MiB of
/// zeros per segment that no sync on the hot path waits for.
/// (Records are written with `pwrite` since issue 20's "pwrite appends",
/// so the pages' writable mapping serves only short stores.) Warming the
/// whole segment here cost ~0.9 core for ~7 s on every fresh start (the
/// next 1 GiB segment is prepared at once; that was before warming faulted
/// single pages: readahead's 2 MiB folios cost ~9 s per GiB to fault in,
/// single pages ~0.5 s) and kept the whole segment resident, mostly for
/// bytes a store may not write for hours; the CommitLog's window warms the
/// rest as it goes.
pub(super) fn allocate(
    path: &Path,
    len: u64,
    map_len: usize,
    warm_head: bool,
) -> io::Result<Mapped> {
    let mapped = allocate_cold(path, len, map_len)?;
    if !warm_head {
        return Ok(mapped);
    }
    let end = PREPARED_WARM_BYTES.min(mapped.map.len());
    let mut off = 0;
    while off < end {
        match warm_chunk(&mapped.map, off, end) {
            Ok(next) => off = next,
            Err(err) => {
                // Only slower first syncs: the file itself is complete.
                tracing::debug!(%err, "warming a prepared segment's head stopped");
                break;
            }
        }
    }
    Ok(mapped)
}

/// Like [`allocate`] without warming the head.
pub(super) fn allocate_cold(path: &Path, len: u64, map_len: usize) -> io::Result<Mapped> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(path)?;
    let result = fallocate(&file, len)
        .and_then(|()| file.sync_all())
        .and_then(|()| MmapOptions::new().len(map_len).map_raw(&file));
    match result {
        Ok(map) => Ok(Mapped { file, map }),
        Err(err) => {
            // Best effort: the caller reports the first error, not this one.
            let _ = fs::remove_file(path);
            Err(err)
        }
    }
}

fn fallocate(file: &File, len: u64) -> io::Result<()> {
    let len = libc::off_t::try_from(len).map_err(|_| invalid(format!("size {len} too large")))?;
    // SAFETY: the descriptor is valid and owned by `file` for the whole call;
    // posix_fallocate touches no memory of ours.
    let rc = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, len) };
    // posix_fallocate returns the error number instead of setting errno.
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok(())
}
