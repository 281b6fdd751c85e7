//! The credentials this run of `sluice` signs every request with (RocketMQ
//! ACL 1.0), from `--access-key`/`--secret-key`: set once in `main`, before
//! any client is made, and read by every client constructor.

use sluice_client::{ClientConfig, ClientInstance};
use sluice_core::SystemClock;
use sluice_net::TokioTransport;

/// A client of this run.
pub(crate) type Client = ClientInstance<TokioTransport, SystemClock>;

/// The credentials every client of this run signs with (set once, from
/// the global flags, before any client is made).
static CREDENTIALS: std::sync::OnceLock<sluice_net::Credentials> = std::sync::OnceLock::new();

/// Signs every later client's requests with `credentials`.
pub(crate) fn sign_with(credentials: sluice_net::Credentials) {
    let _ = CREDENTIALS.set(credentials);
}

/// `config` with this run's credentials, if any.
pub(crate) fn signed(mut config: ClientConfig) -> ClientConfig {
    config.rpc.credentials = CREDENTIALS.get().cloned();
    config
}

/// A client for `namesrv`, signing with this run's credentials.
pub(crate) fn client(namesrv: &str) -> Client {
    ClientInstance::new(
        TokioTransport,
        SystemClock::new(),
        signed(
            ClientConfig::new(namesrv)
                .with_instance_name(format!("sluice-cli-{}", std::process::id())),
        ),
    )
}
