//! Named behaviours of the `MessageStore` on the simulated disk: rollover,
//! torn tails, corruption, fsyncgate poisoning, ENOSPC, ConsumeQueue
//! rebuild, retention, queries and visibility.

mod support;

use std::time::Duration;

use sluice_core::disk::{Disk, Segment};
use sluice_core::store::{GetStatus, TagsFilter};
use sluice_core::testing::{CrashWeights, ManualClock, SimDisk, SimDiskConfig};
use sluice_core::{Error, FlushMode, MessageStore, QueueOffset, StoreConfig};
use support::{block_on, decode, msg};

const T0_MS: u64 = 1_700_000_000_000;

fn open(
    disk: &SimDisk,
    clock: &ManualClock,
    cfg: StoreConfig,
) -> MessageStore<SimDisk, ManualClock> {
    block_on(MessageStore::open(disk.clone(), clock.clone(), cfg)).expect("store opens")
}

/// The bodies of [`all_bodies`], without their offsets.
fn bodies(store: &MessageStore<SimDisk, ManualClock>, topic: &str, queue_id: i32) -> Vec<Vec<u8>> {
    all_bodies(store, topic, queue_id)
        .into_iter()
        .map(|(_, b)| b)
        .collect()
}

fn all_bodies(
    store: &MessageStore<SimDisk, ManualClock>,
    topic: &str,
    queue_id: i32,
) -> Vec<(u64, Vec<u8>)> {
    let mut out = Vec::new();
    let mut next = store.min_offset(topic, queue_id);
    loop {
        let r = store
            .get(topic, queue_id, next, 32, 1 << 20, &TagsFilter::default())
            .expect("get");
        if r.status != GetStatus::Found {
            return out;
        }
        for raw in &r.messages {
            let rec = decode(raw);
            out.push((
                u64::try_from(rec.queue_offset).expect("offset"),
                rec.body.to_vec(),
            ));
        }
        next = r.next_begin_offset;
    }
}

fn body(i: usize) -> Vec<u8> {
    format!("message-{i:05}-{}", "x".repeat(i % 200)).into_bytes()
}

#[test]
fn puts_roll_over_segments_and_read_back_in_queue_order() {
    let disk = SimDisk::new(1);
    let clock = ManualClock::new(T0_MS);
    let store = open(&disk, &clock, StoreConfig::for_tests());
    for i in 0..2_000 {
        let queue = i32::try_from(i % 3).expect("small");
        let a = block_on(store.put(msg("Orders", queue, &body(i), None, None), true)).expect("put");
        assert_eq!(a.queue_offset, QueueOffset::new((i / 3) as u64));
    }
    assert!(
        store.commit_log().chain_segments() > 3,
        "rollover must have happened"
    );
    for queue in 0..3 {
        let got = all_bodies(&store, "Orders", queue);
        let want: Vec<_> = (0..2_000)
            .filter(|i| i % 3 == usize::try_from(queue).expect("small"))
            .enumerate()
            .map(|(q, i)| (q as u64, body(i)))
            .collect();
        assert_eq!(got, want);
    }
}

#[test]
fn torn_tail_is_truncated_and_zeroed_and_acked_puts_survive() {
    let config = SimDiskConfig {
        crash_weights: CrashWeights {
            persisted: 1,
            lost: 1,
            torn: 4,
            garbage: 0,
        },
        ..SimDiskConfig::default()
    };
    for seed in 0..20 {
        let disk = SimDisk::with_config(seed, config.clone());
        let clock = ManualClock::new(T0_MS);
        let store = open(&disk, &clock, StoreConfig::for_tests());
        for i in 0..300 {
            block_on(store.put(msg("T", 0, &body(i), None, None), true)).expect("acked put");
        }
        // Written but never synced, so never acknowledged.
        for i in 300..400 {
            block_on(store.put(msg("T", 0, &body(i), None, None), false)).expect("unacked put");
        }
        let written = store.commit_log().written().get();
        drop(store);
        disk.power_loss();
        let store = open(&disk, &clock, StoreConfig::for_tests());
        let got = all_bodies(&store, "T", 0);
        assert!(
            got.len() >= 300,
            "seed {seed}: acked puts lost: {}",
            got.len()
        );
        for (q, (off, b)) in got.iter().enumerate() {
            assert_eq!((*off, b.clone()), (q as u64, body(q)), "seed {seed}");
        }
        let end = store.commit_log().written().get();
        assert!(end <= written);
        // Everything after the recovered end is zero, durably.
        let seg = StoreConfig::for_tests().commit_log_segment_bytes;
        let start = end - end % seg;
        let path = format!("commitlog/{start:020}");
        let durable = disk.durable_contents(&path).expect("segment exists");
        let rel = usize::try_from(end - start).expect("small");
        assert!(
            durable[rel..].iter().all(|b| *b == 0),
            "seed {seed}: tail not zeroed"
        );
        // New puts continue the queue without a gap.
        let a = block_on(store.put(msg("T", 0, b"after", None, None), true)).expect("put");
        assert_eq!(a.queue_offset, QueueOffset::new(got.len() as u64));
    }
}

