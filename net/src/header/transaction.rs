//! Transaction headers: `END_TRANSACTION` (producer to broker) and
//! `CHECK_TRANSACTION_STATE` (broker to producer), plus the commit/rollback codes.

use super::command_header;

/// `commitOrRollback`: state unknown.
pub const TRANSACTION_NOT_TYPE: i32 = 0;
/// sysFlag transaction type of a half (prepared) message.
pub const TRANSACTION_PREPARED_TYPE: i32 = 4;
/// `commitOrRollback`: commit.
pub const TRANSACTION_COMMIT_TYPE: i32 = 8;
/// `commitOrRollback`: roll back.
pub const TRANSACTION_ROLLBACK_TYPE: i32 = 12;

command_header! {
    /// `END_TRANSACTION` (37) request header (oneway).
    EndTransactionRequestHeader {
        /// Producer group.
        producer_group: String = "producerGroup",
        /// Half-queue offset.
        tran_state_table_offset: i64 = "tranStateTableOffset",
        /// Commit-log offset of the half message.
        commit_log_offset: i64 = "commitLogOffset",
        /// `TRANSACTION_*_TYPE`.
        commit_or_rollback: i32 = "commitOrRollback",
        /// True when answering a check.
        from_transaction_check: Option<bool> = "fromTransactionCheck",
        /// Message ID.
        msg_id: String = "msgId",
        /// Transaction ID.
        transaction_id: Option<String> = "transactionId",
    }
}

command_header! {
    /// `CHECK_TRANSACTION_STATE` (39) request header (oneway, broker to producer).
    CheckTransactionStateRequestHeader {
        /// 5.x: topic of the stored half message (used by proxies to route
        /// the check).
        topic: Option<String> = "topic",
        /// Half-queue offset.
        tran_state_table_offset: i64 = "tranStateTableOffset",
        /// Commit-log offset of the half message.
        commit_log_offset: i64 = "commitLogOffset",
        /// `UNIQ_KEY` of the message.
        msg_id: Option<String> = "msgId",
        /// Transaction ID.
        transaction_id: Option<String> = "transactionId",
        /// Offset message ID.
        offset_msg_id: Option<String> = "offsetMsgId",
    }
}
