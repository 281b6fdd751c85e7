//! The transaction task: on every broker it keeps the tracker caught up
//! with the half and op queues and persists its snapshot; on the master it
//! also checks back halves open longer than `transaction_timeout_ms`
//! (re-put with one more check, then `CHECK_TRANSACTION_STATE` to one live
//! producer of the group) and parks those checked `transaction_check_max`
//! times.

use std::sync::Arc;
use std::time::Duration;

use sluice_core::disk::Disk;
use sluice_core::message::{offset_msg_id, StoredRecord};
use sluice_core::{Clock, CommitLogOffset};
use sluice_net::header::CheckTransactionStateRequestHeader;
use sluice_net::remoting::request_code;
use sluice_net::RemotingCommand;
use tokio::task::JoinHandle;

use super::records::{self, CHECK_MAX_TOPIC};
use super::{Claim, OpenHalf, Outcome};
use crate::broker::{Broker, PERM_READ};

/// Checks sent per pass (the rest wait for the next pass).
const CHECKS_PER_PASS_MAX: usize = 256;
/// How long sending one oneway check may take.
const CHECK_SEND_TIMEOUT_MS: u64 = 3_000;

/// Spawns the transaction task; it runs until aborted.
pub(crate) fn spawn<D: Disk, C: Clock>(broker: &Arc<Broker<D, C>>) -> JoinHandle<()> {
    tokio::spawn(run(Arc::clone(broker)))
}

async fn run<D: Disk, C: Clock>(b: Arc<Broker<D, C>>) {
    let interval_ms = b.config().transaction_check_interval_ms.max(10);
    loop {
        tokio::time::sleep(Duration::from_millis(interval_ms)).await;
        b.transactions().catch_up(b.store());
        if b.is_writer() {
            check_due(&b).await;
        }
        b.persist_transactions().await;
    }
}

async fn check_due<D: Disk, C: Clock>(b: &Broker<D, C>) {
    let now_ms = b.clock().wall_ms();
    let max = b.config().transaction_check_max;
    let interval_ms = b.config().transaction_check_interval_ms.max(10);
    // A legal rare path: halves are checked back before their timeout,
    // while their producer may still be about to end them.
    let horizon_ms = if sluice_core::buggify!() {
        now_ms.saturating_add(b.config().transaction_timeout_ms)
    } else {
        now_ms
    };
    for (origin, open) in b.transactions().due(horizon_ms, CHECKS_PER_PASS_MAX) {
        if open.check_times >= max {
            if let Err(e) = park(b, origin).await {
                tracing::warn!(error = %e, origin, "could not park a half; retrying next pass");
                return;
            }
            continue;
        }
        if let Err(e) = check_one(b, origin, now_ms.saturating_add(interval_ms)).await {
            tracing::warn!(error = %e, origin, "transaction check failed; retrying next pass");
            return;
        }
    }
}

/// Claims `origin` and reads its newest half; `Ok(None)` when it is no
/// longer open, claimed elsewhere, or its half is gone.
fn claim_half<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    origin: u64,
) -> Result<Option<(OpenHalf, StoredRecord)>, String> {
    let Claim::Granted(open) = b.transactions().claim(b.store(), origin) else {
        return Ok(None);
    };
    let raw = b
        .store()
        .read_at(CommitLogOffset::new(open.commit_log_offset))
        .map_err(|e| {
            b.transactions().release(origin, None);
            e.to_string()
        })?;
    if let Some(Ok(rec)) = raw.as_ref().map(StoredRecord::decode) {
        return Ok(Some((open, rec)));
    }
    tracing::warn!(
        origin,
        offset = open.commit_log_offset,
        "half message gone (retention?); dropped"
    );
    b.transactions().forget(origin);
    b.transactions().release(origin, None);
    Ok(None)
}

