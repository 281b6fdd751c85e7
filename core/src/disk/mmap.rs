//! `MmapDisk`: the production disk. Segments are fully allocated
//! (`posix_fallocate`) memory-mapped files, warmed ahead of the writer;
//! reads are zero-copy views of the mapping, records and long writes go
//! through the file (`mmap/segment.rs` says why); `sync` is an msync, on the
//! caller's thread for a short range and on a dedicated thread otherwise.
//! Invariant: a segment's name is visible only once the file is fully allocated.
#![allow(unsafe_code)]

use std::collections::BTreeMap;
use std::ffi::CString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::mem::MaybeUninit;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread;

use futures_channel::oneshot;
use memmap2::MmapOptions;

use super::alloc::{allocate, allocate_cold, Mapped};
use super::check_path;
use super::{Disk, DiskSpace, Prepare};

/// Largest file `read_small` will load; a limit checked before allocating.
pub const SMALL_FILE_BYTES_MAX: u64 = 64 << 20;

/// Largest range a segment syncs on the calling thread; longer ones (a
/// background flush of many dirty pages) go to the sync thread, so a
/// runtime thread is never held for long.
pub const INLINE_SYNC_BYTES_MAX: usize = 256 << 10;

/// Hidden name prefix of a segment being allocated by `prepare_segment`.
const PREP_PREFIX: &str = ".prep-";
/// Hidden name prefix of a segment being allocated by `create_segment`.
const NEW_PREFIX: &str = ".new-";
/// Hidden name prefix of a metadata file being replaced.
const TMP_PREFIX: &str = ".tmp-";

type Job = Box<dyn FnOnce() + Send>;

/// State of a segment handed to the allocator thread.
enum Prep {
    /// Being allocated; setting the flag stops a zero fill early (see
    /// [`Preps::take`]).
    Pending(Arc<AtomicBool>),
    Ready {
        len: u64,
        mapped: Mapped,
    },
    Failed,
}

/// Preparations by relative path, with a condvar signalled when one ends.
#[derive(Default)]
struct Preps {
    map: Mutex<BTreeMap<String, Prep>>,
    done: Condvar,
}

impl Preps {
    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, Prep>> {
        self.map.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn finish(&self, path: String, prep: Prep) {
        self.lock().insert(path, prep);
        self.done.notify_all();
    }

    /// Takes the finished preparation for `path`, waiting if it is still
    /// being allocated: the work is half done, redoing it would be slower.
    /// A zero fill still running is told to stop first, so the writer
    /// waits for one step of it, not for the rest of a GiB on a disk its
    /// own writes keep busy (the segment then comes partly zero-filled).
    fn take(&self, path: &str) -> Option<Prep> {
        let mut map = self.lock();
        if let Some(Prep::Pending(stop)) = map.get(path) {
            stop.store(true, Ordering::Relaxed);
        }
        while matches!(map.get(path), Some(Prep::Pending(_))) {
            map = self.done.wait(map).unwrap_or_else(PoisonError::into_inner);
        }
        map.remove(path)
    }
}

/// Marks a preparation failed unless its job took the key to finish it.
struct PrepGuard {
    preps: Arc<Preps>,
    key: Option<String>,
}

impl Drop for PrepGuard {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            self.preps.finish(key, Prep::Failed);
        }
    }
}

struct Inner {
    root: PathBuf,
    sync_jobs: mpsc::Sender<Job>,
    alloc_jobs: mpsc::Sender<Job>,
    preps: Arc<Preps>,
}

impl Drop for Inner {
    /// Deletes prepared segments nobody claimed. Leftovers from a crash stay
    /// hidden and are replaced when the same path is prepared again.
    fn drop(&mut self) {
        for (path, prep) in std::mem::take(&mut *self.preps.lock()) {
            if let Prep::Ready { .. } = prep {
                let _ = fs::remove_file(hidden(&self.root.join(path), PREP_PREFIX));
            }
        }
    }
}

/// The production disk: memory-mapped segment files under one root
/// directory. Clones share the root, the sync thread and the allocator.
#[derive(Clone)]
pub struct MmapDisk {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for MmapDisk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MmapDisk")
            .field("root", &self.inner.root)
            .finish_non_exhaustive()
    }
}

