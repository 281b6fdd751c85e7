//! Model test of the store: random put / flush / checkpoint / crash
//! sequences on `SimDisk`, checked against a plain in-memory model. After
//! any crash every put whose sync completed is present with identical bytes
//! and queue offsets, nothing never-put appears, and every ConsumeQueue
//! matches the model.

mod support;

use proptest::prelude::*;
use sluice_core::store::{GetStatus, TagsFilter};
use sluice_core::testing::{ManualClock, SimDisk};
use sluice_core::{FlushMode, MessageStore, QueueOffset, StoreConfig};
use support::{block_on, decode, msg};

const QUEUES: i32 = 3;

#[derive(Clone, Debug)]
enum Op {
    Put { queue: i32, pad: usize, wait: bool },
    Flush,
    Checkpoint,
    PowerLoss,
    ProcessCrash,
    CleanRestart,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        12 => (0..QUEUES, 0usize..400, any::<bool>()).prop_map(|(queue, pad, wait)| Op::Put { queue, pad, wait }),
        2 => Just(Op::Flush),
        1 => Just(Op::Checkpoint),
        2 => Just(Op::PowerLoss),
        1 => Just(Op::ProcessCrash),
        1 => Just(Op::CleanRestart),
    ]
}

fn config(mode: FlushMode) -> StoreConfig {
    StoreConfig {
        commit_log_segment_bytes: 8 * 1024,
        cq_entries_per_segment: 8,
        index_slots: 16,
        index_entries: 32,
        flush_mode: mode,
        ..StoreConfig::for_tests()
    }
}

type Store = MessageStore<SimDisk, ManualClock>;

/// The model: every put that returned, in log order, and how many of them
/// are known durable (always a prefix: group commit syncs prefixes).
#[derive(Default)]
struct Model {
    sent: Vec<(i32, Vec<u8>)>,
    durable: usize,
}

fn read_queue(store: &Store, queue: i32) -> Vec<(u64, Vec<u8>)> {
    let mut out = Vec::new();
    let mut next = QueueOffset::new(0);
    loop {
        let r = store
            .get("M", queue, next, 7, 1 << 20, &TagsFilter::default())
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

/// The store's visible contents must be exactly the first `k` sent puts,
/// split by queue, with dense queue offsets from 0.
fn check_prefix(store: &Store, model: &Model, k: usize) -> Result<(), TestCaseError> {
    for queue in 0..QUEUES {
        let got = read_queue(store, queue);
        let want: Vec<(u64, Vec<u8>)> = model.sent[..k]
            .iter()
            .filter(|(q, _)| *q == queue)
            .enumerate()
            .map(|(i, (_, b))| (i as u64, b.clone()))
            .collect();
        prop_assert_eq!(
            got,
            want,
            "queue {} differs from the model's first {} puts",
            queue,
            k
        );
    }
    Ok(())
}

fn visible_count(store: &Store) -> usize {
    (0..QUEUES)
        .map(|q| usize::try_from(store.max_offset("M", q).get()).expect("small"))
        .sum()
}

fn run(seed: u64, mode: FlushMode, ops: &[Op]) -> Result<(), TestCaseError> {
    run_on(&SimDisk::new(seed), mode, ops)
}

fn run_on(disk: &SimDisk, mode: FlushMode, ops: &[Op]) -> Result<(), TestCaseError> {
    let clock = ManualClock::new(1_700_000_000_000);
    let open = || block_on(Store::open(disk.clone(), clock.clone(), config(mode)));
    let mut store = open().expect("fresh store opens");
    let mut model = Model::default();
    for (i, op) in ops.iter().enumerate() {
        clock.advance(std::time::Duration::from_millis(3));
        match op {
            Op::Put { queue, pad, wait } => {
                let id = format!("m{i}");
                let body = format!("{id}:{}", "p".repeat(*pad)).into_bytes();
                let a = block_on(store.put(msg("M", *queue, &body, Some(&id), None), *wait))
                    .expect("put on a healthy disk");
                let expected_q = model.sent.iter().filter(|(q, _)| q == queue).count() as u64;
                prop_assert_eq!(a.queue_offset, QueueOffset::new(expected_q));
                model.sent.push((*queue, body));
                if *wait && mode == FlushMode::Sync {
                    model.durable = model.sent.len();
                }
            }
            Op::Flush | Op::Checkpoint => {
                if matches!(op, Op::Flush) {
                    block_on(store.flush()).expect("flush");
                } else {
                    block_on(store.checkpoint()).expect("checkpoint");
                    block_on(store.flush()).expect("flush");
                }
                model.durable = model.sent.len();
                check_prefix(&store, &model, model.sent.len())?;
            }
            Op::PowerLoss | Op::ProcessCrash | Op::CleanRestart => {
                if matches!(op, Op::CleanRestart) {
                    block_on(store.shutdown()).expect("shutdown");
                }
                drop(store);
                match op {
                    Op::PowerLoss => disk.power_loss(),
                    Op::ProcessCrash => disk.process_crash(),
                    _ => {}
                }
                store = open().expect("store reopens after a crash");
                let k = visible_count(&store);
                prop_assert!(
                    k >= model.durable,
                    "lost durable puts: {} < {}",
                    k,
                    model.durable
                );
                prop_assert!(k <= model.sent.len(), "more records than puts: {}", k);
                if !matches!(op, Op::PowerLoss) {
                    prop_assert_eq!(
                        k,
                        model.sent.len(),
                        "page cache survived, nothing may be lost"
                    );
                }
                check_prefix(&store, &model, k)?;
                model.sent.truncate(k);
                model.durable = k;
                if let Some((q, body)) = model.sent.last() {
                    let id = String::from_utf8_lossy(body)
                        .split(':')
                        .next()
                        .unwrap_or("")
                        .to_owned();
                    let hits = store.query_by_key("M", &id, 4, 0, i64::MAX).expect("query");
                    prop_assert_eq!(hits.len(), 1, "key {} of queue {} not found once", id, q);
                }
            }
        }
    }
    block_on(store.flush()).expect("final flush");
    check_prefix(&store, &model, model.sent.len())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn sync_flush_store_matches_model_across_crashes(seed in any::<u64>(), ops in prop::collection::vec(op(), 1..150)) {
        run(seed, FlushMode::Sync, &ops)?;
    }

    /// On a device without power-safe overwrite a sector being rewritten at
    /// power loss comes back as garbage: group commit must never leave
    /// synced records in a sector that later writes touch.
    #[test]
    fn sync_flush_store_survives_garbage_sectors(seed in any::<u64>(), ops in prop::collection::vec(op(), 1..150)) {
        let config = sluice_core::testing::SimDiskConfig { garbage_sectors: true, ..Default::default() };
        run_on(&SimDisk::with_config(seed, config), FlushMode::Sync, &ops)?;
    }

    #[test]
    fn async_flush_store_matches_model_across_crashes(seed in any::<u64>(), ops in prop::collection::vec(op(), 1..150)) {
        run(seed, FlushMode::Async, &ops)?;
    }
}
