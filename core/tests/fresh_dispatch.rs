//! Dispatch takes what it needs of a record this process just appended from
//! the appender's note instead of reading it back (issue 20: the read-back,
//! its seal check and decode were ~4 % of the broker's CPU per message),
//! and falls back to reading the log wherever a note is missing — past the
//! notes' cap while a gate holds dispatch back — with the same result.

mod support;

use sluice_core::message::{MessageInput, Properties};
use sluice_core::testing::{ManualClock, SimDisk};
use sluice_core::{CommitLogOffset, MessageStore, QueueOffset, StoreConfig};
use support::{block_on, msg, queue_records};

const T0_MS: u64 = 1_700_000_000_000;

fn open(disk: &SimDisk) -> MessageStore<SimDisk, ManualClock> {
    block_on(MessageStore::open(
        disk.clone(),
        ManualClock::new(T0_MS),
        StoreConfig::for_tests(),
    ))
    .expect("store opens")
}

#[test]
fn a_fresh_record_is_dispatched_without_reading_it_back() {
    let disk = SimDisk::new(1);
    let store = open(&disk);
    // Every read of the log would fail now: dispatch must not need one.
    disk.fail_reads_under("commitlog", 1_000);
    for i in 0..3 {
        let key = format!("k{i}");
        block_on(store.put(msg("T", 0, b"body", Some(&key), Some("a")), true)).expect("put");
    }
    assert_eq!(store.max_offset("T", 0), QueueOffset::new(3), "all visible");
    assert_eq!(disk.stats().read_eio_injected, 0, "no read was tried");
}

/// Every record of queue T/0 as (queue offset, body, KEYS).
fn queue(store: &MessageStore<SimDisk, ManualClock>) -> Vec<(i64, Vec<u8>, Option<String>)> {
    queue_records(store, "T", 0)
        .into_iter()
        .map(|rec| {
            let props = Properties::parse(&rec.properties).expect("props");
            let keys = props.get("KEYS").map(str::to_owned);
            (rec.queue_offset, rec.body.to_vec(), keys)
        })
        .collect()
}

#[test]
fn records_past_the_notes_cap_are_read_back_with_the_same_result() {
    let disk = SimDisk::new(2);
    let store = open(&disk);
    // Hold dispatch back at the log's start: notes pile up to their cap.
    store.set_confirmed(CommitLogOffset::new(0));
    let n: usize = 8192 + 300;
    let sent: Vec<MessageInput> = (0..n)
        .map(|i| {
            msg(
                "T",
                0,
                format!("m{i}").as_bytes(),
                Some(&format!("k{i}")),
                None,
            )
        })
        .collect();
    for chunk in sent.chunks(64) {
        block_on(store.put_batch(chunk.to_vec(), true)).expect("put");
    }
    assert_eq!(store.max_offset("T", 0), QueueOffset::new(0), "gated");
    store.set_confirmed(CommitLogOffset::UNGATED);
    let got = queue(&store);
    assert_eq!(got.len(), n);
    for (i, (offset, body, keys)) in got.iter().enumerate() {
        assert_eq!(*offset, i64::try_from(i).expect("fits"));
        assert_eq!(body, format!("m{i}").as_bytes());
        assert_eq!(keys.as_deref(), Some(format!("k{i}").as_str()));
    }
    // The key index holds every record too, noted or read back.
    for i in [0, 8191, 8192, n - 1] {
        let found = store
            .query_by_key("T", &format!("k{i}"), 10, 0, i64::MAX)
            .expect("query");
        assert_eq!(found.len(), 1, "k{i} indexed once");
    }
}

#[test]
fn one_dispatch_over_many_queues_puts_each_record_in_its_own_and_announces_each_max() {
    use std::sync::{Arc, Mutex};
    let disk = SimDisk::new(3);
    let store = open(&disk);
    let told = Arc::new(Mutex::new(Vec::<(String, i32, QueueOffset)>::new()));
    let sink = Arc::clone(&told);
    store.set_arrival_listener(Arc::new(move |topic, queue_id, max| {
        sink.lock()
            .expect("lock")
            .push((topic.to_owned(), queue_id, max));
    }));
    // Runs of records sharing a queue, then another queue: the same id in
    // another topic, another id in the same topic, and back again. Dispatch
    // is held back so that one dispatch walks them all.
    store.set_confirmed(CommitLogOffset::new(0));
    let runs = [
        ("T", 0, 3),
        ("U", 0, 2),
        ("T", 1, 1),
        ("T", 0, 2),
        ("U", 0, 1),
    ];
    for (i, &(topic, queue_id, n)) in runs.iter().enumerate() {
        let batch: Vec<MessageInput> = (0..n)
            .map(|j| msg(topic, queue_id, format!("{i}.{j}").as_bytes(), None, None))
            .collect();
        block_on(store.put_batch(batch, true)).expect("put");
    }
    store.set_confirmed(CommitLogOffset::UNGATED);
    let bodies = |topic: &str, queue_id: i32| -> Vec<String> {
        queue_records(&store, topic, queue_id)
            .into_iter()
            .map(|rec| String::from_utf8(rec.body.to_vec()).expect("utf-8"))
            .collect()
    };
    assert_eq!(bodies("T", 0), ["0.0", "0.1", "0.2", "3.0", "3.1"]);
    assert_eq!(bodies("U", 0), ["1.0", "1.1", "4.0"]);
    assert_eq!(bodies("T", 1), ["2.0"]);
    // The last announcement of each queue is its max offset.
    let told = told.lock().expect("lock");
    for (topic, queue_id, max) in [("T", 0, 5), ("U", 0, 3), ("T", 1, 1)] {
        let last = told
            .iter()
            .rev()
            .find(|(t, q, _)| t == topic && *q == queue_id)
            .map(|&(_, _, m)| m);
        assert_eq!(last, Some(QueueOffset::new(max)), "{topic}/{queue_id}");
    }
    // One dispatch walked them all: each queue is announced once, in
    // (topic, queue) order, with its max.
    let once: Vec<(&str, i32, u64)> = told
        .iter()
        .map(|(t, q, m)| (t.as_str(), *q, m.get()))
        .collect();
    assert_eq!(once, [("T", 0, 5), ("T", 1, 1), ("U", 0, 3)]);
}

