//! The records a transaction writes, built from the records before them:
//! the half (a PREPARED message parked in the half queue), the committed
//! real message, the op record, a re-put copy for a check, a parked copy,
//! and the check-back body. Pure functions over messages; no IO.

use bytes::Bytes;
use sluice_core::message::topic::{HALF_TOPIC, OP_HALF_TOPIC};
use sluice_core::message::{
    keys, save_real_destination, strip_seal, sys_flag, take_real_destination, MessageInput,
    Properties, StoredRecord,
};

use super::tracker::{HalfCopy, Outcome};

/// Where a half checked `transaction_check_max` times goes.
pub const CHECK_MAX_TOPIC: &str = "TRANS_CHECK_MAX_TIME_TOPIC";
/// Tag of op records.
pub const OP_TAG: &str = "d";
/// On a re-put copy: the half-queue offset of the transaction's first copy.
pub const ORIGIN_QUEUE_OFFSET: &str = "TRAN_PREPARED_QUEUE_OFFSET";
/// On an op record: how the transaction ended (`commit`, `rollback`, `parked`).
pub const OUTCOME: &str = "SLUICE_TRAN_OUTCOME";

/// Why a record cannot serve as a half.
#[derive(Debug, PartialEq, Eq)]
pub struct NotAHalf(pub String);

fn bad(e: impl std::fmt::Display) -> NotAHalf {
    NotAHalf(e.to_string())
}

/// True for a send that opens a transaction (sysFlag type PREPARED).
pub fn is_half_send(msg: &MessageInput) -> bool {
    msg.sys_flag & sys_flag::TRANSACTION_MASK == sys_flag::TRANSACTION_PREPARED
}

/// Rewrites a PREPARED send into the half queue: the real topic and queue
/// saved, `TRAN_MSG` and `PGROUP` set, the transaction type reset to NOT
/// (so the store indexes it in the half queue like any message).
pub fn into_half(msg: &mut MessageInput, group: &str) -> Result<(), NotAHalf> {
    let mut props = Properties::parse(&msg.properties).map_err(bad)?;
    save_real_destination(&mut props, &msg.topic, msg.queue_id).map_err(bad)?;
    props.insert(keys::TRAN_MSG, "true").map_err(bad)?;
    if props.get(keys::PGROUP).is_none() {
        props.insert(keys::PGROUP, group).map_err(bad)?;
    }
    // A half is never diverted, and a commit goes straight to its queue.
    props.remove(keys::DELAY);
    HALF_TOPIC.clone_into(&mut msg.topic);
    msg.queue_id = 0;
    msg.sys_flag &= !sys_flag::TRANSACTION_MASK;
    msg.properties = Bytes::from(props.encode());
    Ok(())
}

/// The transaction id a half send answers: `__transactionId__`, else the
/// message's `UNIQ_KEY`.
pub fn transaction_id(props: &Properties) -> Option<String> {
    props
        .get(keys::TRANSACTION_ID)
        .or_else(|| props.uniq_key())
        .map(str::to_owned)
}

/// Reads a stored half-queue record as one copy of a transaction.
pub fn half_copy(rec: &StoredRecord) -> Result<HalfCopy, NotAHalf> {
    if rec.topic != HALF_TOPIC {
        return Err(NotAHalf(format!("it belongs to topic {}", rec.topic)));
    }
    let props = Properties::parse(strip_seal(&rec.properties)).map_err(bad)?;
    let real_topic = props
        .get(keys::REAL_TOPIC)
        .ok_or_else(|| NotAHalf("it has no REAL_TOPIC".to_owned()))?;
    let queue_offset = u64::try_from(rec.queue_offset).map_err(bad)?;
    let origin = match props.get(ORIGIN_QUEUE_OFFSET) {
        Some(o) => o.parse::<u64>().map_err(bad)?,
        None => queue_offset,
    };
    let number = |key: &str| props.get(key).and_then(|v| v.trim().parse::<u64>().ok());
    Ok(HalfCopy {
        origin,
        queue_offset,
        commit_log_offset: u64::try_from(rec.phys_offset).map_err(bad)?,
        real_topic: real_topic.to_owned(),
        group: props.get(keys::PGROUP).unwrap_or_default().to_owned(),
        check_times: number(keys::TRANSACTION_CHECK_TIMES)
            .map_or(0, |n| u32::try_from(n).unwrap_or(u32::MAX)),
        store_ms: u64::try_from(rec.store_timestamp_ms).unwrap_or(0),
        immunity_ms: number(keys::CHECK_IMMUNITY_TIME_IN_SECONDS)
            .map_or(0, |s| s.saturating_mul(1_000)),
    })
}

