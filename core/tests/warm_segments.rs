//! Warming (`Segment::warm`, `disk::warm`): a CommitLog segment's blocks
//! become written extents off the hot path, so a group-commit sync never
//! waits for an extent conversion (issue 20's single-writer `SYNC_FLUSH` gap).
//! Read with `filefrag -v` (e2fsprogs): on a filesystem that does not report
//! unwritten extents, or without `filefrag`, the tests say so and skip.

mod support;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use sluice_core::disk::{Disk, MmapDisk, Segment};
use sluice_core::{FlushMode, MessageStore, StoreConfig, SystemClock};
use support::{block_on, msg};

const SEG_BYTES: u64 = 32 << 20;

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

/// Polls until `path` has no unwritten extent at or after `from_block`.
#[expect(
    clippy::disallowed_methods,
    reason = "waits for the production disk's allocator thread in real time"
)]
fn wait_written_from(path: &Path, from_block: u64) -> Vec<(u64, u64)> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let ext = unwritten(path).expect("filefrag ran before");
        let above: Vec<_> = ext
            .iter()
            .copied()
            .filter(|&(start, len)| start + len > from_block)
            .collect();
        if above.is_empty() || Instant::now() > deadline {
            return above;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn warming_a_cold_segment_converts_its_extents_and_keeps_its_bytes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let disk = MmapDisk::new(dir.path()).expect("disk");
    let seg = disk.create_segment("cold", SEG_BYTES).expect("create");
    let path = dir.path().join("cold");
    if !observable(&path) {
        return;
    }
    seg.write_at(100, b"written before warming").expect("write");
    // Warm from 16 MiB: the first half stays as it was.
    seg.warm(16 << 20);
    // Appends keep going while the warming runs.
    seg.write_at((16 << 20) + 5, b"written while warming")
        .expect("write");
    assert_eq!(
        wait_written_from(&path, 4096),
        vec![],
        "second half converted"
    );
    let below = unwritten(&path).expect("filefrag");
    assert!(
        below.iter().any(|&(start, _)| start < 4096),
        "warming started below its offset: {below:?}"
    );
    assert_eq!(
        &seg.slice(100, 22).expect("read")[..],
        b"written before warming"
    );
    assert_eq!(
        &seg.slice((16 << 20) + 5, 21).expect("read")[..],
        b"written while warming"
    );
}

#[test]
fn prepared_segments_are_warm_when_created() {
    let dir = tempfile::tempdir().expect("tempdir");
    let disk = MmapDisk::new(dir.path()).expect("disk");
    drop(disk.create_segment("probe", 1 << 20).expect("create"));
    if !observable(&dir.path().join("probe")) {
        return;
    }
    disk.prepare_segment("ready", SEG_BYTES);
    let _seg = disk.create_segment("ready", SEG_BYTES).expect("create");
    assert_eq!(unwritten(&dir.path().join("ready")), Some(vec![]));
}

#[test]
fn the_commit_log_warms_its_first_segment_while_it_serves() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = StoreConfig {
        flush_mode: FlushMode::Sync,
        commit_log_segment_bytes: SEG_BYTES,
        ..StoreConfig::for_tests()
    };
    let disk = MmapDisk::new(dir.path()).expect("disk");
    drop(disk.create_segment("probe", 1 << 20).expect("create"));
    if !observable(&dir.path().join("probe")) {
        return;
    }
    let store = block_on(MessageStore::open(disk, SystemClock::new(), cfg)).expect("open");
    block_on(store.put(msg("T", 0, b"first", None, None), true)).expect("put");
    let log = dir.path().join("commitlog").join("00000000000000000000");
    assert_eq!(
        wait_written_from(&log, 0),
        vec![],
        "commit log segment warmed"
    );
}
