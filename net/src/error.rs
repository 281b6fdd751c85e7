//! The crate's one error type plus the narrow [`FrameError`] the decoder
//! returns, so callers can branch on "need more bytes" versus "corrupt".

use std::io;

/// Why a byte sequence is not (yet) a valid remoting frame.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// More bytes are needed before the frame can be decoded.
    #[error("incomplete frame")]
    Incomplete,
    /// A length field exceeds its configured limit; nothing was allocated.
    #[error("{what} of {len} bytes exceeds the limit of {max}")]
    TooLarge {
        /// Which length was too large (`frame`, `header`, `extFields`, ...).
        what: &'static str,
        /// The length read from (or computed for) the wire.
        len: u64,
        /// The limit it exceeded.
        max: u64,
    },
    /// The bytes violate the frame grammar.
    #[error("corrupt frame: {0}")]
    Corrupt(String),
    /// The peer speaks another protocol (its first bytes say which).
    #[error("{0}")]
    ForeignProtocol(&'static str),
}

impl FrameError {
    pub(crate) fn corrupt(reason: impl Into<String>) -> Self {
        Self::Corrupt(reason.into())
    }
}

/// Everything that can fail in `sluice-net`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A frame could not be decoded or encoded.
    #[error(transparent)]
    Frame(#[from] FrameError),
    /// A required typed-header field is absent from `extFields`.
    #[error("header field `{field}` is missing")]
    MissingField {
        /// The wire name of the field.
        field: &'static str,
    },
    /// A typed-header field is present but does not parse.
    #[error("header field `{field}` has invalid value {value:?}")]
    InvalidField {
        /// The wire name of the field.
        field: &'static str,
        /// The value as received.
        value: String,
    },
    /// A JSON body could not be parsed or produced.
    #[error("invalid {what} JSON: {source}")]
    Json {
        /// The body type being handled.
        what: &'static str,
        /// The underlying serde error.
        #[source]
        source: serde_json::Error,
    },
    /// An I/O error on a socket or listener.
    #[error("i/o error: {0}")]
    Io(#[from] io::Error),
    /// Connecting to a peer failed or timed out.
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        /// The address dialled.
        addr: String,
        /// The underlying cause.
        #[source]
        source: io::Error,
    },
    /// No response arrived within the request's timeout.
    #[error("request code {code} to {addr} timed out after {timeout_ms} ms")]
    Timeout {
        /// The peer address.
        addr: String,
        /// The request code.
        code: i32,
        /// The timeout that elapsed.
        timeout_ms: u64,
    },
    /// The connection closed before the response arrived.
    #[error("connection to {addr} closed")]
    ConnectionClosed {
        /// The peer address.
        addr: String,
    },
    /// The bound on in-flight requests on one connection was reached.
    #[error("too many requests in flight to {addr} (max {max})")]
    TooManyInFlight {
        /// The peer address.
        addr: String,
        /// The configured bound.
        max: usize,
    },
    /// TLS settings are inconsistent, or a certificate or key file cannot
    /// be read or used.
    #[error("tls {what}: {source}")]
    Tls {
        /// What was being loaded (`settings`, `certificates <path>`, ...).
        what: String,
        /// The underlying cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The client or server is shutting down.
    #[error("shutting down")]
    Shutdown,
}

/// Shorthand for results in this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
