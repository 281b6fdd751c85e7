//! Generated from the `apache.rocketmq.v2` descriptors (field names, numbers
//! and types are the protocol's facts); see `super`.

#[allow(clippy::wildcard_imports)]
use super::*;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration)]
#[repr(i32)]
pub enum TransactionResolution {
    Unspecified = 0,
    Commit = 1,
    Rollback = 2,
}
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration)]
#[repr(i32)]
pub enum TransactionSource {
    SourceUnspecified = 0,
    SourceClient = 1,
    SourceServerCheck = 2,
}
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration)]
#[repr(i32)]
pub enum Permission {
    Unspecified = 0,
    None = 1,
    Read = 2,
    Write = 3,
    ReadWrite = 4,
}
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration)]
#[repr(i32)]
pub enum FilterType {
    Unspecified = 0,
    Tag = 1,
    Sql = 2,
}
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration)]
#[repr(i32)]
pub enum AddressScheme {
    Unspecified = 0,
    Ipv4 = 1,
    Ipv6 = 2,
    DomainName = 3,
}
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration)]
#[repr(i32)]
pub enum MessageType {
    Unspecified = 0,
    Normal = 1,
    Fifo = 2,
    Delay = 3,
    Transaction = 4,
    Lite = 5,
    Priority = 6,
}
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration)]
#[repr(i32)]
pub enum DigestType {
    Unspecified = 0,
    Crc32 = 1,
    Md5 = 2,
    Sha1 = 3,
}
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration)]
#[repr(i32)]
pub enum ClientType {
    Unspecified = 0,
    Producer = 1,
    PushConsumer = 2,
    SimpleConsumer = 3,
    PullConsumer = 4,
    LitePushConsumer = 5,
    LiteSimpleConsumer = 6,
}
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration)]
#[repr(i32)]
pub enum Encoding {
    Unspecified = 0,
    Identity = 1,
    Gzip = 2,
}
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration)]
#[repr(i32)]
pub enum Code {
    Unspecified = 0,
    Ok = 20000,
    MultipleResults = 30000,
    BadRequest = 40000,
    IllegalAccessPoint = 40001,
    IllegalTopic = 40002,
    IllegalConsumerGroup = 40003,
    IllegalMessageTag = 40004,
    IllegalMessageKey = 40005,
    IllegalMessageGroup = 40006,
    IllegalMessagePropertyKey = 40007,
    InvalidTransactionId = 40008,
    IllegalMessageId = 40009,
    IllegalFilterExpression = 40010,
    IllegalInvisibleTime = 40011,
    IllegalDeliveryTime = 40012,
    InvalidReceiptHandle = 40013,
    MessagePropertyConflictWithType = 40014,
    UnrecognizedClientType = 40015,
    MessageCorrupted = 40016,
    ClientIdRequired = 40017,
    IllegalPollingTime = 40018,
    IllegalOffset = 40019,
    IllegalLiteTopic = 40020,
    Unauthorized = 40100,
    PaymentRequired = 40200,
    Forbidden = 40300,
    NotFound = 40400,
    MessageNotFound = 40401,
    TopicNotFound = 40402,
    ConsumerGroupNotFound = 40403,
    OffsetNotFound = 40404,
    RequestTimeout = 40800,
    PayloadTooLarge = 41300,
    MessageBodyTooLarge = 41301,
    MessageBodyEmpty = 41302,
    PreconditionFailed = 42800,
    TooManyRequests = 42900,
    LiteTopicQuotaExceeded = 42901,
    LiteSubscriptionQuotaExceeded = 42902,
    RequestHeaderFieldsTooLarge = 43100,
    MessagePropertiesTooLarge = 43101,
    InternalError = 50000,
    InternalServerError = 50001,
    HaNotAvailable = 50002,
    NotImplemented = 50100,
    ProxyTimeout = 50400,
    MasterPersistenceTimeout = 50401,
    SlavePersistenceTimeout = 50402,
    Unsupported = 50500,
    VersionUnsupported = 50501,
    VerifyFifoMessageUnsupported = 50502,
    FailedToConsumeMessage = 60000,
}
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration)]
#[repr(i32)]
pub enum Language {
    Unspecified = 0,
    Java = 1,
    Cpp = 2,
    DotNet = 3,
    Golang = 4,
    Rust = 5,
    Python = 6,
    Php = 7,
    NodeJs = 8,
    Ruby = 9,
    ObjectiveC = 10,
    Dart = 11,
    Kotlin = 12,
}
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration)]
#[repr(i32)]
pub enum LiteSubscriptionAction {
    PartialAdd = 0,
    PartialRemove = 1,
    CompleteAdd = 2,
    CompleteRemove = 3,
}
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration)]
#[repr(i32)]
pub enum QueryOffsetPolicy {
    Beginning = 0,
    End = 1,
    Timestamp = 2,
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct FilterExpression {
    #[prost(enumeration = "FilterType", tag = "1")]
    pub r#type: i32,
    #[prost(string, tag = "2")]
    pub expression: String,
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct RetryPolicy {
    #[prost(int32, tag = "1")]
    pub max_attempts: i32,
    #[prost(oneof = "retry_policy::Strategy", tags = "2, 3")]
    pub strategy: Option<retry_policy::Strategy>,
}
/// Oneof fields of [`RetryPolicy`].
pub mod retry_policy {
    #[allow(unused_imports, clippy::wildcard_imports)]
    use super::*;
    #[derive(Clone, PartialEq, ::prost::Oneof)]
    pub enum Strategy {
        #[prost(message, tag = "2")]
        ExponentialBackoff(ExponentialBackoff),
        #[prost(message, tag = "3")]
        CustomizedBackoff(CustomizedBackoff),
    }
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct ExponentialBackoff {
    #[prost(message, optional, tag = "1")]
    pub initial: Option<Duration>,
    #[prost(message, optional, tag = "2")]
    pub max: Option<Duration>,
    #[prost(float, tag = "3")]
    pub multiplier: f32,
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct CustomizedBackoff {
    #[prost(message, repeated, tag = "1")]
    pub next: Vec<Duration>,
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct Resource {
    #[prost(string, tag = "1")]
    pub resource_namespace: String,
    #[prost(string, tag = "2")]
    pub name: String,
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct SubscriptionEntry {
    #[prost(message, optional, tag = "1")]
    pub topic: Option<Resource>,
    #[prost(message, optional, tag = "2")]
    pub expression: Option<FilterExpression>,
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct Address {
    #[prost(string, tag = "1")]
    pub host: String,
    #[prost(int32, tag = "2")]
    pub port: i32,
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct Endpoints {
    #[prost(enumeration = "AddressScheme", tag = "1")]
    pub scheme: i32,
    #[prost(message, repeated, tag = "2")]
    pub addresses: Vec<Address>,
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct Broker {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(int32, tag = "2")]
    pub id: i32,
    #[prost(message, optional, tag = "3")]
    pub endpoints: Option<Endpoints>,
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct MessageQueue {
    #[prost(message, optional, tag = "1")]
    pub topic: Option<Resource>,
    #[prost(int32, tag = "2")]
    pub id: i32,
    #[prost(enumeration = "Permission", tag = "3")]
    pub permission: i32,
    #[prost(message, optional, tag = "4")]
    pub broker: Option<Broker>,
    #[prost(enumeration = "MessageType", repeated, tag = "5")]
    pub accept_message_types: Vec<i32>,
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct Digest {
    #[prost(enumeration = "DigestType", tag = "1")]
    pub r#type: i32,
    #[prost(string, tag = "2")]
    pub checksum: String,
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct SystemProperties {
    #[prost(string, optional, tag = "1")]
    pub tag: Option<String>,
    #[prost(string, repeated, tag = "2")]
    pub keys: Vec<String>,
    #[prost(string, tag = "3")]
    pub message_id: String,
    #[prost(message, optional, tag = "4")]
    pub body_digest: Option<Digest>,
    #[prost(enumeration = "Encoding", tag = "5")]
    pub body_encoding: i32,
    #[prost(enumeration = "MessageType", tag = "6")]
    pub message_type: i32,
    #[prost(message, optional, tag = "7")]
    pub born_timestamp: Option<Timestamp>,
    #[prost(string, tag = "8")]
    pub born_host: String,
    #[prost(message, optional, tag = "9")]
    pub store_timestamp: Option<Timestamp>,
    #[prost(string, tag = "10")]
    pub store_host: String,
    #[prost(message, optional, tag = "11")]
    pub delivery_timestamp: Option<Timestamp>,
    #[prost(string, optional, tag = "12")]
    pub receipt_handle: Option<String>,
    #[prost(int32, tag = "13")]
    pub queue_id: i32,
    #[prost(int64, optional, tag = "14")]
    pub queue_offset: Option<i64>,
    #[prost(message, optional, tag = "15")]
    pub invisible_duration: Option<Duration>,
    #[prost(int32, optional, tag = "16")]
    pub delivery_attempt: Option<i32>,
    #[prost(string, optional, tag = "17")]
    pub message_group: Option<String>,
    #[prost(string, optional, tag = "18")]
    pub trace_context: Option<String>,
    #[prost(message, optional, tag = "19")]
    pub orphaned_transaction_recovery_duration: Option<Duration>,
    #[prost(message, optional, tag = "20")]
    pub dead_letter_queue: Option<DeadLetterQueue>,
    #[prost(string, optional, tag = "21")]
    pub lite_topic: Option<String>,
    #[prost(int32, optional, tag = "22")]
    pub priority: Option<i32>,
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct DeadLetterQueue {
    #[prost(string, tag = "1")]
    pub topic: String,
    #[prost(string, tag = "2")]
    pub message_id: String,
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct Message {
    #[prost(message, optional, tag = "1")]
    pub topic: Option<Resource>,
    #[prost(btree_map = "string, string", tag = "2")]
    pub user_properties: ::std::collections::BTreeMap<String, String>,
    #[prost(message, optional, tag = "3")]
    pub system_properties: Option<SystemProperties>,
    #[prost(bytes = "bytes", tag = "4")]
    pub body: ::bytes::Bytes,
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct Assignment {
    #[prost(message, optional, tag = "1")]
    pub message_queue: Option<MessageQueue>,
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct Status {
    #[prost(enumeration = "Code", tag = "1")]
    pub code: i32,
    #[prost(string, tag = "2")]
    pub message: String,
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct UA {
    #[prost(enumeration = "Language", tag = "1")]
    pub language: i32,
    #[prost(string, tag = "2")]
    pub version: String,
    #[prost(string, tag = "3")]
    pub platform: String,
    #[prost(string, tag = "4")]
    pub hostname: String,
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct Settings {
    #[prost(enumeration = "ClientType", optional, tag = "1")]
    pub client_type: Option<i32>,
    #[prost(message, optional, tag = "2")]
    pub access_point: Option<Endpoints>,
    #[prost(message, optional, tag = "3")]
    pub backoff_policy: Option<RetryPolicy>,
    #[prost(message, optional, tag = "4")]
    pub request_timeout: Option<Duration>,
    #[prost(message, optional, tag = "7")]
    pub user_agent: Option<UA>,
    #[prost(message, optional, tag = "8")]
    pub metric: Option<Metric>,
    #[prost(oneof = "settings::PubSub", tags = "5, 6")]
    pub pub_sub: Option<settings::PubSub>,
}
/// Oneof fields of [`Settings`].
pub mod settings {
    #[allow(unused_imports, clippy::wildcard_imports)]
    use super::*;
    #[derive(Clone, PartialEq, ::prost::Oneof)]
    pub enum PubSub {
        #[prost(message, tag = "5")]
        Publishing(Publishing),
        #[prost(message, tag = "6")]
        Subscription(Subscription),
    }
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct Publishing {
    #[prost(message, repeated, tag = "1")]
    pub topics: Vec<Resource>,
    #[prost(int32, tag = "2")]
    pub max_body_size: i32,
    #[prost(bool, tag = "3")]
    pub validate_message_type: bool,
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct Subscription {
    #[prost(message, optional, tag = "1")]
    pub group: Option<Resource>,
    #[prost(message, repeated, tag = "2")]
    pub subscriptions: Vec<SubscriptionEntry>,
    #[prost(bool, optional, tag = "3")]
    pub fifo: Option<bool>,
    #[prost(int32, optional, tag = "4")]
    pub receive_batch_size: Option<i32>,
    #[prost(message, optional, tag = "5")]
    pub long_polling_timeout: Option<Duration>,
    #[prost(int32, optional, tag = "6")]
    pub lite_subscription_quota: Option<i32>,
    #[prost(int32, optional, tag = "7")]
    pub max_lite_topic_size: Option<i32>,
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct Metric {
    #[prost(bool, tag = "1")]
    pub on: bool,
    #[prost(message, optional, tag = "2")]
    pub endpoints: Option<Endpoints>,
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct OffsetOption {
    #[prost(oneof = "offset_option::OffsetType", tags = "1, 2, 3, 4")]
    pub offset_type: Option<offset_option::OffsetType>,
}
/// Oneof fields of [`OffsetOption`].
pub mod offset_option {
    #[allow(unused_imports, clippy::wildcard_imports)]
    use super::*;
    #[derive(Clone, PartialEq, ::prost::Oneof)]
    pub enum OffsetType {
        #[prost(enumeration = "Policy", tag = "1")]
        Policy(i32),
        #[prost(int64, tag = "2")]
        Offset(i64),
        #[prost(int64, tag = "3")]
        TailN(i64),
        #[prost(int64, tag = "4")]
        Timestamp(i64),
    }
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration)]
    #[repr(i32)]
    pub enum Policy {
        Last = 0,
        Min = 1,
        Max = 2,
    }
}
