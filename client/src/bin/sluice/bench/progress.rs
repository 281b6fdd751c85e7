//! The run's once-a-second sampler and its live display on stderr.
//!
//! Every run samples its send and receive totals once a second (the
//! report's throughput plot is drawn from them), with or without a
//! display. The display is never shown with `--json`; on a terminal it is
//! a small block redrawn in place (a bar of elapsed time with the warm-up
//! shaded differently, then per direction the current rate, a sparkline
//! of the last [`SPARK_SECS`] seconds and p99), each line short enough
//! for an 80-column terminal; otherwise (CI logs) it is one plain line per
//! second for runs longer than [`PROGRESS_AFTER`].

use std::fmt::Write as _;
use std::io::{IsTerminal, Write as _};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::task::JoinHandle;

use super::load::SendStats;
use super::receive::ReceiveStats;
use super::stamp::Stamper;
use super::stats::{fmt_rate, fmt_us, Percentiles};

/// Runs at most this long get no plain progress lines.
pub const PROGRESS_AFTER: Duration = Duration::from_secs(3);
/// Seconds of rate history in a sparkline.
pub const SPARK_SECS: usize = 30;
/// Cells of the live bar.
const BAR_CELLS: usize = 30;
/// Sparkline levels, lowest first.
const LEVELS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
/// A final partial second shorter than this is not sampled (its rate would
/// be noise).
const LAST_SAMPLE_MIN: Duration = Duration::from_millis(500);

/// Erases a block of `lines` drawn without a final newline: clears the
/// cursor's line, then each line above it.
pub fn clear(lines: usize) -> String {
    if lines == 0 {
        return String::new();
    }
    let mut out = String::from("\r\x1b[2K");
    for _ in 1..lines {
        out.push_str("\x1b[1A\x1b[2K");
    }
    out
}

/// Totals so far (warm-up included) at `at` after the start of the run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sample {
    pub at: Duration,
    pub sent: u64,
    pub recv: u64,
}

/// A run's samples, for the report.
#[derive(Clone, Debug, Default)]
pub struct Trace {
    pub samples: Vec<Sample>,
    pub warmup: Duration,
    /// The run sent (produce, e2e) and received (consume, e2e).
    pub has_send: bool,
    pub has_recv: bool,
}

/// Messages per second over each interval between samples (the first
/// from the start): `(seconds since the start at its end, rate)`, one
/// point per sample.
pub fn rates(samples: &[Sample], pick: impl Fn(&Sample) -> u64) -> Vec<(f64, f64)> {
    let mut before = Sample::default();
    samples
        .iter()
        .map(|s| {
            let dt = s.at.saturating_sub(before.at).as_secs_f64();
            #[expect(clippy::cast_precision_loss, reason = "counts far below 2^52")]
            let delta = pick(s).saturating_sub(pick(&before)) as f64;
            before = *s;
            let rate = if dt > 0.0 { delta / dt } else { 0.0 };
            (s.at.as_secs_f64(), rate)
        })
        .collect()
}

/// One character per value, `▁` (zero or less) to `█` (the largest).
/// Non-finite values draw as `▁`.
pub fn sparkline(values: &[f64]) -> String {
    let max = values
        .iter()
        .copied()
        .filter(|v| v.is_finite())
        .fold(0.0_f64, f64::max);
    values
        .iter()
        .map(|v| {
            if max <= 0.0 || !v.is_finite() || *v <= 0.0 {
                return LEVELS[0];
            }
            #[expect(
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss,
                reason = "rounded and clamped to 0..=7"
            )]
            let level = (v / max * 7.0).round().clamp(0.0, 7.0) as usize;
            LEVELS[level]
        })
        .collect()
}

/// A bar of `cells` for `elapsed` of a `total`-second run: done cells are
/// `▒` within the warm-up and `█` after it, the rest `░`. Safe for a zero
/// or non-finite total.
pub fn bar(elapsed: f64, total: f64, warmup: f64, cells: usize) -> String {
    let fraction = |x: f64| {
        let f = x / total;
        if f.is_finite() {
            f.clamp(0.0, 1.0)
        } else {
            0.0
        }
    };
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss,
        reason = "a fraction in 0..=1 of a few cells"
    )]
    let cell = |x: f64| (fraction(x) * cells as f64).round() as usize;
    let (done, warm) = (cell(elapsed), cell(warmup));
    (0..cells)
        .map(|i| match (i < done, i < warm) {
            (true, true) => '▒',
            (true, false) => '█',
            (false, _) => '░',
        })
        .collect()
}

