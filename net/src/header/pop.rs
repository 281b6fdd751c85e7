//! Sluice's POP requests over remoting (`SLUICE_POP_RECEIVE`, `_ACK`,
//! `_RENEW`): the broker's POP consumption (leases, per-message acks) that
//! the RocketMQ 5 gRPC endpoint serves, for Sluice's own clients and the
//! simulation. Not Apache's `POP_MESSAGE` family: the receipt handles are
//! Sluice's (opaque to clients).

use super::command_header;

command_header! {
    /// `SLUICE_POP_RECEIVE` (3510) request header.
    SluicePopReceiveRequestHeader {
        /// Consumer group.
        consumer_group: String = "consumerGroup",
        /// Topic.
        topic: String = "topic",
        /// Most messages to hand out.
        max_msg_nums: i32 = "maxMsgNums",
        /// How long handed-out messages stay invisible, ms.
        invisible_time: i64 = "invisibleTime",
        /// Longest hold when nothing is receivable, ms.
        poll_time: i64 = "pollTime",
        /// `TAG` (default) or `SQL92`.
        expression_type: Option<String> = "expressionType",
        /// The filter expression (default `*`).
        expression: Option<String> = "expression",
        /// One queue only (a FIFO group's); absent: any queue.
        queue_id: Option<i32> = "queueId",
    }
}

command_header! {
    /// `SLUICE_POP_RECEIVE` response header: one receipt handle and one
    /// delivery attempt per record of the body, in order.
    SluicePopReceiveResponseHeader {
        /// Receipt handles, comma-separated.
        receipt_handles: String = "receiptHandles",
        /// Delivery attempts (1 for the first), comma-separated.
        attempts: String = "attempts",
    }
}

command_header! {
    /// `SLUICE_POP_ACK` (3511) request header.
    SluicePopAckRequestHeader {
        /// Consumer group.
        consumer_group: String = "consumerGroup",
        /// Topic.
        topic: String = "topic",
        /// The delivery's receipt handle.
        receipt_handle: String = "receiptHandle",
    }
}

command_header! {
    /// `SLUICE_POP_RENEW` (3512) request and response header: the answer
    /// carries the new receipt handle.
    SluicePopRenewHeader {
        /// Consumer group.
        consumer_group: String = "consumerGroup",
        /// Topic.
        topic: String = "topic",
        /// The delivery's receipt handle (in the answer: its replacement).
        receipt_handle: String = "receiptHandle",
        /// New invisible duration from now, ms.
        invisible_time: i64 = "invisibleTime",
    }
}
