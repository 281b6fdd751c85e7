//! A stored record stored again — retried, delivered when due, committed,
//! copied — and the one way a system topic keeps a message's real
//! destination: [`save_real_destination`] writes `REAL_TOPIC`/`REAL_QID`
//! when the broker diverts a message (delay, timer, half), and
//! [`real_destination`] / [`take_real_destination`] read them back.

use std::net::SocketAddr;

use bytes::Bytes;

use super::properties::keys;
use super::{EncodeError, MessageInput, Properties, StoredRecord};

impl MessageInput {
    /// A message with `rec`'s producer-given fields (flag, sys flag, born
    /// time and host, reconsume count, prepared offset, body), to be stored
    /// by `store_host` in `topic`/`queue_id` with `properties`. Callers
    /// change what their rewrite changes with struct update syntax.
    pub fn from_stored(
        rec: &StoredRecord,
        topic: String,
        queue_id: i32,
        properties: Bytes,
        store_host: SocketAddr,
    ) -> Self {
        Self {
            topic,
            queue_id,
            flag: rec.flag,
            sys_flag: rec.sys_flag,
            born_timestamp_ms: rec.born_timestamp_ms,
            born_host: rec.born_host,
            store_host,
            reconsume_times: rec.reconsume_times,
            prepared_transaction_offset: rec.prepared_transaction_offset,
            body: rec.body.clone(),
            properties,
        }
    }
}

/// Why a record's real destination cannot be read back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RealDestinationError {
    /// No `REAL_TOPIC` property.
    #[error("no REAL_TOPIC")]
    NoTopic,
    /// `REAL_QID` absent or not a number (the topic is known).
    #[error("no valid REAL_QID")]
    NoQueue {
        /// The real topic that was found.
        topic: String,
    },
}

/// Records `topic`/`queue_id` as the message's real destination before the
/// broker diverts it into a system topic.
pub fn save_real_destination(
    props: &mut Properties,
    topic: &str,
    queue_id: i32,
) -> Result<(), EncodeError> {
    props.insert(keys::REAL_TOPIC, topic)?;
    props.insert(keys::REAL_QID, &queue_id.to_string())?;
    Ok(())
}

/// The real destination a diverted message carries, the properties kept
/// (RocketMQ's delay levels leave them on the delivered message).
pub fn real_destination(props: &Properties) -> Result<(String, i32), RealDestinationError> {
    let topic = props
        .get(keys::REAL_TOPIC)
        .ok_or(RealDestinationError::NoTopic)?;
    let queue_id = props
        .get(keys::REAL_QID)
        .and_then(|q| q.parse::<i32>().ok())
        .ok_or_else(|| RealDestinationError::NoQueue {
            topic: topic.to_owned(),
        })?;
    Ok((topic.to_owned(), queue_id))
}

/// The real destination a diverted message carries, both properties
/// removed (timers and transactions restore the message as sent).
pub fn take_real_destination(
    props: &mut Properties,
) -> Result<(String, i32), RealDestinationError> {
    let found = real_destination(props);
    if found.is_ok() || matches!(found, Err(RealDestinationError::NoQueue { .. })) {
        props.remove(keys::REAL_TOPIC);
        props.remove(keys::REAL_QID);
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_saved_destination_reads_back_and_taking_it_removes_both_keys() {
        let mut props = Properties::new();
        props.insert(keys::TAGS, "t").expect("tag");
        save_real_destination(&mut props, "Orders", 3).expect("save");
        assert_eq!(real_destination(&props), Ok(("Orders".to_owned(), 3)));
        assert_eq!(
            props.get(keys::REAL_TOPIC),
            Some("Orders"),
            "kept by a read"
        );
        assert_eq!(
            take_real_destination(&mut props),
            Ok(("Orders".to_owned(), 3))
        );
        assert_eq!(props.get(keys::REAL_TOPIC), None);
        assert_eq!(props.get(keys::REAL_QID), None);
        assert_eq!(props.tags(), Some("t"));
        assert_eq!(
            take_real_destination(&mut props),
            Err(RealDestinationError::NoTopic)
        );
        props.insert(keys::REAL_TOPIC, "T").expect("topic");
        props.insert(keys::REAL_QID, "x").expect("qid");
        assert_eq!(
            real_destination(&props),
            Err(RealDestinationError::NoQueue { topic: "T".into() })
        );
    }
}
