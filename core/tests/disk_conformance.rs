//! One conformance suite for the disk seam, run against `MmapDisk` on a
//! temporary directory and against `SimDisk`, so the simulation stays honest;
//! then `SimDisk`'s fault model: power loss, torn pages, fsyncgate, ENOSPC.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use pollster::block_on;
use sluice_core::disk::{Disk, MmapDisk, Prepare, Segment};
use sluice_core::testing::{CrashWeights, SimDisk, SimDiskConfig, PAGE_BYTES, SECTOR_BYTES};

const SEG_BYTES: u64 = 4 * PAGE_BYTES;
/// [`SEG_BYTES`] as a length in memory (`PAGE_BYTES` is 4096).
const SEG_LEN: usize = 4 * 4096;
const _: () = assert!(SEG_LEN as u64 == SEG_BYTES);

fn mmap_disk() -> (tempfile::TempDir, MmapDisk) {
    let dir = tempfile::tempdir().expect("tempdir");
    let disk = MmapDisk::new(dir.path().join("root")).expect("mmap disk");
    (dir, disk)
}

fn write_slice_round_trip<D: Disk>(disk: &D) {
    let seg = disk.create_segment("log/00000", SEG_BYTES).expect("create");
    assert_eq!(seg.size_bytes(), SEG_BYTES);
    assert_eq!(&seg.slice(0, 8).expect("slice")[..], &[0; 8], "zero-filled");
    let data: Vec<u8> = (0..=255u8).cycle().take(5000).collect();
    seg.write_at(PAGE_BYTES - 10, &data).expect("write");
    let back = seg.slice(PAGE_BYTES - 10, data.len()).expect("slice");
    assert_eq!(&back[..], &data[..]);
    let tail = seg.slice(SEG_BYTES - 1, 1).expect("last byte");
    assert_eq!(tail.len(), 1);
    assert!(seg.slice(SEG_BYTES, 0).expect("empty at end").is_empty());
    let mut copied = [0; 8];
    seg.read_at(PAGE_BYTES - 6, &mut copied).expect("read_at");
    assert_eq!(copied[..], data[4..12], "read_at copies what slice views");
    // A view outlives the segment handle it was made from.
    drop(seg);
    assert_eq!(&back[..], &data[..]);
}

fn fill_in_place_round_trip<D: Disk>(disk: &D) {
    let seg = disk.create_segment("fill", SEG_BYTES).expect("create");
    // Across a page boundary, like a record that straddles two pages.
    let at = PAGE_BYTES - 7;
    let mut calls = 0;
    seg.write_with(at, 20, &mut |buf: &mut [u8]| {
        calls += 1;
        assert_eq!(buf.len(), 20, "fill gets exactly the range");
        for (i, b) in buf.iter_mut().enumerate() {
            *b = u8::try_from(i).expect("small") + 1;
        }
    })
    .expect("fill");
    assert_eq!(calls, 1);
    let back = seg.slice(at, 20).expect("slice");
    assert_eq!(&back[..], &(1..=20).collect::<Vec<u8>>()[..]);
    assert_eq!(
        &seg.slice(at - 1, 1).expect("before")[..],
        &[0],
        "nothing before"
    );
    assert_eq!(
        &seg.slice(at + 20, 1).expect("after")[..],
        &[0],
        "nothing after"
    );
    let mut ran = false;
    let err = seg
        .write_with(SEG_BYTES - 1, 2, &mut |_: &mut [u8]| ran = true)
        .expect_err("out of range");
    assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    assert!(!ran, "an out-of-range fill never runs");
}

