//! The crate's one error type. Callers branch on the variant; messages are
//! short and lower-case.

use std::io;

/// Errors from the storage engine and codecs.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An IO error from the disk seam.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file involved.
        path: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// Bytes that do not decode as a message, batch body, properties or id.
    #[error(transparent)]
    Decode(#[from] crate::message::DecodeError),
    /// A message that cannot be encoded (a field exceeds its limit).
    #[error(transparent)]
    Encode(#[from] crate::message::EncodeError),
    /// Stored data failed a check (CRC, stored offset, layout). Reported,
    /// never silently truncated.
    #[error("corrupt data in {path} at {offset}: {reason}")]
    Corrupt {
        /// The file involved.
        path: String,
        /// Offset in the file's logical space (CommitLog bytes, CQ bytes, ...).
        offset: u64,
        /// What check failed.
        reason: &'static str,
    },
    /// A sync failed earlier, so the durable state of recent writes is
    /// unknown; the store accepts nothing until it is reopened.
    #[error("store is fenced after a failed sync: {reason}")]
    Poisoned {
        /// The failure that fenced the store.
        reason: String,
    },
    /// A message the store refuses before writing anything.
    #[error("message rejected: {reason}")]
    MessageRejected {
        /// Why, e.g. "body exceeds 4194304 bytes".
        reason: String,
    },
    /// The disk is too full to accept messages (retention may free space).
    #[error("disk full: {reason}")]
    DiskFull {
        /// Which limit was hit.
        reason: String,
    },
    /// A put on a replica: only the master's store takes writes.
    #[error("store is a replica and takes no puts")]
    NotWriter,
    /// The store has been shut down.
    #[error("store is shut down")]
    ShutDown,
}

impl Error {
    /// An IO error on `path` while doing `op`.
    pub fn io(op: &'static str, path: &str, source: io::Error) -> Self {
        Self::Io {
            op,
            path: path.to_owned(),
            source,
        }
    }

    /// True when the disk reported it is full (ENOSPC).
    pub fn is_storage_full(&self) -> bool {
        matches!(self, Self::DiskFull { .. })
            || matches!(self, Self::Io { source, .. } if source.kind() == io::ErrorKind::StorageFull)
    }
}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
