//! `SimDisk`: a seeded, deterministic disk for simulations. Each file keeps
//! what the process reads (`cur`, the page cache) apart from what survives a
//! power loss (`durable`); only `sync` moves dirty pages across, and
//! `power_loss` persists, loses, tears or garbles each dirty page by seed.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bytes::Bytes;
use rand::rngs::SmallRng;
use rand::{Rng, RngCore, SeedableRng};

use super::sim_file::{to_usize, zero_page, Page, SimFile, PAGE};
pub use super::sim_stats::SimDiskStats;
use crate::disk::{check_path, Disk, DiskSpace, Segment};

/// Page size of the simulated page cache; the unit of writeback.
pub const PAGE_BYTES: u64 = 4096;
/// Sector size of the simulated device; the unit of atomic writes.
pub const SECTOR_BYTES: u64 = 512;
/// Largest segment `SimDisk` will create; a limit checked before allocating.
pub const SEGMENT_BYTES_MAX: u64 = 1 << 32;
/// Capacity reported by `space()` when no capacity is configured.
const CAPACITY_BYTES_DEFAULT: u64 = 1 << 40;

/// Named salts so each fault class draws from its own RNG sub-stream: turning
/// EIO injection on must not change which pages tear on the next crash.
const CRASH_SALT: u64 = 0x6372_6173_6864_6973;
const FAULT_SALT: u64 = 0x6661_756c_7464_6973;

const SECTOR: usize = 512;

/// An async delay injected before a sync applies; the argument is the number
/// of bytes in the synced range. Lets a simulation sleep on its own clock
/// without `sluice-core` depending on an async runtime.
pub type SyncDelay = Arc<dyn Fn(u64) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

/// Relative weights of what happens to each dirty page at a power loss.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CrashWeights {
    /// The whole new page reached the device.
    pub persisted: u32,
    /// The device still holds the old page.
    pub lost: u32,
    /// Each 512 B sector is independently old or new.
    pub torn: u32,
    /// Sectors being rewritten hold random bytes; only used when
    /// `SimDiskConfig::garbage_sectors` is set.
    pub garbage: u32,
}

impl Default for CrashWeights {
    fn default() -> Self {
        Self {
            persisted: 2,
            lost: 1,
            torn: 1,
            garbage: 1,
        }
    }
}

/// Fault configuration of a `SimDisk`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SimDiskConfig {
    /// Outcome weights for dirty pages at a power loss.
    pub crash_weights: CrashWeights,
    /// Whether the device lacks power-safe overwrite, so a sector being
    /// rewritten at power loss may come back as garbage.
    pub garbage_sectors: bool,
    /// Probability in `[0, 1]` that a segment sync fails with EIO.
    pub sync_eio_probability: f64,
    /// Device capacity; creating past it fails with `StorageFull`.
    pub capacity_bytes: Option<u64>,
    /// `run_beside` runs its job at once, inline, instead of handing it
    /// back: the simulation then walks the same code as a disk with a
    /// helper thread, with the helper always finished first.
    pub helper_inline: bool,
}

struct State {
    config: SimDiskConfig,
    files: BTreeMap<String, SimFile>,
    next_file_id: u64,
    generation: u64,
    crash_rng: SmallRng,
    fault_rng: SmallRng,
    fail_next_sync: bool,
    fail_next_create: bool,
    /// While set, every creation fails with `StorageFull`.
    full: bool,
    /// Reads of files under the prefix fail with EIO, this many more times.
    read_faults: Option<(String, u32)>,
    sync_delay: Option<SyncDelay>,
    stats: SimDiskStats,
}

impl State {
    fn used_bytes(&self) -> u64 {
        self.files.values().map(|f| f.size_bytes).sum()
    }

    fn alloc_id(&mut self) -> u64 {
        self.next_file_id += 1;
        self.next_file_id
    }

