//! `SendMessage` and `EndTransaction`: each v2 message becomes the
//! `SEND_MESSAGE_V2` a 4.x producer would send (one queue chosen here: a
//! message group by Guava's consistent hash of its Java hash, as Apache's
//! proxy does, else round robin), run through the broker's send handler.
//! A transactional send's id names its half (`<offset msg id>-<half queue
//! offset>`), so `EndTransaction` can build the 4.x `END_TRANSACTION`.

use std::sync::atomic::{AtomicU64, Ordering};

use sluice_core::disk::Disk;
use sluice_core::message::{decode_offset_msg_id, java_string_hash};
use sluice_core::Clock;
use sluice_net::header::{
    EndTransactionRequestHeader, SendMessageResponseHeader, TRANSACTION_COMMIT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
};
use sluice_net::remoting::{request_code as rc, response_code};
use sluice_net::{RemotingCommand, Transport};

use super::proto::{self, Code, MessageType, TransactionResolution, TransactionSource};
use super::session::Session;
use super::{auth, convert, ok, status, Caller, Messaging};

/// Round-robin turn for sends without a message group.
static TURN: AtomicU64 = AtomicU64::new(0);

/// Guava's `Hashing.consistentHash(input, buckets)`: the bucket of `input`
/// among `buckets`, moving as few inputs as possible when buckets change.
pub(super) fn consistent_hash(input: i64, buckets: i32) -> i32 {
    let mut state = input;
    let mut candidate: i32 = 0;
    loop {
        state = state
            .wrapping_mul(2_862_933_555_777_941_757)
            .wrapping_add(1);
        let high = i32::try_from(u64::from_ne_bytes(state.to_ne_bytes()) >> 33).unwrap_or(i32::MAX);
        let drawn = f64::from(high + 1) / f64::from(1u32 << 31);
        #[allow(clippy::cast_possible_truncation)]
        let next = (f64::from(candidate + 1) / drawn) as i64;
        if next >= 0 && next < i64::from(buckets) {
            candidate = i32::try_from(next).unwrap_or(0);
        } else {
            return candidate;
        }
    }
}

/// The 5.x code of a 4.x send answer.
fn code_of(response: i32) -> Code {
    match response {
        response_code::SUCCESS => Code::Ok,
        response_code::FLUSH_DISK_TIMEOUT => Code::MasterPersistenceTimeout,
        response_code::FLUSH_SLAVE_TIMEOUT => Code::SlavePersistenceTimeout,
        response_code::SLAVE_NOT_AVAILABLE => Code::HaNotAvailable,
        response_code::MESSAGE_ILLEGAL => Code::BadRequest,
        response_code::NO_PERMISSION => Code::Forbidden,
        response_code::TOPIC_NOT_EXIST => Code::TopicNotFound,
        response_code::SYSTEM_BUSY => Code::TooManyRequests,
        _ => Code::InternalServerError,
    }
}

/// The queue a message goes to on this broker.
fn queue_for<D: Disk, C: Clock, T: Transport>(m: &Messaging<D, C, T>, msg: &proto::Message) -> i32 {
    let topic = msg.topic.as_ref().map_or("", |t| t.name.as_str());
    let queues = m
        .broker
        .topics()
        .get(topic)
        .map_or(m.broker.config().default_topic_queues, |t| {
            t.write_queue_nums
        })
        .max(1);
    let group = msg
        .system_properties
        .as_ref()
        .and_then(|sp| sp.message_group.as_deref())
        .filter(|g| !g.is_empty());
    match group {
        Some(g) => consistent_hash(i64::from(java_string_hash(g)), queues),
        None => {
            i32::try_from(TURN.fetch_add(1, Ordering::Relaxed) % u64::from(queues.unsigned_abs()))
                .unwrap_or(0)
        }
    }
}

/// Stores one message; its result entry.
async fn send_one<D: Disk, C: Clock, T: Transport>(
    m: &Messaging<D, C, T>,
    session: &Session,
    caller: &Caller,
    msg: &proto::Message,
) -> proto::SendResultEntry {
    let message_id = msg
        .system_properties
        .as_ref()
        .map(|sp| sp.message_id.clone())
        .unwrap_or_default();
    let failed = |s: proto::Status| proto::SendResultEntry {
        status: Some(s),
        message_id: message_id.clone(),
        ..Default::default()
    };
    let cmd = match convert::send_command(msg, queue_for(m, msg), m.broker.now_ms()) {
        Ok(cmd) => cmd,
        Err(s) => return failed(s),
    };
    if let Err(remark) = auth::permit(&m.broker, caller, &cmd) {
        return failed(status(Code::Forbidden, remark));
    }
    let answer = m.sessions.invoke(session, &cmd).await;
    if answer.code != response_code::SUCCESS {
        let remark = answer.remark.unwrap_or_default();
        return failed(status(code_of(answer.code), remark));
    }
    let Ok(h) = answer.header::<SendMessageResponseHeader>() else {
        return failed(status(
            Code::InternalServerError,
            "send answer has no header",
        ));
    };
    let transactional = msg
        .system_properties
        .as_ref()
        .is_some_and(|sp| sp.message_type == MessageType::Transaction as i32);
    proto::SendResultEntry {
        status: Some(ok()),
        message_id: message_id.clone(),
        transaction_id: if transactional {
            format!("{}-{}", h.msg_id, h.queue_offset)
        } else {
            String::new()
        },
        offset: h.queue_offset,
        recall_handle: String::new(),
    }
}

