//! Storage micro-benchmarks on `MmapDisk` in a temporary directory (see
//! docs/benchmarks.md for results and ../shared/PERFORMANCE.md for the
//! ceilings they are compared with).
//!
//! - `commit_log_append_1kib` — `CommitLog::append` of a 1 KiB body into a
//!   warm, pre-faulted mapping (each fresh store's first segment is
//!   prepared ahead like every later one). Segment rollover is kept out of
//!   the timed region: the bench opens a fresh store before the 256 MiB
//!   segment fills.
//! - `store_put_1kib_async` — `MessageStore::put(msg, false)` in ASYNC flush
//!   mode: append plus dispatch to the ConsumeQueue and the index; rollover
//!   kept out of the timed region the same way.
//! - `store_put_batch_64x1kib_async` — `MessageStore::put_batch` of 64
//!   messages in ASYNC flush mode (one run, one `pwrite`, then dispatch).
//! - `consume_queue_append` — `ConsumeQueue::append` of one 20-byte entry,
//!   with RocketMQ's 300,000-entry segments rolling over inside the timed
//!   region (a new segment every 300,000 appends).
//! - `get_32_by_offset` — `MessageStore::get` of 32 messages (zero-copy
//!   slices) from a pre-filled queue.
//! - `mmap_segment_write_1kib/{first_write,prefaulted_first_write,rewrite}`
//!   — the disk layer alone: `Segment::write_at` of 1 KiB into pages never
//!   written since the segment was created, cold (each 4 KiB page takes a
//!   fault) or prepared ahead and pre-faulted writable (what the append
//!   sees), and into pages already dirty. It isolates what the mapping
//!   costs the append.
//! - `crc32_1kib` — the body CRC alone; with the pre-faulted first write,
//!   the floor under a 1 KiB append.
//! - `group_commit_sync_flush/<writers>` — SYNC flush mode, N concurrent
//!   writers each doing `put(msg, true)` on a tokio current-thread runtime.
//!   Criterion cannot show messages per sync, so the bench prints them.
//!
//! With `SLUICE_BENCH_CLOCK=cpu` the append, put and first-write benches
//! report the bench thread's CPU time instead of wall time (for a machine
//! shared with other work).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use sluice_core::consume_queue::CqEntry;
use sluice_core::disk::{Disk, MmapDisk, MmapSegment, Prepare, Segment};
use sluice_core::message::{keys, MessageInput, Properties, UniqKeyGenerator};
use sluice_core::store::TagsFilter;
use sluice_core::{
    CommitLogOffset, FlushMode, MessageStore, QueueOffset, StoreConfig, SystemClock,
};

type Store = MessageStore<MmapDisk, SystemClock>;

const BODY_BYTES: usize = 1024;
const TOPIC: &str = "BenchTopic";
/// CommitLog segment size: large, so a timed run never rolls over.
const SEGMENT_BYTES: u64 = 256 << 20;
/// A fresh store is opened (untimed) once the log passes this offset, well
/// before the segment's end.
const ROTATE_AT_BYTES: u64 = SEGMENT_BYTES - (4 << 20);
/// Messages built (untimed) ahead of each timed run of appends.
const CHUNK_MESSAGES: u64 = 4096;
/// Messages pre-filled for the get bench.
const GET_FILL_MESSAGES: u64 = 65_536;
const GET_BATCH: usize = 32;

/// The wall clock for `iter_custom`. clippy.toml bans `Instant::now` outside
/// the clock seam; a benchmark measures real time by definition.
#[expect(
    clippy::disallowed_methods,
    reason = "benchmark tool measures wall time"
)]
fn now() -> Instant {
    Instant::now()
}

/// CPU time (user + system, page faults included) of the calling thread.
#[expect(
    unsafe_code,
    reason = "clock_gettime has no safe std wrapper; benchmark tooling only"
)]
fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the whole call.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &raw mut ts) };
    assert_eq!(rc, 0, "CLOCK_THREAD_CPUTIME_ID is available on Linux");
    Duration::new(
        u64::try_from(ts.tv_sec).expect("non-negative"),
        u32::try_from(ts.tv_nsec).expect("below one second"),
    )
}

