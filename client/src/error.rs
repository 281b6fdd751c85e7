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

    /// Whether the send attempt that failed this way certainly stored
    /// nothing: the request never left for a broker (no route, no name
    /// server, no connection, an invalid message, a closed client) or the
    /// broker refused it before appending (`SYSTEM_BUSY`, `TOPIC_NOT_EXIST`,
    /// `NO_PERMISSION`, `MESSAGE_ILLEGAL`). `false` means the message may be
    /// stored: a timeout or closed connection after the request was sent, a
    /// failure the broker may have hit after the append, an undecodable answer.
    ///
    /// This judges the last attempt only. With retries an earlier attempt
    /// may have stored the message; a caller that must know exactly sends
    /// with `retries = 0`.
    pub fn is_definitely_not_stored(&self) -> bool {
        match self {
            Error::Net(e) => matches!(
                e,
                sluice_net::Error::Connect { .. }
                    | sluice_net::Error::TooManyInFlight { .. }
                    | sluice_net::Error::Shutdown
            ),
            Error::Broker { code, .. } => matches!(
                *code,
                response_code::SYSTEM_BUSY
                    | response_code::TOPIC_NOT_EXIST
                    | response_code::NO_PERMISSION
                    | response_code::MESSAGE_ILLEGAL
            ),
            Error::NoRoute(_)
            | Error::NoNameServer
            | Error::InvalidMessage(_)
            | Error::InvalidArgument(_)
            | Error::NotRunning => true,
            Error::Decode { .. } | Error::Io { .. } => false,
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

#[cfg(test)]
mod tests {
    use std::io;

    use super::*;

    fn broker(code: i32) -> Error {
        Error::Broker {
            server: "b:1".to_owned(),
            code,
            remark: String::new(),
        }
    }

    #[test]
    fn requests_that_never_left_or_were_refused_before_the_append_stored_nothing() {
        let never_sent = [
            Error::Net(sluice_net::Error::Connect {
                addr: "b:1".to_owned(),
                source: io::Error::from(io::ErrorKind::ConnectionRefused),
            }),
            Error::Net(sluice_net::Error::TooManyInFlight {
                addr: "b:1".to_owned(),
                max: 1,
            }),
            Error::Net(sluice_net::Error::Shutdown),
            Error::NoRoute("T".to_owned()),
            Error::NoNameServer,
            Error::InvalidMessage("empty".to_owned()),
            Error::InvalidArgument("no queue".to_owned()),
            Error::NotRunning,
            broker(response_code::SYSTEM_BUSY),
            broker(response_code::TOPIC_NOT_EXIST),
            broker(response_code::NO_PERMISSION),
            broker(response_code::MESSAGE_ILLEGAL),
        ];
        for e in &never_sent {
            assert!(e.is_definitely_not_stored(), "{e}");
        }
    }

    #[test]
    fn lost_answers_and_failures_after_the_append_may_have_stored() {
        let maybe_stored = [
            Error::Net(sluice_net::Error::Timeout {
                addr: "b:1".to_owned(),
                code: 310,
                timeout_ms: 3_000,
            }),
            Error::Net(sluice_net::Error::ConnectionClosed {
                addr: "b:1".to_owned(),
            }),
            Error::Net(sluice_net::Error::Io(io::Error::from(
                io::ErrorKind::BrokenPipe,
            ))),
            broker(response_code::SERVICE_NOT_AVAILABLE),
            broker(response_code::SYSTEM_ERROR),
            broker(response_code::FLUSH_DISK_TIMEOUT),
            Error::decode("send response", "missing queueId"),
        ];
        for e in &maybe_stored {
            assert!(!e.is_definitely_not_stored(), "{e}");
        }
    }
}
