//! The one place that maps storage errors to RocketMQ response codes, with a
//! remark that tells the client (and its operator) why.

use sluice_core::Error as StoreError;
use sluice_net::remoting::response_code;
use sluice_net::RemotingCommand;

/// The response code and remark for a failed put or read.
pub fn store_error_response(e: &StoreError) -> RemotingCommand {
    let code = match e {
        StoreError::MessageRejected { .. } | StoreError::Encode(_) => {
            response_code::MESSAGE_ILLEGAL
        }
        StoreError::Poisoned { .. } | StoreError::DiskFull { .. } | StoreError::ShutDown => {
            response_code::SERVICE_NOT_AVAILABLE
        }
        e if e.is_storage_full() => response_code::SERVICE_NOT_AVAILABLE,
        _ => response_code::SYSTEM_ERROR,
    };
    RemotingCommand::response(code, format!("[sluice] {e}"))
}

/// A `SYSTEM_ERROR` response for a request whose header could not be read.
pub fn bad_request(e: &sluice_net::Error) -> RemotingCommand {
    RemotingCommand::response(
        response_code::SYSTEM_ERROR,
        format!("[sluice] bad request: {e}"),
    )
}

/// A response with just a code and remark.
pub fn fail(code: i32, remark: impl Into<String>) -> RemotingCommand {
    RemotingCommand::response(code, remark)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fenced_and_full_stores_answer_service_not_available() {
        let poisoned = StoreError::Poisoned {
            reason: "eio".into(),
        };
        assert_eq!(
            store_error_response(&poisoned).code,
            response_code::SERVICE_NOT_AVAILABLE
        );
        let full = StoreError::DiskFull {
            reason: "90%".into(),
        };
        let r = store_error_response(&full);
        assert_eq!(r.code, response_code::SERVICE_NOT_AVAILABLE);
        assert!(r.remark.as_deref().is_some_and(|m| m.contains("disk full")));
        let rejected = StoreError::MessageRejected {
            reason: "too big".into(),
        };
        assert_eq!(
            store_error_response(&rejected).code,
            response_code::MESSAGE_ILLEGAL
        );
    }
}
