//! `sluice-node`: run a name server, a broker, or both in one process
//! (`standalone`). Parses flags, picks the production seams (tokio TCP,
//! plain or TLS; mapped files; the system clock) and calls the library.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use sluice_core::disk::MmapDisk;
use sluice_core::SystemClock;
use sluice_net::{TlsMode, TlsSettings, TlsTransport};
use sluice_node::acl::{self, Acl};
use sluice_node::broker::{Broker, BrokerConfig};
use sluice_node::config_file::{
    parse_acl_mode, parse_flush_mode, require_acl_beyond_loopback, BrokerFile,
};
use sluice_node::controller::{parse_peers, Controller, ControllerConfig};
use sluice_node::namesrv::{NameServer, NameServerConfig};
use sluice_node::peer_auth::{process_salt, SharedSecret};
use tokio::sync::watch;

/// mimalloc instead of glibc malloc: a send allocates and frees a few
/// buffers per message across two runtime threads, and glibc's arenas spent
/// ~29 % of the workers' CPU on it (docs/benchmarks.md, issue 20).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(name = "sluice-node", version, about = "Sluice name server and broker")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// A name server, with a controller in the same process when
    /// `--controller-id` is given (RocketMQ's `enableControllerInNamesrv`).
    Namesrv {
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:9876")]
        listen: String,
        /// Also run controller `ID` of `--controller-peers`.
        #[arg(long, requires = "controller_peers")]
        controller_id: Option<u64>,
        /// Every controller: `1=host:9878;2=host:9878;…`.
        #[arg(long)]
        controller_peers: Option<String>,
        /// Data directory for the controller's raft state.
        #[arg(long, default_value = "./sluice-controller")]
        controller_data_dir: PathBuf,
        #[command(flatten)]
        opts: ControllerOpts,
        /// Access control: a policy file (accounts, as the broker's
        /// `[acl]` table), re-read on SIGHUP and when it changes.
        #[arg(long)]
        acl_file: Option<PathBuf>,
        /// `enforcing` (the default with `--acl-file`), `permissive` or
        /// `off` (required to listen beyond loopback without ACL).
        #[arg(long)]
        acl_mode: Option<String>,
        #[command(flatten)]
        tls: TlsArgs,
    },
    /// A broker configured by a TOML file (TLS: its `[tls]` table).
    Broker {
        /// Configuration file (every key optional).
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// A controller: elects broker masters (RocketMQ 5 controller mode).
    Controller {
        /// This controller's raft id; a key of `--peers`.
        #[arg(long)]
        id: u64,
        /// Every controller, itself included: `1=host:9878;2=host:9878;…`.
        #[arg(long)]
        peers: String,
        /// Address to listen on [default: this id's address in `--peers`].
        #[arg(long)]
        listen: Option<String>,
        /// Data directory for the raft state, created if missing.
        #[arg(long, default_value = "./sluice-controller")]
        data_dir: PathBuf,
        #[command(flatten)]
        opts: ControllerOpts,
        #[command(flatten)]
        tls: TlsArgs,
    },
    /// A name server and a broker in one process, on an embedded data dir.
    /// The broker takes its settings from `--config` (a broker TOML file,
    /// every key optional); the flags below override the file, and the
    /// broker always registers with the embedded name server. The file's
    /// `[tls]` table applies to both servers.
    Standalone {
        /// Broker configuration file (the `broker` subcommand's format).
        #[arg(long)]
        config: Option<PathBuf>,
        /// Data directory, created if missing [default: the file's
        /// `data_dir`, else ./sluice-data].
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// `async` (ack from page cache, RocketMQ's default) or `sync`
        /// (ack after fsync, with group commit) [default: the file's
        /// `flush_mode`, else async].
        #[arg(long)]
        flush: Option<String>,
        #[command(flatten)]
        listen: Listen,
    },
}