    /// Fails with `StorageFull` when growing usage by `extra` bytes would
    /// exceed the capacity.
    fn check_room(&mut self, extra: u64, freed: u64) -> io::Result<()> {
        let Some(capacity) = self.config.capacity_bytes else {
            return Ok(());
        };
        let after = self
            .used_bytes()
            .saturating_sub(freed)
            .saturating_add(extra);
        if after > capacity {
            self.stats.enospc += 1;
            return Err(io::Error::new(
                io::ErrorKind::StorageFull,
                "simulated disk full",
            ));
        }
        Ok(())
    }

    /// Fails with `StorageFull` while the device is set full.
    fn check_not_full(&mut self) -> io::Result<()> {
        if self.full {
            self.stats.enospc += 1;
            return Err(io::Error::new(
                io::ErrorKind::StorageFull,
                "simulated disk full",
            ));
        }
        Ok(())
    }

    /// Consumes one armed read failure if `path` is under its prefix.
    fn take_read_fault(&mut self, path: &str) -> bool {
        let Some((prefix, left)) = &mut self.read_faults else {
            return false;
        };
        if !path.starts_with(prefix.as_str()) {
            return false;
        }
        *left -= 1;
        if *left == 0 {
            self.read_faults = None;
        }
        self.stats.read_eio_injected += 1;
        true
    }

    fn file_for(&self, seg: &SimSegment) -> io::Result<&SimFile> {
        if seg.generation != self.generation {
            return Err(stale(&seg.path));
        }
        match self.files.get(&seg.path) {
            Some(file) if file.id == seg.file_id => Ok(file),
            _ => Err(stale(&seg.path)),
        }
    }

    fn file_for_mut(&mut self, seg: &SimSegment) -> io::Result<&mut SimFile> {
        self.file_for(seg)?;
        self.files
            .get_mut(&seg.path)
            .ok_or_else(|| stale(&seg.path))
    }

    fn power_loss(&mut self) {
        let weights = self.config.crash_weights;
        let garbage_weight = if self.config.garbage_sectors {
            weights.garbage
        } else {
            0
        };
        let table = [
            (Outcome::Persisted, weights.persisted),
            (Outcome::Lost, weights.lost),
            (Outcome::Torn, weights.torn),
            (Outcome::Garbage, garbage_weight),
        ];
        for file in self.files.values_mut() {
            for index in std::mem::take(&mut file.dirty) {
                let old = file
                    .durable
                    .get(&index)
                    .map_or_else(zero_page, Clone::clone);
                let new = file.cur.get(&index).map_or_else(zero_page, Clone::clone);
                let outcome = pick(&mut self.crash_rng, &table);
                let page = apply_outcome(outcome, &old, &new, &mut self.crash_rng);
                match outcome {
                    Outcome::Persisted => self.stats.pages_persisted += 1,
                    Outcome::Lost => self.stats.pages_lost += 1,
                    Outcome::Torn => self.stats.pages_torn += 1,
                    Outcome::Garbage => self.stats.pages_garbage += 1,
                }
                file.durable.insert(index, page);
            }
            file.cur = file.durable.clone();
        }
        self.generation += 1;
        self.stats.power_losses += 1;
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    Persisted,
    Lost,
    Torn,
    Garbage,
}

/// Weighted choice; all-zero weights mean every page persists.
fn pick(rng: &mut SmallRng, table: &[(Outcome, u32)]) -> Outcome {
    let total: u64 = table.iter().map(|&(_, w)| u64::from(w)).sum();
    if total == 0 {
        return Outcome::Persisted;
    }
    let mut roll = rng.random_range(0..total);
    for &(outcome, weight) in table {
        if roll < u64::from(weight) {
            return outcome;
        }
        roll -= u64::from(weight);
    }
    Outcome::Persisted
}

fn apply_outcome(outcome: Outcome, old: &Page, new: &Page, rng: &mut SmallRng) -> Page {
    match outcome {
        Outcome::Persisted => new.clone(),
        Outcome::Lost => old.clone(),
        Outcome::Torn => {
            let mut page = old.clone();
            for s in (0..PAGE).step_by(SECTOR) {
                if rng.random_bool(0.5) {
                    page[s..s + SECTOR].copy_from_slice(&new[s..s + SECTOR]);
                }
            }
            page
        }
        Outcome::Garbage => {
            // Only sectors whose contents change are being rewritten; the
            // device leaves untouched sectors alone.
            let mut page = old.clone();
            for s in (0..PAGE).step_by(SECTOR) {
                if old[s..s + SECTOR] != new[s..s + SECTOR] {
                    rng.fill_bytes(&mut page[s..s + SECTOR]);
                }
            }
            page
        }
    }
}

/// A seeded simulated disk. Clones share one state, so a harness can keep a
/// clone outside a crashed host and call `power_loss` on it.
#[derive(Clone)]
pub struct SimDisk {
    state: Arc<Mutex<State>>,
}

impl fmt::Debug for SimDisk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.lock();
        f.debug_struct("SimDisk")
            .field("files", &state.files.len())
            .field("generation", &state.generation)
            .field("stats", &state.stats)
            .finish_non_exhaustive()
    }
}

