//! The store's replication primitives: a follower copies a master's log
//! byte for byte (`read_units` → `append_replicated`), refuses puts and
//! bad bytes, drops a divergent tail with `truncate_to`, survives a power
//! loss right after it, takes the writer role, and hides what is past the
//! confirmed-offset gate from consumers.

mod support;

use bytes::Bytes;
use sluice_core::store::{GetStatus, TagsFilter};
use sluice_core::testing::{ManualClock, SimDisk};
use sluice_core::{CommitLogOffset, Error, MessageStore, QueueOffset, StoreConfig};
use support::{block_on, decode, msg};

const T0_MS: u64 = 1_700_000_000_000;

type Store = MessageStore<SimDisk, ManualClock>;

fn config() -> StoreConfig {
    StoreConfig {
        replicated: true,
        ..StoreConfig::for_tests()
    }
}

fn open(disk: &SimDisk) -> Store {
    block_on(MessageStore::open(
        disk.clone(),
        ManualClock::new(T0_MS),
        config(),
    ))
    .expect("store opens")
}

fn master(seed: u64) -> (SimDisk, Store) {
    let disk = SimDisk::new(seed);
    let store = open(&disk);
    block_on(store.become_writer()).expect("writer");
    (disk, store)
}

fn put(store: &Store, queue: i32, body: &str) -> u64 {
    block_on(store.put(msg("T", queue, body.as_bytes(), None, None), true))
        .expect("put")
        .queue_offset
        .get()
}

/// Copies everything the master has written that the replica lacks, in
/// chunks of at most `chunk` bytes; returns the offset the replica holds.
fn replicate(from: &Store, to: &Store, chunk: usize) -> CommitLogOffset {
    let mut held = to.commit_log().written();
    loop {
        let at = to.commit_log().written();
        let bytes = from
            .commit_log()
            .read_units(at, chunk)
            .expect("master reads units");
        if bytes.is_empty() {
            return held;
        }
        held = block_on(to.append_replicated(at, &bytes)).expect("replica appends");
    }
}

fn whole_log(store: &Store) -> Vec<u8> {
    let mut out = Vec::new();
    let mut at = store.commit_log().min_offset();
    loop {
        let b = store.commit_log().read_units(at, 1 << 16).expect("read");
        if b.is_empty() {
            return out;
        }
        at = CommitLogOffset::new(at.get() + b.len() as u64);
        out.extend_from_slice(&b);
    }
}

fn bodies(store: &Store, queue: i32) -> Vec<String> {
    let mut out = Vec::new();
    let mut next = store.min_offset("T", queue);
    loop {
        let r = store
            .get("T", queue, next, 32, 1 << 20, &TagsFilter::default())
            .expect("get");
        if r.status != GetStatus::Found {
            return out;
        }
        for raw in &r.messages {
            out.push(String::from_utf8(decode(raw).body.to_vec()).expect("utf8"));
        }
        next = r.next_begin_offset;
    }
}

#[test]
fn a_replica_is_a_byte_for_byte_copy_serving_the_same_queues() {
    let (_, m) = master(1);
    let rdisk = SimDisk::new(2);
    let r = open(&rdisk);
    for i in 0..900 {
        put(
            &m,
            i % 3,
            &format!(
                "m{i}-{}",
                "x".repeat(usize::try_from(i % 300).expect("small"))
            ),
        );
        if i % 97 == 0 {
            replicate(&m, &r, 700);
        }
    }
    let held = replicate(&m, &r, 4096);
    assert!(m.commit_log().chain_segments() > 3, "rollover happened");
    assert_eq!(held, m.commit_log().written());
    assert_eq!(whole_log(&r), whole_log(&m));
    for q in 0..3 {
        assert_eq!(bodies(&r, q), bodies(&m, q));
        assert_eq!(r.max_offset("T", q), m.max_offset("T", q));
    }
    // The replica restarts and is still the same copy, still a follower.
    drop(r);
    rdisk.power_loss();
    let r = open(&rdisk);
    assert_eq!(whole_log(&r), whole_log(&m));
    assert!(matches!(
        block_on(r.put(msg("T", 0, b"x", None, None), true)),
        Err(Error::NotWriter)
    ));
}

#[test]
fn bad_replicated_bytes_are_refused_and_change_nothing() {
    let (_, m) = master(3);
    let r = open(&SimDisk::new(4));
    for i in 0..20 {
        put(&m, 0, &format!("m{i}"));
    }
    let chunk = m
        .commit_log()
        .read_units(CommitLogOffset::new(0), 1 << 16)
        .expect("read");
    // Not at the replica's end.
    assert!(block_on(r.append_replicated(CommitLogOffset::new(512), &chunk)).is_err());
    // A flipped byte inside a record.
    let mut bad = chunk.to_vec();
    bad[100] ^= 0x40;
    assert!(block_on(r.append_replicated(CommitLogOffset::new(0), &Bytes::from(bad))).is_err());
    // Cut inside a record.
    let cut = chunk.slice(..chunk.len() - 3);
    assert!(block_on(r.append_replicated(CommitLogOffset::new(0), &cut)).is_err());
    assert_eq!(r.commit_log().written().get(), 0, "nothing written");
    // The whole chunk is fine.
    replicate(&m, &r, 1 << 16);
    assert_eq!(bodies(&r, 0).len(), 20);
    // Records from another master whose queue offsets do not continue
    // this replica's queue are refused, even at the right position.
    // Same sizes in another queue put a record boundary at the replica's
    // end, where the foreign log's queue 0 starts at offset 0, not 20.
    let (_, other) = master(5);
    for i in 0..20 {
        put(&other, 1, &format!("m{i}"));
    }
    for i in 0..20 {
        put(&other, 0, &format!("o{i}"));
    }
    let at = r.commit_log().written();
    let foreign = other.commit_log().read_units(at, 1 << 16).expect("read");
    assert!(!foreign.is_empty());
    assert!(block_on(r.append_replicated(at, &foreign)).is_err());
    assert_eq!(r.commit_log().written(), at);
    // A writer refuses replicated bytes.
    assert!(block_on(m.append_replicated(m.commit_log().written(), &chunk)).is_err());
}