fn out_of_range_is_an_error<D: Disk>(disk: &D) {
    let seg = disk.create_segment("range", SEG_BYTES).expect("create");
    let kind = |r: io::Result<()>| r.expect_err("out of range").kind();
    assert_eq!(
        kind(seg.write_at(SEG_BYTES - 1, &[1, 2])),
        io::ErrorKind::InvalidInput
    );
    assert_eq!(
        kind(seg.write_at(u64::MAX, &[1])),
        io::ErrorKind::InvalidInput
    );
    assert_eq!(
        kind(seg.slice(SEG_BYTES, 1).map(drop)),
        io::ErrorKind::InvalidInput
    );
    assert_eq!(
        kind(seg.slice(u64::MAX, 2).map(drop)),
        io::ErrorKind::InvalidInput
    );
    assert_eq!(
        kind(seg.read_at(SEG_BYTES - 1, &mut [0; 2])),
        io::ErrorKind::InvalidInput
    );
    assert_eq!(
        kind(block_on(seg.sync(0, SEG_BYTES + 1))),
        io::ErrorKind::InvalidInput
    );
    assert_eq!(
        kind(disk.create_segment("zero", 0).map(drop)),
        io::ErrorKind::InvalidInput
    );
    assert_eq!(
        kind(disk.create_segment("../escape", 8).map(drop)),
        io::ErrorKind::InvalidInput
    );
}

fn create_existing_fails<D: Disk>(disk: &D) {
    disk.create_segment("dup", SEG_BYTES).expect("create");
    let err = disk.create_segment("dup", SEG_BYTES).map(drop);
    assert_eq!(
        err.expect_err("second create").kind(),
        io::ErrorKind::AlreadyExists
    );
}

fn list_is_sorted_and_skips_temp_files<D: Disk>(disk: &D) {
    assert!(disk.list("none").expect("missing dir").is_empty());
    for name in ["00200", "00000", "00100"] {
        disk.create_segment(&format!("sorted/{name}"), PAGE_BYTES)
            .expect("create");
    }
    disk.create_segment("sorted/sub/x", PAGE_BYTES)
        .expect("create");
    disk.prepare_segment("sorted/00300", PAGE_BYTES, Prepare::WarmHead);
    block_on(disk.replace_atomically("sorted/meta", b"m")).expect("replace");
    assert_eq!(
        disk.list("sorted").expect("list"),
        ["00000", "00100", "00200", "meta", "sub"]
    );
}

fn remove_is_idempotent<D: Disk>(disk: &D) {
    disk.create_segment("rm/a", PAGE_BYTES).expect("create");
    disk.remove("rm/a").expect("remove");
    disk.remove("rm/a").expect("remove again");
    disk.remove("rm/never").expect("remove missing");
    assert!(disk.list("rm").expect("list").is_empty());
    assert!(disk.open_segment("rm/a").expect("open").is_none());
}

fn replace_then_read_small<D: Disk>(disk: &D) {
    assert_eq!(disk.read_small("meta/checkpoint").expect("read"), None);
    block_on(disk.replace_atomically("meta/checkpoint", b"first")).expect("replace");
    block_on(disk.replace_atomically("meta/checkpoint", b"second!")).expect("replace");
    let back = disk.read_small("meta/checkpoint").expect("read");
    assert_eq!(back.as_deref(), Some(&b"second!"[..]));
    assert_eq!(disk.list("meta").expect("list"), ["checkpoint"]);
}

fn reopen_sees_written_data<D: Disk>(disk: &D) {
    assert!(disk.open_segment("reopen/s").expect("open").is_none());
    let seg = disk.create_segment("reopen/s", SEG_BYTES).expect("create");
    seg.write_at(100, b"hello").expect("write");
    block_on(seg.sync(0, SEG_BYTES)).expect("sync");
    drop(seg);
    let seg = disk
        .open_segment("reopen/s")
        .expect("open")
        .expect("exists");
    assert_eq!(seg.size_bytes(), SEG_BYTES);
    assert_eq!(&seg.slice(100, 5).expect("slice")[..], b"hello");
}

