//! The `sluice` command-line tool: topics, cluster, pending, send, consume, query,
//! group progress, offset reset, `sluice acl` and `sluice bench`. Human output by
//! default, one JSON document per command with `--json`.

mod acl;
mod bench;
mod endpoint;
mod pending;
mod signing;
mod steps;
mod verbs;

use clap::Parser;

/// Sluice command-line tool.
#[derive(Parser, Debug)]
#[command(name = "sluice", version, about)]
struct Cli {
    /// Name server address(es), `;`-separated.
    #[arg(
        long,
        global = true,
        env = "SLUICE_NAMESRV",
        default_value = "127.0.0.1:9876"
    )]
    namesrv: String,
    /// Machine-readable JSON output.
    #[arg(long, global = true)]
    json: bool,
    #[command(flatten)]
    tls: endpoint::TlsFlags,
    /// Access key to sign requests with (RocketMQ ACL), with `--secret-key`.
    #[arg(
        long,
        global = true,
        env = "SLUICE_ACCESS_KEY",
        requires = "secret_key"
    )]
    access_key: Option<String>,
    /// Secret key of `--access-key`.
    #[arg(long, global = true, env = "SLUICE_SECRET_KEY", hide_env_values = true)]
    secret_key: Option<String>,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Subcommand, Debug)]
enum Cmd {
    /// Create, list, show or delete topics.
    #[command(subcommand)]
    Topic(verbs::TopicCmd),
    /// Brokers of every cluster, with their runtime figures.
    Cluster,
    /// Pending timer and transactional half messages per broker and topic.
    Pending,
    /// Send messages.
    Send(verbs::SendArgs),
    /// Consume messages as a member of a group.
    Consume(verbs::ConsumeArgs),
    /// Find messages by business key or by id.
    Query(verbs::QueryArgs),
    /// Consumer group progress.
    #[command(subcommand)]
    Group(verbs::GroupCmd),
    /// Consumer offsets.
    #[command(subcommand)]
    Offset(steps::OffsetCmd),
    /// Load generators.
    #[command(subcommand)]
    Bench(bench::BenchCmd),
    /// Access control: list accounts, check what a key may do.
    #[command(subcommand)]
    Acl(acl::AclCmd),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    if let (Some(ak), Some(sk)) = (&cli.access_key, &cli.secret_key) {
        signing::sign_with(sluice_net::Credentials::new(ak, sk));
    }
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
    }
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let result = rt.block_on(async move {
        let out = verbs::Output { json: cli.json };
        let endpoint = endpoint::Endpoint {
            namesrv: cli.namesrv,
            transport: cli.tls.transport()?,
        };
        let endpoint = &endpoint;
        match cli.cmd {
            Cmd::Topic(c) => verbs::topic(c, endpoint, out).await,
            Cmd::Cluster => verbs::cluster(endpoint, out).await,
            Cmd::Pending => pending::pending(endpoint, out).await,
            Cmd::Send(a) => verbs::send(a, endpoint, out).await,
            Cmd::Consume(a) => verbs::consume(a, endpoint, out).await,
            Cmd::Query(a) => verbs::query(a, endpoint, out).await,
            Cmd::Group(c) => verbs::group(c, endpoint, out).await,
            Cmd::Offset(c) => steps::offset(c, endpoint, out).await,
            Cmd::Bench(b) => bench::run(b, endpoint, cli.json).await,
            Cmd::Acl(c) => acl::acl(c, endpoint, out).await,
        }
    });
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
