//! `sluice bench`: produce, consume and end-to-end load generators.
//! (Being written; see the client issue.)

/// `sluice bench` verbs.
#[derive(clap::Subcommand, Debug)]
pub enum BenchCmd {
    /// Produce load.
    Produce,
}

/// Runs a benchmark against the cluster at `namesrv`.
pub async fn run(cmd: BenchCmd, namesrv: &str, json: bool) -> anyhow::Result<()> {
    anyhow::bail!("sluice bench {cmd:?} against {namesrv} (json: {json}) is not built yet")
}