fn prepared_segment_is_created<D: Disk>(disk: &D) {
    for (dir, prepare) in [
        ("prep-cold", Prepare::Cold),
        ("prep-warm", Prepare::WarmHead),
        ("prep-zero", Prepare::ZeroFilled),
    ] {
        let path = format!("{dir}/00001");
        disk.prepare_segment(&path, SEG_BYTES, prepare);
        // Let the preparation finish before claiming it (claiming stops a
        // zero fill still running; the stopped case is a unit test of
        // `MmapDisk`): jobs run in order, so a fence prepared after it is
        // ready once it is.
        let fence = format!("{dir}-fence/f");
        disk.prepare_segment(&fence, PAGE_BYTES, Prepare::Cold);
        drop(disk.create_segment(&fence, PAGE_BYTES).expect("fence"));
        let seg = disk.create_segment(&path, SEG_BYTES).expect("create");
        assert_eq!(seg.size_bytes(), SEG_BYTES, "{prepare:?}");
        assert!(
            seg.slice(0, SEG_LEN)
                .expect("slice")
                .iter()
                .all(|&b| b == 0),
            "{prepare:?}: a prepared segment reads as zeros"
        );
        writes_in_order_keep_every_byte(&seg, prepare);
        assert_eq!(disk.list(dir).expect("list"), ["00001"], "{prepare:?}");
        // A prepared size that does not match is not reused.
        let other = format!("{dir}/00002");
        disk.prepare_segment(&other, PAGE_BYTES, prepare);
        let seg = disk.create_segment(&other, SEG_BYTES).expect("create");
        assert_eq!(seg.size_bytes(), SEG_BYTES, "{prepare:?}");
    }
}

/// Appends as the CommitLog does (increasing offsets, short and long
/// writes, across page boundaries, up to the segment's last byte) and
/// checks every byte: what was written reads back, the rest stays zero.
/// A zero-filled segment pads its writes to whole pages; the padding must
/// never land on bytes written before, nor leave anything but zeros.
fn writes_in_order_keep_every_byte(seg: &impl Segment, prepare: Prepare) {
    let mut expect = vec![0u8; SEG_LEN];
    let mut off = 0usize;
    let mut n = 0u8;
    for len in [5, 700, 3000, 600, 1, 5000, 513, 4096] {
        n += 1;
        let bytes = vec![n; len];
        if n % 2 == 0 {
            seg.write_at(off as u64, &bytes).expect("write_at");
        } else {
            seg.write_with(off as u64, len, &mut |buf| buf.copy_from_slice(&bytes))
                .expect("write_with");
        }
        expect[off..off + len].copy_from_slice(&bytes);
        off += len;
    }
    let last = SEG_LEN - 700;
    seg.write_at(last as u64, &[9; 700]).expect("write the end");
    expect[last..].fill(9);
    let got = seg.slice(0, SEG_LEN).expect("slice");
    let first_wrong = got.iter().zip(&expect).position(|(a, b)| a != b);
    assert_eq!(
        first_wrong, None,
        "{prepare:?}: byte differs from what was written"
    );
}

fn space_counts_segments<D: Disk>(disk: &D) {
    let before = disk.space().expect("space");
    assert!(before.total_bytes > 0);
    assert!(before.used_bytes <= before.total_bytes);
}

fn bad_paths_are_refused<D: Disk>(disk: &D) {
    for bad in ["", "/abs", "a//b", "./a", "a/../b", "nul\0byte"] {
        let err = disk.create_segment(bad, SEG_BYTES).map(drop);
        assert_eq!(
            err.expect_err(bad).kind(),
            io::ErrorKind::InvalidInput,
            "{bad:?}"
        );
    }
}

