//! The `sluice` command-line tool.

mod bench;

use clap::Parser;

/// Sluice command-line tool.
#[derive(Parser, Debug)]
#[command(name = "sluice", version, about)]
struct Cli {
    /// Name server address(es), `;`-separated.
    #[arg(long, global = true, env = "SLUICE_NAMESRV", default_value = "127.0.0.1:9876")]
    namesrv: String,
    /// Machine-readable JSON output.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Subcommand, Debug)]
enum Cmd {
    /// Load generators.
    #[command(subcommand)]
    Bench(bench::BenchCmd),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(async move {
        match cli.cmd {
            Cmd::Bench(b) => bench::run(b, &cli.namesrv, cli.json).await,
        }
    })
}
