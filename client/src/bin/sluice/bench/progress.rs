//! The live line: once a second on stderr, the last second's send and
//! receive rates and the latency percentiles so far. Shown only for runs
//! longer than [`PROGRESS_AFTER`] and never with `--json`.

use std::fmt::Write;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;

use super::load::SendStats;
use super::receive::ReceiveStats;
use super::stamp::Stamper;
use super::stats::fmt_us;

/// Runs at most this long get no progress line.
pub const PROGRESS_AFTER: Duration = Duration::from_secs(3);

/// The live line's task; aborted when dropped.
pub struct Progress(Option<JoinHandle<()>>);

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(task) = self.0.take() {
            task.abort();
        }
    }
}

/// Starts the live line for a run of `length` unless `json`.
pub fn start(
    warmup: Duration,
    length: Duration,
    json: bool,
    stamper: &Stamper,
    send: Option<Arc<SendStats>>,
    recv: Option<Arc<ReceiveStats>>,
) -> Progress {
    if json || length <= PROGRESS_AFTER {
        return Progress(None);
    }
    let stamper = stamper.clone();
    let started = stamper.now();
    let warmup_s = warmup.as_secs();
    Progress(Some(tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        let (mut sent_before, mut recv_before) = (0_u64, 0_u64);
        loop {
            tick.tick().await;
            let secs = stamper.now().saturating_sub(started).as_secs();
            let mut line = format!(
                "[{secs:>4}s{}]",
                if secs < warmup_s { " warm-up" } else { "" }
            );
            if let Some(s) = &send {
                let total = s.meter.total_msgs();
                let _ = write!(line, " sent {:>9} msg/s", total.saturating_sub(sent_before));
                let p = s.latency.summary();
                if p.count > 0 {
                    let _ = write!(line, "  send p50 {} p99 {}", fmt_us(p.p50), fmt_us(p.p99));
                }
                sent_before = total;
            }
            if let Some(r) = &recv {
                let total = r.meter.total_msgs();
                let _ = write!(
                    line,
                    " | recv {:>9} msg/s",
                    total.saturating_sub(recv_before)
                );
                if r.e2e.summary().count > 0 {
                    let p = r.e2e.summary();
                    let _ = write!(line, "  e2e p50 {} p99 {}", fmt_us(p.p50), fmt_us(p.p99));
                }
                recv_before = total;
            }
            eprintln!("{line}");
        }
    })))
}