/// Whatever runs a disk reports, every written byte lies inside one and
/// everything outside them reads as zeros.
fn data_runs_cover_every_written_byte<D: Disk>(disk: &D) {
    let seg = disk.create_segment("runs", SEG_BYTES).expect("create");
    let written = [PAGE_BYTES + 100, 3 * PAGE_BYTES + 5];
    for at in written {
        seg.write_at(at, b"xyz").expect("write");
    }
    let mut runs = Vec::new();
    let mut at = 0;
    while let Some((a, b)) = seg.data_run(at).expect("data_run") {
        assert!(at <= a && a < b && b <= SEG_BYTES, "run {a}..{b} from {at}");
        runs.push((a, b));
        at = b;
    }
    let inside = |o: u64| runs.iter().any(|&(a, b)| a <= o && o < b);
    for o in written.iter().flat_map(|&w| w..w + 3) {
        assert!(inside(o), "written byte {o} outside the runs {runs:?}");
    }
    let all = seg.slice(0, SEG_LEN).expect("slice");
    for (o, byte) in (0u64..).zip(all.iter()) {
        assert!(
            inside(o) || *byte == 0,
            "byte {o} outside the runs is not zero"
        );
    }
    assert_eq!(seg.data_run(SEG_BYTES).expect("at the end"), None);
}

fn conformance<D: Disk>(disk: &D) {
    bad_paths_are_refused(disk);
    write_slice_round_trip(disk);
    fill_in_place_round_trip(disk);
    out_of_range_is_an_error(disk);
    create_existing_fails(disk);
    list_is_sorted_and_skips_temp_files(disk);
    remove_is_idempotent(disk);
    replace_then_read_small(disk);
    reopen_sees_written_data(disk);
    prepared_segment_is_created(disk);
    space_counts_segments(disk);
    data_runs_cover_every_written_byte(disk);
}

#[test]
fn mmap_disk_conforms() {
    let (_dir, disk) = mmap_disk();
    conformance(&disk);
}

#[test]
fn sim_disk_conforms() {
    conformance(&SimDisk::new(7));
}

// ---- SimDisk fault model ----

#[test]
fn sim_pages_never_written_are_holes() {
    let disk = SimDisk::new(3);
    let seg = disk.create_segment("holes", SEG_BYTES).expect("create");
    assert_eq!(
        seg.data_run(0).expect("run"),
        None,
        "a fresh segment is one hole"
    );
    seg.write_at(PAGE_BYTES + 7, b"a").expect("write");
    seg.write_at(2 * PAGE_BYTES, b"b").expect("write");
    assert_eq!(
        seg.data_run(0).expect("run"),
        Some((PAGE_BYTES, 3 * PAGE_BYTES))
    );
    assert_eq!(
        seg.data_run(PAGE_BYTES + 9).expect("run"),
        Some((PAGE_BYTES + 9, 3 * PAGE_BYTES))
    );
    assert_eq!(seg.data_run(3 * PAGE_BYTES).expect("run"), None);
}

fn only(weights: CrashWeights) -> SimDiskConfig {
    SimDiskConfig {
        crash_weights: weights,
        garbage_sectors: weights.garbage > 0,
        ..SimDiskConfig::default()
    }
}

const NONE: CrashWeights = CrashWeights {
    persisted: 0,
    lost: 0,
    torn: 0,
    garbage: 0,
};

#[test]
fn unsynced_writes_lost_on_power_loss() {
    let disk = SimDisk::with_config(1, only(CrashWeights { lost: 1, ..NONE }));
    let seg = disk.create_segment("s", SEG_BYTES).expect("create");
    seg.write_at(0, &[7; 100]).expect("write");
    assert_eq!(&seg.slice(0, 100).expect("slice")[..], &[7; 100]);
    disk.power_loss();
    let seg = disk.open_segment("s").expect("open").expect("exists");
    assert_eq!(&seg.slice(0, 100).expect("slice")[..], &[0; 100]);
    assert_eq!(disk.stats().pages_lost, 1);
}