impl MmapDisk {
    /// Opens (creating if needed) the disk rooted at `root`, and starts its
    /// sync and allocator threads; they exit when the last clone and the
    /// last segment are dropped.
    pub fn new(root: impl Into<PathBuf>) -> io::Result<Self> {
        let root = root.into();
        fs::create_dir_all(&root)?;
        let sync_jobs = start_worker("sluice-disk-sync")?;
        let alloc_jobs = start_worker("sluice-disk-alloc")?;
        Ok(Self {
            inner: Arc::new(Inner {
                root,
                sync_jobs,
                alloc_jobs,
                preps: Arc::new(Preps::default()),
            }),
        })
    }

    /// The root directory all paths are relative to.
    pub fn root(&self) -> &Path {
        &self.inner.root
    }

    /// Blocks until the allocator thread has run every job queued before
    /// this call (segment preparations and window warming). For benches and
    /// tests that must not race it: claiming a segment to wait for its
    /// preparation would instead stop a zero fill still running.
    pub fn wait_for_allocator(&self) {
        let (done, finished) = mpsc::channel::<()>();
        let barrier = move || {
            let _ = done.send(());
        };
        if self.inner.alloc_jobs.send(Box::new(barrier)).is_ok() {
            // An error means the allocator stopped and dropped the barrier
            // unrun: nothing is left to wait for either way.
            let _ = finished.recv();
        }
    }

    fn abs(&self, path: &str) -> io::Result<PathBuf> {
        check_path(path)?;
        Ok(self.inner.root.join(path))
    }

    /// Runs `job` on the sync thread and awaits its result.
    async fn on_sync_thread<T: Send + 'static>(
        &self,
        job: impl FnOnce() -> io::Result<T> + Send + 'static,
    ) -> io::Result<T> {
        run_on(&self.inner.sync_jobs, job).await
    }

    fn segment(&self, path: PathBuf, mapped: Mapped) -> MmapSegment {
        MmapSegment::new(
            path,
            mapped,
            self.inner.sync_jobs.clone(),
            self.inner.alloc_jobs.clone(),
        )
    }
}

/// The one place the production disk starts threads. clippy.toml bans
/// `std::thread::spawn` for determinism; `Builder::spawn` is used for the
/// thread name and the `io::Result`, and this disk never runs in simulation.
fn start_worker(name: &str) -> io::Result<mpsc::Sender<Job>> {
    let (tx, rx) = mpsc::channel::<Job>();
    thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || {
            // Ends when every sender (the disk and its segments) is dropped.
            while let Ok(job) = rx.recv() {
                job();
            }
        })?;
    Ok(tx)
}

/// A thread of its own for one [`Disk::run_beside`] job (the same audited
/// place as [`start_worker`]). If the thread cannot start, the job is
/// dropped unrun, which the job notices.
fn spawn_beside(job: super::BesideJob) {
    if let Err(e) = thread::Builder::new()
        .name("sluice-beside".to_owned())
        .spawn(job)
    {
        tracing::warn!(error = %e, "no helper thread; the caller does the work itself");
    }
}

async fn run_on<T: Send + 'static>(
    jobs: &mpsc::Sender<Job>,
    job: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    let (tx, rx) = oneshot::channel();
    jobs.send(Box::new(move || {
        // The receiver may be gone (caller dropped the future); then nobody
        // wants the result.
        let _ = tx.send(job());
    }))
    .map_err(|_| io::Error::other("disk worker thread has stopped"))?;
    rx.await
        .map_err(|_| io::Error::other("disk worker thread dropped the request"))?
}

impl Disk for MmapDisk {
    type Seg = MmapSegment;

    fn run_beside(&self, job: super::BesideJob) -> Result<(), super::BesideJob> {
        spawn_beside(job);
        Ok(())
    }

