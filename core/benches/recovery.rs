//! Recovery benchmarks on `MmapDisk` in a temporary directory (results in
//! docs/benchmarks.md, "Issue 20: recovery scan").
//!
//! - `recovery_scan_full` — `MessageStore::open` of a store pre-filled with
//!   `SLUICE_BENCH_RECOVERY_MB` MiB (default 64) of 1 KiB messages (TAGS,
//!   KEYS and a `UNIQ_KEY` each) after a clean stop, with the checkpoint
//!   removed: the full scan re-verifies every record and rebuilds every
//!   ConsumeQueue and the index from the CommitLog. Throughput is the
//!   CommitLog's bytes, so criterion prints GiB/s. The page cache is warm
//!   (the fill just wrote it); stopping the store, and waiting for the
//!   segment preparation each open queues, is not timed.
//! - `recovery_floor/read_and_crc` — the floor under that scan: one pass
//!   reading the same bytes (from memory, the log copied out once) and
//!   CRC32 of all of them.

use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use sluice_core::disk::MmapDisk;
use sluice_core::message::{keys, MessageInput, Properties, UniqKeyGenerator};
use sluice_core::{MessageStore, StoreConfig, SystemClock};

const BODY_BYTES: usize = 1024;
const SEGMENT_BYTES: u64 = 256 << 20;
const QUEUES: u64 = 4;

/// The wall clock for `iter_custom`. clippy.toml bans `Instant::now` outside
/// the clock seam; a benchmark measures real time by definition.
#[expect(
    clippy::disallowed_methods,
    reason = "benchmark tool measures wall time"
)]
fn now() -> Instant {
    Instant::now()
}

fn fill_bytes() -> u64 {
    let mib: u64 = std::env::var("SLUICE_BENCH_RECOVERY_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64);
    mib << 20
}

fn config(root: &std::path::Path) -> (MmapDisk, StoreConfig) {
    let cfg = StoreConfig {
        commit_log_segment_bytes: SEGMENT_BYTES,
        index_slots: 500_000,
        index_entries: 2_000_000,
        ..StoreConfig::default()
    };
    (MmapDisk::new(root).expect("disk"), cfg)
}

type Store = MessageStore<MmapDisk, SystemClock>;

/// Opens the store at `root`; the disk handle comes back for [`stop`].
fn open(root: &std::path::Path) -> (Store, MmapDisk) {
    let (disk, cfg) = config(root);
    let handle = disk.clone();
    let store = pollster::block_on(MessageStore::open(disk, SystemClock::new(), cfg));
    (store.expect("store opens"), handle)
}

/// Stops the store cleanly and waits until the disk's allocator thread is
/// idle: opening queues the preparation of the next segment, which must
/// neither run into the next timed open nor write into the temporary
/// directory after it is deleted.
fn stop(store: Store, disk: &MmapDisk) {
    pollster::block_on(store.shutdown()).expect("shutdown");
    drop(store);
    disk.wait_for_allocator();
}

/// A producer-like 1 KiB message: TAGS, two KEYS and a fresh `UNIQ_KEY`.
fn message(uniq: &mut UniqKeyGenerator, body: &Bytes, n: u64) -> MessageInput {
    let mut props = Properties::new();
    props.insert(keys::TAGS, "TagA").expect("valid property");
    let order_keys = format!("order-{n} user-{}", n % 1000);
    props
        .insert(keys::KEYS, &order_keys)
        .expect("valid property");
    let key = uniq.next(1_700_000_000_000);
    props.insert(keys::UNIQ_KEY, &key).expect("valid property");
    MessageInput {
        topic: "RecoveryTopic".to_owned(),
        queue_id: i32::try_from(n % QUEUES).expect("small"),
        flag: 0,
        sys_flag: 0,
        born_timestamp_ms: 1_700_000_000_000,
        born_host: "10.0.0.1:50000".parse().expect("addr"),
        store_host: "127.0.0.1:10911".parse().expect("addr"),
        reconsume_times: 0,
        prepared_transaction_offset: 0,
        body: body.clone(),
        properties: Bytes::from(props.encode()),
    }
}

/// Fills a store with `bytes` of CommitLog and stops it cleanly; returns
/// the directory and the log's length.
fn filled_store(bytes: u64) -> (tempfile::TempDir, u64) {
    let dir = tempfile::Builder::new()
        .prefix("sluice-recovery-bench-")
        .tempdir()
        .expect("tempdir");
    let (store, disk) = open(dir.path());
    let mut uniq = UniqKeyGenerator::new("10.0.0.1".parse().expect("ip"), 4242, 7);
    let body = Bytes::from(vec![b'x'; BODY_BYTES]);
    let mut n = 0;
    while store.commit_log().written().get() < bytes {
        pollster::block_on(store.put(message(&mut uniq, &body, n), false)).expect("put");
        n += 1;
    }
    let written = store.commit_log().written().get();
    stop(store, &disk);
    (dir, written)
}

fn recovery_scan_full(c: &mut Criterion) {
    let (dir, written) = filled_store(fill_bytes());
    let mut g = c.benchmark_group("recovery");
    g.throughput(Throughput::Bytes(written));
    g.sample_size(10);
    g.bench_function("recovery_scan_full", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                std::fs::remove_file(dir.path().join("checkpoint")).expect("checkpoint");
                let start = now();
                let (store, disk) = open(dir.path());
                total += start.elapsed();
                stop(store, &disk);
            }
            total
        });
    });
    g.finish();
}

/// Reads every byte of the filled log and CRCs it: the memory
/// bandwidth plus CRC floor of a scan over that many bytes.
fn recovery_floor(c: &mut Criterion) {
    let (dir, written) = filled_store(fill_bytes());
    let path = dir.path().join(format!("commitlog/{:020}", 0));
    let log = std::fs::read(path).expect("log");
    // The first segment's bytes (a fill past one segment spills over).
    let len = usize::try_from(written).expect("fits").min(log.len());
    let mut g = c.benchmark_group("recovery_floor");
    g.throughput(Throughput::Bytes(len as u64));
    g.bench_function("read_and_crc", |b| {
        b.iter(|| sluice_core::message::body_crc(black_box(&log[..len])));
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    targets = recovery_scan_full, recovery_floor
}
criterion_main!(benches);
