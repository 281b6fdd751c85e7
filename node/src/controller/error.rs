//! `ControllerError`: why a controller could not start or keep running, and
//! why a `ControllerClient` call failed. Callers branch on `Fenced`.

/// Errors of the controller and its client.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ControllerError {
    /// A configuration value is unusable.
    #[error("controller config: {0}")]
    Config(String),
    /// The network layer failed.
    #[error("network: {0}")]
    Net(#[from] sluice_net::Error),
    /// The raft state on disk could not be read or written; a controller
    /// that fails to persist stops rather than acknowledge.
    #[error("controller storage {path}: {reason}")]
    Storage {
        /// The file.
        path: String,
        /// Why it failed.
        reason: String,
    },
    /// raft-rs refused (a bug or corrupt state).
    #[error("raft: {0}")]
    Raft(#[from] raft::Error),
    /// The caller is not the master at the epoch it claims.
    #[error("fenced: {0}")]
    Fenced(String),
    /// The controller answered with an error code.
    #[error("controller answered {code}: {remark}")]
    Rejected {
        /// The response code.
        code: i32,
        /// Its remark.
        remark: String,
    },
    /// No controller answered as leader within the attempts allowed.
    #[error("no controller leader reachable: {0}")]
    NoLeader(String),
    /// A response body could not be decoded.
    #[error("bad controller response: {0}")]
    Decode(String),
}
