//! TLS on the remoting ports: [`TlsTransport`] is tokio TCP whose listener
//! serves plain, TLS or both on one port ([`TlsMode`]), telling them apart
//! by the first byte as RocketMQ does, and whose dials use TLS when a trust
//! setting is given. Production only: the simulation keeps plain turmoil.

mod config;
mod listener;
mod stream;

use std::fmt;
use std::io;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;

use rustls::pki_types::ServerName;
use serde::Deserialize;
use tokio::net::TcpStream;
use tokio_rustls::{TlsAcceptor, TlsConnector};

use super::{Socket, Transport};
use crate::{Error, Result};

pub use listener::TlsListener;
pub use stream::{TlsReader, TlsWriter};

/// What a listening port accepts (RocketMQ's `tls.server.mode`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TlsMode {
    /// Plain remoting only; a TLS hello is reported as the wrong protocol.
    #[default]
    Disabled,
    /// TLS and plain on the same port, told apart by the first byte, so a
    /// cluster can move to TLS one client at a time.
    Permissive,
    /// TLS only; a plain connection is closed without an answer.
    Enforcing,
}

impl FromStr for TlsMode {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "disabled" => Ok(Self::Disabled),
            "permissive" => Ok(Self::Permissive),
            "enforcing" => Ok(Self::Enforcing),
            other => Err(format!(
                "tls mode must be disabled, permissive or enforcing, not {other:?}"
            )),
        }
    }
}

impl fmt::Display for TlsMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Disabled => "disabled",
            Self::Permissive => "permissive",
            Self::Enforcing => "enforcing",
        })
    }
}

/// TLS settings as a node's `[tls]` table or a client's flags give them:
/// file paths, loaded by [`TlsSettings::transport`]. The server half
/// (`mode`, `cert`, `key`, `client_ca`) governs listening ports; the dial
/// half (`ca` or `insecure`, `client_cert`, `client_key`, `server_name`)
/// governs outgoing connections, which use TLS when `ca` or `insecure` is set.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TlsSettings {
    /// What listening ports accept.
    pub mode: TlsMode,
    /// The server certificate chain (PEM), leaf first.
    pub cert: Option<PathBuf>,
    /// The server's private key (PEM: PKCS#8, PKCS#1 or SEC1).
    pub key: Option<PathBuf>,
    /// CA certificates (PEM) that client certificates must chain to; when
    /// set, every TLS client must present one (mutual TLS).
    pub client_ca: Option<PathBuf>,
    /// CA certificates (PEM) that servers dialled must chain to; setting it
    /// makes outgoing connections TLS.
    pub ca: Option<PathBuf>,
    /// The certificate chain (PEM) presented when dialling (mutual TLS).
    pub client_cert: Option<PathBuf>,
    /// The private key (PEM) of `client_cert`.
    pub client_key: Option<PathBuf>,
    /// The name dialled servers' certificates must carry [default: the
    /// host of the address dialled, an IP or a DNS name].
    pub server_name: Option<String>,
    /// Dial TLS without verifying the server's certificate (development
    /// only: anyone on the path can impersonate the server).
    pub insecure: bool,
}

impl TlsSettings {
    /// Whether outgoing connections use TLS.
    pub fn dials_tls(&self) -> bool {
        self.ca.is_some() || self.insecure
    }

    /// Checks the settings and loads their files into a transport.
    pub fn transport(&self) -> Result<TlsTransport> {
        self.check()?;
        let mut transport = TlsTransport::plain();
        if self.mode != TlsMode::Disabled {
            let (Some(cert), Some(key)) = (&self.cert, &self.key) else {
                return Err(invalid(
                    "mode is not disabled, so cert and key are required",
                ));
            };
            let server = config::server(cert, key, self.client_ca.as_deref())?;
            transport = transport.with_server(self.mode, server);
        }
        if self.dials_tls() {
            let identity = self.client_cert.as_deref().zip(self.client_key.as_deref());
            let client = config::client(self.ca.as_deref(), identity)?;
            let server_name = match &self.server_name {
                Some(name) => Some(ServerName::try_from(name.clone()).map_err(|e| Error::Tls {
                    what: format!("server_name {name:?}"),
                    source: Box::new(e),
                })?),
                None => None,
            };
            transport = transport.with_client(client, server_name);
        }
        Ok(transport)
    }

    /// Rejects combinations that would silently not do what they say.
    fn check(&self) -> Result<()> {
        let disabled = self.mode == TlsMode::Disabled;
        if disabled && (self.cert.is_some() || self.key.is_some() || self.client_ca.is_some()) {
            return Err(invalid(
                "cert, key or client_ca is set but mode is disabled: set mode = \
                 \"permissive\" or \"enforcing\" to serve TLS",
            ));
        }
        if self.ca.is_some() && self.insecure {
            return Err(invalid(
                "set either ca (verify servers) or insecure, not both",
            ));
        }
        if self.client_cert.is_some() != self.client_key.is_some() {
            return Err(invalid("client_cert and client_key go together"));
        }
        let dial_only = self.client_cert.is_some() || self.server_name.is_some();
        if dial_only && !self.dials_tls() {
            return Err(invalid(
                "client_cert or server_name is set but outgoing connections are plain: \
                 set ca (or insecure = true)",
            ));
        }
        Ok(())
    }
}

fn invalid(reason: &str) -> Error {
    Error::Tls {
        what: "settings".to_owned(),
        source: reason.into(),
    }
}

