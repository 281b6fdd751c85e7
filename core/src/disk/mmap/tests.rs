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
