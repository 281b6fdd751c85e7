//! Tests of the production disk.

use super::*;
use crate::disk::Segment;

#[test]
fn unclaimed_preparation_leaves_only_a_hidden_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let disk = MmapDisk::new(dir.path()).expect("disk");
    disk.prepare_segment("log/00001", 8192, Prepare::WarmHead);
    // Claiming waits for the allocator; use a different name to observe
    // the unclaimed one after it finished.
    disk.create_segment("log/00000", 8192).expect("create");
    assert!(matches!(
        disk.inner.preps.take("log/00001"),
        Some(Prep::Ready { .. })
    ));
    assert_eq!(disk.list("log").expect("list"), ["00000"]);
    assert!(dir.path().join("log/.prep-00001").exists());
}

#[test]
fn prepared_segment_is_claimed_without_reallocating() {
    let dir = tempfile::tempdir().expect("tempdir");
    let disk = MmapDisk::new(dir.path()).expect("disk");
    disk.prepare_segment("s", 4096, Prepare::ZeroFilled);
    let seg = disk.create_segment("s", 4096).expect("create");
    seg.write_at(0, b"abc").expect("write");
    assert!(!dir.path().join(".prep-s").exists());
    assert!(disk.inner.preps.lock().is_empty());
    assert_eq!(
        fs::metadata(dir.path().join("s")).expect("meta").len(),
        4096
    );
}

#[test]
fn dropping_the_disk_deletes_unclaimed_preparations() {
    let dir = tempfile::tempdir().expect("tempdir");
    let disk = MmapDisk::new(dir.path()).expect("disk");
    disk.prepare_segment("s", 4096, Prepare::ZeroFilled);
    // Wait for the allocator by claiming a sibling's turn after it.
    disk.prepare_segment("t", 4096, Prepare::WarmHead);
    drop(disk.create_segment("t", 4096).expect("create"));
    assert!(dir.path().join(".prep-s").exists());
    drop(disk);
    assert!(!dir.path().join(".prep-s").exists());
}

#[test]
fn created_segment_is_fully_allocated_not_sparse() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let disk = MmapDisk::new(dir.path()).expect("disk");
    disk.create_segment("s", 1 << 20).expect("create");
    let meta = fs::metadata(dir.path().join("s")).expect("meta");
    assert!(meta.blocks() * 512 >= 1 << 20, "blocks: {}", meta.blocks());
}

/// Holds the allocator thread until the returned sender is used or
/// dropped, so that jobs queued meanwhile run only afterwards.
fn hold_allocator(disk: &MmapDisk) -> mpsc::Sender<()> {
    let (release, held) = mpsc::channel::<()>();
    let _ = disk.inner.alloc_jobs.send(Box::new(move || {
        let _ = held.recv();
    }));
    release
}

#[test]
fn a_zero_fill_runs_to_the_end_unless_the_segment_is_needed_first() {
    const LEN: u64 = 8 << 20;
    let dir = tempfile::tempdir().expect("tempdir");
    let disk = MmapDisk::new(dir.path()).expect("disk");
    disk.prepare_segment("whole", LEN, Prepare::ZeroFilled);
    // Wait for the allocator without claiming "whole" (claiming would stop
    // its fill).
    disk.wait_for_allocator();
    let whole = disk.create_segment("whole", LEN).expect("create");
    if whole.zero_filled_to() == 0 {
        eprintln!("skipped: this filesystem refuses direct I/O");
        return;
    }
    assert_eq!(
        whole.zero_filled_to(),
        8 << 20,
        "a fill nobody waited for is whole"
    );

    // A roll that finds the fill still pending stops it at a step's end
    // (here before its first: the allocator thread was held until then).
    let release = hold_allocator(&disk);
    disk.prepare_segment("needed", LEN, Prepare::ZeroFilled);
    match disk.inner.preps.lock().get("needed") {
        Some(Prep::Pending(stop)) => stop.store(true, Ordering::Relaxed),
        _ => panic!("the preparation is queued behind the held job"),
    }
    drop(release);
    let needed = disk.create_segment("needed", LEN).expect("create");
    assert_eq!(needed.zero_filled_to(), 0, "stopped before its first step");
    // Cold, then: writes are not padded and read back like any segment's.
    needed.write_at(100, &[5; 600]).expect("write");
    needed.write_at(700, &[6; 600]).expect("write");
    let page = needed.slice(0, 4096).expect("read");
    assert!(page[..100].iter().all(|&b| b == 0));
    assert!(page[100..700].iter().all(|&b| b == 5));
    assert!(page[700..1300].iter().all(|&b| b == 6));
    assert!(page[1300..].iter().all(|&b| b == 0));
}

#[test]
#[expect(
    clippy::disallowed_methods,
    reason = "waits in real time for a thread of the production disk"
)]
fn creating_a_segment_stops_its_pending_zero_fill() {
    let dir = tempfile::tempdir().expect("tempdir");
    let disk = MmapDisk::new(dir.path()).expect("disk");
    let release = hold_allocator(&disk);
    disk.prepare_segment("s", 8 << 20, Prepare::ZeroFilled);
    let stop = match disk.inner.preps.lock().get("s") {
        Some(Prep::Pending(stop)) => Arc::clone(stop),
        _ => panic!("the preparation is queued behind the held job"),
    };
    assert!(!stop.load(Ordering::Relaxed));
    // `take` sets the flag before it waits for the job: release the
    // allocator once the flag is seen set.
    let taker = {
        let disk = disk.clone();
        std::thread::Builder::new()
            .spawn(move || {
                disk.create_segment("s", 8 << 20)
                    .map(|s| s.zero_filled_to())
            })
            .expect("spawn")
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !stop.load(Ordering::Relaxed) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    drop(release);
    assert!(
        stop.load(Ordering::Relaxed),
        "creating the segment set the stop"
    );
    let filled = taker.join().expect("join").expect("create");
    assert_eq!(filled, 0, "the fill saw the stop before its first step");
}