/// After a crash the rest of the active segment past the log's end is
/// zeroed without being read where it was never written: there, reading
/// costs a kernel page zeroing per 4 KiB (1.4 s of CPU for the rest of a
/// 1 GiB segment). Stale bytes past the end are still zeroed.
#[test]
fn a_start_after_a_crash_reads_only_the_written_part_of_the_active_segment() {
    let cfg = StoreConfig {
        commit_log_segment_bytes: 16 << 20,
        ..StoreConfig::for_tests()
    };
    let disk = SimDisk::new(4);
    let clock = ManualClock::new(T0_MS);
    let store = open(&disk, &clock, cfg.clone());
    for i in 0..20 {
        block_on(store.put(msg("T", 0, &body(i), None, None), true)).expect("put");
    }
    let end = store.commit_log().written().get();
    drop(store);
    // A stale page far past the end (a record of an earlier life of this
    // file) must not survive the start.
    let seg = disk
        .open_segment("commitlog/00000000000000000000")
        .expect("open")
        .expect("exists");
    seg.write_at(8 << 20, b"stale bytes").expect("write");
    drop(seg);
    disk.process_crash();
    let read_before = disk.stats().read_bytes;
    let store = open(&disk, &clock, cfg);
    let read = disk.stats().read_bytes - read_before;
    assert!(
        read < 1 << 20,
        "the start read {read} bytes of a {end} byte log"
    );
    assert_eq!(bodies(&store, "T", 0).len(), 20);
    let durable = disk
        .durable_contents("commitlog/00000000000000000000")
        .expect("segment");
    assert!(
        durable[8 << 20..(8 << 20) + 11].iter().all(|b| *b == 0),
        "stale bytes kept"
    );
}

#[test]
fn mid_log_corruption_is_reported_not_truncated() {
    let disk = SimDisk::new(7);
    let clock = ManualClock::new(T0_MS);
    let store = open(&disk, &clock, StoreConfig::for_tests());
    let mut offsets = Vec::new();
    for i in 0..200 {
        offsets.push(block_on(store.put(msg("T", 0, &body(i), None, None), true)).expect("put"));
    }
    block_on(store.checkpoint()).expect("checkpoint");
    drop(store); // a crash: the abort marker stays
                 // Flip one body byte of record 100, durably.
    let victim = offsets[100];
    let seg_bytes = StoreConfig::for_tests().commit_log_segment_bytes;
    let start = victim.phys_offset.get() - victim.phys_offset.get() % seg_bytes;
    let seg = disk
        .open_segment(&format!("commitlog/{start:020}"))
        .expect("open")
        .expect("exists");
    let at = victim.phys_offset.get() - start + u64::from(victim.size) - 40;
    let old = seg.slice(at, 1).expect("read")[0];
    seg.write_at(at, &[old ^ 0xFF]).expect("write");
    block_on(seg.sync(0, seg_bytes)).expect("sync");
    disk.power_loss();

    let err = block_on(MessageStore::open(
        disk.clone(),
        clock.clone(),
        StoreConfig::for_tests(),
    ))
    .err()
    .expect("corruption must stop the start");
    assert!(
        matches!(err, Error::Corrupt { offset, .. } if offset == victim.phys_offset.get()),
        "unexpected error: {err}"
    );
    // Nothing was truncated by the failed start: the acknowledged records
    // after the damage are still on disk for an operator to salvage.
    let last = offsets[199];
    let last_start = last.phys_offset.get() - last.phys_offset.get() % seg_bytes;
    let durable = disk
        .durable_contents(&format!("commitlog/{last_start:020}"))
        .expect("exists");
    let rel = usize::try_from(last.phys_offset.get() - last_start).expect("small");
    assert_ne!(
        &durable[rel..rel + 8],
        &[0u8; 8],
        "records after the damage were wiped"
    );

    // An explicit repair starts, keeping everything before the damage.
    let repair = StoreConfig {
        repair_truncate_corrupt: true,
        ..StoreConfig::for_tests()
    };
    let store = open(&disk, &clock, repair);
    assert_eq!(all_bodies(&store, "T", 0).len(), 100);
}

