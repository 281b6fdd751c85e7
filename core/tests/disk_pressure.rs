//! Named behaviours of the store on a full device: disk-pressure retention
//! deletes only consumed segments by default (every segment in `Force`
//! mode), puts are refused above the reject ratio, and a refused put
//! rechecks space so service resumes soon after space returns.

mod support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sluice_core::disk::Disk;
use sluice_core::store::SPACE_RECHECK_INTERVAL_MS;
use sluice_core::testing::{ManualClock, SimDisk};
use sluice_core::{DiskPressureRetention, Error, MessageStore, QueueOffset, StoreConfig};
use support::{block_on, msg};

const T0_MS: u64 = 1_700_000_000_000;
const PUTS: usize = 600;

type Store = MessageStore<SimDisk, ManualClock>;

/// A store holding `PUTS` messages on `T`/0 across several segments.
fn filled(mode: DiskPressureRetention) -> (SimDisk, ManualClock, Store) {
    let disk = SimDisk::new(21);
    let clock = ManualClock::new(T0_MS);
    let cfg = StoreConfig {
        disk_pressure_retention: mode,
        ..StoreConfig::for_tests()
    };
    let store = block_on(MessageStore::open(disk.clone(), clock.clone(), cfg)).expect("opens");
    for i in 0..PUTS {
        let body = format!("message-{i:05}-{}", "x".repeat(200));
        block_on(store.put(msg("T", 0, body.as_bytes(), None, None), true)).expect("put");
    }
    (disk, clock, store)
}

fn put(store: &Store) -> Result<(), Error> {
    block_on(store.put(msg("T", 0, b"late", None, None), true)).map(|_| ())
}

#[test]
fn a_full_sim_disk_reports_every_byte_used() {
    let disk = SimDisk::new(1);
    disk.set_full(true);
    let full = disk.space().expect("space");
    assert_eq!(full.used_bytes, full.total_bytes);
    disk.set_full(false);
    assert!(disk.space().expect("space").used_bytes < full.total_bytes);
}

#[test]
fn a_full_disk_deletes_nothing_unconsumed_and_refuses_puts() {
    let (disk, _clock, store) = filled(DiskPressureRetention::Consumed);
    disk.set_full(true);
    let report = store.clean_expired().expect("retention");
    assert_eq!(report.segments_deleted, 0, "{report:?}");
    assert!(report.disk_full, "{report:?}");
    assert_eq!(store.min_offset("T", 0), QueueOffset::new(0));
    assert!(matches!(put(&store), Err(Error::DiskFull { .. })));
}

#[test]
fn a_full_disk_deletes_segments_every_group_has_consumed() {
    let (disk, _clock, store) = filled(DiskPressureRetention::Consumed);
    let floor = Arc::new(AtomicU64::new(0));
    let seen = Arc::clone(&floor);
    store.set_consumed_floor(Arc::new(move |topic, queue_id| {
        (topic == "T" && queue_id == 0).then(|| QueueOffset::new(seen.load(Ordering::Acquire)))
    }));
    disk.set_full(true);
    let report = store.clean_expired().expect("retention");
    assert_eq!(
        report.segments_deleted, 0,
        "nothing consumed yet: {report:?}"
    );
    floor.store(300, Ordering::Release);
    let report = store.clean_expired().expect("retention");
    assert!(report.segments_deleted > 0, "{report:?}");
    let min = store.min_offset("T", 0);
    assert!(
        min > QueueOffset::new(0) && min <= QueueOffset::new(300),
        "deleted past the consumed floor: min {min:?}"
    );
}

#[test]
fn force_mode_deletes_unconsumed_segments_under_pressure() {
    let (disk, _clock, store) = filled(DiskPressureRetention::Force);
    disk.set_full(true);
    let report = store.clean_expired().expect("retention");
    assert!(report.segments_deleted > 0, "{report:?}");
    assert!(store.min_offset("T", 0) > QueueOffset::new(0));
}

#[test]
fn a_refused_put_rechecks_space_so_service_resumes_promptly() {
    let (disk, clock, store) = filled(DiskPressureRetention::Consumed);
    disk.set_full(true);
    assert!(store.clean_expired().expect("retention").disk_full);
    // The first refusal rechecks at once; while still full, later ones
    // within the interval do not query again.
    assert!(put(&store).is_err());
    disk.set_full(false);
    assert!(
        matches!(put(&store), Err(Error::DiskFull { .. })),
        "rechecked again within the interval"
    );
    clock.advance(Duration::from_millis(SPACE_RECHECK_INTERVAL_MS));
    put(&store).expect("space returned: the put after the interval is stored");
    put(&store).expect("and the flag stays clear");
}
