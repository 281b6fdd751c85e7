//! Deferred writes (issue 20): sends a connection read together reach the
//! disk in one write. A deferred record stays unwritten and invisible
//! (below nothing: `written` does not move) until the next plain append,
//! a flush or `write_deferred`; a crash before that loses only records
//! nobody acknowledged; a deferred write that fails fences the log.

mod support;

use sluice_core::store::{FlushMode, Wait};
use sluice_core::testing::{ManualClock, SimDisk};
use sluice_core::{MessageStore, QueueOffset, StoreConfig};
use support::{block_on, msg, queue_records};

const T0_MS: u64 = 1_700_000_000_000;

fn open(disk: &SimDisk) -> MessageStore<SimDisk, ManualClock> {
    let config = StoreConfig {
        flush_mode: FlushMode::Async,
        ..StoreConfig::for_tests()
    };
    block_on(MessageStore::open(
        disk.clone(),
        ManualClock::new(T0_MS),
        config,
    ))
    .expect("opens")
}

fn put(store: &MessageStore<SimDisk, ManualClock>, body: &str) {
    block_on(store.put(msg("T", 0, body.as_bytes(), None, None), Wait::No)).expect("put");
}

fn defer(store: &MessageStore<SimDisk, ManualClock>, body: &str) {
    let m = msg("T", 0, body.as_bytes(), None, None);
    block_on(store.put_deferred(m, Wait::No)).expect("deferred put");
}

fn bodies(store: &MessageStore<SimDisk, ManualClock>) -> Vec<String> {
    queue_records(store, "T", 0)
        .iter()
        .map(|r| String::from_utf8_lossy(&r.body).into_owned())
        .collect()
}

#[test]
fn deferred_records_stay_unwritten_and_invisible_until_written_in_one_write() {
    let disk = SimDisk::new(1);
    let store = open(&disk);
    put(&store, "m0");
    let (writes, written) = (disk.stats().writes, store.commit_log().written());
    for i in 1..=5 {
        defer(&store, &format!("m{i}"));
    }
    assert_eq!(disk.stats().writes, writes, "nothing reached the disk");
    assert_eq!(
        store.commit_log().written(),
        written,
        "nothing was published"
    );
    assert_eq!(
        store.max_offset("T", 0),
        QueueOffset::new(1),
        "nor dispatched"
    );
    store.write_deferred().expect("written");
    // One CommitLog write; dispatch then writes the run's ConsumeQueue
    // entries in one store (no keys: no index slots).
    assert_eq!(
        disk.stats().writes,
        writes + 1 + 1,
        "five records, one log write"
    );
    assert_eq!(store.max_offset("T", 0), QueueOffset::new(6));
    assert_eq!(bodies(&store), ["m0", "m1", "m2", "m3", "m4", "m5"]);
    store.write_deferred().expect("nothing left");
    assert_eq!(
        disk.stats().writes,
        writes + 2,
        "a second call writes nothing"
    );
}

#[test]
fn a_plain_put_writes_the_deferred_records_with_its_own() {
    let disk = SimDisk::new(2);
    let store = open(&disk);
    put(&store, "m0");
    let writes = disk.stats().writes;
    defer(&store, "m1");
    defer(&store, "m2");
    put(&store, "m3");
    // One CommitLog write, then the three ConsumeQueue entries in one.
    assert_eq!(
        disk.stats().writes,
        writes + 1 + 1,
        "one log write for all three"
    );
    assert_eq!(bodies(&store), ["m0", "m1", "m2", "m3"]);
}

#[test]
fn deferred_records_across_a_segment_end_are_written_whole_and_survive_a_restart() {
    let disk = SimDisk::new(3);
    let store = open(&disk);
    let body = "x".repeat(1000);
    // 64 KiB segments: 150 records of ~1.2 KiB span three of them.
    let sent: Vec<String> = (0..150).map(|i| format!("{i:03}{body}")).collect();
    for b in &sent {
        defer(&store, b);
    }
    block_on(store.flush()).expect("a flush writes what was deferred");
    assert_eq!(bodies(&store), sent);
    assert!(
        store.commit_log().chain_segments() >= 3,
        "crossed segment ends"
    );
    drop(store);
    disk.process_crash();
    let store = open(&disk);
    assert_eq!(bodies(&store), sent, "all back after a restart");
}

#[test]
fn a_crash_loses_only_deferred_records_never_written() {
    let disk = SimDisk::new(4);
    let store = open(&disk);
    put(&store, "m0");
    defer(&store, "m1");
    store.write_deferred().expect("written");
    defer(&store, "m2");
    drop(store);
    disk.process_crash();
    let store = open(&disk);
    assert_eq!(
        bodies(&store),
        ["m0", "m1"],
        "m2 was never written (nor acknowledged)"
    );
    put(&store, "m3");
    assert_eq!(bodies(&store), ["m0", "m1", "m3"]);
}

#[test]
fn a_deferred_write_that_fails_fences_the_log() {
    let disk = SimDisk::new(5);
    let store = open(&disk);
    put(&store, "m0");
    defer(&store, "m1");
    // Segment handles from before a crash fail every later operation: the
    // deferred write fails.
    disk.process_crash();
    assert!(
        store.write_deferred().is_err(),
        "the failed write is reported"
    );
    assert!(
        store.write_deferred().is_err(),
        "and every later call says nothing may be acknowledged"
    );
    let m = msg("T", 0, b"m2", None, None);
    assert!(
        block_on(store.put(m, Wait::No)).is_err(),
        "the log is fenced"
    );
}