/// One direction of a run as the display shows it.
#[derive(Clone, Debug, Default)]
pub struct Direction {
    /// Rates of the recent seconds, oldest first; the last is the current.
    pub history: Vec<f64>,
    /// The latency so far (send latency, or e2e for receives).
    pub latency: Percentiles,
}

/// What one display line shows.
#[derive(Clone, Debug, Default)]
pub struct View {
    pub elapsed: Duration,
    pub total: Duration,
    pub warmup: Duration,
    pub send: Option<Direction>,
    pub recv: Option<Direction>,
}

impl View {
    fn in_warmup(&self) -> bool {
        self.elapsed < self.warmup
    }

    /// The plain line for logs: `[  12s warm-up] sent  1234 msg/s …`.
    pub fn plain(&self) -> String {
        let mut line = format!(
            "[{:>4}s{}]",
            self.elapsed.as_secs(),
            if self.in_warmup() { " warm-up" } else { "" }
        );
        for (sep, what, lat, d) in self.directions() {
            let rate = d.history.last().copied().unwrap_or(0.0);
            let _ = write!(line, "{sep}{what} {rate:>9.0} msg/s");
            if d.latency.count > 0 {
                let (p50, p99) = (fmt_us(d.latency.p50), fmt_us(d.latency.p99));
                let _ = write!(line, "  {lat} p50 {p50} p99 {p99}");
            }
        }
        line
    }

    /// The live block: the bar and time (with `warm-up`, or `drain` past
    /// the end), then a line per direction with its rate, a sparkline and
    /// p99.
    pub fn live(&self) -> Vec<String> {
        let (elapsed, total) = (self.elapsed.as_secs_f64(), self.total.as_secs_f64());
        let phase = if self.in_warmup() {
            " warm-up"
        } else if self.elapsed > self.total {
            " drain"
        } else {
            ""
        };
        let mut lines = vec![format!(
            "{} {:>3.0}/{total:.0}s{phase}",
            bar(elapsed, total, self.warmup.as_secs_f64(), BAR_CELLS),
            elapsed.floor(),
        )];
        for (_, what, lat, d) in self.directions() {
            let rate = d.history.last().copied().unwrap_or(0.0);
            let recent = &d.history[d.history.len().saturating_sub(SPARK_SECS)..];
            let mut line = format!(
                "  {what} {:>7}/s {:<SPARK_SECS$}",
                fmt_rate(rate),
                sparkline(recent)
            );
            if d.latency.count > 0 {
                let _ = write!(line, " {lat} p99 {}", fmt_us(d.latency.p99));
            }
            lines.push(line);
        }
        lines
    }

    fn directions(&self) -> Vec<(&'static str, &'static str, &'static str, &Direction)> {
        let mut out = Vec::new();
        if let Some(d) = &self.send {
            out.push((" ", "sent", "send", d));
        }
        if let Some(d) = &self.recv {
            out.push((" | ", "recv", "e2e", d));
        }
        out
    }
}

/// How the display is drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Off,
    Lines,
    Live,
}

/// What the sampler reads.
#[derive(Clone)]
struct Sources {
    send: Option<Arc<SendStats>>,
    recv: Option<Arc<ReceiveStats>>,
    stamper: Stamper,
    started: Duration,
}

impl Sources {
    fn sample(&self) -> Sample {
        Sample {
            at: self.stamper.now().saturating_sub(self.started),
            sent: self.send.as_ref().map_or(0, |s| s.meter.total_msgs()),
            recv: self.recv.as_ref().map_or(0, |r| r.meter.total_msgs()),
        }
    }