/// A controller's settings beyond its identity and peers.
#[derive(Args)]
struct ControllerOpts {
    /// A broker silent this long is failed over.
    #[arg(long, default_value_t = sluice_node::controller::DEFAULT_BROKER_TIMEOUT_MS)]
    broker_timeout_ms: u64,
    /// The cluster secret (16+ bytes) every peer controller and broker
    /// must prove on its connections; brokers give it as `[replication]
    /// controller_secret`. Prefer the file or the environment variable.
    #[arg(long, env = "SLUICE_CLUSTER_SECRET", hide_env_values = true)]
    cluster_secret: Option<String>,
    /// A file holding the cluster secret.
    #[arg(long)]
    cluster_secret_file: Option<PathBuf>,
}

/// TLS flags, the broker file's `[tls]` keys by another name.
#[derive(Args)]
struct TlsArgs {
    /// What the port accepts: `disabled`, `permissive` (TLS and plain on
    /// one port) or `enforcing` (TLS only).
    #[arg(long = "tls-mode", default_value = "disabled")]
    mode: TlsMode,
    /// Server certificate chain, leaf first (PEM).
    #[arg(long = "tls-cert")]
    cert: Option<PathBuf>,
    /// Server private key (PEM).
    #[arg(long = "tls-key")]
    key: Option<PathBuf>,
    /// Require client certificates chaining to this CA (mutual TLS).
    #[arg(long = "tls-client-ca")]
    client_ca: Option<PathBuf>,
    /// Dial peers (controllers) with TLS, trusting this CA.
    #[arg(long = "tls-ca")]
    ca: Option<PathBuf>,
    /// Certificate presented when dialling (mutual TLS; with `--tls-client-key`).
    #[arg(long = "tls-client-cert")]
    client_cert: Option<PathBuf>,
    /// Private key of `--tls-client-cert`.
    #[arg(long = "tls-client-key")]
    client_key: Option<PathBuf>,
    /// Dial TLS without verifying certificates (development only).
    #[arg(long = "tls-insecure")]
    insecure: bool,
}

impl TlsArgs {
    fn transport(self) -> anyhow::Result<TlsTransport> {
        let settings = TlsSettings {
            mode: self.mode,
            cert: self.cert,
            key: self.key,
            client_ca: self.client_ca,
            ca: self.ca,
            client_cert: self.client_cert,
            client_key: self.client_key,
            server_name: None,
            insecure: self.insecure,
        };
        Ok(settings.transport()?)
    }
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let cli = Cli::parse();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(run(cli.command))
}

async fn run(command: Command) -> anyhow::Result<()> {
    let stop = shutdown_signal();
    match command {
        Command::Namesrv {
            listen,
            controller_id,
            controller_peers,
            controller_data_dir,
            opts,
            acl_file,
            acl_mode,
            tls,
        } => {
            let transport = tls.transport()?;
            let acl = namesrv_acl(&listen, acl_file, acl_mode.as_deref())?;
            watch_acl(acl.as_ref());
            let config = NameServerConfig {
                listen_addr: listen,
                acl,
                ..NameServerConfig::default()
            };
            let ns = NameServer::start(config, SystemClock::new(), &transport).await?;
            let controller = match (controller_id, controller_peers) {
                (Some(id), Some(peers)) => {
                    let dir = &controller_data_dir;
                    let started = start_controller(id, &peers, None, dir, &opts, &transport);
                    Some(started.await?)
                }
                _ => None,
            };
            serve_namesrv(ns, controller, stop).await;
        }
        Command::Controller {
            id,
            peers,
            listen,
            data_dir,
            opts,
            tls,
        } => {
            let transport = tls.transport()?;
            let controller =
                start_controller(id, &peers, listen, &data_dir, &opts, &transport).await?;
            controller.run_until(wait(stop)).await;
        }
        Command::Broker { config } => {
            let file = broker_file(config)?;
            let transport = file.transport()?;
            let (config, data_dir) = file.into_config()?;
            watch_acl(config.acl.as_ref());
            run_broker(config, PathBuf::from(data_dir), transport, stop).await?;
        }
        Command::Standalone {
            config,
            data_dir,
            flush,
            listen,
        } => standalone(broker_file(config)?, data_dir, listen, flush, stop).await?,
    }
    Ok(())
}

