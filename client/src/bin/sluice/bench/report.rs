//! The summary of a run: one JSON object (`--json`) or a few human lines on
//! stdout. Latencies are microseconds; rates are per second of the
//! measured window.

use std::fmt::Write;
use std::time::Duration;

use anyhow::Context;
use serde::Serialize;

use super::procstat::Proc;
use super::stats::{Flow, Percentiles};

/// What was run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Setup {
    pub bench: &'static str,
    pub topic: String,
    pub queues: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub producers: Option<usize>,
    /// Open loop: target messages per second; `None` is closed loop.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_msgs_per_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consumers: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consumer_kind: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    pub duration_s: f64,
    pub warmup_s: f64,
}

/// CPU and memory over the measured window.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Cost {
    /// The bench process's CPU per message (sent, else received).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_cpu_us_per_msg: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub broker_cpu_us_per_msg: Option<f64>,
    /// Broker CPU over the window, in cores (1.0 = one core busy).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub broker_cores: Option<f64>,
    /// Broker RSS at the end, mapped CommitLog and queue files included.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub broker_rss_mib: Option<f64>,
    /// The anonymous part of it (heap, stacks): what configuration bounds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub broker_rss_anon_mib: Option<f64>,
}

/// CPU readings at the start of the measured window.
pub struct CpuMark {
    me: Option<Duration>,
    broker: Option<(Proc, Option<Duration>)>,
}

impl CpuMark {
    /// Reads the CPU time of this process and of `broker_pid`.
    pub fn now(broker_pid: Option<u32>) -> Self {
        Self {
            me: Proc::me().cpu(),
            broker: broker_pid.map(|pid| {
                let p = Proc::pid(pid);
                let cpu = p.cpu();
                (p, cpu)
            }),
        }
    }

    /// The cost since this mark for `msgs` messages over `elapsed`.
    pub fn cost(&self, msgs: u64, elapsed: Duration) -> Cost {
        #[expect(clippy::cast_precision_loss, reason = "counts far below 2^52")]
        let per_msg =
            |cpu: Duration| (msgs > 0).then(|| round1(cpu.as_secs_f64() * 1e6 / msgs as f64));
        let mut cost = Cost::default();
        if let (Some(before), Some(after)) = (self.me, Proc::me().cpu()) {
            cost.client_cpu_us_per_msg = per_msg(after.saturating_sub(before)).flatten();
        }
        if let Some((p, Some(before))) = &self.broker {
            if let Some(after) = p.cpu() {
                let used = after.saturating_sub(*before);
                cost.broker_cpu_us_per_msg = per_msg(used).flatten();
                cost.broker_cores =
                    Some(round2(used.as_secs_f64() / elapsed.as_secs_f64().max(1e-9)));
            }
            #[expect(clippy::cast_precision_loss, reason = "KiB far below 2^52")]
            let mib = |kib: u64| round1(kib as f64 / 1024.0);
            if let Some((all, anon)) = p.rss_kib() {
                cost.broker_rss_mib = mib(all);
                cost.broker_rss_anon_mib = anon.and_then(mib);
            }
        }
        cost
    }
}

fn round1(x: f64) -> Option<f64> {
    x.is_finite().then(|| (x * 10.0).round() / 10.0)
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// Group commits over a run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Syncs {
    pub count: u64,
    pub per_s: f64,
    /// Stored messages per sync.
    pub msgs_per_sync: f64,
}

impl Syncs {
    /// `count` syncs for `stored` messages over `elapsed`; `None` when there
    /// were none (async flush).
    #[expect(clippy::cast_precision_loss, reason = "counts far below 2^52")]
    pub fn of(count: u64, stored: i64, elapsed: Duration) -> Option<Self> {
        (count > 0).then(|| Self {
            count,
            per_s: round2(count as f64 / elapsed.as_secs_f64().max(1e-9)),
            msgs_per_sync: round2(stored as f64 / count as f64),
        })
    }
}

/// One run's summary.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Summary {
    pub setup: Setup,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sent: Option<Flow>,
    /// Per request, from the call (closed loop) or the scheduled time
    /// (open loop) to the answer; oneway: to the hand-off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub send_latency_us: Option<Percentiles>,
    /// Open loop: how late senders started scheduled sends.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schedule_lag_us: Option<Percentiles>,
    /// Open loop: scheduled sends in the measured window never started
    /// (the producers could not keep up with `--rate`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schedule_missed: Option<u64>,
    /// Growth of the topic's stored messages over the whole run, warm-up
    /// included (oneway: what the broker really stored).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stored_msgs: Option<i64>,
    /// The brokers' group-commit syncs over the whole run (sync flush).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub syncs: Option<Syncs>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub received: Option<Flow>,
    /// Consume: stopped early because the backlog was drained.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drained: Option<bool>,
    /// Receipt minus the scheduled send time stamped in the body.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub e2e_latency_us: Option<Percentiles>,
    /// Receipt minus the time the send call started (excludes schedule lag).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub e2e_from_send_us: Option<Percentiles>,
    /// E2e: measured sends not received by the end of the drain.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub missing_msgs: Option<i64>,
    pub cost: Cost,
}