#[test]
fn failed_sync_poisons_the_log_and_nothing_is_acked_after() {
    let disk = SimDisk::new(3);
    let clock = ManualClock::new(T0_MS);
    let store = open(&disk, &clock, StoreConfig::for_tests());
    block_on(store.put(msg("T", 0, b"before", None, None), true)).expect("put");
    disk.fail_next_sync();
    let failed = block_on(store.put(msg("T", 0, b"during", None, None), true));
    assert!(
        failed.is_err(),
        "a put whose sync failed must not be acknowledged"
    );
    // The fsyncgate trap: a retried sync would now "succeed". The store
    // must refuse instead.
    let later = block_on(store.put(msg("T", 0, b"later", None, None), true));
    assert!(matches!(later, Err(Error::Poisoned { .. })), "{later:?}");
    assert!(matches!(
        block_on(store.flush()),
        Err(Error::Poisoned { .. })
    ));
    // The failed record never became visible to consumers.
    let got = all_bodies(&store, "T", 0);
    assert_eq!(got, vec![(0, b"before".to_vec())]);
}

#[test]
fn enospc_on_a_new_segment_fails_the_put_and_reads_keep_working() {
    let disk = SimDisk::new(4);
    let clock = ManualClock::new(T0_MS);
    let store = open(&disk, &clock, StoreConfig::for_tests());
    let mut acked = Vec::new();
    while store.commit_log().written().get() < 60 * 1024 {
        let b = body(acked.len());
        block_on(store.put(msg("T", 0, &b, None, None), true)).expect("put");
        acked.push(b);
    }
    disk.set_capacity(Some(0));
    let mut failed = None;
    for _ in 0..100 {
        let b = body(acked.len());
        match block_on(store.put(msg("T", 0, &b, None, None), true)) {
            Ok(_) => acked.push(b),
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    let err = failed.expect("a put needing a new CommitLog segment must fail on a full disk");
    assert!(err.is_storage_full(), "unclear error: {err}");
    // Reads keep working and show a prefix of what was acknowledged.
    let readable: Vec<Vec<u8>> = bodies(&store, "T", 0);
    assert!(!readable.is_empty());
    assert_eq!(&acked[..readable.len()], &readable[..]);
    // Space returns: the failed put left nothing behind, every acknowledged
    // message becomes visible, and the queue continues without a gap.
    disk.set_capacity(None);
    let a =
        block_on(store.put(msg("T", 0, b"after space returns", None, None), true)).expect("put");
    assert_eq!(a.queue_offset, QueueOffset::new(acked.len() as u64));
    acked.push(b"after space returns".to_vec());
    let all: Vec<Vec<u8>> = bodies(&store, "T", 0);
    assert_eq!(all, acked);
}

#[test]
fn enospc_rolling_an_index_file_defers_dispatch_until_space_returns() {
    let disk = SimDisk::new(7);
    let clock = ManualClock::new(T0_MS);
    let cfg = StoreConfig {
        index_slots: 4,
        index_entries: 4,
        ..StoreConfig::for_tests()
    };
    let store = open(&disk, &clock, cfg);
    let put = |i: usize| {
        let b = body(i);
        let key = format!("k{i}");
        block_on(store.put(msg("T", 0, &b, Some(&key), None), true)).expect("put");
        b
    };
    // The queue's first segment exists; the next index files do not.
    let mut acked = vec![put(0)];
    disk.set_full(true);
    for i in 1..12 {
        // Every record fits the CommitLog's segment: each put is stored and
        // acknowledged, but a full index file cannot roll over.
        acked.push(put(i));
    }
    assert!(disk.stats().enospc > 0, "no index file needed creating");
    let visible_while_full = all_bodies(&store, "T", 0).len();
    assert!(
        visible_while_full < acked.len(),
        "dispatch never hit the full disk"
    );
    // Space returns: the interval flush's dispatch catches up — resuming
    // at the record whose entry was written before its index key failed.
    disk.set_full(false);
    block_on(store.flush()).expect("flush");
    acked.push(put(12));
    let all: Vec<Vec<u8>> = bodies(&store, "T", 0);
    assert_eq!(all, acked);
}

/// Tiny index files (4 keys), so keyed records roll them often.
fn tiny_index() -> StoreConfig {
    StoreConfig {
        index_slots: 4,
        index_entries: 4,
        ..StoreConfig::for_tests()
    }
}

/// Puts record `i` of queue `T`/0 with key `k{i}`; its offset and body.
fn put_keyed(store: &MessageStore<SimDisk, ManualClock>, i: usize) -> (QueueOffset, Vec<u8>) {
    let b = body(i);
    let key = format!("k{i}");
    let a = block_on(store.put(msg("T", 0, &b, Some(&key), None), true)).expect("put");
    (a.queue_offset, b)
}

/// A store on tiny index files that took 12 keyed records and crashed
/// (process crash) before a checkpoint covered them: their index files
/// roll, and recovery drops the files the checkpoint does not name, so the
/// scan after the safe point must create index files again. Returns the
/// acknowledged bodies.
fn crashed_with_keyed_tail(disk: &SimDisk, clock: &ManualClock) -> Vec<Vec<u8>> {
    let store = open(disk, clock, tiny_index());
    let acked = (0..12).map(|i| put_keyed(&store, i).1).collect();
    drop(store);
    disk.process_crash();
    acked
}

#[test]
fn a_store_restarted_on_a_full_disk_opens_serves_reads_and_catches_up() {
    let disk = SimDisk::new(9);
    let clock = ManualClock::new(T0_MS);
    let mut acked = crashed_with_keyed_tail(&disk, &clock);
    disk.set_full(true);
    let enospc_before = disk.stats().enospc;
    let store = block_on(MessageStore::open(
        disk.clone(),
        clock.clone(),
        tiny_index(),
    ))
    .expect("a store opens on a full disk");
    assert!(
        disk.stats().enospc > enospc_before,
        "recovery never needed a new file"
    );
    // Reads are served: what recovery could dispatch is visible, in order.
    let visible = bodies(&store, "T", 0);
    assert!(visible.len() < acked.len(), "nothing was left undispatched");
    assert_eq!(visible, acked[..visible.len()]);
    // A put fitting the active segment is stored while full, after every
    // record the queue holds, dispatched or not: never a reused offset.
    let (offset, b) = put_keyed(&store, 12);
    assert_eq!(offset, QueueOffset::new(12));
    acked.push(b);
    // Space returns: the interval flush dispatches the rest.
    disk.set_full(false);
    block_on(store.flush()).expect("flush");
    let want: Vec<(u64, Vec<u8>)> = acked
        .iter()
        .cloned()
        .enumerate()
        .map(|(q, b)| (q as u64, b))
        .collect();
    assert_eq!(all_bodies(&store, "T", 0), want);
    // And the next start, with space, finds the same.
    drop(store);
    disk.process_crash();
    let store = open(&disk, &clock, tiny_index());
    assert_eq!(all_bodies(&store, "T", 0), want);
}

/// Space returns while the store opens: recovery's dispatch stopped at a
/// file it could not create, but the next index file is created after it.
/// That file must start at the first undispatched record, not at the end
/// of the log: index files are named by the first record they hold, in
/// order, and the catch-up must be able to roll past it.
#[test]
fn space_returning_during_open_lets_the_deferred_tail_dispatch() {
    let disk = SimDisk::new(10);
    let clock = ManualClock::new(T0_MS);
    let mut acked = crashed_with_keyed_tail(&disk, &clock);
    // The first file recovery needs cannot be created; later ones can.
    disk.fail_next_create();
    let store = open(&disk, &clock, tiny_index());
    assert!(
        bodies(&store, "T", 0).len() < acked.len(),
        "recovery never deferred a record"
    );
    block_on(store.flush()).expect("the deferred tail dispatches");
    acked.push(put_keyed(&store, 12).1);
    block_on(store.flush()).expect("flush");
    assert_eq!(bodies(&store, "T", 0), acked);
    // Every key is found again.
    for i in 0..13 {
        let found = store
            .query_by_key("T", &format!("k{i}"), 8, 0, i64::MAX)
            .expect("query");
        assert_eq!(found.len(), 1, "key k{i}");
    }
}

/// Records the store keeps notes of for dispatch (`commit_log::fresh`):
/// past them, dispatch reads records back from the log.
const FRESH_NOTES_MAX: usize = 8192;

#[test]
fn a_commit_log_read_error_fails_the_get_and_does_not_fence_dispatch() {
    let disk = SimDisk::new(8);
    let clock = ManualClock::new(T0_MS);
    let store = open(&disk, &clock, StoreConfig::for_tests());
    // Held back by the gate, the appender's notes fill up: the record after
    // them is one dispatch reads back from the log.
    store.set_confirmed(sluice_core::CommitLogOffset::new(0));
    let noted: Vec<_> = (0..FRESH_NOTES_MAX)
        .map(|_| msg("T", 0, b"n", None, None))
        .collect();
    for chunk in noted.chunks(64) {
        block_on(store.put_batch(chunk.to_vec(), true)).expect("put");
    }
    block_on(store.put(msg("T", 0, b"a", None, None), true)).expect("put");
    // An EIO on that read must defer the record, not fence the store.
    disk.fail_reads_under("commitlog", 1);
    store.set_confirmed(sluice_core::CommitLogOffset::UNGATED);
    assert_eq!(disk.stats().read_eio_injected, 1, "dispatch read the log");
    let n = u64::try_from(FRESH_NOTES_MAX).expect("fits");
    // The record that could not be read waits, and every one after it.
    assert!(
        store.max_offset("T", 0) < QueueOffset::new(n + 1),
        "deferred"
    );
    block_on(store.put(msg("T", 0, b"b", None, None), true))
        .expect("a read error does not fence the store");
    assert_eq!(store.max_offset("T", 0), QueueOffset::new(n + 2));
    // A get whose record cannot be read fails: it never answers past a
    // message it did not return.
    disk.fail_reads_under("commitlog", 1);
    let failed = store.get(
        "T",
        0,
        QueueOffset::new(n),
        32,
        1 << 20,
        &TagsFilter::default(),
    );
    assert!(failed.is_err(), "{failed:?}");
    let got: Vec<(u64, Vec<u8>)> = all_bodies(&store, "T", 0);
    assert_eq!(got.len(), FRESH_NOTES_MAX + 2);
    assert_eq!(
        got[FRESH_NOTES_MAX..],
        [(n, b"a".to_vec()), (n + 1, b"b".to_vec())]
    );
}

#[test]
fn deleted_consume_queue_is_rebuilt_identical() {
    let disk = SimDisk::new(5);
    let clock = ManualClock::new(T0_MS);
    let store = open(&disk, &clock, StoreConfig::for_tests());
    for i in 0..500 {
        let q = i32::try_from(i % 2).expect("small");
        block_on(store.put(
            msg(
                "T",
                q,
                &body(i),
                None,
                Some(if i % 5 == 0 { "A" } else { "B" }),
            ),
            true,
        ))
        .expect("put");
    }
    let entries = |s: &MessageStore<SimDisk, ManualClock>| {
        let cq = s.consume_queues().get("T", 1).expect("queue");
        let mut all = Vec::new();
        let mut q = cq.min_offset();
        while q < cq.max_offset() {
            let e = cq.entry(q).expect("read").expect("entry");
            all.push(e);
            q = q.plus(1);
        }
        all
    };
    let before = entries(&store);
    block_on(store.shutdown()).expect("shutdown");
    drop(store);
    for name in disk.list("consumequeue/T/1").expect("list") {
        disk.remove(&format!("consumequeue/T/1/{name}"))
            .expect("remove");
    }
    let store = open(&disk, &clock, StoreConfig::for_tests());
    assert_eq!(entries(&store), before);
    assert_eq!(before.len(), 250);
}

#[test]
fn lost_first_consume_queue_files_are_rebuilt_not_taken_for_retention() {
    let disk = SimDisk::new(9);
    let clock = ManualClock::new(T0_MS);
    let store = open(&disk, &clock, StoreConfig::for_tests());
    let put = |queue: i32, i: usize| {
        block_on(store.put(msg("T", queue, &body(i), None, None), true)).expect("put");
    };
    // Queue 0 is listed in the checkpoint; queue 1 starts after it.
    (0..150).for_each(|i| put(0, i));
    block_on(store.checkpoint()).expect("checkpoint");
    (150..300).for_each(|i| put(1, i));
    (300..320).for_each(|i| put(0, i));
    let entries = |s: &MessageStore<SimDisk, ManualClock>, queue: i32| {
        let cq = s.consume_queues().get("T", queue).expect("queue");
        (0..cq.max_offset().get())
            .map(|q| cq.entry(QueueOffset::new(q)).expect("read"))
            .collect::<Vec<_>>()
    };
    let before = [entries(&store, 0), entries(&store, 1)];
    assert_eq!((before[0].len(), before[1].len()), (170, 150));
    drop(store);
    disk.process_crash();
    // Each queue's first file is lost; its later files survive.
    for queue in 0..2 {
        disk.remove(&format!("consumequeue/T/{queue}/00000000000000000000"))
            .expect("remove");
    }
    let store = open(&disk, &clock, StoreConfig::for_tests());
    assert_eq!(store.min_offset("T", 0), QueueOffset::new(0));
    assert_eq!([entries(&store, 0), entries(&store, 1)], before);
}

#[test]
fn retention_removes_old_segments_and_keeps_offsets_consistent() {
    let disk = SimDisk::new(6);
    let clock = ManualClock::new(T0_MS);
    let cfg = StoreConfig {
        file_reserved_ms: 3_600_000,
        ..StoreConfig::for_tests()
    };
    let store = open(&disk, &clock, cfg);
    for i in 0..1_000 {
        block_on(store.put(msg("T", 0, &body(i), None, None), true)).expect("put");
        if i == 600 {
            clock.advance(Duration::from_secs(2 * 3600));
        }
    }
    let max_before = store.max_offset("T", 0);
    let report = store.clean_expired().expect("retention");
    assert!(report.segments_deleted > 0, "{report:?}");
    let min = store.min_offset("T", 0);
    assert!(
        min > QueueOffset::new(0) && min <= QueueOffset::new(601),
        "min {min:?}"
    );
    assert_eq!(store.max_offset("T", 0), max_before);
    let stale = store
        .get(
            "T",
            0,
            QueueOffset::new(0),
            32,
            1 << 20,
            &TagsFilter::default(),
        )
        .expect("get");
    assert_eq!(
        (stale.status, stale.next_begin_offset),
        (GetStatus::OffsetTooSmall, min)
    );
    let got = all_bodies(&store, "T", 0);
    assert_eq!(got.first().map(|(q, _)| *q), Some(min.get()));
    assert_eq!(got.len() as u64, max_before.get() - min.get());
    assert!(got
        .iter()
        .all(|(q, b)| *b == body(usize::try_from(*q).expect("small"))));
    // Records newer than the cutoff are kept.
    assert!(min <= QueueOffset::new(601));
    // And the state survives a restart.
    block_on(store.shutdown()).expect("shutdown");
    drop(store);
    let store = open(&disk, &clock, StoreConfig::for_tests());
    assert_eq!(store.min_offset("T", 0), min);
    assert_eq!(all_bodies(&store, "T", 0), got);
}

/// A record's keys go into the index together; those that do not fit the
/// current file go on in one new file. A record with more keys than a whole
/// file holds (11 against 4 here) has the rest left out — and neither
/// wedges dispatch (a second file named by the same record cannot be
/// created) nor hides the records after it, before or after a restart
/// that rebuilds the index from the log.
#[test]
fn a_record_with_more_keys_than_an_index_file_holds_indexes_them_all() {
    let disk = SimDisk::new(8);
    let clock = ManualClock::new(T0_MS);
    let store = open(&disk, &clock, tiny_index());
    put_keyed(&store, 0);
    let many: Vec<String> = (0..11).map(|k| format!("m{k}")).collect();
    block_on(store.put(msg("T", 0, &body(1), Some(&many.join(" ")), None), true)).expect("put");
    put_keyed(&store, 2);
    block_on(store.flush()).expect("flush");
    // k0 and m0..m2 fill the first file, m3..m6 the record's own file.
    let expected = |key: &str| usize::from(!matches!(key, "m7" | "m8" | "m9" | "m10"));
    let found = |store: &MessageStore<SimDisk, ManualClock>, key: &str| {
        store
            .query_by_key("T", key, 8, 0, i64::MAX)
            .expect("query")
            .len()
    };
    for key in many.iter().map(String::as_str).chain(["k0", "k2"]) {
        assert_eq!(
            found(&store, key),
            expected(key),
            "key {key} before the restart"
        );
    }
    block_on(store.shutdown()).expect("shutdown");
    drop(store);
    disk.remove("checkpoint").expect("checkpoint");
    let store = open(&disk, &clock, tiny_index());
    for key in many.iter().map(String::as_str).chain(["k0", "k2"]) {
        assert_eq!(
            found(&store, key),
            expected(key),
            "key {key} after the rebuild"
        );
    }
}

#[test]
fn query_by_key_and_unique_key_and_time() {
    let disk = SimDisk::new(8);
    let clock = ManualClock::new(T0_MS);
    let store = open(&disk, &clock, StoreConfig::for_tests());
    for i in 0..300 {
        let key = format!("order-{}", i % 50);
        block_on(store.put(msg("T", 0, &body(i), Some(&key), None), true)).expect("put");
        clock.advance(Duration::from_millis(10));
    }
    let hits = store
        .query_by_key("T", "order-7", 32, 0, i64::MAX)
        .expect("query");
    assert_eq!(hits.len(), 6);
    assert!(hits.iter().all(|raw| {
        let rec = decode(raw);
        String::from_utf8_lossy(&rec.body).starts_with("message-") && {
            let i: usize = String::from_utf8_lossy(&rec.body)[8..13]
                .parse()
                .expect("index");
            i % 50 == 7
        }
    }));
    assert!(store
        .query_by_key("Other", "order-7", 32, 0, i64::MAX)
        .expect("query")
        .is_empty());
    assert!(store
        .query_by_key("T", "order-999", 32, 0, i64::MAX)
        .expect("query")
        .is_empty());
    // Search by store time: message i was stored at T0 + 10 i ms.
    let q = store
        .search_offset_by_time("T", 0, i64::try_from(T0_MS).expect("ms") + 1_000)
        .expect("search");
    assert_eq!(q, QueueOffset::new(100));
    assert_eq!(
        store.earliest_store_time("T", 0).expect("time"),
        Some(i64::try_from(T0_MS).expect("ms"))
    );
}

#[test]
fn sync_flush_consumers_see_only_durable_messages() {
    let disk = SimDisk::new(9);
    let clock = ManualClock::new(T0_MS);
    let store = open(
        &disk,
        &clock,
        StoreConfig {
            flush_mode: FlushMode::Sync,
            ..StoreConfig::for_tests()
        },
    );
    block_on(store.put(msg("T", 0, b"not yet durable", None, None), false)).expect("put");
    assert_eq!(
        store.max_offset("T", 0),
        QueueOffset::new(0),
        "visible before it is durable"
    );
    block_on(store.flush()).expect("flush");
    assert_eq!(store.max_offset("T", 0), QueueOffset::new(1));
}

#[test]
fn clean_restart_trusts_the_checkpoint_and_does_not_rescan() {
    let disk = SimDisk::new(10);
    let clock = ManualClock::new(T0_MS);
    let store = open(&disk, &clock, StoreConfig::for_tests());
    let first = block_on(store.put(msg("T", 0, b"first", None, None), true)).expect("put");
    for i in 0..50 {
        block_on(store.put(msg("T", 0, &body(i), None, None), true)).expect("put");
    }
    block_on(store.shutdown()).expect("shutdown");
    drop(store);
    // Damage a record below the checkpoint: a clean restart must not read it.
    let seg = disk
        .open_segment("commitlog/00000000000000000000")
        .expect("open")
        .expect("exists");
    // The body starts 88 bytes into a record with IPv4 hosts; the CRC covers it.
    seg.write_at(first.phys_offset.get() + 88, b"\xFF")
        .expect("write");
    let store = open(&disk, &clock, StoreConfig::for_tests());
    assert_eq!(store.max_offset("T", 0), QueueOffset::new(51));
    // After a crash the same damage is found by the verification window.
    drop(store);
    assert!(block_on(MessageStore::open(
        disk.clone(),
        clock.clone(),
        StoreConfig::for_tests()
    ))
    .is_err());
}

/// A future that is pending on its first poll only.
struct YieldOnce(bool);

impl std::future::Future for YieldOnce {
    type Output = ();
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        if self.0 {
            std::task::Poll::Ready(())
        } else {
            self.0 = true;
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }
    }
}

#[test]
fn group_commit_lets_many_writers_share_one_sync() {
    let disk = SimDisk::new(11);
    // Every sync takes "a while": it yields once before completing.
    disk.set_sync_delay(Some(std::sync::Arc::new(|_| Box::pin(YieldOnce(false)))));
    let clock = ManualClock::new(T0_MS);
    let store = open(
        &disk,
        &clock,
        StoreConfig {
            flush_mode: FlushMode::Sync,
            ..StoreConfig::for_tests()
        },
    );
    let syncs_before = store.commit_log().sync_count();
    let mut puts: Vec<_> = (0..50)
        .map(|i| Box::pin(store.put(msg("T", 0, &body(i), None, None), true)))
        .collect();
    let mut done: Vec<Option<sluice_core::Result<sluice_core::commit_log::Appended>>> =
        (0..50).map(|_| None).collect();
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    for _round in 0..20 {
        for (fut, slot) in puts.iter_mut().zip(done.iter_mut()) {
            if slot.is_none() {
                if let std::task::Poll::Ready(r) = std::future::Future::poll(fut.as_mut(), &mut cx)
                {
                    *slot = Some(r);
                }
            }
        }
    }
    assert!(
        done.iter().all(|d| matches!(d, Some(Ok(_)))),
        "every writer completes"
    );
    let syncs = store.commit_log().sync_count() - syncs_before;
    assert!(syncs <= 3, "50 concurrent writers needed {syncs} syncs");
    assert_eq!(store.max_offset("T", 0), QueueOffset::new(50));
}

#[test]
fn a_filter_that_matches_nothing_scans_a_bounded_stretch_per_get() {
    let disk = SimDisk::new(7);
    let clock = ManualClock::new(T0_MS);
    let store = open(&disk, &clock, StoreConfig::for_tests());
    for i in 0..2_000 {
        block_on(store.put(msg("Tagged", 0, &body(i), None, Some("A")), true)).expect("put");
    }
    block_on(store.put(msg("Tagged", 0, b"the-b", None, Some("B")), true)).expect("put");
    let only_b = TagsFilter {
        codes: vec![sluice_core::message::tags_code("B")],
    };
    let mut next = QueueOffset::new(0);
    let mut gets = 0;
    loop {
        let r = store
            .get("Tagged", 0, next, 32, 1 << 20, &only_b)
            .expect("get");
        gets += 1;
        if r.status == GetStatus::Found {
            assert_eq!(decode(&r.messages[0]).body.as_ref(), b"the-b");
            break;
        }
        assert_eq!(r.status, GetStatus::NoMatchedMessage);
        assert_eq!(
            r.next_begin_offset.get() - next.get(),
            sluice_core::store::SCAN_ENTRIES_MAX as u64,
            "each miss advances by exactly the scan bound"
        );
        next = r.next_begin_offset;
    }
    assert_eq!(gets, 3, "2,000 misses take three bounded gets");
}

/// `visit_recent` reads the log's recent end in place: every record stored
/// at or after `since`, in log order, across segment ends and after a
/// reopen, and nothing older.
#[test]
fn visit_recent_reads_the_records_since_a_time_in_log_order_across_segments() {
    let disk = SimDisk::new(1);
    let clock = ManualClock::new(T0_MS);
    let store = open(&disk, &clock, StoreConfig::for_tests());
    for i in 0..2_000 {
        let queue = i32::try_from(i % 3).expect("small");
        block_on(store.put(
            msg("Orders", queue, &body(i), Some(&format!("k{i}")), None),
            true,
        ))
        .expect("put");
        clock.advance(Duration::from_millis(1));
    }
    assert!(store.commit_log().chain_segments() > 3, "rollover happened");
    // The 500th put was stored at T0 + 500 ms.
    let since = i64::try_from(T0_MS).expect("fits") + 500;
    let seen = |store: &MessageStore<SimDisk, ManualClock>| {
        let mut seen = Vec::new();
        store.visit_recent(since, |r| {
            assert!(r.store_timestamp_ms >= since, "older record visited");
            let keys = sluice_core::message::IndexedProperties::scan(r.properties);
            seen.push((
                r.topic.to_owned(),
                r.body.to_vec(),
                keys.keys_raw.map(str::to_owned),
            ));
        });
        seen
    };
    let want: Vec<_> = (500..2_000)
        .map(|i| ("Orders".to_owned(), body(i), Some(format!("k{i}"))))
        .collect();
    assert_eq!(seen(&store), want);
    drop(store);
    let store = open(&disk, &clock, StoreConfig::for_tests());
    assert_eq!(seen(&store), want, "after a reopen");
}
