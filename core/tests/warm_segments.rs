//! Warming (`Segment::warm`, `disk::warm`): a CommitLog segment's blocks
//! become written extents off the hot path, so a group-commit sync never
//! waits for an extent conversion (issue 20's single-writer `SYNC_FLUSH` gap).
//! A store flushed in the background (`ASYNC_FLUSH`) warms nothing ahead:
//! nothing cached, converted or written before the writer gets there.
//! Read with `filefrag -v` (e2fsprogs): on a filesystem that does not report
//! unwritten extents, or without `filefrag`, the tests say so and skip.
#![allow(unsafe_code)]

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use sluice_core::disk::{Disk, MmapDisk, Prepare, Segment};
use sluice_core::{FlushMode, MessageStore, StoreConfig, SystemClock};
use support::{block_on, msg};

const SEG_BYTES: u64 = 32 << 20;
/// The CommitLog's warming window (`WARM_AHEAD_BYTES`).
const WINDOW: u64 = 64 << 20;

/// `(first block, blocks)` of each unwritten extent of `path`, in file
/// blocks; `None` when `filefrag` is unavailable.
fn unwritten(path: &Path) -> Option<Vec<(u64, u64)>> {
    let out = Command::new("filefrag").arg("-v").arg(path).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let mut extents = Vec::new();
    for line in text.lines().filter(|l| l.contains("unwritten")) {
        // "   0:        0..     255:   30278400..  30278655:    256:   last,unwritten,eof"
        let cols: Vec<&str> = line.split(':').map(str::trim).collect();
        let logical = cols.get(1)?.split("..").next()?.trim().parse().ok()?;
        let len = cols.get(3)?.parse().ok()?;
        extents.push((logical, len));
    }
    Some(extents)
}

/// Whether the tests can see extents here; prints why not otherwise.
fn observable(cold: &Path) -> bool {
    match unwritten(cold) {
        None => {
            eprintln!("skipped: filefrag (e2fsprogs) is not available");
            false
        }
        Some(ext) if ext.is_empty() => {
            eprintln!("skipped: this filesystem reports no unwritten extents after fallocate");
            false
        }
        Some(_) => true,
    }
}

/// The unwritten extents of `path` that overlap blocks `[lo, hi)`.
fn unwritten_within(path: &Path, lo: u64, hi: u64) -> Vec<(u64, u64)> {
    unwritten(path)
        .expect("filefrag ran before")
        .into_iter()
        .filter(|&(start, len)| start < hi && start + len > lo)
        .collect()
}

/// How many of blocks `[lo, hi)` of `path` are unwritten.
fn unwritten_blocks(path: &Path, lo: u64, hi: u64) -> u64 {
    unwritten_within(path, lo, hi)
        .iter()
        .map(|&(start, len)| (start + len).min(hi) - start.max(lo))
        .sum()
}

/// Pages of `path`'s first `len` bytes in the page cache (`mincore` over a
/// mapping of its own, which faults nothing in).
fn cached_pages(path: &Path, len: usize) -> usize {
    let file = std::fs::File::open(path).expect("open");
    // SAFETY: a read-only mapping only handed to `mincore`; nothing reads
    // through it, so a concurrent writer cannot change what it returns.
    let map = unsafe { memmap2::MmapOptions::new().len(len).map(&file) }.expect("map");
    let mut vec = vec![0u8; len / 4096];
    // SAFETY: the mapping is live, page-aligned and `len` long; `vec` has
    // one byte per page.
    let rc = unsafe { libc::mincore(map.as_ptr() as *mut libc::c_void, len, vec.as_mut_ptr()) };
    assert_eq!(rc, 0, "mincore");
    vec.iter().filter(|b| **b & 1 != 0).count()
}

/// Asserts that under 1/64 of the pages of `path`'s first `bytes` are in
/// the page cache: nothing was read or faulted in ahead.
fn assert_barely_cached(path: &Path, bytes: u64, what: &str) {
    let len = usize::try_from(bytes).expect("fits");
    let cached = cached_pages(path, len);
    assert!(
        cached * 64 < len / 4096,
        "{what}: {cached} of {} pages cached",
        len / 4096
    );
}

/// File blocks of 4 KiB in `bytes`.
const fn blocks(bytes: u64) -> u64 {
    bytes / 4096
}

