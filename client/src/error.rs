//! The client's one error type.

use sluice_net::remoting::response_code;

/// Everything a client call can fail with. Callers branch on the variant:
/// [`Error::Broker`] carries the broker's response code and remark.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The RPC layer failed (connect, timeout, closed connection, ...).
    #[error(transparent)]
    Net(#[from] sluice_net::Error),
    /// A server answered with a non-success code.
    #[error("{server} answered code {code}: {remark}")]
    Broker {
        /// Address of the name server or broker.
        server: String,
        /// The response code.
        code: i32,
        /// The response remark.
        remark: String,
    },
    /// No name server knows a route for the topic.
    #[error("no route for topic `{0}` (is it created, and is a broker registered?)")]
    NoRoute(String),
    /// The client has no name server address.
    #[error("no name server address configured")]
    NoNameServer,
    /// The message is invalid before it is sent (empty topic, oversized body, ...).
    #[error("invalid message: {0}")]
    InvalidMessage(String),
    /// An argument is invalid (unknown broker, bad expression, ...).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A response body or stored record could not be decoded.
    #[error("cannot decode {what}: {reason}")]
    Decode {
        /// What was being decoded.
        what: &'static str,
        /// Why it failed.
        reason: String,
    },
    /// Local I/O failed (offset file, ...).
    #[error("i/o error on {path}: {source}")]
    Io {
        /// The path involved.
        path: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The client was shut down or not started.
    #[error("client is not running")]
    NotRunning,
}

impl Error {
    /// Whether a send that failed this way may be retried on another queue
    /// without risk of reporting success for an unacknowledged message
    /// (retrying may still duplicate a message the broker did store).
    pub fn is_retryable_send(&self) -> bool {
        match self {
            Error::Net(_) | Error::NoRoute(_) => true,
            Error::Broker { code, .. } => matches!(
                *code,
                response_code::TOPIC_NOT_EXIST
                    | response_code::SERVICE_NOT_AVAILABLE
                    | response_code::SYSTEM_ERROR
                    | response_code::NO_PERMISSION
                    | response_code::NO_BUYER_ID
                    | response_code::NOT_IN_CURRENT_UNIT
                    | response_code::SYSTEM_BUSY
            ),
            _ => false,
        }
    }

    pub(crate) fn decode(what: &'static str, reason: impl std::fmt::Display) -> Self {
        Error::Decode {
            what,
            reason: reason.to_string(),
        }
    }
}

/// Shorthand for results in this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