/// What the single-threaded `iter_custom` benches time: wall time by
/// default, or with `SLUICE_BENCH_CLOCK=cpu` the bench thread's CPU time,
/// which on a shared machine leaves out time spent descheduled (but still
/// counts page faults and everything else the thread does).
#[derive(Clone, Copy)]
enum Stopwatch {
    Wall(Instant),
    Cpu(Duration),
}

impl Stopwatch {
    fn start() -> Self {
        if std::env::var("SLUICE_BENCH_CLOCK").is_ok_and(|v| v == "cpu") {
            Self::Cpu(thread_cpu_time())
        } else {
            Self::Wall(now())
        }
    }

    fn elapsed(self) -> Duration {
        match self {
            Self::Wall(t) => t.elapsed(),
            Self::Cpu(t) => thread_cpu_time().saturating_sub(t),
        }
    }
}

/// A store and the temporary directory holding it; the store is dropped
/// first (field order), then the directory is deleted.
struct BenchStore {
    store: Arc<Store>,
    disk: MmapDisk,
    _dir: tempfile::TempDir,
}

impl BenchStore {
    fn open(flush_mode: FlushMode) -> Self {
        // The system temp directory (on these machines the same ext4 disk
        // as the build, not a tmpfs).
        let dir = tempfile::Builder::new()
            .prefix("sluice-bench-")
            .tempdir()
            .expect("tempdir");
        let cfg = StoreConfig {
            commit_log_segment_bytes: SEGMENT_BYTES,
            // Smaller than RocketMQ's 5 M slots / 20 M entries (420 MB per
            // file) so that the untimed store rotation stays quick; the
            // per-put index work is the same.
            index_slots: 500_000,
            index_entries: 2_000_000,
            flush_mode,
            ..StoreConfig::default()
        };
        let disk = MmapDisk::new(dir.path()).expect("disk");
        // The warm benches measure the steady state, in which every CommitLog
        // segment was prepared ahead by the disk's allocator (zero-filled
        // under SYNC_FLUSH). Only a fresh store's first segment is not (see
        // `MmapDisk::create_segment`), and every bench store is fresh, so
        // prepare that one too, and wait for it (claiming a segment whose
        // zero fill still runs would stop the fill).
        let prepare = if flush_mode == FlushMode::Sync {
            Prepare::ZeroFilled
        } else {
            Prepare::Cold
        };
        disk.prepare_segment(&format!("commitlog/{:020}", 0), SEGMENT_BYTES, prepare);
        disk.wait_for_allocator();
        let disk_handle = disk.clone();
        let store = pollster::block_on(MessageStore::open(disk, SystemClock::new(), cfg))
            .expect("store opens");
        Self {
            store: Arc::new(store),
            disk: disk_handle,
            _dir: dir,
        }
    }

    /// Waits until the disk's allocator thread is idle, so that preparing
    /// the next segment (a 256 MiB fallocate and pre-fault, queued by the
    /// first write to a segment) does not run during a timed region.
    fn wait_for_allocator(&self) {
        self.disk.wait_for_allocator();
    }
}

/// Builds producer-like 1 KiB messages: TAGS and a fresh `UNIQ_KEY` each.
struct Messages {
    body: Bytes,
    uniq: UniqKeyGenerator,
    born_host: SocketAddr,
    store_host: SocketAddr,
}

impl Messages {
    fn new() -> Self {
        Self {
            body: Bytes::from(vec![b'x'; BODY_BYTES]),
            uniq: UniqKeyGenerator::new("10.0.0.1".parse().expect("ip"), 4242, 7),
            born_host: "10.0.0.1:50000".parse().expect("addr"),
            store_host: "127.0.0.1:10911".parse().expect("addr"),
        }
    }

    fn next(&mut self, queue_id: i32) -> MessageInput {
        let mut props = Properties::new();
        props.insert(keys::TAGS, "TagA").expect("valid property");
        let key = self.uniq.next(1_700_000_000_000);
        props.insert(keys::UNIQ_KEY, &key).expect("valid property");
        MessageInput {
            topic: TOPIC.to_owned(),
            queue_id,
            flag: 0,
            sys_flag: 0,
            born_timestamp_ms: 1_700_000_000_000,
            born_host: self.born_host,
            store_host: self.store_host,
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body: self.body.clone(),
            properties: Bytes::from(props.encode()),
        }
    }