#[test]
fn synced_writes_survive_power_loss() {
    let disk = SimDisk::with_config(1, only(CrashWeights { lost: 1, ..NONE }));
    let seg = disk.create_segment("s", SEG_BYTES).expect("create");
    seg.write_at(0, &[7; 100]).expect("write");
    block_on(seg.sync(0, 100)).expect("sync");
    // A later unsynced write to another page is lost; the synced one is not.
    seg.write_at(2 * PAGE_BYTES, &[9; 10]).expect("write");
    disk.power_loss();
    let seg = disk.open_segment("s").expect("open").expect("exists");
    assert_eq!(&seg.slice(0, 100).expect("slice")[..], &[7; 100]);
    assert_eq!(&seg.slice(2 * PAGE_BYTES, 10).expect("slice")[..], &[0; 10]);
    assert_eq!(disk.stats().syncs, 1);
}

#[test]
fn sync_covers_only_pages_in_range() {
    let disk = SimDisk::with_config(1, only(CrashWeights { lost: 1, ..NONE }));
    let seg = disk.create_segment("s", SEG_BYTES).expect("create");
    seg.write_at(0, &[1; 10]).expect("write");
    seg.write_at(3 * PAGE_BYTES, &[3; 10]).expect("write");
    block_on(seg.sync(3 * PAGE_BYTES, 1)).expect("sync");
    disk.power_loss();
    let seg = disk.open_segment("s").expect("open").expect("exists");
    assert_eq!(&seg.slice(0, 10).expect("slice")[..], &[0; 10]);
    assert_eq!(&seg.slice(3 * PAGE_BYTES, 10).expect("slice")[..], &[3; 10]);
}

#[test]
fn unsynced_writes_persist_when_weights_say_so() {
    let disk = SimDisk::with_config(
        1,
        only(CrashWeights {
            persisted: 1,
            ..NONE
        }),
    );
    let seg = disk.create_segment("s", SEG_BYTES).expect("create");
    seg.write_at(10, b"kept").expect("write");
    disk.power_loss();
    let seg = disk.open_segment("s").expect("open").expect("exists");
    assert_eq!(&seg.slice(10, 4).expect("slice")[..], b"kept");
    assert_eq!(disk.stats().pages_persisted, 1);
}

#[test]
fn torn_page_mixes_old_and_new_sectors() {
    let disk = SimDisk::with_config(3, only(CrashWeights { torn: 1, ..NONE }));
    let pages = 16;
    let seg = disk
        .create_segment("s", pages * PAGE_BYTES)
        .expect("create");
    seg.write_at(
        0,
        &vec![0xAB; usize::try_from(pages * PAGE_BYTES).expect("small")],
    )
    .expect("write");
    disk.power_loss();
    let seg = disk.open_segment("s").expect("open").expect("exists");
    let sector = usize::try_from(SECTOR_BYTES).expect("small");
    let page = usize::try_from(PAGE_BYTES).expect("small");
    let all = seg.slice(0, page * 16).expect("slice");
    let mut mixed_pages = 0;
    for p in all.chunks(page) {
        let mut new_sectors = 0;
        for s in p.chunks(sector) {
            let is_new = s.iter().all(|&b| b == 0xAB);
            assert!(
                is_new || s.iter().all(|&b| b == 0),
                "sector is old or new, never a mix"
            );
            new_sectors += usize::from(is_new);
        }
        if new_sectors > 0 && new_sectors < page / sector {
            mixed_pages += 1;
        }
    }
    assert!(mixed_pages > 0, "some page mixes old and new sectors");
    assert_eq!(disk.stats().pages_torn, 16);
}

#[test]
fn garbage_sectors_only_where_rewritten() {
    let disk = SimDisk::with_config(5, only(CrashWeights { garbage: 1, ..NONE }));
    let seg = disk.create_segment("s", SEG_BYTES).expect("create");
    let sector = usize::try_from(SECTOR_BYTES).expect("small");
    seg.write_at(0, &vec![0xCD; sector])
        .expect("write first sector");
    disk.power_loss();
    let seg = disk.open_segment("s").expect("open").expect("exists");
    let first = seg.slice(0, sector).expect("slice");
    assert!(first.iter().any(|&b| b != 0xCD) && first.iter().any(|&b| b != 0));
    let rest = seg.slice(SECTOR_BYTES, 7 * sector).expect("slice");
    assert!(rest.iter().all(|&b| b == 0), "untouched sectors stay old");
    assert_eq!(disk.stats().pages_garbage, 1);
}