    fn create_segment(&self, path: &str, len: u64) -> io::Result<MmapSegment> {
        let abs = self.abs(path)?;
        let map_len = check_len(len)?;
        if abs.symlink_metadata().is_ok() {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{path} exists"),
            ));
        }
        let dir = parent(&abs);
        ensure_dir(&self.inner.root, dir)?;
        let prepared = match self.inner.preps.take(path) {
            Some(Prep::Ready { len: ready, mapped }) if ready == len => Some(mapped),
            Some(Prep::Ready { .. }) => {
                remove_if_exists(&hidden(&abs, PREP_PREFIX))?;
                None
            }
            Some(Prep::Pending(_) | Prep::Failed) | None => None,
        };
        let (tmp, mapped) = if let Some(mapped) = prepared {
            (hidden(&abs, PREP_PREFIX), mapped)
        } else {
            // Not prepared ahead (the first segment of a fresh store, an
            // index file): allocate now and let appends fault their own
            // pages, as RocketMQ does without warmMappedFile. Pre-faulting
            // here made opening a store wait for a gigabyte of page faults
            // (~8 s in the 2 MiB folios readahead built then), and in the
            // background stalled the first seconds of service instead (when
            // several nodes start at once). Later segments are prepared off
            // the hot path, their head warmed only for a SYNC_FLUSH log, which
            // also has the range ahead of its writes warmed (`Segment::warm`)
            // as it goes.
            let tmp = hidden(&abs, NEW_PREFIX);
            remove_if_exists(&tmp)?;
            let mapped = allocate_cold(&tmp, len, map_len)?;
            (tmp, mapped)
        };
        // `hard_link` refuses to replace an existing name, unlike `rename`,
        // so a racing creator gets AlreadyExists instead of a lost segment.
        let linked = fs::hard_link(&tmp, &abs);
        remove_if_exists(&tmp)?;
        linked?;
        sync_dir(dir)?;
        Ok(self.segment(abs, mapped))
    }

    fn prepare_segment(&self, path: &str, len: u64, prepare: Prepare) {
        let (Ok(abs), Ok(map_len)) = (self.abs(path), check_len(len)) else {
            tracing::warn!(
                path,
                len,
                "ignoring prepare_segment with a bad path or size"
            );
            return;
        };
        let stop = Arc::new(AtomicBool::new(false));
        {
            let mut preps = self.inner.preps.lock();
            if preps.contains_key(path) || abs.symlink_metadata().is_ok() {
                return;
            }
            preps.insert(path.to_owned(), Prep::Pending(Arc::clone(&stop)));
        }
        // If the job panics, or is dropped unrun because the allocator
        // stopped, the guard marks the preparation failed so that
        // `create_segment` never waits forever.
        let guard = PrepGuard {
            preps: Arc::clone(&self.inner.preps),
            key: Some(path.to_owned()),
        };
        let root = self.inner.root.clone();
        let job = move || {
            let mut guard = guard;
            let tmp = hidden(&abs, PREP_PREFIX);
            let result = ensure_dir(&root, parent(&abs))
                .and_then(|()| remove_if_exists(&tmp))
                .and_then(|()| allocate(&tmp, len, map_len, prepare, &stop));
            let key = guard.key.take().expect("invariant: the job runs once");
            match result {
                Ok(mapped) => guard.preps.finish(key, Prep::Ready { len, mapped }),
                Err(err) => {
                    tracing::warn!(path = %key, %err, "segment preparation failed");
                    guard.preps.finish(key, Prep::Failed);
                }
            }
        };
        // A failed send drops the job, and its guard marks it failed.
        let _ = self.inner.alloc_jobs.send(Box::new(job));
    }

    fn open_segment(&self, path: &str) -> io::Result<Option<MmapSegment>> {
        let abs = self.abs(path)?;
        let file = match OpenOptions::new().read(true).write(true).open(&abs) {
            Ok(file) => file,
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(err) => return Err(err),
        };
        let len = file.metadata()?.len();
        let map_len = check_len(len)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, format!("{path} is empty")))?;
        let map = MmapOptions::new().len(map_len).map_raw(&file)?;
        Ok(Some(self.segment(
            abs,
            // Unknown: a reopened segment may have been created cold.
            Mapped {
                file,
                map,
                zero_filled_to: 0,
            },
        )))
    }

    fn list(&self, dir: &str) -> io::Result<Vec<String>> {
        let dir = dir.trim_end_matches('/');
        let abs = if dir.is_empty() {
            self.inner.root.clone()
        } else {
            self.abs(dir)?
        };
        let entries = match fs::read_dir(&abs) {
            Ok(entries) => entries,
            Err(err)
                if matches!(
                    err.kind(),
                    io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
                ) =>
            {
                return Ok(Vec::new())
            }
            Err(err) => return Err(err),
        };
        let mut names = Vec::new();
        for entry in entries {
            let name = entry?.file_name();
            match name.into_string() {
                Ok(name) if !name.starts_with('.') => names.push(name),
                Ok(_) => {}
                Err(name) => tracing::warn!(?name, "skipping a file name that is not UTF-8"),
            }
        }
        names.sort();
        Ok(names)
    }

    fn remove(&self, path: &str) -> io::Result<()> {
        let abs = self.abs(path)?;
        match fs::remove_file(&abs) {
            Ok(()) => sync_dir(parent(&abs)),
            Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(err) => Err(err),
        }
    }

    async fn replace_atomically(&self, path: &str, data: &[u8]) -> io::Result<()> {
        let abs = self.abs(path)?;
        let root = self.inner.root.clone();
        let data = data.to_vec();
        self.on_sync_thread(move || {
            let dir = parent(&abs);
            ensure_dir(&root, dir)?;
            let tmp = hidden(&abs, TMP_PREFIX);
            let mut file = File::create(&tmp)?;
            file.write_all(&data)?;
            file.sync_all()?;
            drop(file);
            fs::rename(&tmp, &abs)?;
            sync_dir(dir)
        })
        .await
    }

    fn read_small(&self, path: &str) -> io::Result<Option<Vec<u8>>> {
        let abs = self.abs(path)?;
        let mut file = match File::open(&abs) {
            Ok(file) => file,
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(err) => return Err(err),
        };
        let len = file.metadata()?.len();
        if len > SMALL_FILE_BYTES_MAX {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{path} has {len} bytes, over {SMALL_FILE_BYTES_MAX}"),
            ));
        }
        let mut data = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
        io::Read::read_to_end(&mut file, &mut data)?;
        Ok(Some(data))
    }

    fn space(&self) -> io::Result<DiskSpace> {
        let path = CString::new(self.inner.root.as_os_str().as_bytes())
            .map_err(|_| invalid("root path contains a NUL byte".to_owned()))?;
        let mut stat = MaybeUninit::<libc::statvfs>::uninit();
        // SAFETY: `path` is a valid NUL-terminated string and `stat` points
        // to writable memory of the right type for the duration of the call.
        let rc = unsafe { libc::statvfs(path.as_ptr(), stat.as_mut_ptr()) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: statvfs returned 0, so it initialised the whole struct.
        // Its counters are u64 on the 64-bit Linux targets we support.
        let stat = unsafe { stat.assume_init() };
        let block = stat.f_frsize;
        let total_bytes = stat.f_blocks.saturating_mul(block);
        let free_bytes = stat.f_bfree.saturating_mul(block);
        Ok(DiskSpace {
            used_bytes: total_bytes.saturating_sub(free_bytes),
            total_bytes,
        })
    }
}

