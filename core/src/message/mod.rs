//! The message model: the stored-record codec (the RocketMQ CommitLog format,
//! which is also the PULL/QUERY/VIEW body format), properties, batch bodies,
//! message ids, tag hashes and topic names. Pure functions over bytes; no IO.

mod hex;

pub mod batch;
pub mod indexed_properties;
pub mod java_hash;
pub mod msg_id;
pub mod properties;
pub mod record;
pub mod record_seal;
pub mod restore;
pub mod stored_record;
pub mod topic;
pub mod uniq_key;

pub use batch::{
    decode_batch, encode_batch, merge_batch_properties, merge_batch_properties_into, BatchItem,
    BATCH_ITEMS_MAX,
};
pub use indexed_properties::IndexedProperties;
pub use java_hash::{java_string_hash, java_string_hash_extend, tags_code};
pub use msg_id::{decode_offset_msg_id, offset_msg_id, push_offset_msg_id};
pub use properties::{keys, Properties, NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR};
pub use record::{
    body_crc, layout, store_timestamp_pos, sys_flag, DecodeError, EncodeError, MessageInput,
    RecordStamp, BLANK_HEAD_BYTES, BLANK_MAGIC, BODY_BYTES_MAX, MAGIC_V1, PROPERTIES_BYTES_MAX,
    RECORD_BYTES_MAX, RECORD_BYTES_MIN, TOPIC_BYTES_MAX,
};
pub use record_seal::{
    encode_sealed, seal_matches, sealed_len, strip_seal, with_seal_placeholder, SEAL_PROPERTY_BYTES,
};
pub use restore::{
    real_destination, save_real_destination, take_real_destination, RealDestinationError,
};
pub use stored_record::{
    encode_blank, encode_pad_head, peek_head, stored_phys_offset, stored_queue_offset,
    stored_store_timestamp_ms, RecordHead, RecordView, StoredRecord, PAD_MAGIC,
};
pub use topic::{
    dlq_topic, is_dlq_topic, is_retry_topic, retry_topic, validate_topic, TopicError,
    DEFAULT_TOPIC, DLQ_GROUP_TOPIC_PREFIX, HALF_TOPIC, OP_HALF_TOPIC, RETRY_GROUP_TOPIC_PREFIX,
    SCHEDULE_TOPIC, TOPIC_CHARS_MAX,
};
pub use uniq_key::{decode_uniq_key, UniqKeyGenerator, UniqKeyParts};