impl SimDisk {
    /// An empty disk with default fault weights and no capacity limit.
    pub fn new(seed: u64) -> Self {
        Self::with_config(seed, SimDiskConfig::default())
    }

    /// An empty disk with the given fault configuration.
    pub fn with_config(seed: u64, config: SimDiskConfig) -> Self {
        let state = State {
            config,
            files: BTreeMap::new(),
            next_file_id: 0,
            generation: 0,
            crash_rng: SmallRng::seed_from_u64(seed ^ CRASH_SALT),
            fault_rng: SmallRng::seed_from_u64(seed ^ FAULT_SALT),
            fail_next_sync: false,
            fail_next_create: false,
            full: false,
            read_faults: None,
            sync_delay: None,
            stats: SimDiskStats::default(),
        };
        Self {
            state: Arc::new(Mutex::new(state)),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock is already a test failure; the
        // state itself is never left half-updated across a panic point.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Simulates a power loss: each dirty page is persisted, lost, torn or
    /// garbled by the seeded RNG, then the page cache is reset to what is
    /// durable. Segment handles from before fail every later operation.
    pub fn power_loss(&self) {
        self.lock().power_loss();
    }

    /// Simulates a process crash without power loss: the page cache
    /// survives, but segment handles from before fail every later operation.
    pub fn process_crash(&self) {
        self.lock().generation += 1;
    }

    /// Arms one EIO on the next segment sync, with fsyncgate semantics: the
    /// range's dirty pages are marked clean without being persisted.
    pub fn fail_next_sync(&self) {
        self.lock().fail_next_sync = true;
    }

    /// Arms one `StorageFull` failure on the next `create_segment`.
    pub fn fail_next_create(&self) {
        self.lock().fail_next_create = true;
    }

    /// Arms one EIO on the next `slice`.
    pub fn fail_next_read(&self) {
        self.fail_reads_under("", 1);
    }

    /// Arms EIO on the next `count` slices of files whose path starts with
    /// `prefix` (replacing any earlier armed read failures); reads of other
    /// files are untouched.
    pub fn fail_reads_under(&self, prefix: &str, count: u32) {
        self.lock().read_faults = (count > 0).then(|| (prefix.to_owned(), count));
    }

    /// Makes the device full (`true`) or frees it (`false`). While full,
    /// every `create_segment` and `replace_atomically` fails with
    /// `StorageFull` and `space()` reports every byte used; writes into
    /// existing segments (allocated in full at creation) still work.
    pub fn set_full(&self, full: bool) {
        self.lock().full = full;
    }

    /// Deletes every file whose path is `prefix` or lies under `prefix/`,
    /// as lost files would be; returns how many. Meant for a crashed host:
    /// handles to the deleted files go stale.
    pub fn remove_under(&self, prefix: &str) -> usize {
        let mut state = self.lock();
        let under = format!("{}/", prefix.trim_end_matches('/'));
        let before = state.files.len();
        state
            .files
            .retain(|path, _| path.as_str() != prefix && !path.starts_with(&under));
        let lost = before - state.files.len();
        state.stats.files_lost += lost as u64;
        lost
    }

    /// Changes the capacity; `None` removes the limit.
    pub fn set_capacity(&self, capacity_bytes: Option<u64>) {
        self.lock().config.capacity_bytes = capacity_bytes;
    }

    /// Changes the probability that a segment sync fails with EIO.
    pub fn set_sync_eio_probability(&self, probability: f64) {
        self.lock().config.sync_eio_probability = probability;
    }

    /// Installs (or removes) a delay awaited by every sync before it applies.
    pub fn set_sync_delay(&self, delay: Option<SyncDelay>) {
        self.lock().sync_delay = delay;
    }

    /// Operation and fault counters so far.
    pub fn stats(&self) -> SimDiskStats {
        self.lock().stats
    }

    /// The durable contents of a file (what a power loss now would leave,
    /// before dirty pages are decided); `None` when it does not exist. For
    /// oracles and tests.
    pub fn durable_contents(&self, path: &str) -> Option<Vec<u8>> {
        let state = self.lock();
        let file = state.files.get(path)?;
        let mut out = vec![0; to_usize(file.size_bytes)];
        let mut pos = 0;
        for chunk in out.chunks_mut(PAGE) {
            if let Some(page) = file.durable.get(&(pos / PAGE_BYTES)) {
                chunk.copy_from_slice(&page[..chunk.len()]);
            }
            pos += PAGE_BYTES;
        }
        Some(out)
    }

    fn sync_delay(&self) -> Option<SyncDelay> {
        self.lock().sync_delay.clone()
    }

    fn segment(&self, path: &str, file: &SimFile, generation: u64) -> SimSegment {
        SimSegment {
            disk: self.clone(),
            path: path.to_owned(),
            file_id: file.id,
            generation,
            size_bytes: file.size_bytes,
        }
    }
}

impl Disk for SimDisk {
    type Seg = SimSegment;

    fn run_beside(&self, job: crate::disk::BesideJob) -> Result<(), crate::disk::BesideJob> {
        let inline = self.lock().config.helper_inline;
        if !inline {
            return Err(job);
        }
        job();
        Ok(())
    }

    fn create_segment(&self, path: &str, len: u64) -> io::Result<SimSegment> {
        check_path(path)?;
        if len == 0 || len > SEGMENT_BYTES_MAX {
            return Err(invalid(format!("segment size {len} out of range")));
        }
        let mut state = self.lock();
        if state.files.contains_key(path) {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{path} exists"),
            ));
        }
        if std::mem::take(&mut state.fail_next_create) {
            state.stats.enospc += 1;
            return Err(io::Error::new(
                io::ErrorKind::StorageFull,
                "injected create failure",
            ));
        }
        state.check_not_full()?;
        state.check_room(len, 0)?;
        let id = state.alloc_id();
        let file = SimFile::new(id, len);
        let seg = self.segment(path, &file, state.generation);
        state.files.insert(path.to_owned(), file);
        Ok(seg)
    }