/// Serves `ns` (and its embedded controller) until `stop`, after printing
/// the line scripts wait for.
async fn serve_namesrv(
    ns: NameServer<SystemClock>,
    controller: Option<Controller>,
    stop: watch::Receiver<bool>,
) {
    println!("sluice name server listening on {}", ns.local_addr());
    ns.run_until(wait(stop)).await;
    if let Some(c) = controller {
        c.shutdown().await;
    }
}

/// The broker file at `path` (every key default without one).
fn broker_file(path: Option<PathBuf>) -> anyhow::Result<BrokerFile> {
    Ok(match path {
        Some(path) => BrokerFile::parse(&std::fs::read_to_string(&path)?)?,
        None => BrokerFile::default(),
    })
}

/// Where `standalone` listens: the name server, and the broker unless the
/// file says.
#[derive(Args)]
struct Listen {
    /// Name server listen address.
    #[arg(long = "namesrv-listen", default_value = "127.0.0.1:9876")]
    namesrv: String,
    /// Broker listen address; port − 2 is served too, for old clients
    /// [default: the file's `listen`, else 127.0.0.1:10911].
    #[arg(long = "broker-listen")]
    broker: Option<String>,
    /// HTTP port for `/metrics` and the dashboard, or `off`
    /// [default: the file's `metrics_listen`, else 127.0.0.1:5557].
    #[arg(long = "metrics-listen")]
    metrics: Option<String>,
    /// RocketMQ 5 gRPC endpoint for 5.x clients, or `off`
    /// [default: the file's `grpc_listen`, else 127.0.0.1:8081].
    #[arg(long = "grpc-listen")]
    grpc: Option<String>,
}

/// Where standalone serves HTTP unless told otherwise.
const STANDALONE_METRICS_LISTEN: &str = "127.0.0.1:5557";

/// A name server and a broker in one process, on the transport of the
/// file's `[tls]` and guarded by one ACL policy; the broker signs its
/// registration with its own account.
async fn standalone(
    file: BrokerFile,
    data_dir: Option<PathBuf>,
    listen: Listen,
    flush: Option<String>,
    stop: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let transport = file.transport()?;
    if transport.mode() == TlsMode::Enforcing && !transport.dials_tls() {
        anyhow::bail!(
            "[tls] mode = \"enforcing\" in standalone needs `ca` (or `insecure = true`): \
             the broker registers with its own name server over TLS"
        );
    }
    let acl_configured = file.acl.is_some();
    let metrics = listen
        .metrics
        .or_else(|| file.metrics_listen.clone())
        .unwrap_or_else(|| STANDALONE_METRICS_LISTEN.to_owned());
    let grpc_defaulted = listen.grpc.is_none() && file.grpc_listen.is_none();
    let grpc = listen
        .grpc
        .or_else(|| file.grpc_listen.clone())
        .unwrap_or_else(|| sluice_node::grpc::STANDALONE_GRPC_LISTEN.to_owned());
    let (mut config, file_data_dir) = file.into_config()?;
    config.metrics_listen = Some(metrics).filter(|m| m != "off");
    config.grpc_listen = Some(grpc).filter(|g| g != "off");
    config.grpc_listen_defaulted = grpc_defaulted;
    if let Some(broker) = listen.broker {
        config.listen = broker;
    }
    if let Some(flush) = flush {
        config.store.flush_mode = parse_flush_mode(&flush)?;
    }
    let data_dir = data_dir.unwrap_or_else(|| PathBuf::from(file_data_dir));
    // One policy guards both servers; the broker signs its
    // registration with its own account.
    require_acl_beyond_loopback(&listen.namesrv, acl_configured, "the name server")?;
    require_acl_beyond_loopback(&config.listen, acl_configured, "the broker")?;
    if config.acl.is_some() && config.credentials.is_none() {
        anyhow::bail!(
            "standalone with ACL on needs acl.access_key and acl.secret_key: an account \
             with broker = true that the broker signs its registration with"
        );
    }
    watch_acl(config.acl.as_ref());
    let ns_config = NameServerConfig {
        listen_addr: listen.namesrv,
        acl: config.acl.clone(),
        ..NameServerConfig::default()
    };
    let ns = NameServer::start(ns_config, SystemClock::new(), &transport).await?;
    config.namesrv_addrs = vec![ns.local_addr().to_string()];
    let result = run_broker(config, data_dir, transport, stop).await;
    ns.shutdown().await;
    result
}

