//! The flags of `sluice bench` and their validation: every count, size and
//! duration is checked against a named limit before anything is allocated
//! or connected.

use std::time::Duration;

use anyhow::{bail, ensure, Context};

/// Longest run (warm-up plus measurement) a bench accepts.
const RUN_SECS_MAX: f64 = 24.0 * 3600.0;
/// Most producers or consumers (each is a client with its own connection).
const CLIENTS_MAX: usize = 256;
/// Most requests in flight per producer.
const WINDOW_MAX: usize = 4096;
/// Most messages per batch request.
const BATCH_MAX: usize = 4096;
/// Largest message body (the broker's limit is 4 MiB).
const SIZE_BYTES_MAX: usize = 4 * 1024 * 1024;
/// Largest batch request body, below the broker's 4 MiB body limit with
/// room for per-message headers.
const BATCH_BYTES_MAX: usize = 4 * 1024 * 1024 - 64 * 1024;
/// Most messages a pull asks for (the broker caps at 1,024).
const PULL_BATCH_MAX: i32 = 1024;

/// How a producer sends.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendMode {
    /// `Producer::send`, one request at a time per producer.
    Sync,
    /// `Producer::send_async`, `--window` sends in flight per producer.
    Async,
    /// `Producer::send_batch` of `--batch` messages, `--window` batches in
    /// flight per producer.
    Batch,
    /// `Producer::send_oneway`, `--window` senders per producer; nothing is
    /// acknowledged (latency is the time to hand the request to the
    /// connection).
    Oneway,
}

impl SendMode {
    /// The flag spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Sync => "sync",
            Self::Async => "async",
            Self::Batch => "batch",
            Self::Oneway => "oneway",
        }
    }
}

/// Push consumers (the client's long-poll loop and handlers) or pull
/// consumers (one loop per queue calling `pull_blocking`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConsumerKind {
    /// `PushConsumer` with a counting handler.
    Push,
    /// `PullConsumer`, one long-poll loop per queue.
    Pull,
}

impl ConsumerKind {
    /// The flag spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Push => "push",
            Self::Pull => "pull",
        }
    }
}

/// Which protocol the bench's clients speak.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// RocketMQ 4.x remoting, routed through the name server.
    Remoting,
    /// RocketMQ 5 gRPC to one broker's endpoint (`--grpc-endpoint`):
    /// `SendMessage`, and `ReceiveMessage` + `AckMessage` consumers.
    Grpc,
}

/// Where a fresh consumer group starts.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartFrom {
    /// The oldest stored message (replay the backlog).
    First,
    /// Only messages stored after the start.
    Last,
}

/// Flags every verb shares.
#[derive(clap::Args, Debug, Clone)]
pub struct CommonArgs {
    /// Topic; created (with `--queues` queues) if it does not exist.
    #[arg(long)]
    pub topic: String,
    /// Queues of the topic when the bench creates it.
    #[arg(long, default_value_t = 8)]
    pub queues: i32,
    /// Measured seconds (after the warm-up).
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Seconds of load before measuring starts.
    #[arg(long, default_value_t = 0.0)]
    pub warmup: f64,
    /// The broker's process ID: report its CPU time per message and RSS
    /// (read from /proc).
    #[arg(long)]
    pub broker_pid: Option<u32>,
    /// Also write the run as pictures: FILE.html (charts and summary table)
    /// or FILE.svg (the latency and throughput charts).
    #[arg(long, value_name = "FILE")]
    pub report: Option<std::path::PathBuf>,
    /// `remoting` (4.x clients) or `grpc` (a 5.x client of
    /// `--grpc-endpoint`; topic creation and stored counts still go through
    /// the name server).
    #[arg(long, value_enum, default_value_t = Protocol::Remoting)]
    pub protocol: Protocol,
    /// The broker's RocketMQ 5 gRPC endpoint, for `--protocol grpc`.
    #[arg(long, default_value = "127.0.0.1:8081")]
    pub grpc_endpoint: String,
}

/// Producer flags (`produce` and `e2e`).
#[derive(clap::Args, Debug, Clone)]
pub struct LoadArgs {
    /// Body bytes per message (at least 20 carry the send timestamps).
    #[arg(long, default_value_t = 1024)]
    pub size: usize,
    /// Messages per request; more than 1 implies `--mode batch`.
    #[arg(long, default_value_t = 1)]
    pub batch: usize,
    /// How producers send (default: sync, or batch when `--batch` > 1).
    #[arg(long, value_enum)]
    pub mode: Option<SendMode>,
    /// Requests in flight per producer (async: 64, batch and oneway: 1 by
    /// default; sync is always 1).
    #[arg(long)]
    pub window: Option<usize>,
    /// Producers, each with its own client and connection.
    #[arg(long, default_value_t = 1)]
    pub producers: usize,
    /// Open loop: messages per second over all producers, sends scheduled
    /// at fixed intervals and latency measured from the scheduled time.
    /// Without it the run is closed loop (max throughput).
    #[arg(long)]
    pub rate: Option<f64>,
}

