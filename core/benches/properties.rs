//! Properties-string micro-benchmarks over a realistic send's properties
//! (`UNIQ_KEY`, WAIT, TAGS, KEYS, `MSG_REGION`, `TRACE_ON`, CLUSTER and a
//! 20-character custom property; about 170 bytes, 8 pairs).
//!
//! - `properties/scan` — `IndexedProperties::scan`: what dispatch and
//!   recovery read from every record, without allocating.
//! - `properties/for_each_pair` — the bare pair walk under `scan`.
//! - `properties/parse` — `Properties::parse`: the full, owned table the
//!   send path builds.

use std::time::Duration;

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use sluice_core::message::indexed_properties::for_each_pair;
use sluice_core::message::{keys, IndexedProperties, Properties};

/// The encoded properties of a typical send.
fn realistic() -> Vec<u8> {
    let mut props = Properties::new();
    for (key, value) in [
        (keys::UNIQ_KEY, "7F0000010B8A18B4AAC27A3F5C1D0000"),
        (keys::WAIT, "true"),
        (keys::TAGS, "TagA"),
        (keys::KEYS, "order-123"),
        (keys::MSG_REGION, "DefaultRegion"),
        (keys::TRACE_ON, "true"),
        (keys::CLUSTER, "DefaultCluster"),
        ("x-tenant-route-label", "blue-canary-7"),
    ] {
        props.insert(key, value).expect("valid pair");
    }
    props.encode()
}

fn properties(c: &mut Criterion) {
    let raw = realistic();
    let mut g = c.benchmark_group("properties");
    g.throughput(Throughput::Bytes(u64::try_from(raw.len()).expect("fits")));
    g.bench_function("scan", |b| {
        b.iter(|| IndexedProperties::scan(black_box(&raw)));
    });
    g.bench_function("for_each_pair", |b| {
        b.iter(|| {
            let mut bytes = 0;
            for_each_pair(black_box(&raw), |k, v| bytes += k.len() + v.len());
            bytes
        });
    });
    g.bench_function("parse", |b| {
        b.iter(|| Properties::parse(black_box(&raw)).expect("valid"));
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    targets = properties
}
criterion_main!(benches);
