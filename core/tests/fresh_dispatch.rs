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
}