/// Reads a stored op record: the origin it resolves and how.
pub fn op_entry(rec: &StoredRecord) -> Option<(u64, Outcome)> {
    let origin = std::str::from_utf8(&rec.body).ok()?.trim().parse().ok()?;
    let props = Properties::parse(strip_seal(&rec.properties)).ok()?;
    Some((
        origin,
        props
            .get(OUTCOME)
            .map_or(Outcome::Unspecified, Outcome::parse),
    ))
}

/// The message as its producer meant it: the real topic and queue
/// restored, the internal properties removed (`UNIQ_KEY`, `TRAN_MSG`,
/// `PGROUP` and `__transactionId__` stay, as in RocketMQ).
fn restored(
    rec: &StoredRecord,
    store_host: std::net::SocketAddr,
) -> Result<MessageInput, NotAHalf> {
    let mut props = Properties::parse(strip_seal(&rec.properties)).map_err(bad)?;
    let (topic, queue_id) =
        take_real_destination(&mut props).map_err(|e| NotAHalf(format!("it has {e}")))?;
    props.remove(keys::TRANSACTION_CHECK_TIMES);
    props.remove(ORIGIN_QUEUE_OFFSET);
    Ok(MessageInput {
        sys_flag: rec.sys_flag & !sys_flag::TRANSACTION_MASK,
        prepared_transaction_offset: rec.phys_offset,
        ..MessageInput::from_stored(
            rec,
            topic,
            queue_id,
            Bytes::from(props.encode()),
            store_host,
        )
    })
}

/// The committed real message (sysFlag COMMIT, pointing at the half).
pub fn committed(
    rec: &StoredRecord,
    store_host: std::net::SocketAddr,
) -> Result<MessageInput, NotAHalf> {
    let mut msg = restored(rec, store_host)?;
    msg.sys_flag |= sys_flag::TRANSACTION_COMMIT;
    Ok(msg)
}

/// The check-back body: the half with its real topic and queue restored,
/// encoded as a stored record at the half's own offsets.
pub fn check_body(
    rec: &StoredRecord,
    store_host: std::net::SocketAddr,
) -> Result<Vec<u8>, NotAHalf> {
    let mut msg = restored(rec, store_host)?;
    msg.store_host = rec.store_host;
    // Keep the check count visible to the producer, as RocketMQ does.
    let mut props = Properties::parse(&msg.properties).map_err(bad)?;
    if let Some(n) = Properties::parse(strip_seal(&rec.properties))
        .ok()
        .and_then(|p| p.get(keys::TRANSACTION_CHECK_TIMES).map(str::to_owned))
    {
        props
            .insert(keys::TRANSACTION_CHECK_TIMES, &n)
            .map_err(bad)?;
    }
    msg.properties = Bytes::from(props.encode());
    let stamp = sluice_core::message::RecordStamp {
        queue_offset: rec.queue_offset,
        phys_offset: rec.phys_offset,
        store_timestamp_ms: rec.store_timestamp_ms,
    };
    msg.encode_to_vec(&stamp).map_err(bad)
}

/// The op record resolving `origin`.
pub fn op_record(
    origin: u64,
    outcome: Outcome,
    store_host: std::net::SocketAddr,
    now_ms: i64,
) -> MessageInput {
    let mut props = Properties::new();
    // Fixed keys and short values: inserting cannot exceed any limit.
    let _ = props.insert(keys::TAGS, OP_TAG);
    let _ = props.insert(OUTCOME, outcome.as_str());
    MessageInput {
        topic: OP_HALF_TOPIC.to_owned(),
        queue_id: 0,
        flag: 0,
        sys_flag: 0,
        born_timestamp_ms: now_ms,
        born_host: store_host,
        store_host,
        reconsume_times: 0,
        prepared_transaction_offset: 0,
        body: Bytes::from(origin.to_string().into_bytes()),
        properties: Bytes::from(props.encode()),
    }
}