/// Creates the missing directories between `root` and `dir`, syncing each
/// new directory's parent so the new entries are durable.
fn ensure_dir(root: &Path, dir: &Path) -> io::Result<()> {
    let Ok(rel) = dir.strip_prefix(root) else {
        return Err(invalid(format!("{} is outside the root", dir.display())));
    };
    let mut cur = root.to_path_buf();
    for part in rel.components() {
        let next = cur.join(part);
        if !next.is_dir() {
            match fs::create_dir(&next) {
                Ok(()) => sync_dir(&cur)?,
                Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {}
                Err(err) => return Err(err),
            }
        }
        cur = next;
    }
    Ok(())
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

fn remove_if_exists(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(err) if err.kind() != io::ErrorKind::NotFound => Err(err),
        _ => Ok(()),
    }
}

/// `dir/name` → `dir/<prefix>name`: a hidden sibling that `list` skips and
/// that renames or links atomically into place.
fn hidden(abs: &Path, prefix: &str) -> PathBuf {
    let mut name = std::ffi::OsString::from(prefix);
    name.push(abs.file_name().unwrap_or_default());
    abs.with_file_name(name)
}

/// Paths are checked relative, so every absolute path has a parent.
fn parent(abs: &Path) -> &Path {
    abs.parent()
        .expect("invariant: a checked path has a parent")
}

fn check_len(len: u64) -> io::Result<usize> {
    match usize::try_from(len) {
        Ok(n) if n > 0 && libc::off_t::try_from(len).is_ok() => Ok(n),
        _ => Err(invalid(format!("segment size {len} out of range"))),
    }
}

pub(super) fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

mod segment;

pub use segment::MmapSegment;

#[cfg(test)]
mod tests;
