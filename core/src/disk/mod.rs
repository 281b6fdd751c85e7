//! The disk seam: fixed-size, pre-allocated segments with positional writes,
//! zero-copy reads and range sync, plus atomic small-file replace for
//! metadata. Production maps files (`MmapDisk`); simulations use
//! `testing::SimDisk` (feature `testing`).
//! Invariant: a range is durable only after `Segment::sync` covering it
//! returned `Ok`; an `Err` leaves the range's state unknown.

use std::future::Future;
use std::io;

use bytes::Bytes;

mod alloc;
mod mmap;

pub use mmap::{MmapDisk, MmapSegment, SMALL_FILE_BYTES_MAX};

/// What the default `Segment::write_with` puts in the buffer before its
/// fill runs (see there).
const UNFILLED_BYTE: u8 = 0xA5;

/// Rejects paths that could escape a disk's root or name nothing: empty,
/// absolute, with an empty, `.` or `..` component, or with a NUL byte. One
/// rule for every disk, so a path the simulation accepts the kernel does too.
pub(crate) fn check_path(path: &str) -> io::Result<()> {
    let bad = path.is_empty()
        || path.starts_with('/')
        || path
            .split('/')
            .any(|part| part.is_empty() || part == "." || part == ".." || part.contains('\0'));
    if bad {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("bad path {path:?}"),
        ));
    }
    Ok(())
}

/// One pre-allocated, fixed-size file (a CommitLog or ConsumeQueue segment).
///
/// Writes land in the page cache; they survive a process crash
/// but not a power loss until a `sync` covering them has completed.
pub trait Segment: Send + Sync + 'static {
    /// Fixed size in bytes, chosen at creation; never changes.
    fn size_bytes(&self) -> u64;

    /// Copies `buf` to `[off, off + buf.len())`. Fails (never panics) when
    /// the range is outside the segment.
    fn write_at(&self, off: u64, buf: &[u8]) -> io::Result<()>;

    /// Fills `[off, off + len)` in place: `fill` gets exactly `len` bytes
    /// and must write every one of them (their prior contents are
    /// unspecified). The CommitLog encodes its records with this, so a
    /// disk may choose where they are encoded (the production disk: into a
    /// staging buffer written with one `pwrite`, see `MmapSegment`); the
    /// default fills a buffer and copies it with `write_at`. Fails (never
    /// panics) when the range is outside the segment, before `fill` runs.
    fn write_with(&self, off: u64, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> io::Result<()> {
        check_write(self.size_bytes(), off, len as u64)?;
        // Not zeros: a fill that skipped a byte would then write junk the
        // store's checks catch, not zeros that pass for padding.
        let mut buf = vec![UNFILLED_BYTE; len];
        fill(&mut buf);
        self.write_at(off, &buf)
    }

    /// Returns the bytes at `[off, off + len)`. On a mapped file this is a
    /// zero-copy view of the mapping, kept alive by the returned `Bytes`.
    fn slice(&self, off: u64, len: usize) -> io::Result<Bytes>;

    /// Copies the bytes at `[off, off + buf.len())` into `buf`: for small
    /// reads (a record head, an index slot) where making a `Bytes` view
    /// costs more than the copy. The default copies out of [`slice`].
    ///
    /// [`slice`]: Segment::slice
    fn read_at(&self, off: u64, buf: &mut [u8]) -> io::Result<()> {
        buf.copy_from_slice(&self.slice(off, buf.len())?);
        Ok(())
    }

    /// Makes `[off, off + len)` durable (msync / fdatasync). An `Err` means
    /// the range's durable state is unknown: callers must fence themselves,
    /// never retry and acknowledge (fsyncgate semantics).
    fn sync(&self, off: u64, len: u64) -> impl Future<Output = io::Result<()>> + Send;

    /// The first run at or after `off` that may hold non-zero bytes, as
    /// `[start, end)` with `off <= start < end <= size`: `[off, start)`
    /// reads as zeros without being read (a hole, or blocks reserved and
    /// never written — reading those makes the kernel zero a page per
    /// 4 KiB). `None`: the rest of the segment reads as zeros. A disk may
    /// report more than its data (the default: the whole rest), never
    /// less.
    fn data_run(&self, off: u64) -> io::Result<Option<(u64, u64)>> {
        let size = self.size_bytes();
        Ok((off < size).then_some((off, size)))
    }

    /// A hint that `[off, off + len)` will soon be written and synced (the
    /// CommitLog of a `SYNC_FLUSH` store, just ahead of its write
    /// position): a production disk makes the range's blocks real on disk
    /// off the hot path, so each later sync writes data only. Changes no
    /// byte; the default does nothing.
    fn warm(&self, off: u64, len: u64) {
        let _ = (off, len);
    }
}