    fn open_segment(&self, path: &str) -> io::Result<Option<SimSegment>> {
        check_path(path)?;
        let state = self.lock();
        Ok(state
            .files
            .get(path)
            .map(|file| self.segment(path, file, state.generation)))
    }

    fn list(&self, dir: &str) -> io::Result<Vec<String>> {
        let dir = dir.trim_end_matches('/');
        let prefix = if dir.is_empty() {
            String::new()
        } else {
            check_path(dir)?;
            format!("{dir}/")
        };
        let state = self.lock();
        let names: BTreeSet<String> = state
            .files
            .keys()
            .filter_map(|path| path.strip_prefix(&prefix))
            .filter_map(|rest| rest.split('/').next())
            .filter(|name| !name.is_empty() && !name.starts_with('.'))
            .map(str::to_owned)
            .collect();
        Ok(names.into_iter().collect())
    }

    fn remove(&self, path: &str) -> io::Result<()> {
        check_path(path)?;
        self.lock().files.remove(path);
        Ok(())
    }

    async fn replace_atomically(&self, path: &str, data: &[u8]) -> io::Result<()> {
        check_path(path)?;
        if let Some(delay) = self.sync_delay() {
            delay(data.len() as u64).await;
        }
        let mut state = self.lock();
        state.check_not_full()?;
        let freed = state.files.get(path).map_or(0, |f| f.size_bytes);
        state.check_room(data.len() as u64, freed)?;
        let id = state.alloc_id();
        state
            .files
            .insert(path.to_owned(), SimFile::with_contents(id, data));
        Ok(())
    }

