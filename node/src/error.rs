//! The node crate's one error type, for starting and running servers.
//! Request-level failures are answered on the wire, not raised.

/// Errors from starting or running a name server or broker.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The storage engine failed.
    #[error("store: {0}")]
    Store(#[from] sluice_core::Error),
    /// The network layer failed.
    #[error("network: {0}")]
    Net(#[from] sluice_net::Error),
    /// A configuration value is unusable.
    #[error("config: {0}")]
    Config(String),
    /// A metadata file (topics, offsets) could not be read or written.
    #[error("{what} {path}: {reason}")]
    Metadata {
        /// What was being done.
        what: &'static str,
        /// The file.
        path: String,
        /// Why it failed.
        reason: String,
    },
}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
