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
        StoreError::Poisoned { .. }
        | StoreError::DiskFull { .. }
        | StoreError::ShutDown
        | StoreError::NotWriter => response_code::SERVICE_NOT_AVAILABLE,
        e if e.is_storage_full() => response_code::SERVICE_NOT_AVAILABLE,
        _ => response_code::SYSTEM_ERROR,
    };
    RemotingCommand::response(code, format!("[sluice] {e}"))
}

/// The answer to a stored message the in-sync set did not confirm, as
/// RocketMQ answers: `SLAVE_NOT_AVAILABLE` or `FLUSH_SLAVE_TIMEOUT` with
/// the send's header (the message is stored), or `SERVICE_NOT_AVAILABLE`
/// when this broker stopped being the master meanwhile (the message may
/// be lost in the failover; the producer must not count it as sent).
pub fn replica_ack_response(
    e: &crate::broker::ReplicaAckError,
    stored: RemotingCommand,
) -> RemotingCommand {
    use crate::broker::ReplicaAckError;
    let (code, remark) =
        match e {
            ReplicaAckError::NotAvailable(why) => (
                response_code::SLAVE_NOT_AVAILABLE,
                format!("[sluice] stored, but the in-sync set is short: {why}"),
            ),
            ReplicaAckError::Timeout => (
                response_code::FLUSH_SLAVE_TIMEOUT,
                "[sluice] stored, but the in-sync set did not confirm in time".to_owned(),
            ),
            ReplicaAckError::NotMaster => return RemotingCommand::response(
                response_code::SERVICE_NOT_AVAILABLE,
                "[sluice] this broker stopped being the master before the in-sync set confirmed",
            ),
        };
    let mut out = stored;
    out.code = code;
    out.remark = Some(remark);
    out
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