    fn view(&self, samples: &[Sample], total: Duration, warmup: Duration) -> View {
        let history = |pick: fn(&Sample) -> u64| {
            let keep = &samples[samples.len().saturating_sub(SPARK_SECS + 1)..];
            let mut r: Vec<f64> = rates(keep, pick).into_iter().map(|(_, r)| r).collect();
            if keep.len() > SPARK_SECS {
                r.remove(0);
            }
            r
        };
        View {
            elapsed: samples.last().map_or(Duration::ZERO, |s| s.at),
            total,
            warmup,
            send: self.send.as_ref().map(|s| Direction {
                history: history(|s| s.sent),
                latency: s.latency.summary(),
            }),
            recv: self.recv.as_ref().map(|r| Direction {
                history: history(|s| s.recv),
                latency: r.e2e.summary(),
            }),
        }
    }
}

#[derive(Default)]
struct Shared {
    samples: Vec<Sample>,
    stopped: bool,
    /// Lines of the live block on the terminal now.
    drawn: usize,
}

/// The sampler task; stopped by [`Progress::finish`] or when dropped.
pub struct Progress {
    task: Option<JoinHandle<()>>,
    shared: Arc<Mutex<Shared>>,
    sources: Sources,
    warmup: Duration,
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Progress {
    fn stop(&mut self) {
        if let Some(task) = self.task.take() {
            let mut shared = self.shared.lock().unwrap_or_else(PoisonError::into_inner);
            shared.stopped = true;
            task.abort();
            if shared.drawn > 0 {
                eprint!("{}", clear(shared.drawn));
                let _ = std::io::stderr().flush();
                shared.drawn = 0;
            }
        }
    }

    /// Stops sampling (and clears a live line); the samples so far plus
    /// the final partial second if it is long enough.
    pub fn finish(mut self) -> Trace {
        self.stop();
        let last = self.sources.sample();
        let mut shared = self.shared.lock().unwrap_or_else(PoisonError::into_inner);
        let mut samples = std::mem::take(&mut shared.samples);
        let before = samples.last().map_or(Duration::ZERO, |s| s.at);
        if samples.is_empty() || last.at.saturating_sub(before) >= LAST_SAMPLE_MIN {
            samples.push(last);
        }
        Trace {
            samples,
            warmup: self.warmup,
            has_send: self.sources.send.is_some(),
            has_recv: self.sources.recv.is_some(),
        }
    }
}

/// Starts sampling a run of `length`, with a display unless `json`.
pub fn start(
    warmup: Duration,
    length: Duration,
    json: bool,
    stamper: &Stamper,
    send: Option<Arc<SendStats>>,
    recv: Option<Arc<ReceiveStats>>,
) -> Progress {
    let mode = match (json, std::io::stderr().is_terminal()) {
        (false, true) => Mode::Live,
        (false, false) if length > PROGRESS_AFTER => Mode::Lines,
        (true, _) | (false, false) => Mode::Off,
    };
    let sources = Sources {
        send,
        recv,
        stamper: stamper.clone(),
        started: stamper.now(),
    };
    let shared = Arc::new(Mutex::new(Shared::default()));
    let task = tokio::spawn(sample(
        sources.clone(),
        Arc::clone(&shared),
        mode,
        (length, warmup),
    ));
    Progress {
        task: Some(task),
        shared,
        sources,
        warmup,
    }
}

/// Samples once a second until stopped, drawing the display in `mode`.
async fn sample(
    sources: Sources,
    shared: Arc<Mutex<Shared>>,
    mode: Mode,
    (length, warmup): (Duration, Duration),
) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        // Drawn under the lock, so a stop never races a redraw.
        let mut s = shared.lock().unwrap_or_else(PoisonError::into_inner);
        if s.stopped {
            return;
        }
        s.samples.push(sources.sample());
        match mode {
            Mode::Live => {
                let lines = sources.view(&s.samples, length, warmup).live();
                eprint!("{}{}", clear(s.drawn), lines.join("\n"));
                let _ = std::io::stderr().flush();
                s.drawn = lines.len();
            }
            Mode::Lines => eprintln!("{}", sources.view(&s.samples, length, warmup).plain()),
            Mode::Off => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64, sent: u64, recv: u64) -> Sample {
        Sample {
            at: Duration::from_secs(secs),
            sent,
            recv,
        }
    }

