//! What recording stats costs per message, operation by operation, on the
//! same calls the broker makes (docs/benchmarks.md, "Cost of stats"):
//!
//! - `send_one`: a single send — the request table's two clock reads and
//!   its latency record, plus `topic_in` and `message_in`;
//! - `batch_64`: a batch of 64 — one request's timing and one `topic_in`,
//!   64 `message_in`s (divide by 64 for a message's share);
//! - `pull_32`: one pull returning 32 messages (`messages_out`);
//! - `scrape_snapshot`: `snapshot()` with 100 topics and 1,000 groups.
//!
//! Each op runs on a map already holding 100 topics, as a live broker's
//! would. Divide by the broker CPU per message that `sluice bench` reports
//! to get the share. Run: `cargo bench -p sluice-node --bench stats`.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use sluice_core::{Clock, SystemClock};
use sluice_node::broker::BrokerStats;

const SEND: i32 = 310;
const BATCH: i32 = 320;
const PULL: i32 = 11;

fn loaded() -> BrokerStats {
    let s = BrokerStats::new([SEND, BATCH, PULL], Arc::default());
    for t in 0..100 {
        let topic = format!("Topic{t}");
        s.message_in(&s.topic_in(&topic), 1_100);
        for g in 0..10 {
            s.messages_out(&topic, &format!("group{g}"), 0, 1, (1, 1_100));
        }
    }
    s
}

/// One request as the request table times it: two reads of the clock.
fn timed_request(s: &BrokerStats, clock: &SystemClock, code: i32) {
    let start = clock.monotonic();
    let elapsed = clock.monotonic().saturating_sub(start);
    s.request(code, 0, black_box(elapsed).max(Duration::from_micros(20)));
}

fn bench(c: &mut Criterion) {
    let s = loaded();
    let clock = SystemClock::new();
    c.bench_function("send_one", |b| {
        b.iter(|| {
            timed_request(&s, &clock, SEND);
            let t = s.topic_in(black_box("Topic42"));
            s.message_in(&t, 1_100);
        });
    });
    c.bench_function("batch_64", |b| {
        b.iter(|| {
            timed_request(&s, &clock, BATCH);
            let t = s.topic_in(black_box("Topic42"));
            for _ in 0..64 {
                s.message_in(&t, 1_100);
            }
        });
    });
    c.bench_function("pull_32", |b| {
        b.iter(|| {
            timed_request(&s, &clock, PULL);
            s.messages_out(
                black_box("Topic42"),
                black_box("group3"),
                0,
                33,
                (32, 35_200),
            );
        });
    });
    c.bench_function("scrape_snapshot", |b| b.iter(|| black_box(s.snapshot())));
}

criterion_group!(benches, bench);
criterion_main!(benches);