/// Re-puts the half one check further and asks a producer about it; with
/// no producer of the group connected, postpones it to `later_ms` (not
/// counted as a check).
async fn check_one<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    origin: u64,
    later_ms: u64,
) -> Result<(), String> {
    let Some((open, rec)) = claim_half(b, origin)? else {
        tracing::debug!(origin, "half not claimed for a check");
        return Ok(());
    };
    let host = b.store_host();
    if b.commit_already_stored(&rec, origin) {
        // Committed, but the op record was lost (a crash between the two):
        // write it instead of asking the producer again.
        let op = records::op_record(origin, Outcome::Commit, host, b.now_ms());
        let stored = b.store().put(op, true).await.map_err(|e| e.to_string());
        let outcome = stored.is_ok().then_some(Outcome::Commit);
        b.transactions().release(origin, outcome);
        tracing::warn!(
            origin,
            "committed half had no op record; op record restored"
        );
        return stored.map(|_| ());
    }
    // Successive checks of one half ask successive members of the group.
    let turn = origin.wrapping_add(u64::from(open.check_times));
    if b.clients().producer_connection(&open.group, turn).is_none() {
        tracing::debug!(origin, group = %open.group, "no producer of the group connected; check postponed");
        b.transactions().defer(origin, later_ms);
        b.transactions().release(origin, None);
        return Ok(());
    }
    let stored = match records::recheck_copy(&rec, origin, open.check_times + 1, host) {
        Ok(copy) => b.store().put(copy, false).await.map_err(|e| e.to_string()),
        Err(e) => Err(e.0),
    };
    let appended = match stored {
        Ok(a) => a,
        Err(e) => {
            b.transactions().release(origin, None);
            return Err(e);
        }
    };
    let copy = super::HalfCopy {
        origin,
        queue_offset: appended.queue_offset.get(),
        commit_log_offset: appended.phys_offset.get(),
        real_topic: open.real_topic.clone(),
        group: open.group.clone(),
        check_times: open.check_times + 1,
        store_ms: u64::try_from(appended.store_timestamp_ms).unwrap_or(0),
        immunity_ms: 0,
    };
    b.transactions().note_copy(&copy);
    b.transactions().release(origin, None);
    // The check names the new copy (what the store now holds for it).
    let mut shown = rec;
    shown.queue_offset = i64::try_from(copy.queue_offset).unwrap_or(i64::MAX);
    shown.phys_offset = i64::try_from(copy.commit_log_offset).unwrap_or(i64::MAX);
    shown.store_timestamp_ms = appended.store_timestamp_ms;
    let body = records::check_body(&shown, host).map_err(|e| e.0)?;
    let props = sluice_core::message::Properties::parse(sluice_core::message::strip_seal(
        &shown.properties,
    ))
    .unwrap_or_default();
    let header = CheckTransactionStateRequestHeader {
        // Apache 5.x names the stored half's topic (before restoring the
        // real one).
        topic: Some(shown.topic.clone()),
        tran_state_table_offset: shown.queue_offset,
        commit_log_offset: shown.phys_offset,
        msg_id: props.uniq_key().map(str::to_owned),
        transaction_id: records::transaction_id(&props),
        offset_msg_id: Some(offset_msg_id(host, shown.phys_offset)),
    };
    let mut cmd =
        RemotingCommand::request_with_header(request_code::CHECK_TRANSACTION_STATE, &header)
            .with_body(body);
    cmd.mark_oneway();
    if let Some(conn) = b.clients().producer_connection(&open.group, turn) {
        if let Err(e) = conn
            .invoke_oneway(cmd, Duration::from_millis(CHECK_SEND_TIMEOUT_MS))
            .await
        {
            tracing::debug!(error = %e, origin, "transaction check not delivered");
        }
    }
    tracing::debug!(origin, checks = copy.check_times, group = %open.group, "transaction checked");
    Ok(())
}

/// Moves a half checked too often to `TRANS_CHECK_MAX_TIME_TOPIC` and
/// resolves it as parked.
async fn park<D: Disk, C: Clock>(b: &Broker<D, C>, origin: u64) -> Result<(), String> {
    let Some((open, rec)) = claim_half(b, origin)? else {
        return Ok(());
    };
    let (_, created) = b.topics().ensure(CHECK_MAX_TOPIC, 1, PERM_READ, b.now_ms());
    if created {
        b.topics_updated().await;
    }
    let host = b.store_host();
    let stored = match records::parked(&rec, host) {
        Ok(parked) => {
            let op = records::op_record(origin, Outcome::Parked, host, b.now_ms());
            b.store()
                .put_batch(vec![parked, op], true)
                .await
                .map_err(|e| e.to_string())
        }
        Err(e) => Err(e.0),
    };
    match stored {
        Ok(_) => {
            b.transactions().release(origin, Some(Outcome::Parked));
            tracing::warn!(origin, checks = open.check_times, group = %open.group, topic = %open.real_topic,
                "transaction never resolved; half parked in {CHECK_MAX_TOPIC}");
            Ok(())
        }
        Err(e) => {
            b.transactions().release(origin, None);
            Err(e)
        }
    }
}