#[test]
fn garbage_needs_a_device_without_power_safe_overwrite() {
    let mut config = only(CrashWeights { garbage: 1, ..NONE });
    config.garbage_sectors = false;
    let disk = SimDisk::with_config(5, config);
    let seg = disk.create_segment("s", SEG_BYTES).expect("create");
    seg.write_at(0, &[0xCD; 64]).expect("write");
    disk.power_loss();
    assert_eq!(disk.stats().pages_garbage, 0);
}

#[test]
fn failed_sync_reports_eio_once_and_loses_data() {
    let disk = SimDisk::with_config(1, only(CrashWeights { lost: 1, ..NONE }));
    let seg = disk.create_segment("s", SEG_BYTES).expect("create");
    seg.write_at(0, b"acked?").expect("write");
    disk.fail_next_sync();
    let err = block_on(seg.sync(0, SEG_BYTES)).expect_err("injected EIO");
    assert_eq!(err.raw_os_error(), Some(libc::EIO));
    // The process still reads its own write...
    assert_eq!(&seg.slice(0, 6).expect("slice")[..], b"acked?");
    // ...and the retry "succeeds" because the pages were marked clean.
    block_on(seg.sync(0, SEG_BYTES)).expect("retry succeeds");
    disk.power_loss();
    let seg = disk.open_segment("s").expect("open").expect("exists");
    assert_eq!(&seg.slice(0, 6).expect("slice")[..], &[0; 6]);
    assert_eq!(disk.stats().eio_injected, 1);
    // Clean pages decide nothing at a crash: no page was lost, only forgotten.
    assert_eq!(disk.stats().pages_lost, 0);
}

#[test]
fn sync_eio_probability_one_fails_every_sync() {
    let disk = SimDisk::with_config(
        1,
        SimDiskConfig {
            sync_eio_probability: 1.0,
            ..SimDiskConfig::default()
        },
    );
    let seg = disk.create_segment("s", SEG_BYTES).expect("create");
    for _ in 0..3 {
        assert!(block_on(seg.sync(0, 1)).is_err());
    }
    assert_eq!(disk.stats().eio_injected, 3);
}

#[test]
fn enospc_on_create_when_full() {
    let disk = SimDisk::with_config(
        1,
        SimDiskConfig {
            capacity_bytes: Some(2 * SEG_BYTES),
            ..SimDiskConfig::default()
        },
    );
    disk.create_segment("a", SEG_BYTES).expect("fits");
    disk.create_segment("b", SEG_BYTES).expect("fits");
    let err = disk.create_segment("c", SEG_BYTES).expect_err("full");
    assert_eq!(err.kind(), io::ErrorKind::StorageFull);
    let err = block_on(disk.replace_atomically("meta", b"x")).expect_err("full");
    assert_eq!(err.kind(), io::ErrorKind::StorageFull);
    let space = disk.space().expect("space");
    assert_eq!(
        (space.used_bytes, space.total_bytes),
        (2 * SEG_BYTES, 2 * SEG_BYTES)
    );
    disk.remove("a").expect("remove");
    disk.create_segment("c", SEG_BYTES)
        .expect("fits after remove");
    disk.set_capacity(None);
    disk.create_segment("d", SEG_BYTES).expect("unlimited");
    assert_eq!(disk.stats().enospc, 2);
}

#[test]
fn injected_create_failure_fires_once() {
    let disk = SimDisk::new(1);
    disk.fail_next_create();
    let err = disk.create_segment("a", SEG_BYTES).expect_err("injected");
    assert_eq!(err.kind(), io::ErrorKind::StorageFull);
    assert!(disk.list("").expect("list").is_empty());
    disk.create_segment("a", SEG_BYTES).expect("second try");
}