/// Consumer flags (`consume` and `e2e`).
#[derive(clap::Args, Debug, Clone)]
pub struct ConsumerArgs {
    /// Consumer group (default: a fresh group per run).
    #[arg(long)]
    pub group: Option<String>,
    /// Consumers, each with its own client and connection.
    #[arg(long, default_value_t = 1)]
    pub consumers: usize,
    /// Push or pull consumers.
    #[arg(long, value_enum, default_value_t = ConsumerKind::Push)]
    pub kind: ConsumerKind,
    /// Messages per pull.
    #[arg(long, default_value_t = 32)]
    pub pull_batch: i32,
    /// Push: messages per handler call (RocketMQ's default is 1).
    #[arg(long, default_value_t = 1)]
    pub consume_batch: usize,
}

/// `sluice bench produce`.
#[derive(clap::Args, Debug, Clone)]
pub struct ProduceArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    #[command(flatten)]
    pub load: LoadArgs,
}

/// `sluice bench consume`.
#[derive(clap::Args, Debug, Clone)]
pub struct ConsumeArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    #[command(flatten)]
    pub consumer: ConsumerArgs,
    /// Where a group without committed offsets starts.
    #[arg(long, value_enum, default_value_t = StartFrom::First)]
    pub from: StartFrom,
    /// Stop early once nothing has arrived for this many seconds after the
    /// first message (the backlog is drained); 0 runs the full duration.
    #[arg(long, default_value_t = 2.0)]
    pub idle_exit: f64,
}

/// `sluice bench e2e`.
#[derive(clap::Args, Debug, Clone)]
pub struct E2eArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    #[command(flatten)]
    pub load: LoadArgs,
    #[command(flatten)]
    pub consumer: ConsumerArgs,
}

/// A `--flag SECS` value as a duration, refusing negatives, NaN and runs
/// beyond [`RUN_SECS_MAX`].
pub fn seconds(flag: &str, secs: f64, zero_ok: bool) -> anyhow::Result<Duration> {
    ensure!(
        secs.is_finite() && (0.0..=RUN_SECS_MAX).contains(&secs),
        "--{flag} {secs} is outside 0..={RUN_SECS_MAX} seconds"
    );
    ensure!(
        zero_ok || secs > 0.0,
        "--{flag} must be more than 0 seconds"
    );
    Duration::try_from_secs_f64(secs).with_context(|| format!("--{flag} {secs}"))
}

/// The validated timing of a run.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    pub warmup: Duration,
    pub duration: Duration,
}

impl CommonArgs {
    /// The gRPC endpoint when the run speaks gRPC; oneway sends have no
    /// gRPC form.
    pub fn grpc(&self, mode: Option<SendMode>) -> anyhow::Result<Option<&str>> {
        if self.protocol == Protocol::Remoting {
            return Ok(None);
        }
        ensure!(
            mode != Some(SendMode::Oneway),
            "--mode oneway has no gRPC form (--protocol grpc)"
        );
        Ok(Some(self.grpc_endpoint.as_str()))
    }

    /// Validates the shared flags.
    pub fn timing(&self) -> anyhow::Result<Timing> {
        sluice_core::message::validate_topic(&self.topic)
            .map_err(|e| anyhow::anyhow!("--topic {}: {e}", self.topic))?;
        ensure!(
            (1..=1024).contains(&self.queues),
            "--queues {} is outside 1..=1024",
            self.queues
        );
        let warmup = seconds("warmup", self.warmup, true)?;
        let duration = seconds("duration", self.duration, false)?;
        ensure!(
            (warmup + duration).as_secs_f64() <= RUN_SECS_MAX,
            "--warmup plus --duration exceed {RUN_SECS_MAX} seconds"
        );
        Ok(Timing { warmup, duration })
    }
}

impl ConsumerArgs {
    /// What the consumers are, as reports name them.
    pub fn kind_label(&self, protocol: Protocol) -> &'static str {
        match protocol {
            Protocol::Grpc => "grpc receive+ack",
            Protocol::Remoting => self.kind.as_str(),
        }
    }
}

/// Producer flags after validation.
#[derive(Clone, Debug)]
pub struct Load {
    pub mode: SendMode,
    pub size_bytes: usize,
    pub batch: usize,
    pub window: usize,
    pub producers: usize,
    /// Open loop: requests per second over all producers.
    pub requests_per_s: Option<f64>,
    pub rate_msgs_per_s: Option<f64>,
}