/// Starts controller `id` of `peers` with its raft state under `data_dir`,
/// and prints the line scripts wait for.
async fn start_controller(
    id: u64,
    peers: &str,
    listen: Option<String>,
    data_dir: &std::path::Path,
    opts: &ControllerOpts,
    transport: &TlsTransport,
) -> anyhow::Result<Controller> {
    let peers = parse_peers(peers)?;
    let listen = match listen {
        Some(listen) => listen,
        None => peers
            .get(&id)
            .cloned()
            .ok_or_else(|| anyhow::anyhow!("--peers has no controller {id}"))?,
    };
    let secret = SharedSecret::from_value_or_file(
        "--cluster-secret",
        opts.cluster_secret.as_deref(),
        opts.cluster_secret_file.as_deref(),
    )?
    .map(|s| s.salted(process_salt()));
    let config = ControllerConfig {
        broker_timeout_ms: opts.broker_timeout_ms,
        secret,
        ..ControllerConfig::new(id, peers, listen)
    };
    // The raft state goes to <data-dir>/controller/raft-state.
    std::fs::create_dir_all(data_dir)?;
    let disk = MmapDisk::new(data_dir)?;
    let controller = Controller::start(config, disk, SystemClock::new(), transport).await?;
    println!("sluice controller listening on {}", controller.local_addr());
    Ok(controller)
}

async fn run_broker(
    config: BrokerConfig,
    data_dir: PathBuf,
    transport: TlsTransport,
    stop: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    std::fs::create_dir_all(&data_dir)?;
    let disk = MmapDisk::new(&data_dir)?;
    let broker = Broker::open(disk, SystemClock::new(), config).await?;
    if let Some(listen) = broker.config().metrics_listen.clone() {
        let local = Arc::clone(&broker);
        let dashboard = sluice_node::dashboard::DashboardConfig {
            namesrv_addrs: broker.config().namesrv_addrs.clone(),
            transport: transport.clone(),
            acl_on: broker.config().acl.is_some(),
            http_listen: listen.clone(),
            broker_listen: broker.config().listen.clone(),
            dispatch_behind: Some(Arc::new(move || {
                local.figures(0).gauges.dispatch_behind_bytes
            })),
        };
        let router = sluice_node::http::metrics_router(Arc::clone(&broker))
            .merge(sluice_node::dashboard::router(dashboard));
        serve_http(&listen, router, wait(stop.clone())).await?;
    }
    if let Some(listen) = broker.config().grpc_listen.clone() {
        let endpoint = sluice_node::grpc::start(&broker, &listen, &transport, wait(stop.clone()));
        if let Some(addr) = endpoint.await? {
            println!("sluice gRPC (RocketMQ 5) listening on {addr}");
        }
    }
    let registered = Arc::clone(&broker);
    broker
        .serve(transport, wait(stop), move |addr| {
            // A line scripts can wait for: printed once a name server has
            // the broker's routes (or after 10 s without one, with a
            // warning), so a client started on it does not miss the route.
            tokio::spawn(async move {
                let first = registered.first_registration();
                if tokio::time::timeout(Duration::from_secs(10), first)
                    .await
                    .is_err()
                {
                    tracing::warn!("no name server accepted the registration within 10 s");
                }
                println!("sluice broker listening on {addr}");
            });
        })
        .await?;
    Ok(())
}