impl Summary {
    /// Prints the summary to stdout.
    pub fn print(&self, json: bool) -> anyhow::Result<()> {
        if json {
            let text = serde_json::to_string(self).context("encode the summary")?;
            println!("{text}");
            return Ok(());
        }
        for line in self.human() {
            println!("{line}");
        }
        Ok(())
    }

    pub(super) fn human(&self) -> Vec<String> {
        let s = &self.setup;
        let mut out = vec![format!(
            "sluice bench {} · topic {} ({} queues) · {:.1} s measured after {:.1} s warm-up",
            s.bench, s.topic, s.queues, s.duration_s, s.warmup_s
        )];
        if let (Some(mode), Some(size), Some(producers)) = (s.mode, s.size_bytes, s.producers) {
            let rate = s.rate_msgs_per_s.map_or_else(
                || "closed loop".to_owned(),
                |r| format!("open loop at {r} msg/s"),
            );
            out.push(format!(
                "  load: {mode}, {size} B × batch {} · window {} · {producers} producer(s) · {rate}",
                s.batch.unwrap_or(1),
                s.window.unwrap_or(1)
            ));
        }
        if let (Some(n), Some(kind)) = (s.consumers, s.consumer_kind) {
            out.push(format!(
                "  consumers: {n} {kind} · group {}",
                s.group.as_deref().unwrap_or("?")
            ));
        }
        if let Some(f) = &self.sent {
            out.push(flow_line("sent", f));
        }
        if let Some(p) = &self.send_latency_us {
            out.push(format!("  send latency: {}", p.line()));
        }
        if let Some(p) = &self.schedule_lag_us {
            out.push(format!("  schedule lag: {}", p.line()));
        }
        if let Some(n) = self.schedule_missed.filter(|n| *n > 0) {
            out.push(format!(
                "  schedule missed: {n} sends never started (rate not sustained)"
            ));
        }
        if let Some(n) = self.stored_msgs {
            out.push(format!("  stored: {n} messages (whole run)"));
        }
        if let Some(s) = &self.syncs {
            out.push(format!(
                "  group commits: {} syncs, {:.0}/s, {:.1} messages per sync",
                s.count, s.per_s, s.msgs_per_sync
            ));
        }
        if let Some(f) = &self.received {
            out.push(flow_line("received", f));
        }
        if self.drained == Some(true) {
            out.push("  drained: nothing new arrived; stopped early".to_owned());
        }
        if let Some(p) = &self.e2e_latency_us {
            out.push(format!("  e2e latency (from schedule): {}", p.line()));
        }
        if let Some(p) = &self.e2e_from_send_us {
            out.push(format!("  e2e latency (from send call): {}", p.line()));
        }
        if let Some(n) = self.missing_msgs.filter(|n| *n != 0) {
            out.push(format!("  missing: {n} measured messages not received"));
        }
        let c = &self.cost;
        let mut cost = Vec::new();
        if let Some(x) = c.client_cpu_us_per_msg {
            cost.push(format!("bench CPU {x} µs/msg"));
        }
        if let Some(x) = c.broker_cpu_us_per_msg {
            cost.push(format!("broker CPU {x} µs/msg"));
        }
        if let Some(x) = c.broker_cores {
            cost.push(format!("broker {x} cores"));
        }
        if let Some(x) = c.broker_rss_mib {
            cost.push(format!("broker RSS {x} MiB"));
        }
        if let Some(x) = c.broker_rss_anon_mib {
            cost.push(format!("(anonymous {x} MiB)"));
        }
        if !cost.is_empty() {
            out.push(format!("  cost: {}", cost.join(" · ")));
        }
        out
    }
}

fn flow_line(what: &str, f: &Flow) -> String {
    let requests = if f.requests == f.msgs {
        String::new()
    } else {
        format!(" in {} requests", f.requests)
    };
    let mut line = format!(
        "  {what}: {} msgs{requests} over {:.2} s = {:.0} msg/s, {:.1} MB/s",
        f.msgs, f.seconds, f.msgs_per_s, f.mb_per_s
    );
    if f.errors > 0 {
        let _ = write!(
            line,
            " · {} errors (first: {})",
            f.errors,
            f.first_error.as_deref().unwrap_or("?")
        );
    }
    line
}