#[test]
fn warming_converts_just_the_range_asked_for_and_keeps_the_bytes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let disk = MmapDisk::new(dir.path()).expect("disk");
    let seg = disk.create_segment("cold", SEG_BYTES).expect("create");
    let path = dir.path().join("cold");
    if !observable(&path) {
        return;
    }
    seg.write_at(100, b"written before warming").expect("write");
    let (lo, hi) = (16 << 20, 24 << 20);
    seg.warm(lo, hi - lo);
    // Appends keep going while the warming runs.
    seg.write_at(lo + 5, b"written while warming")
        .expect("write");
    // The warming is one job on the allocator thread, synced before it ends.
    disk.wait_for_allocator();
    assert_eq!(
        unwritten_within(&path, blocks(lo), blocks(hi)),
        vec![],
        "the range asked for is converted"
    );
    assert!(
        !unwritten_within(&path, 0, blocks(lo)).is_empty(),
        "below the range: untouched"
    );
    assert!(
        !unwritten_within(&path, blocks(hi), blocks(SEG_BYTES)).is_empty(),
        "above the range: untouched"
    );
    assert_eq!(
        &seg.slice(100, 22).expect("read")[..],
        b"written before warming"
    );
    assert_eq!(
        &seg.slice(lo + 5, 21).expect("read")[..],
        b"written while warming"
    );
}

/// A store on segments of four windows, in `flush` mode, holding one
/// record: its directory, the store and its first CommitLog segment's
/// path; `None` (said why) where extents cannot be seen.
fn store_with_one_record(
    flush: FlushMode,
) -> Option<(
    tempfile::TempDir,
    MessageStore<MmapDisk, SystemClock>,
    PathBuf,
)> {
    let dir = tempfile::tempdir().expect("tempdir");
    let disk = MmapDisk::new(dir.path()).expect("disk");
    drop(disk.create_segment("probe", 1 << 20).expect("create"));
    if !observable(&dir.path().join("probe")) {
        return None;
    }
    let (store, log) = open_with_one_record(&disk, dir.path(), "", flush);
    Some((dir, store, log))
}

#[test]
fn the_commit_log_warms_a_window_ahead_of_its_writes() {
    let Some((_dir, _store, log)) = store_with_one_record(FlushMode::Sync) else {
        return;
    };
    assert_eq!(
        unwritten_within(&log, 0, blocks(WINDOW)),
        vec![],
        "the window ahead of the first write is converted"
    );
    assert!(
        !unwritten_within(&log, blocks(2 * WINDOW), blocks(4 * WINDOW)).is_empty(),
        "the rest of the segment waits until the writes come near"
    );
}

/// A store on segments of four windows under `root` of `disk`, in `flush`
/// mode, after one put and once the allocator thread has run whatever the
/// store asked of it: the store and its first CommitLog segment's path.
fn open_with_one_record(
    disk: &MmapDisk,
    dir: &Path,
    root: &str,
    flush: FlushMode,
) -> (MessageStore<MmapDisk, SystemClock>, PathBuf) {
    let cfg = StoreConfig {
        root: root.to_owned(),
        flush_mode: flush,
        commit_log_segment_bytes: 4 * WINDOW,
        ..StoreConfig::for_tests()
    };
    let store = block_on(MessageStore::open(disk.clone(), SystemClock::new(), cfg)).expect("open");
    let wait = flush == FlushMode::Sync;
    block_on(store.put(msg("T", 0, b"first", None, None), wait)).expect("put");
    disk.wait_for_allocator();
    let log = dir
        .join(root)
        .join("commitlog")
        .join("00000000000000000000");
    (store, log)
}

#[test]
fn an_async_store_warms_nothing_ahead_of_its_writes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let disk = MmapDisk::new(dir.path()).expect("disk");
    drop(disk.create_segment("probe", 1 << 20).expect("create"));
    if !observable(&dir.path().join("probe")) {
        return;
    }
    let (_async_store, async_log) =
        open_with_one_record(&disk, dir.path(), "async", FlushMode::Async);
    // The positive control: a SYNC_FLUSH store on the same disk, opened the
    // same way, has its window converted by then.
    let (_sync_store, sync_log) = open_with_one_record(&disk, dir.path(), "sync", FlushMode::Sync);
    assert_eq!(
        unwritten_within(&sync_log, 0, blocks(WINDOW)),
        vec![],
        "the SYNC_FLUSH store's window is converted"
    );
    assert_barely_cached(&async_log, WINDOW, "the async window is not read ahead");
    // Past the first MiB (the record and what a background flush may have
    // converted around it) the window is still one unwritten stretch.
    let (lo, hi) = (blocks(1 << 20), blocks(WINDOW));
    assert_eq!(
        unwritten_blocks(&async_log, lo, hi),
        hi - lo,
        "nothing ahead of the writer converted"
    );
}

/// A segment of four windows prepared (as `prepare` says) and then
/// created, which waits for the preparation: its directory, the segment
/// and its path; `None` (said why) where extents cannot be seen.
fn prepared_segment(
    prepare: Prepare,
) -> Option<(tempfile::TempDir, <MmapDisk as Disk>::Seg, PathBuf)> {
    let dir = tempfile::tempdir().expect("tempdir");
    let disk = MmapDisk::new(dir.path()).expect("disk");
    drop(disk.create_segment("probe", 1 << 20).expect("create"));
    if !observable(&dir.path().join("probe")) {
        return None;
    }
    disk.prepare_segment("next", 4 * WINDOW, prepare);
    // Let the preparation finish before claiming it (claiming stops a zero
    // fill still running).
    disk.wait_for_allocator();
    let seg = disk.create_segment("next", 4 * WINDOW).expect("create");
    let path = dir.path().join("next");
    Some((dir, seg, path))
}

