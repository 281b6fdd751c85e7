//! Recovery verifying the log ahead of its walk on a helper thread finds
//! exactly what a walk checking every record itself finds: the same end
//! after a torn tail, the same corruption at the same offset, the same
//! records — on the simulated disk (helper run inline, compared with no
//! helper, across seeds, power losses, flipped bytes and a lost checkpoint)
//! and on real files with a real thread.

mod support;

use sluice_core::commit_log::Appended;
use sluice_core::disk::{Disk, MmapDisk, Segment};
use sluice_core::testing::{CrashWeights, ManualClock, SimDisk, SimDiskConfig};
use sluice_core::{FlushMode, MessageStore, QueueOffset, StoreConfig, SystemClock};
use support::{block_on, msg, queue_bodies};

const T0_MS: u64 = 1_700_000_000_000;

fn body(i: usize) -> Vec<u8> {
    format!("body-{i:05}-{}", "v".repeat(i % 700)).into_bytes()
}

/// Flips a byte of the body of the record `put` stored, durably.
fn flip_body_byte<D: Disk>(disk: &D, seg_bytes: u64, put: Appended) {
    let at = put.phys_offset.get();
    let start = at - at % seg_bytes;
    let seg = disk
        .open_segment(&format!("commitlog/{start:020}"))
        .expect("open")
        .expect("exists");
    let rel = at - start + u64::from(put.size) - 30;
    let old = seg.slice(rel, 1).expect("read")[0];
    seg.write_at(rel, &[old ^ 0x5A]).expect("flip");
    block_on(seg.sync(0, seg_bytes)).expect("sync");
}

/// How a run damages the store before it opens again.
#[derive(Clone, Copy, Debug)]
struct Damage {
    /// Flip a byte of this record (its body, durably).
    flip: Option<usize>,
    /// Delete the checkpoint (the whole log is scanned).
    lose_checkpoint: bool,
    /// Start with `repair_truncate_corrupt`.
    repair: bool,
}

/// Fills a simulated store (a checkpoint halfway, unsynced records at the
/// end), damages it, loses power and opens it again: the error, or the
/// log's end and every body read back.
fn outcome(seed: u64, helper: bool, damage: Damage) -> Result<(u64, Vec<Vec<u8>>), String> {
    let config = SimDiskConfig {
        crash_weights: CrashWeights {
            persisted: 1,
            lost: 1,
            torn: 2,
            garbage: 0,
        },
        helper_inline: helper,
        ..SimDiskConfig::default()
    };
    let disk = SimDisk::with_config(seed, config);
    let clock = ManualClock::new(T0_MS);
    let cfg = StoreConfig::for_tests();
    let store = block_on(MessageStore::open(disk.clone(), clock.clone(), cfg.clone()))
        .expect("fresh store");
    let mut at = Vec::new();
    for i in 0..300 {
        let synced = i < 260;
        at.push(block_on(store.put(msg("T", 0, &body(i), None, None), synced)).expect("put"));
        if i == 150 {
            block_on(store.checkpoint()).expect("checkpoint");
        }
    }
    drop(store);
    if let Some(victim) = damage.flip.map(|i| at[i]) {
        flip_body_byte(&disk, cfg.commit_log_segment_bytes, victim);
    }
    disk.power_loss();
    if damage.lose_checkpoint {
        disk.remove("checkpoint").expect("remove checkpoint");
    }
    let cfg = StoreConfig {
        repair_truncate_corrupt: damage.repair,
        ..cfg
    };
    match block_on(MessageStore::open(disk, clock, cfg)) {
        Ok(store) => Ok((
            store.commit_log().written().get(),
            queue_bodies(&store, "T", 0),
        )),
        Err(e) => Err(e.to_string()),
    }
}

#[test]
fn a_helper_verifying_ahead_finds_what_the_walk_alone_finds() {
    let mut errors = 0;
    for seed in 0..24u64 {
        let seed_usize = usize::try_from(seed).expect("small");
        let damage = Damage {
            // Inside the checkpoint's verify window, after the safe point,
            // or none.
            flip: [Some(40), Some(200), None][seed_usize % 3],
            lose_checkpoint: seed % 2 == 1,
            repair: seed % 4 == 2,
        };
        let alone = outcome(seed, false, damage);
        let ahead = outcome(seed, true, damage);
        assert_eq!(alone, ahead, "seed {seed}, {damage:?}");
        errors += usize::from(alone.is_err());
        if let Ok((_, got)) = &alone {
            let want: Vec<_> = (0..got.len()).map(body).collect();
            assert_eq!(got, &want, "seed {seed}: a gap or a changed body");
        }
    }
    assert!(errors > 0, "no run met corruption it had to report");
}