/// Fails when `[off, off + len)` is not inside a segment of `size` bytes.
fn check_write(size: u64, off: u64, len: u64) -> io::Result<()> {
    match off.checked_add(len) {
        Some(end) if end <= size => Ok(()),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("range {off}+{len} outside a {size} byte segment"),
        )),
    }
}

/// Work for [`Disk::run_beside`].
pub type BesideJob = Box<dyn FnOnce() + Send>;

/// How [`Disk::prepare_segment`] readies a segment ahead of its use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prepare {
    /// Allocated only (an `ASYNC_FLUSH` CommitLog: no sync on its hot path
    /// waits for what the first writeback of a block costs).
    Cold,
    /// Allocated, with its head in the page cache and its head's blocks
    /// written on disk (ConsumeQueue files: entries are stored through the
    /// mapping a few bytes at a time).
    WarmHead,
    /// Every block written with zeros on disk before the segment is handed
    /// out, by direct I/O, so nothing of it is cached (a `SYNC_FLUSH`
    /// CommitLog): each sync of it writes data only, and no thread faults
    /// its pages in ahead of the writer. Where direct I/O is refused (e.g.
    /// tmpfs), the disk falls back to [`Prepare::WarmHead`].
    ///
    /// Contract: on such a segment a write may also zero the rest of the
    /// page it ends in (so that the kernel never reads a page from disk to
    /// complete a partial write), so it must be written in increasing
    /// offset order with nothing stored after the write position.
    ZeroFilled,
}

/// A directory of segments and small metadata files. Paths are relative to
/// the disk's root and use `/` as separator.
pub trait Disk: Clone + Send + Sync + 'static {
    /// The segment type this disk hands out.
    type Seg: Segment;

    /// Creates a fully allocated, zero-filled segment of `len` bytes whose
    /// directory entry is durable when this returns. Fails with
    /// `ErrorKind::StorageFull` when there is no room, and with
    /// `ErrorKind::AlreadyExists` when the path exists.
    fn create_segment(&self, path: &str, len: u64) -> io::Result<Self::Seg>;

    /// A hint that `create_segment(path, len)` will be called soon, so a
    /// production disk can allocate it off the hot path and ready it as
    /// `prepare` says. The default does nothing.
    fn prepare_segment(&self, path: &str, len: u64, prepare: Prepare) {
        let _ = (path, len, prepare);
    }

    /// Runs `job` on a helper thread beside the caller, for work that only
    /// reads what is on the disk and publishes its results through shared
    /// state (recovery verifying the log ahead of its walk). Hands the job
    /// back when the disk has no helper (the default: a simulated disk
    /// stays on one thread); the caller then does the work itself. A job
    /// taken and then dropped unrun must be noticed by its own drop.
    fn run_beside(&self, job: BesideJob) -> Result<(), BesideJob> {
        Err(job)
    }

    /// Opens an existing segment; `Ok(None)` when it does not exist.
    fn open_segment(&self, path: &str) -> io::Result<Option<Self::Seg>>;

    /// File names (not paths) directly inside `dir`, sorted; empty when the
    /// directory does not exist.
    fn list(&self, dir: &str) -> io::Result<Vec<String>>;

    /// Removes a file durably; removing a missing file is not an error.
    fn remove(&self, path: &str) -> io::Result<()>;

    /// Replaces a small file atomically and durably: write a temporary file,
    /// sync it, rename it over `path`, sync the directory. After a crash the
    /// file holds either the old or the new contents, never a mix.
    fn replace_atomically(
        &self,
        path: &str,
        data: &[u8],
    ) -> impl Future<Output = io::Result<()>> + Send;

    /// Reads a whole small file; `Ok(None)` when it does not exist.
    fn read_small(&self, path: &str) -> io::Result<Option<Vec<u8>>>;

    /// Bytes used and total bytes of the device holding the disk, for
    /// retention by disk-usage ratio.
    fn space(&self) -> io::Result<DiskSpace>;
}

/// Device usage as reported by `Disk::space`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DiskSpace {
    /// Bytes in use on the device.
    pub used_bytes: u64,
    /// Capacity of the device in bytes.
    pub total_bytes: u64,
}

impl DiskSpace {
    /// Used fraction in `[0, 1]`; a zero-sized device counts as full.
    pub fn used_ratio(self) -> f64 {
        if self.total_bytes == 0 {
            return 1.0;
        }
        #[expect(clippy::cast_precision_loss, reason = "a ratio needs no exact bytes")]
        let ratio = self.used_bytes as f64 / self.total_bytes as f64;
        ratio.clamp(0.0, 1.0)
    }
}
