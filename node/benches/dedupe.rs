//! What deduplicating retried sends costs per message, on the calls the
//! send path makes (docs/benchmarks.md, "Dedupe cost"), with the window
//! full at the default cap (100,000 keys, so every new key evicts one) and
//! 10,000 producer lanes:
//!
//! - `new_key`: a new message with a `UNIQ_KEY` — look its stamp up (none),
//!   claim the key, record it stored;
//! - `new_stamped`: the same for a Sluice producer's message — also the
//!   stamp parsed from its properties, its lane checked and recorded;
//! - `retry_hit`: a retry whose key is in the window (answered from it);
//! - `retry_past_window`: a stamped retry found by its number only;
//! - `parse_properties`: the parse `new_stamped` includes, which the send
//!   path does once per message anyway (subtract it).
//!
//! Run: `cargo bench -p sluice-node --bench dedupe`.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use sluice_core::message::{keys, Properties};
use sluice_node::broker::dedupe::sequences::Stamp;
use sluice_node::broker::dedupe::{Claim, DedupeWindow, Original};

const KEYS_MAX: usize = 100_000;
const LANES: usize = 10_000;
/// Distinct keys cycled through (more than the cap: each is new again).
const KEYS: usize = 1 << 18;

fn original(i: usize) -> Original {
    Original {
        store_host: "10.0.0.1:10911".parse().expect("addr"),
        phys_offset: i64::try_from(i * 1_100).unwrap_or(0),
        queue_id: 3,
        queue_offset: i64::try_from(i).unwrap_or(0),
        end: u64::try_from(i * 1_100).unwrap_or(0),
    }
}

/// A Java-style `UNIQ_KEY` (32 hex digits).
fn key(i: usize) -> String {
    format!("7F0000010B5C18B4AAC2{i:012X}")
}

/// A Sluice producer's properties for message `i` of lane `i % LANES`.
fn stamped_properties(i: usize) -> Vec<u8> {
    let mut p = Properties::new();
    p.insert(keys::UNIQ_KEY, &key(i)).expect("fits");
    p.insert(keys::WAIT, "true").expect("fits");
    p.insert(
        keys::SLUICE_PRODUCER_ID,
        "orders-7F0000010B5C18B4AAC2000000000000",
    )
    .expect("fits");
    p.insert(
        keys::SLUICE_SEQUENCE,
        &format!("broker-a@{}/{}", i % LANES, i / LANES + 1),
    )
    .expect("fits");
    p.encode()
}

/// A window at its caps, as a busy broker's is.
fn full() -> DedupeWindow {
    let w = DedupeWindow::new(600_000, KEYS_MAX).with_sequences(LANES, 600_000);
    for i in 0..KEYS_MAX {
        let props = Properties::parse(&stamped_properties(KEYS + i)).expect("props");
        let k = key(KEYS + i);
        let Claim::Claimed(ticket) = w.claim("Topic", &k, 0) else {
            panic!("{k} is new");
        };
        let stamp = Stamp::of(&props);
        let stamped = stamp.as_ref().map(|s| ("Topic", s));
        w.stored_claim(ticket, stamped, original(i), 0);
    }
    w
}

/// One new message through the window, as the send path takes it.
fn send_new(w: &DedupeWindow, key: &str, stamp: Option<&Stamp>, i: usize, now_ms: i64) {
    black_box(w.seen("Topic", stamp));
    if let Claim::Claimed(ticket) = w.claim("Topic", key, now_ms) {
        let stamped = stamp.map(|s| ("Topic", s));
        w.stored_claim(ticket, stamped, original(i), now_ms);
    }
}

fn bench(c: &mut Criterion) {
    let keys: Vec<String> = (0..KEYS).map(key).collect();
    let props: Vec<Vec<u8>> = (0..KEYS).map(stamped_properties).collect();
    let w = full();
    let mut i = 0usize;
    c.bench_function("new_key", |b| {
        b.iter(|| {
            i = (i + 1) % KEYS;
            send_new(&w, &keys[i], None, i, 1);
        });
    });
    c.bench_function("parse_properties", |b| {
        b.iter(|| {
            i = (i + 1) % KEYS;
            black_box(Properties::parse(black_box(&props[i])).expect("props"));
        });
    });
    let w = full();
    c.bench_function("new_stamped", |b| {
        b.iter(|| {
            i = (i + 1) % KEYS;
            // The send path parses the properties once anyway; the stamp is
            // read from them.
            let parsed = Properties::parse(black_box(&props[i])).expect("props");
            let stamp = Stamp::of(&parsed);
            send_new(&w, &keys[i], stamp.as_ref(), i, 1);
        });
    });
    let w = full();
    let hits: Vec<String> = (0..KEYS_MAX).map(|i| key(KEYS + i)).collect();
    c.bench_function("retry_hit", |b| {
        b.iter(|| {
            i = (i + 1) % KEYS_MAX;
            let hit = w.claim("Topic", &hits[i], 1);
            assert!(matches!(hit, Claim::Stored(_)), "a retry in the window");
            black_box(hit);
        });
    });
    let w = DedupeWindow::new(1, KEYS_MAX).with_sequences(LANES, 600_000);
    let stamps: Vec<Stamp> = (0..LANES)
        .map(|i| {
            let parsed = Properties::parse(&props[i]).expect("props");
            let stamp = Stamp::of(&parsed).expect("stamped");
            w.stored("Topic", &keys[i], Some(&stamp), original(i), 0);
            stamp
        })
        .collect();
    c.bench_function("retry_past_window", |b| {
        b.iter(|| {
            i = (i + 1) % LANES;
            black_box(w.seen("Topic", Some(&stamps[i])));
        });
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