#[test]
fn injected_read_failure_fires_once() {
    let disk = SimDisk::new(1);
    let seg = disk.create_segment("a", SEG_BYTES).expect("create");
    disk.fail_next_read();
    let err = seg.slice(0, 4).expect_err("injected");
    assert_eq!(err.raw_os_error(), Some(libc::EIO));
    seg.slice(0, 4).expect("second read");
    assert_eq!(disk.stats().read_eio_injected, 1);
}

#[test]
fn stale_handle_rejected_after_power_loss() {
    let disk = SimDisk::new(1);
    let seg = disk.create_segment("s", SEG_BYTES).expect("create");
    seg.write_at(0, b"before").expect("write");
    block_on(seg.sync(0, SEG_BYTES)).expect("sync");
    disk.power_loss();
    assert!(seg.write_at(0, b"zombie").is_err());
    assert!(seg.slice(0, 6).is_err());
    assert!(block_on(seg.sync(0, 6)).is_err());
    let fresh = disk.open_segment("s").expect("open").expect("exists");
    assert_eq!(&fresh.slice(0, 6).expect("slice")[..], b"before");
}

#[test]
fn stale_handle_rejected_after_process_crash_but_data_kept() {
    let disk = SimDisk::with_config(1, only(CrashWeights { lost: 1, ..NONE }));
    let seg = disk.create_segment("s", SEG_BYTES).expect("create");
    seg.write_at(0, b"cached").expect("write");
    disk.process_crash();
    assert!(seg.write_at(0, b"zombie").is_err());
    let fresh = disk.open_segment("s").expect("open").expect("exists");
    assert_eq!(&fresh.slice(0, 6).expect("slice")[..], b"cached");
    // Still only in the page cache: a power loss now drops it.
    disk.power_loss();
    let fresh = disk.open_segment("s").expect("open").expect("exists");
    assert_eq!(&fresh.slice(0, 6).expect("slice")[..], &[0; 6]);
}

#[test]
fn handle_to_removed_file_is_rejected() {
    let disk = SimDisk::new(1);
    let seg = disk.create_segment("s", SEG_BYTES).expect("create");
    disk.remove("s").expect("remove");
    disk.create_segment("s", SEG_BYTES).expect("recreate");
    assert!(seg.write_at(0, b"old handle").is_err());
}

fn crash_outcome(seed: u64) -> Vec<u8> {
    let disk = SimDisk::with_config(seed, SimDiskConfig::default());
    let seg = disk.create_segment("s", 32 * PAGE_BYTES).expect("create");
    for page in 0..32 {
        seg.write_at(page * PAGE_BYTES, &[0xEE; 4096])
            .expect("write");
    }
    disk.power_loss();
    disk.durable_contents("s").expect("exists")
}

#[test]
fn same_seed_same_crash_outcome() {
    assert_eq!(crash_outcome(42), crash_outcome(42));
    assert_ne!(crash_outcome(42), crash_outcome(43));
}

#[test]
fn metadata_replace_is_durable_at_once() {
    let disk = SimDisk::with_config(1, only(CrashWeights { lost: 1, ..NONE }));
    block_on(disk.replace_atomically("checkpoint", b"v1")).expect("replace");
    disk.power_loss();
    assert_eq!(
        disk.read_small("checkpoint").expect("read").as_deref(),
        Some(&b"v1"[..])
    );
}

#[test]
fn sync_awaits_the_delay_hook_with_range_bytes() {
    let disk = SimDisk::new(1);
    let seen = Arc::new(AtomicU64::new(0));
    let seen_in_hook = Arc::clone(&seen);
    disk.set_sync_delay(Some(Arc::new(move |bytes| {
        seen_in_hook.fetch_add(bytes, Ordering::SeqCst);
        Box::pin(std::future::ready(()))
    })));
    let seg = disk.create_segment("s", SEG_BYTES).expect("create");
    block_on(seg.sync(0, 1000)).expect("sync");
    assert_eq!(seen.load(Ordering::SeqCst), 1000);
}

