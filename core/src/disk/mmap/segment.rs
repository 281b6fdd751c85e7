//! A segment of the production disk: reads are views of a shared mapping,
//! stores of records go through the file.
//!
//! Why not store through the mapping too (one copy fewer): every page
//! dirtied through a page-table entry must be write-protected again when
//! it is written back, and on a multi-core machine that costs an
//! inter-processor TLB shootdown per page (plus a write-protect fault on
//! the next store to it). On this project's 2-core VM the shootdowns alone
//! were ~8 % of the broker's CPU at 64 senders, and each costs a VM exit. A
//! `pwrite` dirties the page cache without touching the mapping, so the
//! writeback finds the mapping's entries clean and flushes no TLB; readers
//! see the bytes through the mapping as soon as the call returns (one page
//! cache). Paired runs: docs/benchmarks.md, issue 20 "pwrite appends".
//! Small writes (ConsumeQueue entries, index slots: many to a page) still
//! store through the mapping, where a syscall each would cost more than the
//! page's one shootdown.
//!
//! A segment zero-filled on disk ([`crate::disk::Prepare::ZeroFilled`];
//! or its head, when the writer needed it before the fill was done)
//! has none of its pages cached there, and its blocks are written extents: a
//! `pwrite` covering part of such a page makes the kernel read the page
//! from the disk first, in the writer's call. Each `pwrite` into it is
//! therefore padded with zeros to the end of its last page (the bytes the
//! disk already holds there), so that page is overwritten whole; the next
//! write starts in a page this one left cached. Measured: 64 sync senders
//! of 1 KiB fell from 52 k to 29 k msg/s without the padding.
#![allow(unsafe_code)]

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::mpsc;
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use memmap2::MmapRaw;

use super::{invalid, run_on, Job, INLINE_SYNC_BYTES_MAX};
use crate::disk::alloc::{self, Mapped};
use crate::disk::Segment;

/// Writes at least this long go through the file (`pwrite`); shorter ones
/// store through the mapping.
const FILE_WRITE_MIN_BYTES: usize = 512;

/// A staging buffer grown past this by a large batch is freed after use,
/// not kept for the next record.
const STAGE_KEEP_BYTES: usize = 1 << 20;

/// A zero-filled segment's writes are padded to a multiple of this.
const PAGE_BYTES: usize = 4096;

/// A mapped segment file. Clones are cheap and share the mapping, the file
/// and the staging buffer.
///
/// Contract (as for any shared mapping): never write a range while a
/// `slice` of it is alive; the store appends above its committed position
/// and hands out slices only below it. Never truncate the file while mapped.
#[derive(Clone)]
pub struct MmapSegment {
    map: Arc<MmapRaw>,
    file: Arc<File>,
    /// Where `write_with` encodes a record before its `pwrite`.
    stage: Arc<Mutex<Vec<u8>>>,
    size_bytes: u64,
    path: PathBuf,
    sync_jobs: mpsc::Sender<Job>,
    alloc_jobs: mpsc::Sender<Job>,
    /// Bytes below this were zero-filled on disk when prepared (all of
    /// them unless the fill was stopped early; 0: none): writes ending
    /// there are padded to whole pages and warming skips them (see the
    /// module doc).
    zero_filled_to: usize,
}

impl std::fmt::Debug for MmapSegment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MmapSegment")
            .field("path", &self.path)
            .field("size_bytes", &self.size_bytes)
            .finish_non_exhaustive()
    }
}

impl MmapSegment {
    pub(super) fn new(
        path: PathBuf,
        mapped: Mapped,
        sync_jobs: mpsc::Sender<Job>,
        alloc_jobs: mpsc::Sender<Job>,
    ) -> Self {
        Self {
            size_bytes: mapped.map.len() as u64,
            zero_filled_to: mapped.zero_filled_to,
            map: Arc::new(mapped.map),
            file: Arc::new(mapped.file),
            stage: Arc::default(),
            path,
            sync_jobs,
            alloc_jobs,
        }
    }

    /// Fills `len` bytes of the staging buffer and writes them at `off` with
    /// one `pwrite`; on a zero-filled segment, zeros to the end of the last
    /// page go with them (see the module doc). `[off, off + len)` is
    /// inside the segment.
    fn pwrite_staged(
        &self,
        off: usize,
        len: usize,
        fill: &mut dyn FnMut(&mut [u8]),
    ) -> io::Result<()> {
        let end = off + len;
        // The page the write ends in lies in the zero-filled part: pad it.
        let padded_end = if end - end % PAGE_BYTES < self.zero_filled_to {
            end.next_multiple_of(PAGE_BYTES).min(self.map.len())
        } else {
            end
        };
        let total = padded_end - off;
        let mut stage = self.stage.lock().unwrap_or_else(PoisonError::into_inner);
        // Grown, never cleared: `fill` writes every byte it is given (the
        // trait's contract), so zeroing a batch's run of records first
        // would only be a second pass over up to a MiB.
        if stage.len() < total {
            stage.resize(total, 0);
        }
        let (run, pad) = stage[..total].split_at_mut(len);
        fill(run);
        pad.fill(0);
        let written = self.file.write_all_at(&stage[..total], off as u64);
        if stage.capacity() > STAGE_KEEP_BYTES {
            *stage = Vec::new();
        }
        written
    }

    /// Bytes below which the segment was zero-filled when prepared.
    #[cfg(test)]
    pub(super) fn zero_filled_to(&self) -> usize {
        self.zero_filled_to
    }

