//! A read the disk fails (EIO) while a store starts is an error, never the
//! end of the log: the start stops with the I/O error and cuts nothing, and
//! once the disk reads again the next start finds every record. Before,
//! recovery took an unreadable record for a torn tail and truncated the log
//! there — one transient EIO on the first record emptied a store with no
//! checkpoint.

mod support;

use sluice_core::testing::{ManualClock, SimDisk, SimDiskConfig};
use sluice_core::{Error, MessageStore, StoreConfig};
use support::{block_on, msg, queue_bodies};

const T0_MS: u64 = 1_700_000_000_000;
const RECORDS: usize = 400;

fn body(i: usize) -> Vec<u8> {
    format!("body-{i:05}-{}", "e".repeat(i % 500)).into_bytes()
}

/// A store of [`RECORDS`] acknowledged records over several segments (a
/// checkpoint a quarter of the way in when `checkpoint`), crashed.
fn crashed_store(helper: bool, checkpoint: bool) -> (SimDisk, ManualClock, Vec<u64>) {
    let config = SimDiskConfig {
        helper_inline: helper,
        ..SimDiskConfig::default()
    };
    let disk = SimDisk::with_config(11, config);
    let clock = ManualClock::new(T0_MS);
    let store = block_on(MessageStore::open(
        disk.clone(),
        clock.clone(),
        StoreConfig::for_tests(),
    ))
    .expect("open");
    for i in 0..RECORDS {
        if checkpoint && i == RECORDS / 4 {
            block_on(store.checkpoint()).expect("checkpoint");
        }
        block_on(store.put(msg("T", 0, &body(i), None, None), true)).expect("put");
    }
    let seg = StoreConfig::for_tests().commit_log_segment_bytes;
    let end = store.commit_log().written().get();
    let starts: Vec<u64> = (0..end.div_ceil(seg)).map(|i| i * seg).collect();
    assert!(starts.len() >= 4, "the log spans several segments");
    drop(store);
    disk.process_crash();
    (disk, clock, starts)
}

fn segment_path(start: u64) -> String {
    format!("commitlog/{start:020}")
}

/// Every combination of: the log's first segment or one past the
/// checkpoint unreadable, a helper verifying ahead or none, a checkpoint
/// or none, repair mode or not.
#[test]
fn an_unreadable_segment_stops_the_start_and_loses_nothing() {
    for helper in [false, true] {
        for checkpoint in [false, true] {
            for repair in [false, true] {
                for which in [0, 2] {
                    let case = format!(
                        "helper {helper}, checkpoint {checkpoint}, repair {repair}, segment {which}"
                    );
                    let (disk, clock, starts) = crashed_store(helper, checkpoint);
                    let path = segment_path(starts[which]);
                    let before: Vec<_> = starts
                        .iter()
                        .map(|s| disk.durable_contents(&segment_path(*s)))
                        .collect();
                    disk.fail_reads_under(&path, u32::MAX);
                    let cfg = StoreConfig {
                        repair_truncate_corrupt: repair,
                        ..StoreConfig::for_tests()
                    };
                    let failed = block_on(MessageStore::open(disk.clone(), clock.clone(), cfg))
                        .err()
                        .unwrap_or_else(|| panic!("{case}: the start must fail"));
                    match &failed {
                        Error::Io { path: at, .. } => assert_eq!(at, &path, "{case}"),
                        other => panic!("{case}: an I/O error, not {other}"),
                    }
                    disk.fail_reads_under("", 0);
                    let after: Vec<_> = starts
                        .iter()
                        .map(|s| disk.durable_contents(&segment_path(*s)))
                        .collect();
                    assert!(before == after, "{case}: the failed start changed the log");
                    let store = block_on(MessageStore::open(
                        disk.clone(),
                        clock.clone(),
                        StoreConfig::for_tests(),
                    ))
                    .unwrap_or_else(|e| panic!("{case}: {e}"));
                    let want: Vec<_> = (0..RECORDS).map(body).collect();
                    assert!(queue_bodies(&store, "T", 0) == want, "{case}: records lost");
                }
            }
        }
    }
}

/// A transient run of 1–11 failed reads from a start's first read of the
/// log on never costs a record: the start either fails (and the next one
/// finds everything) or succeeds with everything.
#[test]
fn a_transient_read_error_at_start_never_costs_a_record() {
    for helper in [false, true] {
        for checkpoint in [false, true] {
            for failing in 1..12 {
                let case = format!("helper {helper}, checkpoint {checkpoint}, {failing} reads");
                let (disk, clock, _) = crashed_store(helper, checkpoint);
                disk.fail_reads_under("commitlog", failing);
                let opened = block_on(MessageStore::open(
                    disk.clone(),
                    clock.clone(),
                    StoreConfig::for_tests(),
                ));
                disk.fail_reads_under("", 0);
                let store = match opened {
                    Ok(store) => store,
                    Err(Error::Io { .. }) => block_on(MessageStore::open(
                        disk.clone(),
                        clock.clone(),
                        StoreConfig::for_tests(),
                    ))
                    .unwrap_or_else(|e| panic!("{case}: {e}")),
                    Err(e) => panic!("{case}: an I/O error, not {e}"),
                };
                let want: Vec<_> = (0..RECORDS).map(body).collect();
                assert!(queue_bodies(&store, "T", 0) == want, "{case}: records lost");
            }
        }
    }
}
