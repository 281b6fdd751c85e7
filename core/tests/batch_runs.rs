//! A batch reaches the disk in runs: every record that fits the current
//! segment is encoded into one buffer and written with one call (issue 20:
//! one `pwrite` per record cost a third of the broker's request-path CPU
//! for batches of 64). Runs split at segment ends (a blank record closes
//! the segment as for single appends), queue offsets stay consecutive, and
//! a run that fails to write gives its queue offsets back.

mod support;

use sluice_core::message::MessageInput;
use sluice_core::testing::{ManualClock, SimDisk};
use sluice_core::{MessageStore, QueueOffset, StoreConfig};
use support::{block_on, msg, queue_records};

const T0_MS: u64 = 1_700_000_000_000;

fn open(disk: &SimDisk, clock: &ManualClock) -> MessageStore<SimDisk, ManualClock> {
    block_on(MessageStore::open(
        disk.clone(),
        clock.clone(),
        StoreConfig::for_tests(),
    ))
    .expect("store opens")
}

fn batch(from: usize, n: usize, body_bytes: usize) -> Vec<MessageInput> {
    (from..from + n)
        .map(|i| {
            let mut body = format!("m{i:05}-").into_bytes();
            body.resize(body_bytes, b'x');
            msg("T", 0, &body, Some(&format!("k{i}")), Some("a"))
        })
        .collect()
}

/// Every record of queue T/0 as (queue offset, first 6 body bytes).
fn queue(store: &MessageStore<SimDisk, ManualClock>) -> Vec<(i64, String)> {
    queue_records(store, "T", 0)
        .into_iter()
        .map(|rec| {
            let head = String::from_utf8_lossy(&rec.body[..6]).into_owned();
            (rec.queue_offset, head)
        })
        .collect()
}

#[test]
fn a_batch_within_a_segment_is_one_disk_write() {
    let disk = SimDisk::new(1);
    let store = open(&disk, &ManualClock::new(T0_MS));
    let log = store.commit_log();
    let before = disk.stats().writes;
    let placed = log.append_batch(&batch(0, 32, 200)).expect("append");
    assert_eq!(disk.stats().writes - before, 1, "one write for 32 records");
    // Back to back, in order, with consecutive queue offsets.
    for (i, pair) in placed.windows(2).enumerate() {
        assert_eq!(pair[0].end(), pair[1].phys_offset, "record {i}");
    }
    let offsets: Vec<u64> = placed.iter().map(|a| a.queue_offset.get()).collect();
    assert_eq!(offsets, (0..32).collect::<Vec<u64>>());
    assert_eq!(log.written(), placed[31].end());
}

#[test]
fn a_batch_across_a_segment_end_is_split_and_reads_back_whole() {
    let disk = SimDisk::new(2);
    let store = open(&disk, &ManualClock::new(T0_MS));
    // 64 KiB test segments: 100 records of ~1.2 KiB cross at least one end.
    let first = block_on(store.put_batch(batch(0, 100, 1024), true)).expect("put");
    let second = block_on(store.put_batch(batch(100, 100, 1024), true)).expect("put");
    let seg = StoreConfig::for_tests().commit_log_segment_bytes;
    let mut crossings = 0;
    // Within a batch records are back to back but for the blank at a
    // segment end (a sync between batches may leave a pad).
    for placed in [&first, &second] {
        for pair in placed.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            if a.phys_offset.get() / seg == b.phys_offset.get() / seg {
                assert_eq!(a.end(), b.phys_offset, "back to back within a segment");
            } else {
                crossings += 1;
                assert_eq!(b.phys_offset.get() % seg, 0, "next record starts a segment");
            }
        }
    }
    let offsets: Vec<u64> = first
        .iter()
        .chain(&second)
        .map(|a| a.queue_offset.get())
        .collect();
    assert_eq!(offsets, (0..200).collect::<Vec<u64>>());
    assert!(
        crossings >= 2,
        "the batches cross segment ends ({crossings})"
    );
    let got = queue(&store);
    let want: Vec<(i64, String)> = (0..200).map(|i| (i, format!("m{i:05}"))).collect();
    assert_eq!(got, want);
    // And after a restart (recovery walks the runs and their blanks).
    drop(store);
    let store = open(&disk, &ManualClock::new(T0_MS));
    assert_eq!(queue(&store), want);
}

#[test]
fn a_run_that_fails_to_write_gives_its_queue_offsets_back() {
    let disk = SimDisk::new(3);
    let store = open(&disk, &ManualClock::new(T0_MS));
    let log = store.commit_log();
    log.append_batch(&batch(0, 3, 100)).expect("append");
    assert_eq!(log.queue_next("T", 0), QueueOffset::new(3));
    let written = log.written();
    // The segment vanishes under the log: its writes now fail.
    assert!(disk.remove_under("commitlog") > 0);
    log.append_batch(&batch(3, 5, 100))
        .expect_err("the segment is gone");
    assert_eq!(
        log.queue_next("T", 0),
        QueueOffset::new(3),
        "offsets given back"
    );
    assert_eq!(log.written(), written, "nothing counted as written");
    log.append(&batch(8, 1, 100)[0]).expect_err("still gone");
    assert_eq!(log.queue_next("T", 0), QueueOffset::new(3));
}

#[test]
fn a_batch_is_refused_whole_for_any_message_it_may_not_store() {
    let disk = SimDisk::new(40);
    let clock = ManualClock::new(T0_MS);
    let store = block_on(MessageStore::open(
        disk.clone(),
        clock,
        StoreConfig {
            body_bytes_max: 64,
            ..StoreConfig::for_tests()
        },
    ))
    .expect("store opens");
    // A later message of the same topic with too long a body (the topic is
    // checked once per batch, each body every time).
    let mut long = batch(0, 3, 16);
    long[2].body = vec![b'x'; 65].into();
    // A later message of another topic whose name is not valid.
    let mut named = batch(0, 3, 16);
    named[1].topic = "T with spaces".to_owned();
    for (what, msgs) in [("a long body", long), ("a bad topic", named)] {
        let refused = block_on(store.put_batch(msgs, true));
        assert!(
            matches!(refused, Err(sluice_core::Error::MessageRejected { .. })),
            "{what}: {refused:?}"
        );
    }
    assert!(queue(&store).is_empty(), "nothing of either batch stored");
    block_on(store.put_batch(batch(0, 3, 16), true)).expect("a valid batch");
    assert_eq!(queue(&store).len(), 3);
}
