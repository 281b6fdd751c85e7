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
}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
