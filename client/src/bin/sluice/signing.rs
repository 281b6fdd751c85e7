//! The credentials this run of `sluice` signs every request with (RocketMQ
//! ACL 1.0), from `--access-key`/`--secret-key`: set once in `main`, before
//! any client is made, and read by every client constructor (`endpoint`).

use sluice_client::ClientConfig;

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
