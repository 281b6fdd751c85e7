//! The producer id and per-lane sequence numbers a producer stamps on what
//! it sends (`__SLUICE_PID`, `__SLUICE_SEQ` = `<lane>/<n>`), so a Sluice
//! broker recognises a retry exactly, however late (docs/dedupe.md). A lane
//! is the topic, broker and queue of a send's first attempt; numbers in a
//! lane start at 1 and only grow, and every retry of a send keeps its
//! stamp, even when it goes to another queue or broker.

use std::collections::BTreeMap;
use std::sync::Mutex;

use bytes::Bytes;
use sluice_core::message::{encode_batch, keys, BatchItem, Properties, BODY_BYTES_MAX};

use super::Prepared;
use crate::error::{Error, Result};
use crate::instance::lock;
use crate::message::MessageQueue;

/// Longest producer id prefix kept (a Sluice broker ignores ids over 128
/// bytes; the unique part takes the rest).
pub const PRODUCER_ID_PREFIX_BYTES_MAX: usize = 64;

/// The producer id: `prefix` (control characters dropped, cut to
/// [`PRODUCER_ID_PREFIX_BYTES_MAX`] bytes) and `-`, then `unique`, a part
/// never used by another producer start. Numbers restart at 1 with every
/// producer, so an id must never be reused: a broker would take the new
/// numbers for retries of the old ones.
pub(super) fn producer_id(prefix: Option<&str>, unique: &str) -> String {
    let mut id = String::new();
    for c in prefix
        .unwrap_or_default()
        .chars()
        .filter(|c| !c.is_control())
    {
        if id.len() + c.len_utf8() > PRODUCER_ID_PREFIX_BYTES_MAX {
            break;
        }
        id.push(c);
    }
    if !id.is_empty() {
        id.push('-');
    }
    id.push_str(unique);
    id
}

/// What a prepared send is stamped from: its properties, unencoded.
#[derive(Clone, Debug)]
pub(super) enum Stampable {
    /// A single message's properties.
    One(Properties),
    /// A batch's items, each with its properties.
    Batch(Vec<(i32, Bytes, Properties)>),
}

/// A producer's id and the next number of each of its lanes.
pub(super) struct Lanes {
    id: String,
    next: Mutex<BTreeMap<(String, String, i32), u64>>,
}

impl Lanes {
    /// Lanes of the producer `id` (see [`producer_id`]).
    pub(super) fn new(id: String) -> Self {
        Self {
            id,
            next: Mutex::default(),
        }
    }

    /// The producer id.
    pub(super) fn id(&self) -> &str {
        &self.id
    }

    /// Reserves `n` numbers in the lane of `queue`: the lane's name and the
    /// first number.
    fn reserve(&self, queue: &MessageQueue, n: u64) -> (String, u64) {
        let mut next = lock(&self.next);
        let id = (
            queue.topic.clone(),
            queue.broker_name.clone(),
            queue.queue_id,
        );
        let slot = next.entry(id).or_insert(1);
        let first = *slot;
        *slot = slot.saturating_add(n);
        (format!("{}@{}", queue.broker_name, queue.queue_id), first)
    }

    /// `prepared` stamped for its first attempt, to `queue` (as is when it
    /// cannot be stamped: a transaction half, or already stamped).
    pub(super) fn stamp(&self, prepared: &Prepared, queue: &MessageQueue) -> Result<Prepared> {
        let mut out = prepared.clone();
        let Some(source) = out.stampable.take() else {
            return Ok(out);
        };
        match source {
            Stampable::One(mut props) => {
                let (lane, seq) = self.reserve(queue, 1);
                self.put(&mut props, &lane, seq)?;
                out.properties = String::from_utf8(props.encode())
                    .map_err(|e| Error::InvalidMessage(format!("properties: {e}")))?;
            }
            Stampable::Batch(items) => {
                let n = u64::try_from(items.len()).unwrap_or(u64::MAX);
                let (lane, first) = self.reserve(queue, n);
                let mut stamped = Vec::with_capacity(items.len());
                for ((flag, body, mut props), seq) in items.into_iter().zip(first..) {
                    self.put(&mut props, &lane, seq)?;
                    stamped.push(BatchItem {
                        flag,
                        body,
                        properties: Bytes::from(props.encode()),
                    });
                }
                let body =
                    encode_batch(&stamped).map_err(|e| Error::InvalidMessage(e.to_string()))?;
                if body.len() > BODY_BYTES_MAX {
                    return Err(Error::InvalidMessage(format!(
                        "the batch is {} bytes with its stamps; at most {BODY_BYTES_MAX} are allowed",
                        body.len()
                    )));
                }
                out.body = Bytes::from(body);
            }
        }
        Ok(out)
    }

    fn put(&self, props: &mut Properties, lane: &str, seq: u64) -> Result<()> {
        let invalid = |e: sluice_core::message::EncodeError| Error::InvalidMessage(e.to_string());
        props
            .insert(keys::SLUICE_PRODUCER_ID, &self.id)
            .map_err(invalid)?;
        props
            .insert(keys::SLUICE_SEQUENCE, &format!("{lane}/{seq}"))
            .map_err(invalid)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue(broker: &str, id: i32) -> MessageQueue {
        MessageQueue {
            topic: "T".to_owned(),
            broker_name: broker.to_owned(),
            queue_id: id,
        }
    }

    #[test]
    fn numbers_grow_per_lane_from_one_and_batches_reserve_a_run() {
        let lanes = Lanes::new("P1".to_owned());
        assert_eq!(lanes.reserve(&queue("a", 0), 1), ("a@0".to_owned(), 1));
        assert_eq!(lanes.reserve(&queue("a", 0), 3), ("a@0".to_owned(), 2));
        assert_eq!(lanes.reserve(&queue("a", 0), 1), ("a@0".to_owned(), 5));
        assert_eq!(lanes.reserve(&queue("a", 1), 1), ("a@1".to_owned(), 1));
        assert_eq!(lanes.reserve(&queue("b", 0), 1), ("b@0".to_owned(), 1));
    }

    #[test]
    fn the_id_is_the_cleaned_prefix_then_the_unique_part() {
        assert_eq!(producer_id(None, "U1"), "U1");
        assert_eq!(producer_id(Some(""), "U1"), "U1");
        assert_eq!(producer_id(Some("orders\u{1}\u{2}"), "U1"), "orders-U1");
        let long = "é".repeat(PRODUCER_ID_PREFIX_BYTES_MAX);
        let id = producer_id(Some(&long), "U1");
        assert!(id.len() <= PRODUCER_ID_PREFIX_BYTES_MAX + 3, "{}", id.len());
        assert!(id.ends_with("-U1"));
    }
}