#[test]
fn a_divergent_tail_is_truncated_and_the_new_masters_history_followed() {
    // A is the master; B got everything, C only the first 100 messages.
    let (_, a) = master(10);
    let bdisk = SimDisk::new(11);
    let b = open(&bdisk);
    let c = open(&SimDisk::new(12));
    for i in 0..100 {
        put(&a, i % 2, &format!("a{i}"));
    }
    replicate(&a, &c, 1000);
    for i in 100..160 {
        put(&a, i % 2, &format!("a{i}"));
    }
    replicate(&a, &b, 1000);
    // C is promoted: its history starts where its log ends.
    let c_end = c.commit_log().written();
    let epoch_start = block_on(c.become_writer()).expect("promote");
    assert_eq!(epoch_start, c_end);
    for i in 0..30 {
        put(&c, i % 2, &format!("c{i}"));
    }
    // B drops what C never had, then follows C.
    block_on(b.truncate_to(epoch_start)).expect("truncate");
    assert_eq!(b.commit_log().written(), epoch_start);
    assert_eq!(b.max_offset("T", 0), QueueOffset::new(50));
    replicate(&c, &b, 1000);
    assert_eq!(whole_log(&b), whole_log(&c));
    let want: Vec<String> = (0..100)
        .filter(|i| i % 2 == 0)
        .map(|i| format!("a{i}"))
        .chain((0..30).filter(|i| i % 2 == 0).map(|i| format!("c{i}")))
        .collect();
    assert_eq!(bodies(&b, 0), want);
    // A power loss now keeps exactly the new history.
    drop(b);
    bdisk.power_loss();
    let b = open(&bdisk);
    assert_eq!(whole_log(&b), whole_log(&c));
    assert_eq!(bodies(&b, 0), want);
}

#[test]
fn a_power_loss_right_after_truncation_never_resurrects_the_tail() {
    for seed in 0..10 {
        let (_, a) = master(100 + seed);
        let bdisk = SimDisk::new(200 + seed);
        let b = open(&bdisk);
        let mut cut = CommitLogOffset::new(0);
        for i in 0..200 {
            put(&a, 0, &format!("a{i}"));
            if i == 120 {
                cut = a.commit_log().written();
            }
        }
        replicate(&a, &b, 3000);
        block_on(b.checkpoint()).expect("checkpoint past the cut");
        block_on(b.truncate_to(cut)).expect("truncate");
        drop(b);
        bdisk.power_loss();
        let b = open(&bdisk);
        assert_eq!(b.commit_log().written(), cut, "seed {seed}");
        assert_eq!(b.max_offset("T", 0), QueueOffset::new(121), "seed {seed}");
        assert_eq!(
            bodies(&b, 0),
            (0..121).map(|i| format!("a{i}")).collect::<Vec<_>>()
        );
    }
}

#[test]
fn truncation_refuses_a_point_inside_a_record() {
    let (_, a) = master(20);
    put(&a, 0, "first message");
    put(&a, 0, "second");
    let b = open(&SimDisk::new(21));
    replicate(&a, &b, 1 << 16);
    let before = b.commit_log().written();
    assert!(block_on(b.truncate_to(CommitLogOffset::new(13))).is_err());
    assert_eq!(b.commit_log().written(), before);
    assert_eq!(bodies(&b, 0).len(), 2);
}

#[test]
fn the_confirmed_gate_hides_records_until_it_moves() {
    let (_, m) = master(30);
    put(&m, 0, "one");
    m.set_confirmed(m.commit_log().written());
    let gate = m.commit_log().written();
    m.set_confirmed(gate);
    put(&m, 0, "two");
    put(&m, 0, "three");
    assert_eq!(bodies(&m, 0), vec!["one"]);
    assert_eq!(m.max_offset("T", 0), QueueOffset::new(1));
    m.set_confirmed(m.commit_log().written());
    assert_eq!(bodies(&m, 0), vec!["one", "two", "three"]);
    m.set_confirmed(CommitLogOffset::UNGATED);
    put(&m, 0, "four");
    assert_eq!(bodies(&m, 0).len(), 4);
}

#[test]
fn promotion_pads_then_takes_puts_that_continue_the_queues() {
    let (_, a) = master(40);
    for i in 0..7 {
        put(&a, 0, &format!("a{i}"));
    }
    let b = open(&SimDisk::new(41));
    replicate(&a, &b, 1 << 16);
    let end = b.commit_log().written();
    assert_eq!(block_on(b.become_writer()).expect("promote"), end);
    assert_eq!(
        b.commit_log().written().get() % 512,
        0,
        "padded to a sector"
    );
    assert_eq!(put(&b, 0, "b0"), 7);
    // The old master, demoted, follows: its own pad differs, so it is cut
    // back to the promotion point first.
    a.become_follower();
    assert!(matches!(
        block_on(a.put(msg("T", 0, b"x", None, None), true)),
        Err(Error::NotWriter)
    ));
    block_on(a.truncate_to(end)).expect("truncate");
    replicate(&b, &a, 1 << 16);
    assert_eq!(whole_log(&a), whole_log(&b));
}
