//! `sluice bench`: produce, consume and end-to-end load generators over the
//! real client library (`TlsTransport` + `SystemClock`). Every run is bounded
//! by `--warmup` + `--duration` (plus a fixed drain grace for e2e); latencies
//! go into HDR histograms; open-loop runs measure from the scheduled send
//! time, so a stalled broker is charged for every send it delayed.
//!
//! Submodules: `args` (flags), `load` (producer workers), `pacer` (open-loop
//! schedule), `receive` (push and pull consumers), `stamp` (send timestamps
//! in the body), `stats` (histograms and counters), `progress` (the
//! per-second sampler and live display), `report` (summary), `plot` and
//! `export` (the `--report` charts and page), `cluster` (clients and topic
//! creation), `procstat` (CPU and RSS from /proc), and one file per verb.

mod args;
mod cluster;
mod consume;
mod e2e;
mod export;
mod grpc;
mod load;
mod pacer;
mod plot;
mod procstat;
mod produce;
mod progress;
mod receive;
mod report;
mod stamp;
mod stats;

pub use args::{ConsumeArgs, E2eArgs, ProduceArgs};

use crate::endpoint::Endpoint;

/// `sluice bench` verbs.
#[derive(clap::Subcommand, Debug)]
pub enum BenchCmd {
    /// Produce load: sync, async window, batch or oneway sends, closed loop
    /// (max throughput) or open loop at `--rate`.
    Produce(ProduceArgs),
    /// Consume a topic (replay a backlog or follow it) with push or pull
    /// consumers; reports msg/s and MB/s.
    Consume(ConsumeArgs),
    /// Producers and consumers together; end-to-end latency from the send
    /// timestamp carried in each body to the consumer's receipt.
    E2e(E2eArgs),
}

impl BenchCmd {
    fn common(&self) -> &args::CommonArgs {
        match self {
            Self::Produce(a) => &a.common,
            Self::Consume(a) => &a.common,
            Self::E2e(a) => &a.common,
        }
    }
}

/// Runs a benchmark against the cluster at `endpoint`; prints a human
/// summary, or one JSON object with `json`, then writes the `--report`.
pub async fn run(cmd: BenchCmd, endpoint: &Endpoint, json: bool) -> anyhow::Result<()> {
    let report = cmd.common().report.as_deref().map(export::Target::of);
    let report = report.transpose()?;
    let (summary, pictures) = match cmd {
        BenchCmd::Produce(a) => produce::run(a, endpoint, json).await?,
        BenchCmd::Consume(a) => consume::run(a, endpoint, json).await?,
        BenchCmd::E2e(a) => e2e::run(a, endpoint, json).await?,
    };
    summary.print(json)?;
    if let Some(target) = report {
        target.write(&summary, &pictures)?;
        if !json {
            eprintln!("report written to {}", target.path.display());
        }
    }
    Ok(())
}
