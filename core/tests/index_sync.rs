//! The key index is synced at a checkpoint only when due (its interval has
//! passed or the log grew past its lag), and a crash between two index syncs
//! loses no key: recovery re-indexes the records after the index's own safe
//! point, which the checkpoint records beside the queues' one.

mod support;

use std::time::Duration;

use sluice_core::testing::{CrashWeights, ManualClock, SimDisk, SimDiskConfig};
use sluice_core::{MessageStore, StoreConfig};
use support::{block_on, msg};

const T0_MS: u64 = 1_700_000_000_000;

type Store = MessageStore<SimDisk, ManualClock>;

/// Tiny index files (4 keys each), so the keys below span several files
/// and the index rolls between two of its syncs.
fn config() -> StoreConfig {
    StoreConfig {
        index_slots: 4,
        index_entries: 4,
        index_sync_interval_ms: 10_000,
        index_sync_lag_bytes: 1 << 30,
        ..StoreConfig::for_tests()
    }
}

fn open(disk: &SimDisk, clock: &ManualClock) -> Store {
    block_on(MessageStore::open(disk.clone(), clock.clone(), config())).expect("store opens")
}

fn put_keyed(store: &Store, keys: std::ops::Range<usize>) {
    for i in keys {
        let key = format!("k{i}");
        block_on(store.put(msg("T", 0, key.as_bytes(), Some(&key), None), true)).expect("put");
    }
}

/// Syncs the disk ran during one checkpoint.
fn syncs_of_checkpoint(disk: &SimDisk, store: &Store) -> u64 {
    let before = disk.stats().syncs;
    block_on(store.checkpoint()).expect("checkpoint");
    disk.stats().syncs - before
}

fn found(store: &Store, i: usize) -> usize {
    store
        .query_by_key("T", &format!("k{i}"), 8, 0, i64::MAX)
        .expect("query")
        .len()
}

#[test]
fn a_checkpoint_syncs_the_index_only_when_its_interval_has_passed() {
    let disk = SimDisk::new(1);
    let clock = ManualClock::new(T0_MS);
    let store = open(&disk, &clock);
    put_keyed(&store, 0..10);
    clock.advance(Duration::from_secs(1));
    let early = syncs_of_checkpoint(&disk, &store);
    put_keyed(&store, 10..12);
    clock.advance(Duration::from_secs(10));
    let due = syncs_of_checkpoint(&disk, &store);
    // The due one also syncs each of the index's (three or more) files.
    assert!(due >= early + 3, "due {due} syncs, early {early}");
}

#[test]
fn a_checkpoint_syncs_the_index_once_the_log_outgrew_its_lag() {
    let disk = SimDisk::new(2);
    let clock = ManualClock::new(T0_MS);
    let cfg = StoreConfig {
        index_sync_lag_bytes: 1,
        ..config()
    };
    let store = block_on(MessageStore::open(disk.clone(), clock.clone(), cfg)).expect("opens");
    put_keyed(&store, 0..10);
    let grown = syncs_of_checkpoint(&disk, &store);
    let idle = syncs_of_checkpoint(&disk, &store);
    assert!(grown >= idle + 3, "grown {grown} syncs, idle {idle}");
}

/// Every dirty page a power loss meets is lost: what was not synced is gone.
fn losing_disk(seed: u64) -> SimDisk {
    let config = SimDiskConfig {
        crash_weights: CrashWeights {
            persisted: 0,
            lost: 1,
            torn: 0,
            garbage: 0,
        },
        ..SimDiskConfig::default()
    };
    SimDisk::with_config(seed, config)
}

#[test]
fn a_power_loss_between_index_syncs_loses_no_key() {
    let disk = losing_disk(3);
    let clock = ManualClock::new(T0_MS);
    let store = open(&disk, &clock);
    put_keyed(&store, 0..6);
    clock.advance(Duration::from_secs(11));
    block_on(store.checkpoint()).expect("checkpoint (index synced)");
    // These keys reach the queues' safe point but not the index's.
    put_keyed(&store, 6..14);
    clock.advance(Duration::from_secs(1));
    block_on(store.checkpoint()).expect("checkpoint (index not due)");
    put_keyed(&store, 14..16);
    drop(store);
    disk.power_loss();
    assert!(disk.stats().pages_lost > 0, "the crash lost nothing");
    let store = open(&disk, &clock);
    for i in 0..16 {
        assert_eq!(found(&store, i), 1, "key k{i} after the power loss");
    }
    // And the index recovery rebuilt is synced: a second loss keeps it.
    put_keyed(&store, 16..17);
    drop(store);
    disk.power_loss();
    let store = open(&disk, &clock);
    for i in 0..17 {
        assert_eq!(found(&store, i), 1, "key k{i} after the second loss");
    }
}