    fn chunk(&mut self, n: u64) -> Vec<MessageInput> {
        (0..n).map(|_| self.next(0)).collect()
    }
}

/// Runs `iters` timed operations of `op` over pre-built messages, opening a
/// fresh store (untimed) whenever the log nears the end of its segment.
fn timed_appends(
    iters: u64,
    current: &mut BenchStore,
    msgs: &mut Messages,
    flush_mode: FlushMode,
    op: impl Fn(&Store, MessageInput),
) -> Duration {
    let mut total = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let written = current.store.commit_log().written().get();
        if written >= ROTATE_AT_BYTES {
            *current = BenchStore::open(flush_mode);
            warm(current, msgs, &op);
            continue;
        }
        // Each record is a little over 1 KiB; 2 KiB per message is a safe
        // bound on how many fit before the rotation point.
        let room = ((ROTATE_AT_BYTES - written) / 2048).max(1);
        let n = left.min(room).min(CHUNK_MESSAGES);
        let batch = msgs.chunk(n);
        let start = Stopwatch::start();
        for m in batch {
            op(&current.store, m);
        }
        total += start.elapsed();
        left -= n;
    }
    total
}

/// One untimed operation: creates the first segment (and index file) so the
/// timed region starts on a warm mapping, then lets the preparation of the
/// next segments finish.
fn warm(current: &mut BenchStore, msgs: &mut Messages, op: &impl Fn(&Store, MessageInput)) {
    op(&current.store, msgs.next(0));
    current.wait_for_allocator();
}

fn commit_log_append(c: &mut Criterion) {
    let mut g = c.benchmark_group("storage");
    g.throughput(Throughput::Bytes(BODY_BYTES as u64));
    let mut msgs = Messages::new();
    let append = |s: &Store, m: MessageInput| {
        black_box(s.commit_log().append(&m).expect("append"));
    };
    let mut current = BenchStore::open(FlushMode::Async);
    warm(&mut current, &mut msgs, &append);
    g.bench_function("commit_log_append_1kib", |b| {
        b.iter_custom(|iters| {
            timed_appends(iters, &mut current, &mut msgs, FlushMode::Async, append)
        });
    });
    g.finish();
}

/// One `MessageStore::put` that does not wait for the disk.
fn put_async(s: &Store, m: MessageInput) {
    black_box(pollster::block_on(s.put(m, false)).expect("put"));
}

/// A fresh ASYNC flush store, warmed (see [`warm`]).
fn warm_async_store(msgs: &mut Messages) -> BenchStore {
    let mut current = BenchStore::open(FlushMode::Async);
    warm(&mut current, msgs, &put_async);
    current
}

fn store_put_async(c: &mut Criterion) {
    let mut g = c.benchmark_group("storage");
    g.throughput(Throughput::Bytes(BODY_BYTES as u64));
    let mut msgs = Messages::new();
    let mut current = warm_async_store(&mut msgs);
    g.bench_function("store_put_1kib_async", |b| {
        b.iter_custom(|iters| {
            timed_appends(iters, &mut current, &mut msgs, FlushMode::Async, put_async)
        });
    });
    g.finish();
}

/// Messages per `put_batch` in `store_put_batch_64x1kib_async` (a
/// producer's batch of 64, as in the peer table's b64x4 row).
const PUT_BATCH: u64 = 64;

/// `MessageStore::put_batch` of 64 × 1 KiB in ASYNC flush mode: one run
/// encoded into the staging buffer and written with one `pwrite`, then
/// dispatched; a fresh store (untimed) before the segment fills.
fn store_put_batch_async(c: &mut Criterion) {
    let mut g = c.benchmark_group("storage");
    g.throughput(Throughput::Bytes(PUT_BATCH * BODY_BYTES as u64));
    let mut msgs = Messages::new();
    let mut current = warm_async_store(&mut msgs);
    g.bench_function("store_put_batch_64x1kib_async", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                if current.store.commit_log().written().get() >= ROTATE_AT_BYTES {
                    current = warm_async_store(&mut msgs);
                }
                let batch = msgs.chunk(PUT_BATCH);
                let start = Stopwatch::start();
                let stored = pollster::block_on(current.store.put_batch(batch, false));
                total += start.elapsed();
                black_box(stored.expect("put_batch"));
            }
            total
        });
    });
    g.finish();
}