/// The dial half: the connector and an optional fixed server name.
#[derive(Clone)]
struct Dialer {
    connector: TlsConnector,
    server_name: Option<ServerName<'static>>,
}

/// tokio TCP with optional TLS: listeners serve per [`TlsMode`], dials use
/// TLS when a client configuration is set. Without either it is plain TCP,
/// like [`super::TokioTransport`].
#[derive(Clone, Default)]
pub struct TlsTransport {
    server: Option<(TlsMode, TlsAcceptor)>,
    dialer: Option<Dialer>,
}

impl fmt::Debug for TlsTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsTransport")
            .field("mode", &self.mode())
            .field("dials_tls", &self.dialer.is_some())
            .finish_non_exhaustive()
    }
}

impl TlsTransport {
    /// Plain TCP both ways.
    pub fn plain() -> Self {
        Self::default()
    }

    /// Listeners serve per `mode` with `config` (`Disabled` keeps them plain).
    #[must_use]
    pub fn with_server(mut self, mode: TlsMode, config: Arc<rustls::ServerConfig>) -> Self {
        self.server = (mode != TlsMode::Disabled).then(|| (mode, TlsAcceptor::from(config)));
        self
    }

    /// Dials use TLS with `config`, checking certificates against
    /// `server_name` when given, else against the host dialled.
    #[must_use]
    pub fn with_client(
        mut self,
        config: Arc<rustls::ClientConfig>,
        server_name: Option<ServerName<'static>>,
    ) -> Self {
        self.dialer = Some(Dialer {
            connector: TlsConnector::from(config),
            server_name,
        });
        self
    }

    /// The same transport, its listeners offering `protocols` in the TLS
    /// handshake (ALPN): gRPC clients insist on `h2`. Plain listeners and
    /// dials are unchanged.
    #[must_use]
    pub fn with_alpn(&self, protocols: &[&[u8]]) -> Self {
        let mut out = self.clone();
        if let Some((mode, acceptor)) = &self.server {
            let mut config = rustls::ServerConfig::clone(acceptor.config());
            config.alpn_protocols = protocols.iter().map(|p| p.to_vec()).collect();
            out.server = Some((*mode, TlsAcceptor::from(Arc::new(config))));
        }
        out
    }

    /// What this transport's listeners accept.
    pub fn mode(&self) -> TlsMode {
        self.server
            .as_ref()
            .map_or(TlsMode::Disabled, |(mode, _)| *mode)
    }

    /// Whether dials use TLS.
    pub fn dials_tls(&self) -> bool {
        self.dialer.is_some()
    }
}

/// The host part of a `host:port` address (brackets of an IPv6 literal off).
fn host_of(addr: &str) -> &str {
    let host = addr.rsplit_once(':').map_or(addr, |(host, _)| host);
    host.trim_start_matches('[').trim_end_matches(']')
}

impl Transport for TlsTransport {
    type Reader = TlsReader;
    type Writer = TlsWriter;
    type Listener = TlsListener;

    async fn connect(&self, addr: &str) -> io::Result<Socket<TlsReader, TlsWriter>> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let peer_addr = stream.peer_addr()?;
        let Some(dialer) = &self.dialer else {
            return Ok(stream::plain(stream, peer_addr));
        };
        let name = match &dialer.server_name {
            Some(name) => name.clone(),
            None => ServerName::try_from(host_of(addr).to_owned())
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?,
        };
        let tls = dialer.connector.connect(name, stream).await?;
        Ok(stream::tls(tls.into(), peer_addr))
    }

    async fn bind(&self, addr: &str) -> io::Result<TlsListener> {
        TlsListener::bind(addr, self.server.clone()).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_of_strips_port_and_ipv6_brackets() {
        assert_eq!(host_of("127.0.0.1:9876"), "127.0.0.1");
        assert_eq!(host_of("broker-a.example:10911"), "broker-a.example");
        assert_eq!(host_of("[::1]:9876"), "::1");
    }

    #[test]
    fn mode_parses_case_insensitively_and_rejects_others() {
        assert_eq!("ENFORCING".parse::<TlsMode>(), Ok(TlsMode::Enforcing));
        assert_eq!("permissive".parse::<TlsMode>(), Ok(TlsMode::Permissive));
        assert!("strict".parse::<TlsMode>().is_err());
        assert_eq!(TlsMode::Permissive.to_string(), "permissive");
    }

    #[test]
    fn settings_that_would_silently_stay_plain_are_rejected() {
        let cert_without_mode = TlsSettings {
            cert: Some("c.pem".into()),
            key: Some("k.pem".into()),
            ..TlsSettings::default()
        };
        assert!(cert_without_mode.transport().is_err());
        let half_identity = TlsSettings {
            ca: Some("ca.pem".into()),
            client_cert: Some("c.pem".into()),
            ..TlsSettings::default()
        };
        assert!(half_identity.transport().is_err());
        let both_trusts = TlsSettings {
            ca: Some("ca.pem".into()),
            insecure: true,
            ..TlsSettings::default()
        };
        assert!(both_trusts.transport().is_err());
        let enforcing_without_cert = TlsSettings {
            mode: TlsMode::Enforcing,
            ..TlsSettings::default()
        };
        assert!(enforcing_without_cert.transport().is_err());
        let plain = TlsSettings::default().transport().expect("plain is valid");
        assert_eq!(
            (plain.mode(), plain.dials_tls()),
            (TlsMode::Disabled, false)
        );
    }
}
