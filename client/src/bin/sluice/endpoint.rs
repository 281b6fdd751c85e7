//! Where the CLI's clients go and how: the name servers, and a plain or
//! TLS transport from the global `--tls*` flags (TLS only with something to
//! verify servers against, or an explicit `--tls-insecure`); every client
//! made here signs with the run's credentials (`signing`).

use std::path::PathBuf;

use clap::builder::BoolishValueParser;
use sluice_client::{ClientConfig, ClientInstance, TlsSettings, TlsTransport};
use sluice_core::SystemClock;

use crate::signing::signed;

/// A client over the CLI's transport with the production clock.
pub type Client = ClientInstance<TlsTransport, SystemClock>;

/// How to reach TLS name servers and brokers.
#[derive(clap::Args, Debug)]
// Field names are clap argument ids, and global arguments meet every
// subcommand's: the tls_ prefix keeps `tls_key` apart from `query --key`.
pub struct TlsFlags {
    /// Connect with TLS (needs `--tls-ca`, or `--tls-insecure`).
    #[arg(long = "tls", global = true, env = "SLUICE_TLS", value_parser = BoolishValueParser::new())]
    tls: bool,
    /// Trust servers whose certificates chain to this CA (PEM); implies `--tls`.
    #[arg(
        long = "tls-ca",
        global = true,
        env = "SLUICE_TLS_CA",
        value_name = "FILE"
    )]
    tls_ca: Option<PathBuf>,
    /// Present this certificate chain (PEM) for mutual TLS, with `--tls-key`.
    #[arg(
        long = "tls-cert",
        global = true,
        env = "SLUICE_TLS_CERT",
        value_name = "FILE"
    )]
    tls_cert: Option<PathBuf>,
    /// The private key (PEM) of `--tls-cert`.
    #[arg(
        long = "tls-key",
        global = true,
        env = "SLUICE_TLS_KEY",
        value_name = "FILE"
    )]
    tls_key: Option<PathBuf>,
    /// The name server certificates must carry [default: the host dialled].
    #[arg(
        long = "tls-server-name",
        global = true,
        env = "SLUICE_TLS_SERVER_NAME"
    )]
    tls_server_name: Option<String>,
    /// Connect with TLS without verifying certificates (development only).
    #[arg(
        long = "tls-insecure",
        global = true,
        env = "SLUICE_TLS_INSECURE",
        value_parser = BoolishValueParser::new()
    )]
    tls_insecure: bool,
}

impl TlsFlags {
    /// Plain TCP unless a `--tls*` flag asks for TLS.
    pub fn transport(self) -> anyhow::Result<TlsTransport> {
        let settings = TlsSettings {
            ca: self.tls_ca,
            client_cert: self.tls_cert,
            client_key: self.tls_key,
            server_name: self.tls_server_name,
            insecure: self.tls_insecure,
            ..TlsSettings::default()
        };
        if self.tls && !settings.dials_tls() {
            anyhow::bail!(
                "--tls needs --tls-ca FILE to verify servers (or --tls-insecure to skip that)"
            );
        }
        Ok(settings.transport()?)
    }
}

/// The name servers, and the transport to reach them and the brokers.
pub struct Endpoint {
    /// Name server address(es), `;`-separated.
    pub namesrv: String,
    /// Plain TCP, or TLS when asked for.
    pub transport: TlsTransport,
}

/// A client of `endpoint`, named after this process, signing with this
/// run's credentials.
pub fn client(endpoint: &Endpoint) -> Client {
    ClientInstance::new(
        endpoint.transport.clone(),
        SystemClock::new(),
        signed(
            ClientConfig::new(&endpoint.namesrv)
                .with_instance_name(format!("sluice-cli-{}", std::process::id())),
        ),
    )
}
