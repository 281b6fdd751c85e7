//! Response codes: the `code` of a response command. A separate table from
//! request codes, with explicit wire numbers (spec §1).

/// The request succeeded.
pub const SUCCESS: i32 = 0;
/// Generic failure (also `[PC_SYNCHRONIZED]` page-cache busy).
pub const SYSTEM_ERROR: i32 = 1;
/// Flow control: the broker is overloaded.
pub const SYSTEM_BUSY: i32 = 2;
/// No handler for the request code.
pub const REQUEST_CODE_NOT_SUPPORTED: i32 = 3;
/// A transaction operation failed.
pub const TRANSACTION_FAILED: i32 = 4;
/// Stored, but the sync flush timed out.
pub const FLUSH_DISK_TIMEOUT: i32 = 10;
/// Stored, but no slave is available.
pub const SLAVE_NOT_AVAILABLE: i32 = 11;
/// Stored, but the slave ack timed out.
pub const FLUSH_SLAVE_TIMEOUT: i32 = 12;
/// The message is malformed or too large.
pub const MESSAGE_ILLEGAL: i32 = 13;
/// The store is not writable (slave, full disk).
pub const SERVICE_NOT_AVAILABLE: i32 = 14;
/// The client version is not supported.
pub const VERSION_NOT_SUPPORTED: i32 = 15;
/// The topic or broker forbids the operation.
pub const NO_PERMISSION: i32 = 16;
/// The topic does not exist.
pub const TOPIC_NOT_EXIST: i32 = 17;
/// The topic already exists.
pub const TOPIC_EXIST_ALREADY: i32 = 18;
/// No new message at the requested offset.
pub const PULL_NOT_FOUND: i32 = 19;
/// Pull again at once.
pub const PULL_RETRY_IMMEDIATELY: i32 = 20;
/// The requested offset is out of range.
pub const PULL_OFFSET_MOVED: i32 = 21;
/// Nothing matched the query.
pub const QUERY_NOT_FOUND: i32 = 22;
/// The subscription expression does not parse.
pub const SUBSCRIPTION_PARSE_FAILED: i32 = 23;
/// No subscription is registered.
pub const SUBSCRIPTION_NOT_EXIST: i32 = 24;
/// The registered subscription is older than the request's.
pub const SUBSCRIPTION_NOT_LATEST: i32 = 25;
/// The subscription group does not exist.
pub const SUBSCRIPTION_GROUP_NOT_EXIST: i32 = 26;
/// Filter data is missing.
pub const FILTER_DATA_NOT_EXIST: i32 = 27;
/// Filter data is stale.
pub const FILTER_DATA_NOT_LATEST: i32 = 28;
/// A parameter is invalid.
pub const INVALID_PARAMETER: i32 = 29;
/// Check result: commit.
pub const TRANSACTION_SHOULD_COMMIT: i32 = 200;
/// Check result: roll back.
pub const TRANSACTION_SHOULD_ROLLBACK: i32 = 201;
/// Check result: unknown (RocketMQ's spelling).
pub const TRANSACTION_STATE_UNKNOW: i32 = 202;
/// The transaction's producer group is wrong.
pub const TRANSACTION_STATE_GROUP_WRONG: i32 = 203;
/// No buyer ID (legacy; clients retry on it).
pub const NO_BUYER_ID: i32 = 204;
/// Not in the current unit (legacy; clients retry on it).
pub const NOT_IN_CURRENT_UNIT: i32 = 205;
/// The consumer is not connected.
pub const CONSUMER_NOT_ONLINE: i32 = 206;
/// Direct consumption timed out.
pub const CONSUME_MSG_TIMEOUT: i32 = 207;
/// 5.x: no message (pop).
pub const NO_MESSAGE: i32 = 208;
/// 5.x: the server is going away.
pub const GO_AWAY: i32 = 1500;

/// The constant name of a response code, for logs.
pub fn name(code: i32) -> Option<&'static str> {
    Some(match code {
        SUCCESS => "SUCCESS",
        SYSTEM_ERROR => "SYSTEM_ERROR",
        SYSTEM_BUSY => "SYSTEM_BUSY",
        REQUEST_CODE_NOT_SUPPORTED => "REQUEST_CODE_NOT_SUPPORTED",
        TRANSACTION_FAILED => "TRANSACTION_FAILED",
        FLUSH_DISK_TIMEOUT => "FLUSH_DISK_TIMEOUT",
        SLAVE_NOT_AVAILABLE => "SLAVE_NOT_AVAILABLE",
        FLUSH_SLAVE_TIMEOUT => "FLUSH_SLAVE_TIMEOUT",
        MESSAGE_ILLEGAL => "MESSAGE_ILLEGAL",
        SERVICE_NOT_AVAILABLE => "SERVICE_NOT_AVAILABLE",
        VERSION_NOT_SUPPORTED => "VERSION_NOT_SUPPORTED",
        NO_PERMISSION => "NO_PERMISSION",
        TOPIC_NOT_EXIST => "TOPIC_NOT_EXIST",
        TOPIC_EXIST_ALREADY => "TOPIC_EXIST_ALREADY",
        PULL_NOT_FOUND => "PULL_NOT_FOUND",
        PULL_RETRY_IMMEDIATELY => "PULL_RETRY_IMMEDIATELY",
        PULL_OFFSET_MOVED => "PULL_OFFSET_MOVED",
        QUERY_NOT_FOUND => "QUERY_NOT_FOUND",
        SUBSCRIPTION_PARSE_FAILED => "SUBSCRIPTION_PARSE_FAILED",
        SUBSCRIPTION_NOT_EXIST => "SUBSCRIPTION_NOT_EXIST",
        SUBSCRIPTION_NOT_LATEST => "SUBSCRIPTION_NOT_LATEST",
        SUBSCRIPTION_GROUP_NOT_EXIST => "SUBSCRIPTION_GROUP_NOT_EXIST",
        FILTER_DATA_NOT_EXIST => "FILTER_DATA_NOT_EXIST",
        FILTER_DATA_NOT_LATEST => "FILTER_DATA_NOT_LATEST",
        INVALID_PARAMETER => "INVALID_PARAMETER",
        TRANSACTION_SHOULD_COMMIT => "TRANSACTION_SHOULD_COMMIT",
        TRANSACTION_SHOULD_ROLLBACK => "TRANSACTION_SHOULD_ROLLBACK",
        TRANSACTION_STATE_UNKNOW => "TRANSACTION_STATE_UNKNOW",
        TRANSACTION_STATE_GROUP_WRONG => "TRANSACTION_STATE_GROUP_WRONG",
        NO_BUYER_ID => "NO_BUYER_ID",
        NOT_IN_CURRENT_UNIT => "NOT_IN_CURRENT_UNIT",
        CONSUMER_NOT_ONLINE => "CONSUMER_NOT_ONLINE",
        CONSUME_MSG_TIMEOUT => "CONSUME_MSG_TIMEOUT",
        NO_MESSAGE => "NO_MESSAGE",
        GO_AWAY => "GO_AWAY",
        _ => return None,
    })
}