    /// Checks `[off, off + len)` lies inside the mapping and returns `off`
    /// and `len` as `usize`.
    fn range(&self, off: u64, len: u64) -> io::Result<(usize, usize)> {
        match off.checked_add(len) {
            Some(end) if end <= self.size_bytes => {
                // The mapping is `size_bytes` long in memory, so both fit.
                let off = usize::try_from(off).expect("invariant: offset inside a mapping");
                let len = usize::try_from(len).expect("invariant: length inside a mapping");
                Ok((off, len))
            }
            _ => Err(invalid(format!(
                "range {off}+{len} outside {} of {} bytes",
                self.path.display(),
                self.size_bytes
            ))),
        }
    }
}

/// Owner of a zero-copy view: keeps the mapping alive for the `Bytes`.
struct MapView {
    map: Arc<MmapRaw>,
    off: usize,
    len: usize,
}

impl AsRef<[u8]> for MapView {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: `off + len <= map.len()` was checked when the view was
        // made, and `map` keeps the mapping alive as long as `self`. The
        // store reads only below its committed position and writes only
        // above it, so no write (a `pwrite` or a store through the mapping)
        // mutates these bytes while they are borrowed; the file is never
        // truncated while mapped.
        unsafe { std::slice::from_raw_parts(self.map.as_ptr().add(self.off), self.len) }
    }
}

impl Segment for MmapSegment {
    fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    fn write_at(&self, off: u64, buf: &[u8]) -> io::Result<()> {
        let (off, len) = self.range(off, buf.len() as u64)?;
        if len >= FILE_WRITE_MIN_BYTES {
            if self.zero_filled_to > 0 {
                return self.pwrite_staged(off, len, &mut |run| run.copy_from_slice(buf));
            }
            return self.file.write_all_at(buf, off as u64);
        }
        // SAFETY: the destination `[off, off + len)` is inside the mapping
        // (checked above), which `self.map` keeps alive. `ptr::copy` allows
        // `buf` to overlap the mapping (e.g. a slice of this segment). The
        // store never writes a range that readers may be viewing (see
        // `MapView`), and the file is fully allocated, so no SIGBUS on ENOSPC.
        unsafe { std::ptr::copy(buf.as_ptr(), self.map.as_mut_ptr().add(off), len) };
        Ok(())
    }

    /// Encodes into the staging buffer and writes it with one `pwrite`
    /// (see the module doc for why not in place in the mapping).
    fn write_with(&self, off: u64, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> io::Result<()> {
        let (off, len) = self.range(off, len as u64)?;
        self.pwrite_staged(off, len, fill)
    }

    fn slice(&self, off: u64, len: usize) -> io::Result<Bytes> {
        let (off, len) = self.range(off, len as u64)?;
        Ok(Bytes::from_owner(MapView {
            map: Arc::clone(&self.map),
            off,
            len,
        }))
    }

    fn read_at(&self, off: u64, buf: &mut [u8]) -> io::Result<()> {
        let (off, len) = self.range(off, buf.len() as u64)?;
        // SAFETY: as for `MapView::as_ref` — `[off, off + len)` is inside
        // the mapping (checked above), which `self.map` keeps alive for the
        // copy, and no write mutates bytes below the committed position
        // that readers ask for. No `Arc` clone: nothing outlives the call.
        let src = unsafe { std::slice::from_raw_parts(self.map.as_ptr().add(off), len) };
        buf.copy_from_slice(src);
        Ok(())
    }

    /// `lseek(SEEK_DATA)`, then `SEEK_HOLE`: on ext4 and XFS the blocks
    /// `posix_fallocate` reserved and nothing wrote since (no page of them
    /// cached either) count as a hole. Where the file system cannot tell,
    /// the rest of the segment is reported.
    fn data_run(&self, off: u64) -> io::Result<Option<(u64, u64)>> {
        let size = self.size_bytes;
        if off >= size {
            return Ok(None);
        }
        let whole = Ok(Some((off, size)));
        let (Ok(at), fd) = (libc::off_t::try_from(off), self.file.as_raw_fd()) else {
            return whole;
        };
        // SAFETY: `lseek` on a descriptor `self.file` keeps open; it
        // touches no memory. The file's position is never used (every
        // read and write is positional), so moving it is harmless.
        let start = unsafe { libc::lseek(fd, at, libc::SEEK_DATA) };
        if start < 0 {
            return match io::Error::last_os_error().raw_os_error() {
                Some(libc::ENXIO) => Ok(None),
                _ => whole,
            };
        }
        // SAFETY: as above.
        let end = unsafe { libc::lseek(fd, start, libc::SEEK_HOLE) };
        let (Ok(start), Ok(end)) = (u64::try_from(start), u64::try_from(end)) else {
            return whole;
        };
        if start >= size {
            return Ok(None);
        }
        Ok(Some((start.max(off), end.clamp(start + 1, size))))
    }

    async fn sync(&self, off: u64, len: u64) -> io::Result<()> {
        let (off, len) = self.range(off, len)?;
        if len == 0 {
            return Ok(());
        }
        if len <= INLINE_SYNC_BYTES_MAX {
            // On the caller's thread: for a few pages the hop to the sync
            // thread and back (two cross-thread wake-ups) costs about as
            // much as the msync itself.
            return self.map.flush_range(off, len);
        }
        let map = Arc::clone(&self.map);
        run_on(&self.sync_jobs, move || map.flush_range(off, len)).await
    }

    /// Queues the warming on the allocator thread; it stops early if the
    /// segment is dropped. A range outside the segment is ignored, and so
    /// is its zero-filled part (already written on disk).
    fn warm(&self, off: u64, len: u64) {
        let Ok((off, len)) = self.range(off, len) else {
            return;
        };
        let end = off + len;
        let off = off.max(self.zero_filled_to);
        if off >= end {
            return;
        }
        let len = end - off;
        let map = Arc::downgrade(&self.map);
        let _ = self.alloc_jobs.send(Box::new(move || {
            alloc::warm_while_alive(&map, off, len);
        }));
    }
}
