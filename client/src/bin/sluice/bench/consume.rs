//! `sluice bench consume`: consumers only; msg/s and MB/s of replaying a
//! backlog (or following a topic another process produces to). The rates
//! are over the active window, first to last measured receipt, so a
//! backlog drained early is not diluted by idle time.

use std::sync::Arc;
use std::time::Duration;

use sluice_core::SystemClock;

use super::args::{ConsumeArgs, Timing};
use super::cluster;
use super::export::Pictures;
use super::progress;
use super::receive::{Measure, Plan, ReceiveStats, Receivers};
use super::report::{CpuMark, Setup, Summary};
use super::stamp::Stamper;
use crate::endpoint::Endpoint;

/// How often the run checks for its end and for idleness.
const TICK: Duration = Duration::from_millis(50);

/// Runs the consume bench.
pub async fn run(
    args: ConsumeArgs,
    endpoint: &Endpoint,
    json: bool,
) -> anyhow::Result<(Summary, Pictures)> {
    let timing = args.common.timing()?;
    args.consumer.validate()?;
    let idle_exit = super::args::seconds("idle-exit", args.idle_exit, true)?;
    let stamper = Stamper::new();
    let clock = SystemClock::new();
    let topic = &args.common.topic;
    let queues = cluster::ensure_topic(endpoint, &clock, topic, args.common.queues).await?;
    let group = args.consumer.group.clone().unwrap_or_else(|| {
        format!(
            "sluice-bench-consume-{}-{}",
            std::process::id(),
            sluice_core::Clock::wall_ms(&clock)
        )
    });
    let stats = Arc::new(ReceiveStats::new(Measure::ByArrival, &stamper)?);
    let start = stamper.now();
    stats.measure_from(start + timing.warmup);
    let cpu = CpuMark::now(args.common.broker_pid);
    let plan = Plan {
        endpoint,
        clock: &clock,
        topic,
        queues: &queues,
        group: &group,
        from: args.from,
        args: &args.consumer,
        grpc: args.common.grpc(None)?,
    };
    let mut receivers = Receivers::start(&plan, &stats).await?;
    let live = progress::start(
        timing.warmup,
        timing.warmup + timing.duration,
        json,
        &stamper,
        None,
        Some(Arc::clone(&stats)),
    );
    let drained = wait(&stamper, &stats, start, timing, idle_exit).await;
    let trace = live.finish();
    receivers.shutdown().await;
    let elapsed = stamper.now().saturating_sub(start);
    let active = stats
        .active()
        .map_or(timing.duration, |(first, last)| last.saturating_sub(first));
    let received = stats.meter.flow(active.max(Duration::from_millis(1)));
    let cost = cpu.cost(stats.meter.total_msgs(), elapsed);
    let summary = Summary {
        setup: setup(&args, queues.len(), group, timing),
        received: Some(received),
        drained: Some(drained),
        cost,
        ..Summary::default()
    };
    let pictures = Pictures {
        trace,
        ..Pictures::default()
    };
    Ok((summary, pictures))
}

fn setup(args: &ConsumeArgs, queues: usize, group: String, timing: Timing) -> Setup {
    Setup {
        bench: "consume",
        topic: args.common.topic.clone(),
        queues,
        consumers: Some(args.consumer.consumers),
        consumer_kind: Some(args.consumer.kind_label(args.common.protocol)),
        group: Some(group),
        duration_s: timing.duration.as_secs_f64(),
        warmup_s: timing.warmup.as_secs_f64(),
        ..Setup::default()
    }
}

/// Waits for the end of the run, or (with `idle_exit`) until nothing has
/// arrived for that long after the first message; `true` when it ended
/// for idleness.
async fn wait(
    stamper: &Stamper,
    stats: &ReceiveStats,
    start: Duration,
    timing: Timing,
    idle_exit: Duration,
) -> bool {
    let end = start + timing.warmup + timing.duration;
    loop {
        let now = stamper.now();
        if now >= end {
            return false;
        }
        if !idle_exit.is_zero() {
            if let Some(last) = stats.last_receipt() {
                if now.saturating_sub(last) >= idle_exit {
                    return true;
                }
            }
        }
        tokio::time::sleep(TICK.min(end.saturating_sub(now))).await;
    }
}
