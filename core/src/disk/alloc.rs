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
//!
//! Warming costs the allocator thread a page fault, a zeroed page and its
//! writeback per 4 KiB, in the hot path's wake: at 1 KiB batches of 64 × 4
//! senders it took ≈ 40 % of a `SYNC_FLUSH` broker's CPU and its 8 MiB
//! syncs stalled the group commits queued behind them. So a synced log's
//! *next* segments are instead zero-filled whole by direct I/O while they
//! are prepared ([`Prepare::ZeroFilled`]; no page faulted or cached, a
//! fraction of the CPU, a file nobody writes yet), and the window warms
//! only the segments that were not. Pages of a zero-filled segment are
//! written extents that are not cached, so a write that covers part of a
//! page would make the kernel read the rest from the disk first; the
//! segment pads each of its writes with zeros to the end of the page
//! instead (see `MmapSegment`).
#![allow(unsafe_code)]

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Weak;

use memmap2::{Advice, MmapOptions, MmapRaw, UncheckedAdvice};

use super::mmap::invalid;
use super::Prepare;

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
    /// Every block below this offset was written with zeros by
    /// [`allocate`] ([`Prepare::ZeroFilled`]; all of it unless stopped
    /// early); 0 where unknown.
    pub(super) zero_filled_to: usize,
}

/// Bytes at the head of a prepared segment that [`allocate`] warms: what
/// the CommitLog keeps warmed ahead of its writes, so the first appends
/// after a roll neither fault nor wait for an extent conversion. The rest
/// is warmed by the CommitLog's window as the writer approaches.
pub(super) const PREPARED_WARM_BYTES: usize = 64 << 20;

/// Creates `path` (which must not exist), allocates all `len` bytes so
/// writes never hit a hole, syncs it, maps it, and readies it as `prepare`
/// says. [`Prepare::WarmHead`] (a ConsumeQueue file) warms its head (the
/// first [`PREPARED_WARM_BYTES`]): its pages in the page cache and its
/// extents converted, as RocketMQ's warmMappedFile does for a whole file.
/// [`Prepare::ZeroFilled`] (a `SYNC_FLUSH` CommitLog's next segment)
/// writes zeros over all of it instead ([`zero_fill`]), or warms the head
/// where that fails; `stop` set ends the zero fill early, at a step's end.
/// An `ASYNC_FLUSH` log's segments come cold: nothing would wait for what
/// preparing them costs.
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
    prepare: Prepare,
    stop: &AtomicBool,
) -> io::Result<Mapped> {
    let mut mapped = allocate_cold(path, len, map_len)?;
    match prepare {
        Prepare::Cold => {}
        Prepare::WarmHead => warm_head(&mapped),
        Prepare::ZeroFilled => {
            let mut filled_to = 0;
            match zero_fill(path, &mapped.file, map_len, stop, &mut filled_to) {
                Ok(()) => mapped.zero_filled_to = filled_to,
                Err(err) => {
                    tracing::debug!(%err, "zero-filling a prepared segment failed; warming its head");
                    warm_head(&mapped);
                }
            }
        }
    }
    Ok(mapped)
}

/// Bytes per direct write of [`zero_fill`].
const ZERO_FILL_STEP: usize = 1 << 20;

/// Offset and length alignment direct I/O asks for (a page: at least the
/// logical block size of any device this runs on).
const DIRECT_ALIGN: usize = 4096;

/// Writes zeros over `[0, len)` of `path` (open as `file`, not yet in use)
/// with direct I/O, then syncs it: every block becomes a written extent on
/// disk and none of it is left in the page cache. On this project's VM a
/// GiB took 0.5 s and 0.1 s of CPU (`dd oflag=direct`), where warming it
/// page by page took seconds of CPU. A tail shorter than [`DIRECT_ALIGN`]
/// is written through the page cache. Once `stop` is set it stops at the
/// end of a step and syncs what it wrote. `filled_to` ends as the offset
/// below which every byte is written and synced (`len` when complete).
fn zero_fill(
    path: &Path,
    file: &File,
    len: usize,
    stop: &AtomicBool,
    filled_to: &mut usize,
) -> io::Result<()> {
    use std::os::unix::fs::{FileExt, OpenOptionsExt};

    let direct = OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)?;
    // A zeroed buffer with an aligned window of `ZERO_FILL_STEP` bytes.
    let buf = vec![0u8; ZERO_FILL_STEP + DIRECT_ALIGN];
    let skip = buf.as_ptr().align_offset(DIRECT_ALIGN);
    let zeros = buf
        .get(skip..skip + ZERO_FILL_STEP)
        .ok_or_else(|| invalid("no aligned buffer for direct writes".to_owned()))?;
    let aligned = len - len % DIRECT_ALIGN;
    let mut off = 0;
    while off < aligned && !stop.load(Ordering::Relaxed) {
        let n = (aligned - off).min(ZERO_FILL_STEP);
        direct.write_all_at(&zeros[..n], off as u64)?;
        off += n;
    }
    if off == aligned && aligned < len {
        // Less than `DIRECT_ALIGN` bytes.
        file.write_all_at(&zeros[..len - aligned], aligned as u64)?;
        off = len;
    }
    file.sync_data()?;
    *filled_to = off;
    Ok(())
}

/// Warms the head of a prepared segment (see [`allocate`]).
fn warm_head(mapped: &Mapped) {
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
        Ok(map) => Ok(Mapped {
            file,
            map,
            zero_filled_to: 0,
        }),
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
