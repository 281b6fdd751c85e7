//! Generated from the `apache.rocketmq.v2` descriptors (field names, numbers
//! and types are the protocol's facts); see `super`.

#[allow(clippy::wildcard_imports)]
use super::*;

#[derive(Clone, PartialEq, ::prost::Message)]
pub struct QueryRouteRequest {
    #[prost(message, optional, tag = "1")]
    pub topic: Option<Resource>,
    #[prost(message, optional, tag = "2")]
    pub endpoints: Option<Endpoints>,
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct QueryRouteResponse {
    #[prost(message, optional, tag = "1")]
    pub status: Option<Status>,
    #[prost(message, repeated, tag = "2")]
    pub message_queues: Vec<MessageQueue>,
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct SendMessageRequest {
    #[prost(message, repeated, tag = "1")]
    pub messages: Vec<Message>,
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct SendResultEntry {
    #[prost(message, optional, tag = "1")]
    pub status: Option<Status>,
    #[prost(string, tag = "2")]
    pub message_id: String,
    #[prost(string, tag = "3")]
    pub transaction_id: String,
    #[prost(int64, tag = "4")]
    pub offset: i64,
    #[prost(string, tag = "5")]
    pub recall_handle: String,
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct SendMessageResponse {
    #[prost(message, optional, tag = "1")]
    pub status: Option<Status>,
    #[prost(message, repeated, tag = "2")]
    pub entries: Vec<SendResultEntry>,
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct QueryAssignmentRequest {
    #[prost(message, optional, tag = "1")]
    pub topic: Option<Resource>,
    #[prost(message, optional, tag = "2")]
    pub group: Option<Resource>,
    #[prost(message, optional, tag = "3")]
    pub endpoints: Option<Endpoints>,
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct QueryAssignmentResponse {
    #[prost(message, optional, tag = "1")]
    pub status: Option<Status>,
    #[prost(message, repeated, tag = "2")]
    pub assignments: Vec<Assignment>,
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct ReceiveMessageRequest {
    #[prost(message, optional, tag = "1")]
    pub group: Option<Resource>,
    #[prost(message, optional, tag = "2")]
    pub message_queue: Option<MessageQueue>,
    #[prost(message, optional, tag = "3")]
    pub filter_expression: Option<FilterExpression>,
    #[prost(int32, tag = "4")]
    pub batch_size: i32,
    #[prost(message, optional, tag = "5")]
    pub invisible_duration: Option<Duration>,
    #[prost(bool, tag = "6")]
    pub auto_renew: bool,
    #[prost(message, optional, tag = "7")]
    pub long_polling_timeout: Option<Duration>,
    #[prost(string, optional, tag = "8")]
    pub attempt_id: Option<String>,
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct ReceiveMessageResponse {
    #[prost(oneof = "receive_message_response::Content", tags = "1, 2, 3")]
    pub content: Option<receive_message_response::Content>,
}
/// Oneof fields of [`ReceiveMessageResponse`].
pub mod receive_message_response {
    #[allow(unused_imports, clippy::wildcard_imports)]
    use super::*;
    #[derive(Clone, PartialEq, ::prost::Oneof)]
    pub enum Content {
        #[prost(message, tag = "1")]
        Status(Status),
        #[prost(message, tag = "2")]
        Message(Message),
        #[prost(message, tag = "3")]
        DeliveryTimestamp(Timestamp),
    }
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct AckMessageEntry {
    #[prost(string, tag = "1")]
    pub message_id: String,
    #[prost(string, tag = "2")]
    pub receipt_handle: String,
    #[prost(string, optional, tag = "3")]
    pub lite_topic: Option<String>,
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct AckMessageRequest {
    #[prost(message, optional, tag = "1")]
    pub group: Option<Resource>,
    #[prost(message, optional, tag = "2")]
    pub topic: Option<Resource>,
    #[prost(message, repeated, tag = "3")]
    pub entries: Vec<AckMessageEntry>,
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct AckMessageResultEntry {
    #[prost(string, tag = "1")]
    pub message_id: String,
    #[prost(string, tag = "2")]
    pub receipt_handle: String,
    #[prost(message, optional, tag = "3")]
    pub status: Option<Status>,
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct AckMessageResponse {
    #[prost(message, optional, tag = "1")]
    pub status: Option<Status>,
    #[prost(message, repeated, tag = "2")]
    pub entries: Vec<AckMessageResultEntry>,
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct ForwardMessageToDeadLetterQueueRequest {
    #[prost(message, optional, tag = "1")]
    pub group: Option<Resource>,
    #[prost(message, optional, tag = "2")]
    pub topic: Option<Resource>,
    #[prost(string, tag = "3")]
    pub receipt_handle: String,
    #[prost(string, tag = "4")]
    pub message_id: String,
    #[prost(int32, tag = "5")]
    pub delivery_attempt: i32,
    #[prost(int32, tag = "6")]
    pub max_delivery_attempts: i32,
    #[prost(string, optional, tag = "7")]
    pub lite_topic: Option<String>,
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct ForwardMessageToDeadLetterQueueResponse {
    #[prost(message, optional, tag = "1")]
    pub status: Option<Status>,
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct HeartbeatRequest {
    #[prost(message, optional, tag = "1")]
    pub group: Option<Resource>,
    #[prost(enumeration = "ClientType", tag = "2")]
    pub client_type: i32,
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct HeartbeatResponse {
    #[prost(message, optional, tag = "1")]
    pub status: Option<Status>,
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct EndTransactionRequest {
    #[prost(message, optional, tag = "1")]
    pub topic: Option<Resource>,
    #[prost(string, tag = "2")]
    pub message_id: String,
    #[prost(string, tag = "3")]
    pub transaction_id: String,
    #[prost(enumeration = "TransactionResolution", tag = "4")]
    pub resolution: i32,
    #[prost(enumeration = "TransactionSource", tag = "5")]
    pub source: i32,
    #[prost(string, tag = "6")]
    pub trace_context: String,
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct EndTransactionResponse {
    #[prost(message, optional, tag = "1")]
    pub status: Option<Status>,
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct PrintThreadStackTraceCommand {
    #[prost(string, tag = "1")]
    pub nonce: String,
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct ReconnectEndpointsCommand {
    #[prost(string, tag = "1")]
    pub nonce: String,
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct ThreadStackTrace {
    #[prost(string, tag = "1")]
    pub nonce: String,
    #[prost(string, optional, tag = "2")]
    pub thread_stack_trace: Option<String>,
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct VerifyMessageCommand {
    #[prost(string, tag = "1")]
    pub nonce: String,
    #[prost(message, optional, tag = "2")]
    pub message: Option<Message>,
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct VerifyMessageResult {
    #[prost(string, tag = "1")]
    pub nonce: String,
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct RecoverOrphanedTransactionCommand {
    #[prost(message, optional, tag = "1")]
    pub message: Option<Message>,
    #[prost(string, tag = "2")]
    pub transaction_id: String,
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct NotifyUnsubscribeLiteCommand {
    #[prost(string, tag = "1")]
    pub lite_topic: String,
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct TelemetryCommand {
    #[prost(message, optional, tag = "1")]
    pub status: Option<Status>,
    #[prost(oneof = "telemetry_command::Command", tags = "2, 3, 4, 5, 6, 7, 8, 9")]
    pub command: Option<telemetry_command::Command>,
}
/// Oneof fields of [`TelemetryCommand`].
pub mod telemetry_command {
    #[allow(unused_imports, clippy::wildcard_imports)]
    use super::*;
    #[derive(Clone, PartialEq, ::prost::Oneof)]
    pub enum Command {
        #[prost(message, tag = "2")]
        Settings(Settings),
        #[prost(message, tag = "3")]
        ThreadStackTrace(ThreadStackTrace),
        #[prost(message, tag = "4")]
        VerifyMessageResult(VerifyMessageResult),
        #[prost(message, tag = "5")]
        RecoverOrphanedTransactionCommand(RecoverOrphanedTransactionCommand),
        #[prost(message, tag = "6")]
        PrintThreadStackTraceCommand(PrintThreadStackTraceCommand),
        #[prost(message, tag = "7")]
        VerifyMessageCommand(VerifyMessageCommand),
        #[prost(message, tag = "8")]
        ReconnectEndpointsCommand(ReconnectEndpointsCommand),
        #[prost(message, tag = "9")]
        NotifyUnsubscribeLiteCommand(NotifyUnsubscribeLiteCommand),
    }
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct NotifyClientTerminationRequest {
    #[prost(message, optional, tag = "1")]
    pub group: Option<Resource>,
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct NotifyClientTerminationResponse {
    #[prost(message, optional, tag = "1")]
    pub status: Option<Status>,
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct ChangeInvisibleDurationRequest {
    #[prost(message, optional, tag = "1")]
    pub group: Option<Resource>,
    #[prost(message, optional, tag = "2")]
    pub topic: Option<Resource>,
    #[prost(string, tag = "3")]
    pub receipt_handle: String,
    #[prost(message, optional, tag = "4")]
    pub invisible_duration: Option<Duration>,
    #[prost(string, tag = "5")]
    pub message_id: String,
    #[prost(string, optional, tag = "6")]
    pub lite_topic: Option<String>,
    #[prost(bool, optional, tag = "7")]
    pub suspend: Option<bool>,
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct ChangeInvisibleDurationResponse {
    #[prost(message, optional, tag = "1")]
    pub status: Option<Status>,
    #[prost(string, tag = "2")]
    pub receipt_handle: String,
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct PullMessageRequest {
    #[prost(message, optional, tag = "1")]
    pub group: Option<Resource>,
    #[prost(message, optional, tag = "2")]
    pub message_queue: Option<MessageQueue>,
    #[prost(int64, tag = "3")]
    pub offset: i64,
    #[prost(int32, tag = "4")]
    pub batch_size: i32,
    #[prost(message, optional, tag = "5")]
    pub filter_expression: Option<FilterExpression>,
    #[prost(message, optional, tag = "6")]
    pub long_polling_timeout: Option<Duration>,
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct PullMessageResponse {
    #[prost(oneof = "pull_message_response::Content", tags = "1, 2, 3")]
    pub content: Option<pull_message_response::Content>,
}
/// Oneof fields of [`PullMessageResponse`].
pub mod pull_message_response {
    #[allow(unused_imports, clippy::wildcard_imports)]
    use super::*;
    #[derive(Clone, PartialEq, ::prost::Oneof)]
    pub enum Content {
        #[prost(message, tag = "1")]
        Status(Status),
        #[prost(message, tag = "2")]
        Message(Message),
        #[prost(int64, tag = "3")]
        NextOffset(i64),
    }
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct UpdateOffsetRequest {
    #[prost(message, optional, tag = "1")]
    pub group: Option<Resource>,
    #[prost(message, optional, tag = "2")]
    pub message_queue: Option<MessageQueue>,
    #[prost(int64, tag = "3")]
    pub offset: i64,
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct UpdateOffsetResponse {
    #[prost(message, optional, tag = "1")]
    pub status: Option<Status>,
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct GetOffsetRequest {
    #[prost(message, optional, tag = "1")]
    pub group: Option<Resource>,
    #[prost(message, optional, tag = "2")]
    pub message_queue: Option<MessageQueue>,
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct GetOffsetResponse {
    #[prost(message, optional, tag = "1")]
    pub status: Option<Status>,
    #[prost(int64, tag = "2")]
    pub offset: i64,
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct QueryOffsetRequest {
    #[prost(message, optional, tag = "1")]
    pub message_queue: Option<MessageQueue>,
    #[prost(enumeration = "QueryOffsetPolicy", tag = "2")]
    pub query_offset_policy: i32,
    #[prost(message, optional, tag = "3")]
    pub timestamp: Option<Timestamp>,
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct QueryOffsetResponse {
    #[prost(message, optional, tag = "1")]
    pub status: Option<Status>,
    #[prost(int64, tag = "2")]
    pub offset: i64,
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct RecallMessageRequest {
    #[prost(message, optional, tag = "1")]
    pub topic: Option<Resource>,
    #[prost(string, tag = "2")]
    pub recall_handle: String,
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct RecallMessageResponse {
    #[prost(message, optional, tag = "1")]
    pub status: Option<Status>,
    #[prost(string, tag = "2")]
    pub message_id: String,
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct SyncLiteSubscriptionRequest {
    #[prost(enumeration = "LiteSubscriptionAction", tag = "1")]
    pub action: i32,
    #[prost(message, optional, tag = "2")]
    pub topic: Option<Resource>,
    #[prost(message, optional, tag = "3")]
    pub group: Option<Resource>,
    #[prost(string, repeated, tag = "4")]
    pub lite_topic_set: Vec<String>,
    #[prost(int64, optional, tag = "5")]
    pub version: Option<i64>,
    #[prost(message, optional, tag = "6")]
    pub offset_option: Option<OffsetOption>,
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct SyncLiteSubscriptionResponse {
    #[prost(message, optional, tag = "1")]
    pub status: Option<Status>,
}