    fn read_small(&self, path: &str) -> io::Result<Option<Vec<u8>>> {
        check_path(path)?;
        Ok(self.lock().files.get(path).map(SimFile::contents))
    }

    fn space(&self) -> io::Result<DiskSpace> {
        let state = self.lock();
        let capacity = state.config.capacity_bytes;
        let total_bytes = capacity.unwrap_or(CAPACITY_BYTES_DEFAULT);
        let used = state.used_bytes();
        Ok(DiskSpace {
            used_bytes: if state.full { total_bytes } else { used }, // see `set_full`
            total_bytes,
        })
    }
}

/// A handle to one `SimDisk` file, valid until the next crash or removal.
#[derive(Clone)]
pub struct SimSegment {
    disk: SimDisk,
    path: String,
    file_id: u64,
    generation: u64,
    size_bytes: u64,
}

impl fmt::Debug for SimSegment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimSegment")
            .field("path", &self.path)
            .field("size_bytes", &self.size_bytes)
            .field("generation", &self.generation)
            .finish_non_exhaustive()
    }
}

impl SimSegment {
    fn check_range(&self, off: u64, len: u64) -> io::Result<()> {
        match off.checked_add(len) {
            Some(end) if end <= self.size_bytes => Ok(()),
            _ => Err(invalid(format!(
                "range {off}+{len} outside {} of {} bytes",
                self.path, self.size_bytes
            ))),
        }
    }
}

impl Segment for SimSegment {
    fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    fn write_at(&self, off: u64, buf: &[u8]) -> io::Result<()> {
        self.check_range(off, buf.len() as u64)?;
        let mut state = self.disk.lock();
        state.file_for_mut(self)?.write(off, buf);
        state.stats.writes += 1;
        Ok(())
    }

    fn slice(&self, off: u64, len: usize) -> io::Result<Bytes> {
        self.check_range(off, len as u64)?;
        let mut state = self.disk.lock();
        state.file_for(self)?;
        if state.take_read_fault(&self.path) {
            return Err(io::Error::from_raw_os_error(libc::EIO));
        }
        let mut out = vec![0; len];
        state.file_for(self)?.read(off, &mut out);
        state.stats.read_bytes += len as u64;
        Ok(Bytes::from(out))
    }

    fn data_run(&self, off: u64) -> io::Result<Option<(u64, u64)>> {
        self.check_range(off, 0)?;
        let state = self.disk.lock();
        Ok(state.file_for(self)?.data_run(off))
    }

    async fn sync(&self, off: u64, len: u64) -> io::Result<()> {
        self.check_range(off, len)?;
        {
            let state = self.disk.lock();
            state.file_for(self)?;
        }
        if let Some(delay) = self.disk.sync_delay() {
            delay(len).await;
        }
        let mut state = self.disk.lock();
        // A crash during the delay makes this handle stale: nothing applies.
        state.file_for(self)?;
        state.stats.syncs += 1;
        let probability = state.config.sync_eio_probability.clamp(0.0, 1.0);
        let injected = std::mem::take(&mut state.fail_next_sync)
            || (probability > 0.0 && state.fault_rng.random_bool(probability));
        let file = state.file_for_mut(self)?;
        let pages = file.dirty_in(off, len);
        for index in pages {
            file.dirty.remove(&index);
            if !injected {
                let page = file.cur.get(&index).map_or_else(zero_page, Clone::clone);
                file.durable.insert(index, page);
            }
        }
        if injected {
            // fsyncgate: the kernel reports the writeback error once and
            // forgets the pages, so a retried sync "succeeds".
            state.stats.eio_injected += 1;
            return Err(io::Error::from_raw_os_error(libc::EIO));
        }
        Ok(())
    }
}