    #[test]
    fn sparkline_scales_to_the_largest_value() {
        assert_eq!(sparkline(&[0.0, 1.0, 2.0, 7.0]), "▁▂▃█");
        assert_eq!(sparkline(&[5.0, 5.0]), "██");
        // Nothing, zeros, negatives and NaN draw flat, without a panic.
        assert_eq!(sparkline(&[]), "");
        assert_eq!(sparkline(&[0.0, 0.0]), "▁▁");
        assert_eq!(sparkline(&[f64::NAN, -3.0, 2.0]), "▁▁█");
    }

    #[test]
    fn bar_fills_warm_up_and_measured_cells_differently() {
        assert_eq!(bar(0.0, 10.0, 2.0, 10), "░░░░░░░░░░");
        assert_eq!(bar(1.0, 10.0, 2.0, 10), "▒░░░░░░░░░");
        assert_eq!(bar(5.0, 10.0, 2.0, 10), "▒▒███░░░░░");
        // Past the end (e2e drains) stays full; zero and NaN totals are empty.
        assert_eq!(bar(12.0, 10.0, 0.0, 4), "████");
        assert_eq!(bar(1.0, 0.0, 0.0, 4), "░░░░");
        assert_eq!(bar(f64::NAN, 10.0, 0.0, 4), "░░░░");
    }

    #[test]
    fn rates_are_per_interval_one_point_per_sample() {
        let samples = [at(1, 100, 0), at(2, 300, 50), at(4, 700, 50)];
        assert_eq!(
            rates(&samples, |s| s.sent),
            vec![(1.0, 100.0), (2.0, 200.0), (4.0, 200.0)]
        );
        assert_eq!(
            rates(&samples, |s| s.recv),
            vec![(1.0, 0.0), (2.0, 50.0), (4.0, 0.0)]
        );
        // Two samples at the same instant do not divide by zero.
        assert_eq!(rates(&[at(0, 5, 0)], |s| s.sent), vec![(0.0, 0.0)]);
    }

    fn view(elapsed: u64) -> View {
        View {
            elapsed: Duration::from_secs(elapsed),
            total: Duration::from_secs(10),
            warmup: Duration::from_secs(2),
            send: Some(Direction {
                history: vec![1000.0, 2000.0, 4000.0],
                latency: Percentiles {
                    count: 3,
                    p50: 250.0,
                    p99: 1500.0,
                    ..Percentiles::default()
                },
            }),
            recv: None,
        }
    }

    #[test]
    fn live_block_has_bar_rate_sparkline_and_phase() {
        let warm = view(1).live();
        assert_eq!(warm.len(), 2, "{warm:?}");
        assert!(warm[0].starts_with("▒▒▒░"), "{warm:?}");
        assert!(warm[0].ends_with("  1/10s warm-up"), "{warm:?}");
        let block = view(5).live();
        assert!(block[0].ends_with("  5/10s"), "{block:?}");
        assert!(block[1].starts_with("  sent    4.0k/s ▃▅█ "), "{block:?}");
        assert!(block[1].ends_with(" send p99 1.50 ms"), "{block:?}");
        assert!(view(12).live()[0].ends_with(" 12/10s drain"));
        // Both directions of e2e still fit an 80-column terminal.
        let mut both = view(5);
        both.send.as_mut().expect("send").history = vec![1.0e6; 60];
        both.recv = both.send.clone();
        let block = both.live();
        assert_eq!(block.len(), 3);
        assert!(block[2].starts_with("  recv   1.00M/s ████"), "{block:?}");
        assert!(block.iter().all(|l| l.chars().count() <= 80), "{block:?}");
    }

    #[test]
    fn clear_erases_every_line_of_the_block() {
        assert_eq!(clear(0), "");
        assert_eq!(clear(1), "\r\x1b[2K");
        assert_eq!(clear(3), "\r\x1b[2K\x1b[1A\x1b[2K\x1b[1A\x1b[2K");
    }

    #[test]
    fn plain_line_keeps_the_log_format() {
        assert_eq!(
            view(1).plain(),
            "[   1s warm-up] sent      4000 msg/s  send p50 250.0 µs p99 1.50 ms"
        );
        let mut v = view(3);
        v.send = None;
        v.recv = Some(Direction {
            history: vec![7.0],
            latency: Percentiles::default(),
        });
        assert_eq!(v.plain(), "[   3s] | recv         7 msg/s");
    }
}