/// A store whose ConsumeQueue segments hold 4 entries and whose index
/// files hold 4 keys, so a batch's run of records crosses both.
fn open_tiny(disk: &SimDisk, cq_entries: u64) -> MessageStore<SimDisk, ManualClock> {
    block_on(MessageStore::open(
        disk.clone(),
        ManualClock::new(T0_MS),
        StoreConfig {
            cq_entries_per_segment: cq_entries,
            index_slots: 4,
            index_entries: 4,
            ..StoreConfig::for_tests()
        },
    ))
    .expect("store opens")
}

/// Record `i` of queue T/0: body `m{i}`, KEYS `k{i}`, TAGS `a` or `b`.
fn keyed(i: usize) -> MessageInput {
    let tags = if i % 2 == 0 { "a" } else { "b" };
    msg(
        "T",
        0,
        format!("m{i}").as_bytes(),
        Some(&format!("k{i}")),
        Some(tags),
    )
}

/// Checks queue T/0 holds `m0..m{n}` in order, each key `k{i}` is found
/// exactly once, and a tag filter on `a` reads back just the even ones.
fn assert_whole(store: &MessageStore<SimDisk, ManualClock>, n: usize) {
    let got = queue(store);
    assert_eq!(got.len(), n, "every record visible");
    for (i, (offset, body, keys)) in got.iter().enumerate() {
        assert_eq!(*offset, i64::try_from(i).expect("fits"));
        assert_eq!(body, format!("m{i}").as_bytes());
        assert_eq!(keys.as_deref(), Some(format!("k{i}").as_str()));
    }
    for i in 0..n {
        let found = store
            .query_by_key("T", &format!("k{i}"), 10, 0, i64::MAX)
            .expect("query");
        assert_eq!(found.len(), 1, "k{i} found once");
    }
    let only_a = sluice_core::store::TagsFilter {
        codes: vec![sluice_core::message::tags_code("a")],
    };
    let r = store
        .get("T", 0, QueueOffset::new(0), 64, 1 << 20, &only_a)
        .expect("get");
    let bodies: Vec<Vec<u8>> = r
        .messages
        .iter()
        .map(|m| support::decode(m).body.to_vec())
        .collect();
    let even: Vec<Vec<u8>> = (0..n)
        .step_by(2)
        .map(|i| format!("m{i}").into_bytes())
        .collect();
    // A get stops at a ConsumeQueue segment's end: compare what it read.
    assert!(!bodies.is_empty(), "the filter matched something");
    assert_eq!(
        bodies[..],
        even[..bodies.len()],
        "tags codes in the entries"
    );
}

#[test]
fn a_batch_across_queue_segments_and_index_files_is_dispatched_whole() {
    let disk = SimDisk::new(4);
    let store = open_tiny(&disk, 4);
    let n = 30;
    block_on(store.put_batch((0..n).map(keyed).collect(), true)).expect("put");
    assert_whole(&store, n);
    // A second batch continues the same queue and index.
    block_on(store.put_batch((n..n + 7).map(keyed).collect(), true)).expect("put");
    assert_whole(&store, n + 7);
}

#[test]
fn a_queue_segment_that_cannot_be_created_mid_batch_defers_the_rest_and_loses_nothing() {
    use std::sync::{Arc, Mutex};
    let disk = SimDisk::new(5);
    let store = open_tiny(&disk, 4);
    let told = Arc::new(Mutex::new(Vec::<QueueOffset>::new()));
    let sink = Arc::clone(&told);
    store.set_arrival_listener(Arc::new(move |_, _, max| {
        sink.lock().expect("lock").push(max);
    }));
    block_on(store.put(keyed(0), true)).expect("put");
    disk.set_full(true);
    // Stored and acknowledged: the log's segment exists. The queue's
    // second segment (entries 4..) cannot be created.
    block_on(store.put_batch((1..10).map(keyed).collect(), true)).expect("put");
    assert_eq!(
        store.max_offset("T", 0),
        QueueOffset::new(4),
        "the entries that fit the first segment are in"
    );
    assert_eq!(
        told.lock().expect("lock").last(),
        Some(&QueueOffset::new(4)),
        "and announced, although the run failed"
    );
    disk.set_full(false);
    block_on(store.flush()).expect("flush");
    assert_whole(&store, 10);
}

#[test]
fn an_index_file_that_cannot_roll_mid_batch_defers_the_rest_and_indexes_each_key_once() {
    let disk = SimDisk::new(6);
    // ConsumeQueue segments large enough that only the index rolls.
    let store = open_tiny(&disk, 1_000);
    block_on(store.put(keyed(0), true)).expect("put");
    disk.set_full(true);
    block_on(store.put_batch((1..10).map(keyed).collect(), true)).expect("put");
    assert!(disk.stats().enospc > 0, "an index file needed creating");
    disk.set_full(false);
    block_on(store.flush()).expect("flush");
    // The retry takes the run record by record: the keys put before the
    // failure go in again, and a query still finds each record once.
    assert_whole(&store, 10);
}