/// Binds `listen` and serves `router` (`/metrics`, the dashboard) until
/// `shutdown`, after printing the line scripts wait for.
async fn serve_http(
    listen: &str,
    router: axum::Router,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(listen).await?;
    println!(
        "sluice http listening on http://{}/",
        listener.local_addr()?
    );
    tokio::spawn(async move {
        let served = axum::serve(listener, router)
            .with_graceful_shutdown(shutdown)
            .await;
        if let Err(e) = served {
            tracing::error!(error = %e, "HTTP port stopped");
        }
    });
    Ok(())
}

/// The name server's access control from its flags; listening beyond
/// loopback needs one of them.
fn namesrv_acl(
    listen: &str,
    file: Option<PathBuf>,
    mode: Option<&str>,
) -> anyhow::Result<Option<Arc<Acl>>> {
    require_acl_beyond_loopback(listen, file.is_some() || mode.is_some(), "the name server")?;
    if file.is_none() && mode.is_none() {
        return Ok(None);
    }
    let Some(mode) = parse_acl_mode(mode.unwrap_or("enforcing"))? else {
        return Ok(None);
    };
    let Some(file) = file else {
        anyhow::bail!("--acl-mode {mode:?} needs --acl-file with the accounts");
    };
    let source = acl::Source {
        inline: acl::Policy::default(),
        file: Some(file),
    };
    Ok(Some(Arc::new(Acl::load(mode, source)?)))
}

/// Re-reads `acl`'s policy file on SIGHUP and when its modification time
/// changes (looked at every 5 s); a file that fails to load is logged and
/// the policy in force stays.
fn watch_acl(acl: Option<&Arc<Acl>>) {
    let Some(acl) = acl.filter(|a| a.file().is_some()).cloned() else {
        return;
    };
    tokio::spawn(async move {
        let modified = |acl: &Acl| {
            acl.file()
                .and_then(|f| std::fs::metadata(f).ok())
                .and_then(|m| m.modified().ok())
        };
        let mut seen = modified(&acl);
        #[cfg(unix)]
        let mut hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok();
        let mut tick = tokio::time::interval(Duration::from_secs(5));
        loop {
            #[cfg(unix)]
            let hangup = async {
                match hup.as_mut() {
                    Some(h) => drop(h.recv().await),
                    None => std::future::pending().await,
                }
            };
            #[cfg(not(unix))]
            let hangup = std::future::pending::<()>();
            tokio::select! {
                () = hangup => {}
                _ = tick.tick() => {
                    let now = modified(&acl);
                    if now == seen {
                        continue;
                    }
                    seen = now;
                }
            }
            match acl.reload() {
                Ok(accounts) => tracing::info!(accounts, "ACL policy reloaded"),
                Err(e) => tracing::error!(error = %e, "ACL policy not reloaded; the old one stays"),
            }
        }
    });
}

/// Flips to `true` on SIGINT or SIGTERM.
fn shutdown_signal() -> watch::Receiver<bool> {
    let (tx, rx) = watch::channel(false);
    tokio::spawn(async move {
        let ctrl_c = tokio::signal::ctrl_c();
        #[cfg(unix)]
        {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                    .expect("installing a SIGTERM handler");
            tokio::select! {
                _ = ctrl_c => {}
                _ = term.recv() => {}
            }
        }
        #[cfg(not(unix))]
        let _ = ctrl_c.await;
        tracing::info!("shutdown requested");
        let _ = tx.send(true);
    });
    rx
}

async fn wait(mut rx: watch::Receiver<bool>) {
    while !*rx.borrow() {
        if rx.changed().await.is_err() {
            return;
        }
    }
}