impl LoadArgs {
    /// Validates the producer flags.
    pub fn validate(&self) -> anyhow::Result<Load> {
        ensure!(
            (1..=SIZE_BYTES_MAX).contains(&self.size),
            "--size {} is outside 1..={SIZE_BYTES_MAX} bytes",
            self.size
        );
        ensure!(
            (1..=BATCH_MAX).contains(&self.batch),
            "--batch {} is outside 1..={BATCH_MAX}",
            self.batch
        );
        let mode = self.mode.unwrap_or(if self.batch > 1 {
            SendMode::Batch
        } else {
            SendMode::Sync
        });
        if mode != SendMode::Batch && self.batch != 1 {
            bail!("--batch applies to --mode batch only");
        }
        ensure!(
            self.size.saturating_mul(self.batch) <= BATCH_BYTES_MAX,
            "--size × --batch is {} bytes; a request holds at most {BATCH_BYTES_MAX}",
            self.size.saturating_mul(self.batch)
        );
        let window = match (mode, self.window) {
            (SendMode::Sync, Some(w)) if w != 1 => {
                bail!("--mode sync has one request in flight; use --mode async for a window")
            }
            (SendMode::Async, None) => 64,
            (SendMode::Sync, _) | (_, None) => 1,
            (_, Some(w)) => w,
        };
        ensure!(
            (1..=WINDOW_MAX).contains(&window),
            "--window {window} is outside 1..={WINDOW_MAX}"
        );
        ensure!(
            (1..=CLIENTS_MAX).contains(&self.producers),
            "--producers {} is outside 1..={CLIENTS_MAX}",
            self.producers
        );
        let requests_per_s = match self.rate {
            None => None,
            Some(r) => {
                ensure!(
                    r.is_finite() && (0.01..=1e9).contains(&r),
                    "--rate {r} is outside 0.01..=1e9 messages per second"
                );
                #[expect(clippy::cast_precision_loss, reason = "batch ≤ 4096")]
                let per_request = self.batch as f64;
                Some(r / per_request)
            }
        };
        Ok(Load {
            mode,
            size_bytes: self.size,
            batch: self.batch,
            window,
            producers: self.producers,
            requests_per_s,
            rate_msgs_per_s: self.rate,
        })
    }
}

impl ConsumerArgs {
    /// Validates the consumer flags.
    pub fn validate(&self) -> anyhow::Result<()> {
        ensure!(
            (1..=CLIENTS_MAX).contains(&self.consumers),
            "--consumers {} is outside 1..={CLIENTS_MAX}",
            self.consumers
        );
        ensure!(
            (1..=PULL_BATCH_MAX).contains(&self.pull_batch),
            "--pull-batch {} is outside 1..={PULL_BATCH_MAX}",
            self.pull_batch
        );
        ensure!(
            (1..=1024).contains(&self.consume_batch),
            "--consume-batch {} is outside 1..=1024",
            self.consume_batch
        );
        if let Some(g) = &self.group {
            sluice_core::message::validate_topic(g)
                .map_err(|e| anyhow::anyhow!("--group {g}: {e}"))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(mode: SendMode) -> LoadArgs {
        LoadArgs {
            size: 1024,
            batch: 1,
            mode: Some(mode),
            window: None,
            producers: 1,
            rate: None,
        }
    }

    #[test]
    fn windows_default_by_mode_and_sync_refuses_one() {
        assert_eq!(load(SendMode::Async).validate().expect("valid").window, 64);
        assert_eq!(load(SendMode::Oneway).validate().expect("valid").window, 1);
        let mut sync = load(SendMode::Sync);
        sync.window = Some(8);
        assert!(sync.validate().is_err());
    }

    #[test]
    fn batch_flag_needs_batch_mode_and_fits_a_request() {
        let mut a = load(SendMode::Sync);
        a.batch = 4;
        assert!(a.validate().is_err());
        // `--batch N` alone, as the issue spells it, means batch mode.
        a.mode = None;
        assert_eq!(a.validate().expect("valid").mode, SendMode::Batch);
        a.batch = 1;
        assert_eq!(a.validate().expect("valid").mode, SendMode::Sync);
        let mut b = load(SendMode::Batch);
        b.batch = 64;
        b.rate = Some(6400.0);
        let v = b.validate().expect("valid");
        assert!((v.requests_per_s.expect("open loop") - 100.0).abs() < 1e-9);
        b.size = 1 << 20;
        assert!(b.validate().is_err());
    }

    #[test]
    fn seconds_refuse_nan_negative_and_zero_duration() {
        assert!(seconds("duration", f64::NAN, false).is_err());
        assert!(seconds("duration", -1.0, false).is_err());
        assert!(seconds("duration", 0.0, false).is_err());
        assert_eq!(
            seconds("warmup", 0.0, true).expect("zero warm-up"),
            Duration::ZERO
        );
        assert_eq!(
            seconds("duration", 1.5, false).expect("valid"),
            Duration::from_millis(1500)
        );
    }
}
