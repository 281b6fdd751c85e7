//! `END_TRANSACTION`: commits (the real message and its op record, in one
//! append) or rolls back (an op record) the transaction of the named half,
//! exactly once. The named half must exist at `commitLogOffset`, sit at
//! `tranStateTableOffset` of the half queue and belong to
//! `producerGroup`. A duplicate or late END (naming any copy of the half)
//! stores nothing; a contradicting one is refused with a remark. A two-way
//! request is answered only once the outcome is stored with the requested
//! durability and replicated, like a send.

use std::time::Duration;

use sluice_core::disk::Disk;
use sluice_core::message::StoredRecord;
use sluice_core::{Clock, CommitLogOffset};
use sluice_net::header::{
    EndTransactionRequestHeader, TRANSACTION_COMMIT_TYPE, TRANSACTION_NOT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
};
use sluice_net::remoting::response_code;
use sluice_net::{RemotingCommand, RequestContext};

use super::send::replicated;
use crate::broker::transaction::records::{self, CHECK_MAX_TOPIC};
use crate::broker::transaction::{Claim, Outcome, TxState};
use crate::broker::Broker;
use crate::dispatch::{Refusal, Reply};

/// Longest an END waits for another END (or a check) holding its
/// transaction.
const CLAIM_WAIT_MS_MAX: u64 = 5_000;
const CLAIM_POLL_MS: u64 = 5;

pub(super) async fn handle<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    _: &RequestContext,
    req: &RemotingCommand,
) -> Reply {
    let h: EndTransactionRequestHeader = req.header()?;
    let Some(outcome) = requested_outcome(&h)? else {
        // Unknown: nothing to do; the check-back asks again later.
        return Ok(RemotingCommand::success());
    };
    if !b.is_writer() {
        return Err(Refusal::new(
            response_code::SERVICE_NOT_AVAILABLE,
            "[sluice] this broker is not the master of its group; end the transaction at the master",
        ));
    }
    let rec = named_half(b, &h).await.map_err(Refusal::system_error)?;
    let origin = records::half_copy(&rec)
        .map_err(|e| Refusal::system_error(format!("[sluice] {}", e.0)))?
        .origin;
    if let Some(state) = claim(b, origin).await? {
        return not_open(b, state, outcome).await;
    }
    let host = b.store_host();
    if b.commit_already_stored(&rec, origin) {
        // A crash lost the op record after the commit: restore the op
        // record only, then answer as for any later END.
        let op = records::op_record(origin, Outcome::Commit, host, b.now_ms());
        let stored = b.store().put(op, true).await;
        b.transactions()
            .release(origin, stored.is_ok().then_some(Outcome::Commit));
        stored?;
        return not_open(b, TxState::Resolved(Outcome::Commit), outcome).await;
    }
    let op = records::op_record(origin, outcome, host, b.now_ms());
    let stored = match outcome {
        Outcome::Commit => match records::committed(&rec, host) {
            // One append: a crash keeps both, the commit alone, or neither.
            Ok(real) => b.store().put_batch(vec![real, op], true).await.map(|a| {
                a.last().map_or(
                    CommitLogOffset::default(),
                    sluice_core::commit_log::Appended::end,
                )
            }),
            Err(e) => {
                b.transactions().release(origin, None);
                return Err(Refusal::system_error(format!("[sluice] {}", e.0)));
            }
        },
        _ => b.store().put(op, true).await.map(|a| a.end()),
    };
    b.transactions()
        .release(origin, stored.is_ok().then_some(outcome));
    Ok(replicated(b, stored?, true, RemotingCommand::success()).await)
}

/// The outcome the header asks for; `None` for "unknown".
fn requested_outcome(h: &EndTransactionRequestHeader) -> Result<Option<Outcome>, Refusal> {
    match h.commit_or_rollback {
        TRANSACTION_COMMIT_TYPE => Ok(Some(Outcome::Commit)),
        TRANSACTION_ROLLBACK_TYPE => Ok(Some(Outcome::Rollback)),
        TRANSACTION_NOT_TYPE => Ok(None),
        other => Err(Refusal::system_error(format!(
            "[sluice] commitOrRollback {other} is not 0 (unknown), 8 (commit) or 12 (rollback)"
        ))),
    }
}