#[test]
fn power_loss_during_sync_delay_fails_the_sync() {
    let disk = SimDisk::with_config(1, only(CrashWeights { lost: 1, ..NONE }));
    let crasher = disk.clone();
    disk.set_sync_delay(Some(Arc::new(move |_| {
        crasher.power_loss();
        Box::pin(std::future::ready(()))
    })));
    let seg = disk.create_segment("s", SEG_BYTES).expect("create");
    seg.write_at(0, b"x").expect("write");
    assert!(block_on(seg.sync(0, 1)).is_err());
    assert_eq!(disk.durable_contents("s").expect("exists")[0], 0);
}

/// A reference model of the page cache: `cur` holds every write, `durable`
/// only pages a sync covered after their last write.
#[derive(Debug, Clone)]
enum Op {
    Write { off: u64, len: u64, byte: u8 },
    Sync { off: u64, len: u64 },
}

fn op_strategy() -> impl proptest::strategy::Strategy<Value = Op> {
    use proptest::prelude::*;
    prop_oneof![
        (0..SEG_BYTES, 1..2 * PAGE_BYTES, any::<u8>()).prop_map(|(off, len, byte)| Op::Write {
            off,
            len: len.min(SEG_BYTES - off),
            byte
        }),
        (0..SEG_BYTES, 0..2 * PAGE_BYTES).prop_map(|(off, len)| Op::Sync {
            off,
            len: len.min(SEG_BYTES - off)
        }),
    ]
}

fn run_model(seed: u64, weights: CrashWeights, ops: &[Op]) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    let size = usize::try_from(SEG_BYTES).expect("small");
    let page = usize::try_from(PAGE_BYTES).expect("small");
    let (mut cur, mut durable) = (vec![0u8; size], vec![0u8; size]);
    let mut dirty = vec![false; size / page];
    let disk = SimDisk::with_config(seed, only(weights));
    let seg = disk.create_segment("s", SEG_BYTES).expect("create");
    for op in ops {
        match *op {
            Op::Write { off, len, byte } => {
                let (off, len) = (
                    usize::try_from(off).expect("small"),
                    usize::try_from(len).expect("small"),
                );
                seg.write_at(off as u64, &vec![byte; len]).expect("write");
                cur[off..off + len].fill(byte);
                dirty[off / page..=(off + len - 1) / page].fill(true);
            }
            Op::Sync { off, len } => {
                block_on(seg.sync(off, len)).expect("sync");
                if len > 0 {
                    let (first, last) = (off / PAGE_BYTES, (off + len - 1) / PAGE_BYTES);
                    for p in usize::try_from(first).expect("small")
                        ..=usize::try_from(last).expect("small")
                    {
                        if std::mem::take(&mut dirty[p]) {
                            durable[p * page..(p + 1) * page]
                                .copy_from_slice(&cur[p * page..(p + 1) * page]);
                        }
                    }
                }
            }
        }
    }
    assert_eq!(
        &seg.slice(0, size).expect("slice")[..],
        &cur[..],
        "reads see every write"
    );
    disk.power_loss();
    let after = disk.durable_contents("s").expect("exists");
    (cur, durable, after)
}

proptest::proptest! {
    #[test]
    fn power_loss_keeps_exactly_the_synced_pages(seed: u64, ops in proptest::collection::vec(op_strategy(), 1..40)) {
        let (_, durable, after) = run_model(seed, CrashWeights { lost: 1, ..NONE }, &ops);
        proptest::prop_assert_eq!(after, durable);
    }

    #[test]
    fn power_loss_with_full_writeback_keeps_every_write(seed: u64, ops in proptest::collection::vec(op_strategy(), 1..40)) {
        let (cur, _, after) = run_model(seed, CrashWeights { persisted: 1, ..NONE }, &ops);
        proptest::prop_assert_eq!(after, cur);
    }
}