fn consume_queue_append(c: &mut Criterion) {
    let mut g = c.benchmark_group("storage");
    g.throughput(Throughput::Elements(1));
    let current = BenchStore::open(FlushMode::Async);
    let (cq, _) = current
        .store
        .consume_queues()
        .get_or_open("CqBench", 0)
        .expect("queue opens");
    let first = CqEntry {
        phys_offset: CommitLogOffset::new(0),
        size: 1100,
        tags_code: 0x7A6B,
    };
    cq.append(QueueOffset::new(0), first).expect("append");
    current.wait_for_allocator();
    let mut next = 1u64;
    g.bench_function("consume_queue_append", |b| {
        b.iter(|| {
            let entry = CqEntry {
                phys_offset: CommitLogOffset::new(next * 1100),
                size: 1100,
                tags_code: 0x7A6B,
            };
            cq.append(QueueOffset::new(next), entry).expect("append");
            next += 1;
        });
    });
    g.finish();
}

fn get_by_offset(c: &mut Criterion) {
    let mut g = c.benchmark_group("storage");
    g.throughput(Throughput::Elements(GET_BATCH as u64));
    let current = BenchStore::open(FlushMode::Async);
    let mut msgs = Messages::new();
    for _ in 0..GET_FILL_MESSAGES {
        pollster::block_on(current.store.put(msgs.next(0), false)).expect("fill");
    }
    current.wait_for_allocator();
    assert_eq!(
        current.store.max_offset(TOPIC, 0),
        QueueOffset::new(GET_FILL_MESSAGES)
    );
    let filter = TagsFilter::default();
    let mut offset = 0u64;
    g.bench_function("get_32_by_offset", |b| {
        b.iter(|| {
            let r = current
                .store
                .get(
                    TOPIC,
                    0,
                    QueueOffset::new(offset),
                    GET_BATCH,
                    1 << 20,
                    &filter,
                )
                .expect("get");
            assert_eq!(r.messages.len(), GET_BATCH);
            black_box(r);
            offset = (offset + GET_BATCH as u64) % (GET_FILL_MESSAGES - GET_BATCH as u64);
        });
    });
    g.finish();
}

/// A fresh segment of `SEGMENT_BYTES` on its own disk, with the directory.
/// A new 256 MiB segment in its own directory: created cold (its pages
/// fault on first write), or prepared ahead and pre-faulted writable as the
/// store's allocator prepares every CommitLog segment after the first.
fn fresh_segment(prefaulted: bool) -> (MmapSegment, tempfile::TempDir) {
    let dir = tempfile::Builder::new()
        .prefix("sluice-bench-")
        .tempdir()
        .expect("tempdir");
    let disk = MmapDisk::new(dir.path()).expect("disk");
    if prefaulted {
        disk.prepare_segment("seg", SEGMENT_BYTES, Prepare::WarmHead);
    }
    let seg = disk.create_segment("seg", SEGMENT_BYTES).expect("segment");
    (seg, dir)
}

/// Times 1 KiB writes, each to pages never written since the segment was
/// created; a new segment (untimed) replaces a full one.
fn first_writes(
    iters: u64,
    seg: &mut (MmapSegment, tempfile::TempDir),
    next: &mut u64,
    prefaulted: bool,
    buf: &[u8],
) -> Duration {
    let slots = SEGMENT_BYTES / BODY_BYTES as u64;
    let mut total = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        if *next == slots {
            *seg = fresh_segment(prefaulted);
            *next = 0;
        }
        let n = left.min(slots - *next);
        let start = Stopwatch::start();
        for i in *next..*next + n {
            seg.0.write_at(i * BODY_BYTES as u64, buf).expect("write");
        }
        total += start.elapsed();
        *next += n;
        left -= n;
    }
    total
}

/// The body CRC every append computes: the floor under the append, with
/// the copy into the mapping.
fn crc32_1kib(c: &mut Criterion) {
    let mut g = c.benchmark_group("storage");
    g.throughput(Throughput::Bytes(BODY_BYTES as u64));
    let body = vec![0x5Au8; BODY_BYTES];
    g.bench_function("crc32_1kib", |b| {
        b.iter(|| sluice_core::message::body_crc(black_box(&body)));
    });
    g.finish();
}