/// On real files the helper is a thread; records past several of its
/// progress reports are found, and a damaged record ends the log (no
/// checkpoint) or stops the start (inside the verify window) exactly as
/// the records say.
#[test]
fn on_real_files_a_helper_thread_verifies_ahead_of_the_walk() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = StoreConfig {
        commit_log_segment_bytes: 1 << 20,
        flush_mode: FlushMode::Async,
        ..StoreConfig::for_tests()
    };
    let open = || {
        let disk = MmapDisk::new(dir.path()).expect("disk");
        block_on(MessageStore::open(disk, SystemClock::new(), cfg.clone()))
    };
    let want: Vec<Vec<u8>> = (0..24_000).map(body).collect();
    let store = open().expect("open");
    let mut at = Vec::new();
    for b in &want {
        at.push(block_on(store.put(msg("T", 0, b, None, None), false)).expect("put"));
    }
    block_on(store.shutdown()).expect("shutdown");
    drop(store);
    let log_end = at[at.len() - 1].phys_offset.get();
    assert!(
        log_end > 8 << 20,
        "the log ({log_end} bytes) spans few reports"
    );

    std::fs::remove_file(dir.path().join("checkpoint")).expect("remove checkpoint");
    let store = open().expect("open with no checkpoint");
    assert_eq!(queue_bodies(&store, "T", 0), want);
    block_on(store.shutdown()).expect("shutdown");
    drop(store);

    // A flipped body byte far into the log: with no checkpoint the log
    // ends there (a torn tail is all a scan with no safe point can tell).
    let victim = at[18_000];
    let disk = MmapDisk::new(dir.path()).expect("disk");
    flip_body_byte(&disk, cfg.commit_log_segment_bytes, victim);
    std::fs::remove_file(dir.path().join("checkpoint")).expect("remove checkpoint");
    let store = open().expect("open with no checkpoint");
    assert_eq!(queue_bodies(&store, "T", 0), want[..18_000].to_vec());
    let next = block_on(store.put(msg("T", 0, b"after", None, None), false)).expect("put");
    assert_eq!(next.queue_offset, QueueOffset::new(18_000));
    assert!(next.phys_offset.get() >= victim.phys_offset.get());
}

/// After a crash the verify window before the checkpoint is walked with the
/// helper too: a damaged record there stops the start at its offset.
#[test]
fn on_real_files_damage_in_the_verify_window_stops_the_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = StoreConfig {
        commit_log_segment_bytes: 1 << 20,
        flush_mode: FlushMode::Async,
        ..StoreConfig::for_tests()
    };
    let disk = MmapDisk::new(dir.path()).expect("disk");
    let store = block_on(MessageStore::open(
        disk.clone(),
        SystemClock::new(),
        cfg.clone(),
    ))
    .expect("open");
    let mut at = Vec::new();
    for i in 0..24_000 {
        at.push(block_on(store.put(msg("T", 0, &body(i), None, None), false)).expect("put"));
    }
    block_on(store.checkpoint()).expect("checkpoint");
    drop(store); // no shutdown: the abort marker stays
    let victim = at[20_000];
    flip_body_byte(&disk, cfg.commit_log_segment_bytes, victim);
    let err = block_on(MessageStore::open(disk, SystemClock::new(), cfg))
        .err()
        .expect("the damage stops the start");
    assert!(
        matches!(err, sluice_core::Error::Corrupt { offset, .. } if offset == victim.phys_offset.get()),
        "unexpected: {err}"
    );
}

/// A disk that runs the helper inline runs it to the end before the walk
/// starts: the helper must not wait for a walk that is not there yet, however
/// far past its lead bound the log goes.
#[test]
fn an_inline_helper_runs_to_the_end_without_waiting_for_the_walk() {
    let config = SimDiskConfig {
        helper_inline: true,
        ..SimDiskConfig::default()
    };
    let disk = SimDisk::with_config(5, config);
    let clock = ManualClock::new(T0_MS);
    let cfg = StoreConfig {
        commit_log_segment_bytes: 1 << 20,
        ..StoreConfig::for_tests()
    };
    let store = block_on(MessageStore::open(disk.clone(), clock.clone(), cfg.clone()))
        .expect("fresh store");
    let big = |i: usize| format!("{i:06}-{}", "w".repeat(1_000)).into_bytes();
    for i in 0..10_000 {
        block_on(store.put(msg("T", 0, &big(i), None, None), false)).expect("put");
    }
    block_on(store.shutdown()).expect("shutdown");
    drop(store);
    disk.remove("checkpoint").expect("remove checkpoint");
    let store = block_on(MessageStore::open(disk, clock, cfg)).expect("open");
    let want: Vec<_> = (0..10_000).map(big).collect();
    assert_eq!(queue_bodies(&store, "T", 0), want);
}
