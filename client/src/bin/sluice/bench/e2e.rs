//! `sluice bench e2e`: producers and consumers in one process. Consumers of
//! a fresh group start at the topic's end and are reading every queue
//! before the first send; each receipt's latency is its receive time minus
//! the send timestamp in its body. After the senders stop, consumers get
//! [`DRAIN_MAX`] to catch up.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, ensure};
use sluice_core::{Clock as _, SystemClock};

use super::args::{E2eArgs, Load, StartFrom, Timing};
use super::cluster;
use super::export::Pictures;
use super::load::{SendStats, Senders, Window};
use super::progress;
use super::progress::Trace;
use super::receive::{Measure, Plan, ReceiveStats, Receivers};
use super::report::{Cost, CpuMark, Setup, Summary};
use super::stamp::{Stamper, STAMP_BYTES};
use crate::endpoint::Endpoint;

/// Longest the consumers get after the senders stop.
const DRAIN_MAX: Duration = Duration::from_secs(3);
/// Consumers settle this long after assignment before the first send (their
/// first long polls are in flight).
const SETTLE: Duration = Duration::from_millis(300);

/// Runs the end-to-end bench.
pub async fn run(
    args: E2eArgs,
    endpoint: &Endpoint,
    json: bool,
) -> anyhow::Result<(Summary, Pictures)> {
    let (timing, load) = validate(&args)?;
    let stamper = Stamper::new();
    let clock = SystemClock::new();
    let topic = &args.common.topic;
    let queues = cluster::ensure_topic(endpoint, &clock, topic, args.common.queues).await?;
    let group = args.consumer.group.clone().unwrap_or_else(|| {
        format!(
            "sluice-bench-e2e-{}-{}",
            std::process::id(),
            clock.wall_ms()
        )
    });
    let recv = Arc::new(ReceiveStats::new(Measure::ByStamp, &stamper)?);
    let plan = Plan {
        endpoint,
        clock: &clock,
        topic,
        queues: &queues,
        group: &group,
        from: StartFrom::Last,
        args: &args.consumer,
        grpc: args.common.grpc(Some(load.mode))?,
    };
    let mut receivers = Receivers::start(&plan, &recv).await?;
    let senders = match Senders::connect(endpoint, &clock, topic, &load, plan.grpc).await {
        Ok(s) => s,
        Err(e) => {
            receivers.shutdown().await;
            return Err(e);
        }
    };
    let run = Run {
        timing,
        stamper: &stamper,
        senders: &senders,
        recv: &recv,
        broker_pid: args.common.broker_pid,
        json,
    };
    let measured = run.measure().await;
    receivers.shutdown().await;
    senders.shutdown().await;
    let (senders_stats, schedule_missed, cost, trace) = measured?;
    let sent = senders_stats.meter.flow(timing.duration);
    if sent.msgs == 0 && sent.errors > 0 {
        bail!(
            "every send failed ({} errors); first: {}",
            sent.errors,
            sent.first_error.as_deref().unwrap_or("?")
        );
    }
    let received = recv.meter.flow(timing.duration);
    let missing = i64::try_from(sent.msgs).unwrap_or(i64::MAX)
        - i64::try_from(received.msgs).unwrap_or(i64::MAX);
    let pictures = Pictures {
        trace,
        send_curve: Some(senders_stats.latency.curve()),
        e2e_curve: Some(recv.e2e.curve()),
    };
    let summary = Summary {
        setup: setup(&args, &load, queues.len(), group, timing),
        sent: Some(sent),
        send_latency_us: Some(senders_stats.latency.summary()),
        schedule_lag_us: load.requests_per_s.map(|_| senders_stats.lag.summary()),
        schedule_missed,
        received: Some(received),
        e2e_latency_us: Some(recv.e2e.summary()),
        e2e_from_send_us: Some(recv.e2e_from_send.summary()),
        missing_msgs: Some(missing),
        cost,
        ..Summary::default()
    };
    Ok((summary, pictures))
}

/// The run's timing and load, once every flag is checked.
fn validate(args: &E2eArgs) -> anyhow::Result<(Timing, Load)> {
    let timing = args.common.timing()?;
    let load = args.load.validate()?;
    args.consumer.validate()?;
    ensure!(
        load.size_bytes >= STAMP_BYTES,
        "e2e needs --size of at least {STAMP_BYTES} bytes to carry the send timestamps"
    );
    Ok((timing, load))
}

fn setup(args: &E2eArgs, load: &Load, queues: usize, group: String, timing: Timing) -> Setup {
    Setup {
        bench: "e2e",
        topic: args.common.topic.clone(),
        queues,
        mode: Some(load.mode.as_str()),
        size_bytes: Some(load.size_bytes),
        batch: Some(load.batch),
        window: Some(load.window),
        producers: Some(load.producers),
        rate_msgs_per_s: load.rate_msgs_per_s,
        consumers: Some(args.consumer.consumers),
        consumer_kind: Some(args.consumer.kind_label(args.common.protocol)),
        group: Some(group),
        duration_s: timing.duration.as_secs_f64(),
        warmup_s: timing.warmup.as_secs_f64(),
    }
}

/// The measured part of a run, with consumers already reading.
struct Run<'a> {
    timing: Timing,
    stamper: &'a Stamper,
    senders: &'a Senders,
    recv: &'a Arc<ReceiveStats>,
    broker_pid: Option<u32>,
    json: bool,
}

impl Run<'_> {
    /// Sends for the run's window, then gives the consumers up to
    /// [`DRAIN_MAX`] to catch up; returns the send stats, the open-loop
    /// slots never started, the CPU cost and the per-second samples.
    async fn measure(&self) -> anyhow::Result<(Arc<SendStats>, Option<u64>, Cost, Trace)> {
        tokio::time::sleep(SETTLE).await;
        let send = Arc::new(SendStats::new()?);
        let start = self.stamper.now();
        let window = Window {
            start,
            measure_from: start + self.timing.warmup,
            end: start + self.timing.warmup + self.timing.duration,
        };
        self.recv.measure_from(window.measure_from);
        let live = progress::start(
            self.timing.warmup,
            self.timing.warmup + self.timing.duration,
            self.json,
            self.stamper,
            Some(Arc::clone(&send)),
            Some(Arc::clone(self.recv)),
        );
        let cpu = CpuMark::now(self.broker_pid);
        let schedule = self.senders.run(window, self.stamper, &send).await?;
        let drain_end = self.stamper.now() + DRAIN_MAX;
        while self.recv.meter.msgs() < send.meter.msgs() && self.stamper.now() < drain_end {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let trace = live.finish();
        let elapsed = self.stamper.now().saturating_sub(start);
        let cost = cpu.cost(send.meter.total_msgs(), elapsed);
        let requests = send.meter.flow(self.timing.duration);
        let missed = schedule.map(|s| {
            s.slots_between(window.measure_from)
                .saturating_sub(requests.requests + requests.errors)
        });
        Ok((send, missed, cost, trace))
    }
}