/// A copy of the half at the tail of the half queue, one check further,
/// linked to its origin.
pub fn recheck_copy(
    rec: &StoredRecord,
    origin: u64,
    check_times: u32,
    store_host: std::net::SocketAddr,
) -> Result<MessageInput, NotAHalf> {
    let mut props = Properties::parse(strip_seal(&rec.properties)).map_err(bad)?;
    props
        .insert(keys::TRANSACTION_CHECK_TIMES, &check_times.to_string())
        .map_err(bad)?;
    props
        .insert(ORIGIN_QUEUE_OFFSET, &origin.to_string())
        .map_err(bad)?;
    Ok(MessageInput {
        sys_flag: rec.sys_flag & !sys_flag::TRANSACTION_MASK,
        ..MessageInput::from_stored(
            rec,
            HALF_TOPIC.to_owned(),
            0,
            Bytes::from(props.encode()),
            store_host,
        )
    })
}

/// The half as parked in [`CHECK_MAX_TOPIC`] (its properties kept, so an
/// operator sees its real topic and check count).
pub fn parked(
    rec: &StoredRecord,
    store_host: std::net::SocketAddr,
) -> Result<MessageInput, NotAHalf> {
    let mut msg = recheck_copy(rec, 0, 0, store_host)?;
    CHECK_MAX_TOPIC.clone_into(&mut msg.topic);
    msg.properties = Bytes::copy_from_slice(strip_seal(&rec.properties));
    Ok(msg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::message::RecordStamp;

    fn stored(msg: &MessageInput, queue_offset: i64, phys: i64) -> StoredRecord {
        let raw = msg
            .encode_to_vec(&RecordStamp {
                queue_offset,
                phys_offset: phys,
                store_timestamp_ms: 7,
            })
            .expect("encodes");
        StoredRecord::decode(&Bytes::from(raw)).expect("decodes")
    }

    fn prepared() -> MessageInput {
        let mut props = Properties::new();
        props.insert(keys::UNIQ_KEY, "U1").expect("fits");
        props.insert(keys::DELAY, "3").expect("fits");
        MessageInput {
            topic: "Orders".to_owned(),
            queue_id: 2,
            flag: 0,
            sys_flag: sys_flag::TRANSACTION_PREPARED,
            born_timestamp_ms: 1,
            born_host: "127.0.0.1:5".parse().expect("addr"),
            store_host: "127.0.0.1:6".parse().expect("addr"),
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body: Bytes::from_static(b"b"),
            properties: Bytes::from(props.encode()),
        }
    }

    #[test]
    fn a_half_round_trips_to_the_committed_real_message() {
        let mut msg = prepared();
        assert!(is_half_send(&msg));
        into_half(&mut msg, "pg").expect("half");
        assert_eq!((msg.topic.as_str(), msg.queue_id), (HALF_TOPIC, 0));
        assert_eq!(msg.sys_flag & sys_flag::TRANSACTION_MASK, 0);
        let rec = stored(&msg, 4, 900);
        let copy = half_copy(&rec).expect("a half");
        assert_eq!(
            (copy.origin, copy.queue_offset, copy.group.as_str()),
            (4, 4, "pg")
        );
        let host = "127.0.0.1:6".parse().expect("addr");
        let again = stored(&recheck_copy(&rec, 4, 1, host).expect("copy"), 9, 1_900);
        let c2 = half_copy(&again).expect("a half");
        assert_eq!((c2.origin, c2.queue_offset, c2.check_times), (4, 9, 1));
        let real = committed(&again, host).expect("commit");
        assert_eq!((real.topic.as_str(), real.queue_id), ("Orders", 2));
        assert_eq!(
            real.sys_flag & sys_flag::TRANSACTION_MASK,
            sys_flag::TRANSACTION_COMMIT
        );
        assert_eq!(real.prepared_transaction_offset, 1_900);
        let props = Properties::parse(&real.properties).expect("props");
        assert_eq!(props.uniq_key(), Some("U1"));
        for gone in [
            keys::REAL_TOPIC,
            keys::REAL_QID,
            keys::TRANSACTION_CHECK_TIMES,
            ORIGIN_QUEUE_OFFSET,
            keys::DELAY,
        ] {
            assert!(props.get(gone).is_none(), "{gone} must be stripped");
        }
    }

    #[test]
    fn an_op_record_names_its_origin_and_outcome() {
        let host = "127.0.0.1:6".parse().expect("addr");
        let rec = stored(&op_record(42, Outcome::Rollback, host, 1), 0, 0);
        assert_eq!(op_entry(&rec), Some((42, Outcome::Rollback)));
        assert!(half_copy(&rec).is_err());
    }
}