/// `SendMessage`: one entry per message; the top status is the entries'
/// one code, or `MULTIPLE_RESULTS`.
pub(super) async fn send<D: Disk, C: Clock, T: Transport>(
    m: &Messaging<D, C, T>,
    session: &Session,
    caller: &Caller,
    request: proto::SendMessageRequest,
) -> proto::SendMessageResponse {
    if request.messages.is_empty() {
        return proto::SendMessageResponse {
            status: Some(status(Code::BadRequest, "no message to send")),
            entries: Vec::new(),
        };
    }
    let mut entries = Vec::with_capacity(request.messages.len());
    for msg in &request.messages {
        entries.push(send_one(m, session, caller, msg).await);
    }
    let mut codes: Vec<i32> = entries
        .iter()
        .map(|e| e.status.as_ref().map_or(0, |s| s.code))
        .collect();
    codes.dedup();
    let top = match (codes.len(), entries.first().and_then(|e| e.status.clone())) {
        (1, Some(s)) => s,
        _ => status(Code::MultipleResults, "the messages had different results"),
    };
    proto::SendMessageResponse {
        status: Some(top),
        entries,
    }
}

/// `EndTransaction`: commit or roll back the half the transaction id
/// names, as its producer (the topic is a 5.x producer's group).
pub(super) async fn end_transaction<D: Disk, C: Clock, T: Transport>(
    m: &Messaging<D, C, T>,
    session: &Session,
    caller: &Caller,
    request: &proto::EndTransactionRequest,
) -> proto::Status {
    let Some((msg_id, half_offset)) = request.transaction_id.rsplit_once('-') else {
        return status(
            Code::InvalidTransactionId,
            "transaction id is not one this broker issued",
        );
    };
    let (Ok((_, commit_log_offset)), Ok(tran_state_table_offset)) =
        (decode_offset_msg_id(msg_id), half_offset.parse::<i64>())
    else {
        return status(
            Code::InvalidTransactionId,
            "transaction id is not one this broker issued",
        );
    };
    let commit_or_rollback = match TransactionResolution::try_from(request.resolution) {
        Ok(TransactionResolution::Commit) => TRANSACTION_COMMIT_TYPE,
        Ok(TransactionResolution::Rollback) => TRANSACTION_ROLLBACK_TYPE,
        _ => return status(Code::BadRequest, "resolution must be COMMIT or ROLLBACK"),
    };
    let topic = request
        .topic
        .as_ref()
        .map(|t| t.name.clone())
        .unwrap_or_default();
    let header = EndTransactionRequestHeader {
        producer_group: topic,
        tran_state_table_offset,
        commit_log_offset,
        commit_or_rollback,
        from_transaction_check: Some(request.source == TransactionSource::SourceServerCheck as i32),
        msg_id: msg_id.to_owned(),
        transaction_id: Some(request.message_id.clone()),
    };
    let cmd = RemotingCommand::request_with_header(rc::END_TRANSACTION, &header);
    if let Err(remark) = auth::permit(&m.broker, caller, &cmd) {
        return status(Code::Forbidden, remark);
    }
    let answer = m.sessions.invoke(session, &cmd).await;
    if answer.code == response_code::SUCCESS {
        ok()
    } else {
        status(
            code_of(answer.code),
            answer
                .remark
                .unwrap_or_else(|| format!("end transaction refused ({})", answer.code)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consistent_hash_stays_in_range_and_moves_inputs_only_to_a_new_bucket() {
        assert_eq!(consistent_hash(0, 1), 0);
        for buckets in 1..50 {
            for input in [-7_i64, 0, 1, 42, 1_000_003, i64::from(i32::MIN)] {
                let b = consistent_hash(input, buckets);
                assert!((0..buckets).contains(&b), "{input} in {buckets}: {b}");
            }
        }
        // Growing the buckets moves an input only to the new bucket.
        for input in 0..200_i64 {
            let before = consistent_hash(input, 10);
            let after = consistent_hash(input, 11);
            assert!(
                after == before || after == 10,
                "{input}: {before} -> {after}"
            );
        }
    }
}
