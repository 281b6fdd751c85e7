//! The message model: the stored-record codec (the RocketMQ CommitLog format,
//! which is also the PULL/QUERY/VIEW body format), properties, batch bodies,
//! message ids, tag hashes and topic names. Pure functions over bytes; no IO.

mod hex;

pub mod batch;
pub mod java_hash;
pub mod msg_id;
pub mod properties;
pub mod record;
pub mod topic;
pub mod uniq_key;

pub use batch::{decode_batch, encode_batch, merge_batch_properties, BatchItem, BATCH_ITEMS_MAX};
pub use java_hash::{java_string_hash, tags_code};
pub use msg_id::{decode_offset_msg_id, offset_msg_id};
pub use properties::{keys, Properties, NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR};
pub use record::{
    encode_blank, peek_head, sys_flag, DecodeError, EncodeError, MessageInput, RecordHead,
    RecordStamp, StoredRecord, BLANK_MAGIC, BODY_BYTES_MAX, MAGIC_V1, PROPERTIES_BYTES_MAX,
};
pub use topic::{dlq_topic, retry_topic, validate_topic, TopicError};
pub use uniq_key::{decode_uniq_key, UniqKeyGenerator, UniqKeyParts};