/// Writes and reads back the segment's last bytes: a prepared segment is
/// allocated to its full size, warmed or not.
fn tail_round_trips(seg: &<MmapDisk as Disk>::Seg) {
    let end = 4 * WINDOW;
    seg.write_at(end - 8, b"tail").expect("write");
    assert_eq!(&seg.slice(end - 8, 4).expect("read")[..], b"tail");
}

#[test]
fn a_prepared_segment_has_just_its_head_warmed() {
    let Some((_dir, seg, path)) = prepared_segment(Prepare::WarmHead) else {
        return;
    };
    assert_eq!(
        unwritten_within(&path, 0, blocks(WINDOW)),
        vec![],
        "the head the writer starts in is converted before the roll"
    );
    assert!(
        !unwritten_within(&path, blocks(WINDOW), blocks(4 * WINDOW)).is_empty(),
        "the rest waits for the CommitLog's window (warming a whole \
         segment at every start cost seconds of CPU and its size in RSS)"
    );
    tail_round_trips(&seg);
}

#[test]
fn a_segment_prepared_cold_is_allocated_but_not_warmed() {
    let Some((_dir, seg, path)) = prepared_segment(Prepare::Cold) else {
        return;
    };
    assert_eq!(
        unwritten_blocks(&path, 0, blocks(4 * WINDOW)),
        blocks(4 * WINDOW),
        "an ASYNC_FLUSH log's next segment: every block still unwritten"
    );
    assert_barely_cached(&path, WINDOW, "and its head not read into the page cache");
    tail_round_trips(&seg);
}

#[test]
fn a_segment_prepared_zero_filled_is_written_whole_and_left_uncached() {
    let Some((_dir, seg, path)) = prepared_segment(Prepare::ZeroFilled) else {
        return;
    };
    assert_eq!(
        unwritten_within(&path, 0, blocks(4 * WINDOW)),
        vec![],
        "a SYNC_FLUSH log's next segment: every block written before the \
         roll, so no group commit in it waits for an extent conversion"
    );
    assert_barely_cached(
        &path,
        4 * WINDOW,
        "written by direct I/O: not faulted into the page cache page by page",
    );
    // A short write in the middle of an uncached page, then one after it:
    // the first pads its page with zeros, the second keeps its bytes.
    seg.write_at(WINDOW + 100, &[7; 600]).expect("write");
    seg.write_with(WINDOW + 700, 50, &mut |buf| buf.fill(8))
        .expect("write_with");
    let page = seg.slice(WINDOW, 4096).expect("read");
    assert!(page[..100].iter().all(|&b| b == 0));
    assert!(page[100..700].iter().all(|&b| b == 7));
    assert!(page[700..750].iter().all(|&b| b == 8));
    assert!(page[750..].iter().all(|&b| b == 0));
    tail_round_trips(&seg);
}

#[test]
fn a_sync_store_rolls_into_a_zero_filled_segment_and_warms_nothing_there() {
    let dir = tempfile::tempdir().expect("tempdir");
    let disk = MmapDisk::new(dir.path()).expect("disk");
    drop(disk.create_segment("probe", 1 << 20).expect("create"));
    if !observable(&dir.path().join("probe")) {
        return;
    }
    let cfg = StoreConfig {
        flush_mode: FlushMode::Sync,
        commit_log_segment_bytes: SEG_BYTES,
        ..StoreConfig::for_tests()
    };
    let store = block_on(MessageStore::open(disk, SystemClock::new(), cfg)).expect("open");
    // Past the first segment (created cold, warmed by the window) 1 MiB
    // into the second, which the allocator zero-filled as the first filled.
    let body = vec![b'z'; 64 << 10];
    for _ in 0..(SEG_BYTES + (1 << 20)) / (64 << 10) {
        block_on(store.put(msg("T", 0, &body, None, None), true)).expect("put");
    }
    let second = dir
        .path()
        .join("commitlog")
        .join(format!("{SEG_BYTES:020}"));
    assert_eq!(
        unwritten_within(&second, 0, blocks(SEG_BYTES)),
        vec![],
        "the second segment was zero-filled before the roll"
    );
    let cached = cached_pages(&second, usize::try_from(SEG_BYTES).expect("fits"));
    assert!(
        cached * 4096 < 4 << 20,
        "only what was appended there (≈ 1 MiB) is cached, no window \
         warmed ahead of it: {cached} pages"
    );
}
