//! `sluice bench produce`: producers only; send latency, msg/s and what
//! the broker stored.

use std::sync::Arc;
use std::time::Duration;

use anyhow::bail;
use sluice_core::SystemClock;

use sluice_client::MessageQueue;

use super::args::{Load, ProduceArgs, SendMode, Timing};
use super::cluster;
use super::export::Pictures;
use super::load::{SendStats, Senders, Window};
use super::progress;
use super::report::{CpuMark, Setup, Summary, Syncs};
use super::stamp::Stamper;
use crate::endpoint::Endpoint;

/// How long oneway sends may take to land in the store after the senders stop.
const SETTLE_MAX: Duration = Duration::from_secs(2);

/// Runs the produce bench.
pub async fn run(
    args: ProduceArgs,
    endpoint: &Endpoint,
    json: bool,
) -> anyhow::Result<(Summary, Pictures)> {
    let timing = args.common.timing()?;
    let load = args.load.validate()?;
    let grpc = args.common.grpc(Some(load.mode))?;
    let stamper = Stamper::new();
    let clock = SystemClock::new();
    let topic = &args.common.topic;
    let queues = cluster::ensure_topic(endpoint, &clock, topic, args.common.queues).await?;
    let senders = Senders::connect(endpoint, &clock, topic, &load, grpc).await?;
    let result = measure(&args, &load, &senders, &queues, &stamper, timing, json).await;
    senders.shutdown().await;
    result
}

async fn measure(
    args: &ProduceArgs,
    load: &Load,
    senders: &Senders,
    queues: &[MessageQueue],
    stamper: &Stamper,
    timing: Timing,
    json: bool,
) -> anyhow::Result<(Summary, Pictures)> {
    let client = senders
        .client()
        .ok_or_else(|| anyhow::anyhow!("no producer"))?;
    let stored_before = cluster::stored_msgs(client, queues).await?;
    let syncs_before = cluster::broker_syncs(client).await;
    let stats = Arc::new(SendStats::new()?);
    let start = stamper.now();
    let window = Window {
        start,
        measure_from: start + timing.warmup,
        end: start + timing.warmup + timing.duration,
    };
    let live = progress::start(
        timing.warmup,
        timing.warmup + timing.duration,
        json,
        stamper,
        Some(Arc::clone(&stats)),
        None,
    );
    // The CPU mark is taken at the start even with a warm-up; the cost is
    // then per message over the whole run.
    let cpu = CpuMark::now(args.common.broker_pid);
    let schedule = senders.run(window, stamper, &stats).await?;
    let trace = live.finish();
    let total = stats.meter.total_msgs();
    let cost = cpu.cost(total, timing.warmup + timing.duration);
    let settle = if load.mode == SendMode::Oneway {
        SETTLE_MAX
    } else {
        Duration::ZERO
    };
    let stored_after = cluster::stored_msgs_settled(client, queues, settle).await?;
    let elapsed = stamper.now().saturating_sub(start);
    let syncs = match (syncs_before, cluster::broker_syncs(client).await) {
        (Some(before), Some(after)) => Syncs::of(
            after.saturating_sub(before),
            stored_after - stored_before,
            elapsed,
        ),
        _ => None,
    };
    let sent = stats.meter.flow(timing.duration);
    if sent.msgs == 0 && sent.errors > 0 {
        bail!(
            "every send failed ({} errors); first: {}",
            sent.errors,
            sent.first_error.as_deref().unwrap_or("?")
        );
    }
    let schedule_missed = schedule.map(|s| {
        let due = s.slots_between(window.measure_from);
        due.saturating_sub(sent.requests + sent.errors)
    });
    let pictures = Pictures {
        trace,
        send_curve: Some(stats.latency.curve()),
        e2e_curve: None,
    };
    let summary = Summary {
        setup: setup(args, load, queues.len(), timing),
        sent: Some(sent),
        send_latency_us: Some(stats.latency.summary()),
        schedule_lag_us: load.requests_per_s.map(|_| stats.lag.summary()),
        schedule_missed,
        stored_msgs: Some(stored_after - stored_before),
        syncs,
        cost,
        ..Summary::default()
    };
    Ok((summary, pictures))
}

fn setup(args: &ProduceArgs, load: &Load, queues: usize, timing: Timing) -> Setup {
    Setup {
        bench: "produce",
        topic: args.common.topic.clone(),
        queues,
        mode: Some(load.mode.as_str()),
        size_bytes: Some(load.size_bytes),
        batch: Some(load.batch),
        window: Some(load.window),
        producers: Some(load.producers),
        rate_msgs_per_s: load.rate_msgs_per_s,
        duration_s: timing.duration.as_secs_f64(),
        warmup_s: timing.warmup.as_secs_f64(),
        ..Setup::default()
    }
}