fn mmap_segment_write(c: &mut Criterion) {
    let mut g = c.benchmark_group("storage/mmap_segment_write_1kib");
    g.throughput(Throughput::Bytes(BODY_BYTES as u64));
    let buf = vec![0x5Au8; BODY_BYTES];
    let slots = SEGMENT_BYTES / BODY_BYTES as u64;

    for (name, prefaulted) in [("first_write", false), ("prefaulted_first_write", true)] {
        let mut fresh = fresh_segment(prefaulted);
        let mut next = 0u64;
        g.bench_function(name, |b| {
            b.iter_custom(|iters| first_writes(iters, &mut fresh, &mut next, prefaulted, &buf));
        });
    }

    // The same segment, every page dirtied once before timing; writes wrap.
    let dirty = fresh_segment(false);
    for i in 0..slots {
        dirty
            .0
            .write_at(i * BODY_BYTES as u64, &buf)
            .expect("write");
    }
    let mut next = 0u64;
    g.bench_function("rewrite", |b| {
        b.iter(|| {
            dirty
                .0
                .write_at(next * BODY_BYTES as u64, &buf)
                .expect("write");
            next = (next + 1) % slots;
        });
    });
    g.finish();
}

/// Totals over every timed run of one writer count, for the summary line.
#[derive(Default)]
struct GroupCommitTotals {
    messages: u64,
    syncs: u64,
    elapsed: Duration,
}

fn group_commit(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let mut g = c.benchmark_group("storage/group_commit_sync_flush");
    g.throughput(Throughput::Elements(1));
    g.sample_size(10);
    for writers in [1u64, 16, 64] {
        let current = BenchStore::open(FlushMode::Sync);
        let mut msgs = Messages::new();
        pollster::block_on(current.store.put(msgs.next(0), true)).expect("warm");
        current.wait_for_allocator();
        let mut totals = GroupCommitTotals::default();
        g.bench_with_input(BenchmarkId::from_parameter(writers), &writers, |b, &n| {
            b.iter_custom(|iters| {
                let per_writer = iters.div_ceil(n);
                let batches: Vec<Vec<MessageInput>> =
                    (0..n).map(|_| msgs.chunk(per_writer)).collect();
                let syncs_before = current.store.commit_log().sync_count();
                let start = now();
                rt.block_on(async {
                    let mut tasks = tokio::task::JoinSet::new();
                    for batch in batches {
                        let store = Arc::clone(&current.store);
                        tasks.spawn(async move {
                            for m in batch {
                                store.put(m, true).await.expect("put");
                            }
                        });
                    }
                    while let Some(done) = tasks.join_next().await {
                        done.expect("writer task");
                    }
                });
                let elapsed = start.elapsed();
                let done = per_writer * n;
                totals.messages += done;
                totals.syncs += current.store.commit_log().sync_count() - syncs_before;
                totals.elapsed += elapsed;
                // Criterion divides by `iters`; scale for the rounding up.
                let scaled = elapsed.as_nanos() * u128::from(iters) / u128::from(done);
                Duration::from_nanos(u64::try_from(scaled).unwrap_or(u64::MAX))
            });
        });
        report_group_commit(writers, &totals);
    }
    g.finish();
}

#[expect(
    clippy::cast_precision_loss,
    reason = "message and sync counts far below 2^52"
)]
fn report_group_commit(writers: u64, t: &GroupCommitTotals) {
    if t.messages == 0 {
        return; // filtered out on the command line
    }
    let secs = t.elapsed.as_secs_f64().max(f64::MIN_POSITIVE);
    println!(
        "group_commit_sync_flush/{writers}: {} msgs, {} syncs in {:.2} s: {:.0} msg/s, {:.0} syncs/s, {:.2} msgs/sync",
        t.messages,
        t.syncs,
        secs,
        t.messages as f64 / secs,
        t.syncs as f64 / secs,
        t.messages as f64 / (t.syncs.max(1)) as f64,
    );
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(20);
    targets = commit_log_append, store_put_async, store_put_batch_async, consume_queue_append, get_by_offset,
        mmap_segment_write, crc32_1kib, group_commit
}
criterion_main!(benches);