fn stale(path: &str) -> io::Error {
    io::Error::other(format!(
        "stale handle to {path}: the disk crashed or the file was removed"
    ))
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_names_subdirectories_once() {
        let disk = SimDisk::new(1);
        disk.create_segment("cq/topic/0/00", 10).expect("create");
        disk.create_segment("cq/topic/1/00", 10).expect("create");
        disk.create_segment("cq/other/0/00", 10).expect("create");
        assert_eq!(disk.list("cq").expect("list"), ["other", "topic"]);
        assert_eq!(disk.list("cq/topic/").expect("list"), ["0", "1"]);
        assert_eq!(disk.list("").expect("list"), ["cq"]);
    }

    #[test]
    fn paths_escaping_the_root_are_rejected() {
        let disk = SimDisk::new(1);
        for path in ["", "/abs", "a/../b", "a//b", "./a"] {
            let err = disk.create_segment(path, 10).expect_err(path);
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{path}");
        }
    }

    #[test]
    fn writes_spanning_pages_read_back_across_the_boundary() {
        let disk = SimDisk::new(1);
        let seg = disk.create_segment("s", 3 * PAGE_BYTES).expect("create");
        let data: Vec<u8> = (0..=255).cycle().take(PAGE + 100).collect();
        seg.write_at(PAGE_BYTES - 50, &data).expect("write");
        let back = seg.slice(PAGE_BYTES - 50, data.len()).expect("slice");
        assert_eq!(&back[..], &data[..]);
        let file_dirty = disk.lock().files["s"].dirty.clone();
        assert_eq!(file_dirty, BTreeSet::from([0, 1, 2]));
    }

    #[test]
    fn a_full_disk_refuses_creations_until_freed() {
        let disk = SimDisk::new(1);
        let seg = disk.create_segment("a", 10).expect("create");
        disk.set_full(true);
        for _ in 0..2 {
            let err = disk.create_segment("b", 10).expect_err("full");
            assert_eq!(err.kind(), io::ErrorKind::StorageFull);
        }
        seg.write_at(0, b"still")
            .expect("existing segments stay writable");
        assert_eq!(disk.stats().enospc, 2);
        disk.set_full(false);
        disk.create_segment("b", 10).expect("freed");
    }

    #[test]
    fn read_faults_hit_only_their_prefix_and_run_out() {
        let disk = SimDisk::new(1);
        let log = disk.create_segment("log/0", 10).expect("create");
        let cq = disk.create_segment("cq/0", 10).expect("create");
        disk.fail_reads_under("log", 2);
        cq.slice(0, 4).expect("other files read");
        assert!(log.slice(0, 4).is_err());
        assert!(log.slice(0, 4).is_err());
        log.slice(0, 4).expect("the armed failures ran out");
        assert_eq!(disk.stats().read_eio_injected, 2);
    }

    #[test]
    fn remove_under_deletes_a_subtree_and_counts_it() {
        let disk = SimDisk::new(1);
        for path in ["s/cq/t/0/00", "s/cq/t/1/00", "s/cqx", "s/log/00"] {
            disk.create_segment(path, 10).expect("create");
        }
        assert_eq!(disk.remove_under("s/cq"), 2);
        assert_eq!(disk.list("s").expect("list"), ["cqx", "log"]);
        assert_eq!(disk.stats().files_lost, 2);
    }

    #[test]
    fn zero_weights_persist_everything() {
        let table = [(Outcome::Lost, 0), (Outcome::Torn, 0)];
        let mut rng = SmallRng::seed_from_u64(3);
        assert_eq!(pick(&mut rng, &table), Outcome::Persisted);
    }
}