/// Claims the transaction (waiting, bounded, while another END or a check
/// holds it): `None` once claimed, or the state of one no longer open.
async fn claim<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    origin: u64,
) -> Result<Option<TxState>, Refusal> {
    let mut waited_ms = 0;
    loop {
        match b.transactions().claim(b.store(), origin) {
            Claim::Granted(_) => return Ok(None),
            Claim::Busy if waited_ms < CLAIM_WAIT_MS_MAX => {
                tokio::time::sleep(Duration::from_millis(CLAIM_POLL_MS)).await;
                waited_ms += CLAIM_POLL_MS;
            }
            Claim::Busy => {
                return Err(Refusal::new(
                    response_code::SYSTEM_BUSY,
                    "[sluice] the transaction is being resolved by another request; retry",
                ))
            }
            Claim::NotOpen(state) => return Ok(Some(state)),
        }
    }
}

/// The half the request names, checked against its header.
async fn named_half<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    h: &EndTransactionRequestHeader,
) -> Result<StoredRecord, String> {
    let at = CommitLogOffset::from_wire("commitLogOffset", h.commit_log_offset)
        .map_err(|e| format!("[sluice] {e}"))?;
    let mut raw = b.store().read_at(at).ok().flatten();
    let written = b.store().commit_log().written();
    if raw.is_none() && at < written {
        // Written but not visible yet: a copy the check task re-put with
        // WAIT=false, not yet flushed (SYNC flush) or not yet held by the
        // in-sync set (SYNC replication, whose gate hides it). A producer
        // answering the check can be faster than both; wait as a send
        // would (bounded by the replication timeout), then read again.
        let _ = b.store().flush().await;
        if let Some(ha) = b.replication() {
            let _ = ha.await_replicated(written, written).await;
        }
        raw = b.store().read_at(at).ok().flatten();
    }
    let not_found = || {
        format!(
            "[sluice] no half message at commitLogOffset {} (tranStateTableOffset {}, msgId {})",
            h.commit_log_offset, h.tran_state_table_offset, h.msg_id
        )
    };
    let rec = raw
        .as_ref()
        .and_then(|r| StoredRecord::decode(r).ok())
        .ok_or_else(not_found)?;
    let copy = records::half_copy(&rec).map_err(|e| {
        format!(
            "[sluice] the message at commitLogOffset {} is not a half message: {}",
            h.commit_log_offset, e.0
        )
    })?;
    if i64::try_from(copy.queue_offset).ok() != Some(h.tran_state_table_offset) {
        return Err(format!(
            "[sluice] tranStateTableOffset {} does not match the half at commitLogOffset {} (half-queue offset {})",
            h.tran_state_table_offset, h.commit_log_offset, copy.queue_offset
        ));
    }
    if copy.group != h.producer_group {
        return Err(format!(
            "[sluice] producer group {} does not own this half (its PGROUP is {})",
            h.producer_group, copy.group
        ));
    }
    Ok(rec)
}

/// The answer for a transaction that is no longer open.
async fn not_open<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    state: TxState,
    requested: Outcome,
) -> Reply {
    let refuse = |remark: String| Err(Refusal::new(response_code::TRANSACTION_FAILED, remark));
    match state {
        TxState::Resolved(done) if done == requested => {
            // A duplicate: the first END stored it; answer once it is
            // replicated as far as a send would be.
            let written = b.store().commit_log().written();
            let mut ok = RemotingCommand::success();
            ok.remark = Some(format!(
                "[sluice] already {}; nothing stored again",
                past(done)
            ));
            Ok(replicated(b, written, true, ok).await)
        }
        TxState::Resolved(Outcome::Parked) => refuse(format!(
            "[sluice] the half was parked in {CHECK_MAX_TOPIC} after too many unanswered checks; \
             {} refused",
            requested.as_str()
        )),
        TxState::Resolved(done) => refuse(format!(
            "[sluice] transaction already {}; {} refused",
            past(done),
            requested.as_str()
        )),
        TxState::ResolvedForgotten | TxState::Open(_) => refuse(format!(
            "[sluice] transaction already resolved long ago (outcome no longer remembered); {} refused, nothing stored",
            requested.as_str()
        )),
        TxState::Unknown => Err(Refusal::system_error(
            "[sluice] the half is not tracked yet; retry shortly",
        )),
    }
}

fn past(o: Outcome) -> &'static str {
    match o {
        Outcome::Commit => "committed",
        Outcome::Rollback => "rolled back",
        Outcome::Parked => "parked",
        Outcome::Unspecified => "resolved",
    }
}
