//! The master's side of replication: handshakes (the master computes the
//! replica's divergence point itself), fetches (acknowledgements counted
//! only up to verified bytes, then a long-polled read of whole log units),
//! metadata copies, and the duty that keeps the in-sync set and the
//! consumer-visibility gate up to date.

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use sluice_core::disk::Disk;
use sluice_core::{Clock, CommitLogOffset};
use sluice_net::remoting::response_code;
use sluice_net::rpc::HandlerFuture;
use sluice_net::{Handler, RemotingCommand, RequestContext};

use super::epochs::divergence_point;
use super::protocol::{
    json_body, parse_body, Fetch, Handshake, HandshakeReply, Metadata, FIELD_AT, FIELD_CONFIRMED,
    FIELD_EPOCH, HA_FETCH, HA_HANDSHAKE, HA_METADATA, HA_RESTART,
};
use super::{Replication, ReplicationMode, Role, Session};
use crate::broker::response::fail;
use crate::broker::Broker;
use crate::peer_auth::Gate;

/// Serves the HA port.
pub(crate) struct HaHandler<D: Disk, C: Clock> {
    broker: Arc<Broker<D, C>>,
    /// With a group secret: the gate that knows which replica proved
    /// itself on each connection (the `Guard` in front lets only proven
    /// connections through).
    gate: Option<Arc<Gate<C>>>,
}

/// The HA port's handler for `broker`, behind `gate` when there is one.
pub(crate) fn handler<D: Disk, C: Clock>(
    broker: Arc<Broker<D, C>>,
    gate: Option<Arc<Gate<C>>>,
) -> HaHandler<D, C> {
    HaHandler { broker, gate }
}

/// The replica a handshake or fetch speaks for.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Speaker {
    replica_id: u64,
}

impl<D: Disk, C: Clock> HaHandler<D, C> {
    /// With a group secret: refuses a handshake or fetch that speaks for
    /// another replica than the one proven on this connection.
    fn check_speaker(
        &self,
        ctx: &RequestContext,
        request: &RemotingCommand,
    ) -> Option<RemotingCommand> {
        let gate = self.gate.as_ref()?;
        if !matches!(request.code, HA_HANDSHAKE | HA_FETCH) {
            return None;
        }
        let proven = gate.identity(ctx.connection.id());
        let speaker = serde_json::from_slice::<Speaker>(&request.body).ok();
        let claimed = speaker.map(|s| super::port::identity(s.replica_id));
        if proven.is_some() && proven == claimed {
            None
        } else {
            Some(gate.refuse(
                ctx,
                request.code,
                "speaks for another replica than it proved",
            ))
        }
    }
}

impl<D: Disk, C: Clock> Handler for HaHandler<D, C> {
    fn handle(&self, ctx: RequestContext, request: RemotingCommand) -> HandlerFuture {
        let b = Arc::clone(&self.broker);
        let refused = self.check_speaker(&ctx, &request);
        Box::pin(async move {
            if let Some(refused) = refused {
                return Some(refused);
            }
            let Some(ha) = b.replication() else {
                return Some(fail(
                    response_code::SYSTEM_ERROR,
                    "[sluice] replication is off",
                ));
            };
            let response = match request.code {
                HA_HANDSHAKE => handshake(&b, ha, &request),
                HA_FETCH => fetch(&b, ha, &request).await,
                HA_METADATA => metadata(&b),
                code => fail(
                    response_code::REQUEST_CODE_NOT_SUPPORTED,
                    format!("[sluice] HA port: request code {code} not supported"),
                ),
            };
            Some(response)
        })
    }
}

fn handshake<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    ha: &Replication,
    req: &RemotingCommand,
) -> RemotingCommand {
    let hs: Handshake = match parse_body(req) {
        Ok(h) => h,
        Err(e) => return fail(response_code::SYSTEM_ERROR, e),
    };
    if hs.group != b.config().broker_name {
        return fail(
            response_code::NO_PERMISSION,
            format!(
                "[sluice] replica of group {} at the master of {}",
                hs.group,
                b.config().broker_name
            ),
        );
    }
    if hs.replica_id == ha.me() {
        return fail(
            response_code::NO_PERMISSION,
            format!(
                "[sluice] replica id {} is the master's own id",
                hs.replica_id
            ),
        );
    }
    let segment_bytes = b.store().config().commit_log_segment_bytes;
    if hs.segment_bytes != segment_bytes {
        return fail(
            response_code::SYSTEM_ERROR,
            format!(
                "[sluice] replica segment size {} differs from the master's {segment_bytes}",
                hs.segment_bytes
            ),
        );
    }
    let now = b.clock().monotonic();
    let written = b.store().commit_log().written().get();
    let mut st = ha.lock();
    let Role::Master { epoch } = st.role else {
        return fail(HA_RESTART, "[sluice] not the master");
    };
    let point = if ha.trusts_claimed_offset() {
        // The mutant: believe the replica's own account of its log.
        Some(hs.end)
    } else {
        divergence_point(&hs.epochs, hs.end, &st.epochs, written)
    };
    let Some(truncate_to) = point else {
        return fail(
            response_code::SYSTEM_ERROR,
            format!(
                "[sluice] replica {} shares no epoch with the master; wipe its store to rejoin",
                hs.replica_id
            ),
        );
    };
    let log_min = b.store().commit_log().min_offset().get();
    if truncate_to < log_min && !ha.trusts_claimed_offset() {
        return fail(
            response_code::SYSTEM_ERROR,
            format!(
                "[sluice] replica {} needs the log from {truncate_to}, but retention removed \
                 everything below {log_min}: seed it with a copy of the master's store",
                hs.replica_id
            ),
        );
    }
    let id = ha.next_session_id();
    st.sessions.insert(
        hs.replica_id,
        Session {
            id,
            epoch,
            verified: CommitLogOffset::new(truncate_to),
            acked: if ha.trusts_claimed_offset() {
                CommitLogOffset::new(hs.end)
            } else {
                CommitLogOffset::default()
            },
            caught_up_target: CommitLogOffset::UNGATED,
            last_seen: now,
            caught_up_at: now,
            confirmed_sent: CommitLogOffset::default(),
        },
    );
    tracing::info!(
        replica = hs.replica_id,
        session = id,
        epoch,
        truncate_to,
        replica_end = hs.end,
        "replica joined"
    );
    let reply = HandshakeReply {
        session: id,
        epoch,
        epochs: st.epochs.clone(),
        truncate_to,
    };
    RemotingCommand::success().with_body(json_body(&reply))
}

/// The most bytes one fetch answer carries.
fn fetch_limit(ha: &Replication) -> usize {
    if sluice_core::buggify!() {
        // A legal rare path: one log unit per fetch, so replicas see the
        // stream in its smallest pieces.
        1
    } else {
        ha.config().fetch_bytes_max
    }
}

/// Records what a fetch says the replica holds, for its live session at
/// the master's epoch; the master's epoch, or the answer that restarts it.
fn record_ack(ha: &Replication, f: &Fetch, now: Duration) -> Result<u32, RemotingCommand> {
    let from = CommitLogOffset::new(f.from);
    let held = CommitLogOffset::new(f.held);
    let mut st = ha.lock();
    let Role::Master { epoch } = st.role else {
        return Err(fail(HA_RESTART, "[sluice] not the master"));
    };
    if f.epoch != epoch {
        return Err(fail(
            HA_RESTART,
            format!("[sluice] the master's epoch is {epoch}"),
        ));
    }
    let Some(s) = st
        .sessions
        .get_mut(&f.replica_id)
        .filter(|s| s.id == f.session && s.epoch == epoch)
    else {
        return Err(fail(HA_RESTART, "[sluice] unknown replication session"));
    };
    if from > s.verified && !ha.trusts_claimed_offset() {
        st.sessions.remove(&f.replica_id);
        return Err(fail(
            HA_RESTART,
            "[sluice] replica reports bytes this session never sent",
        ));
    }
    s.acked = s.acked.max(held.min(from));
    s.last_seen = now;
    if s.acked >= s.caught_up_target {
        s.caught_up_at = now;
    }
    Ok(epoch)
}

async fn fetch<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    ha: &Replication,
    req: &RemotingCommand,
) -> RemotingCommand {
    let f: Fetch = match parse_body(req) {
        Ok(f) => f,
        Err(e) => return fail(response_code::SYSTEM_ERROR, e),
    };
    let now = b.clock().monotonic();
    // The wire's numbers, as log positions.
    let from = CommitLogOffset::new(f.from);
    let epoch = match record_ack(ha, &f, now) {
        Ok(epoch) => epoch,
        Err(refused) => return refused,
    };
    publish(b, ha);
    let log = b.store().commit_log();
    let sync = ha.config().mode == ReplicationMode::Sync;
    // A moved gate is news for the replica's readers: answer at once.
    let gate_moved = sync && {
        let st = ha.lock();
        let confirmed = Replication::confirmed_locked(&st);
        st.sessions
            .get(&f.replica_id)
            .is_some_and(|s| confirmed != s.confirmed_sent)
    };
    if log.written() <= from && !gate_moved {
        let mut rx = ha.written_rx();
        let wait = async {
            while log.written() <= from {
                if rx.changed().await.is_err() {
                    return;
                }
            }
        };
        let _ = tokio::time::timeout(Duration::from_millis(ha.config().fetch_wait_ms), wait).await;
    }
    let written = log.written();
    let bytes = match log.read_units(from, fetch_limit(ha)) {
        Ok(bytes) => bytes,
        Err(e) => {
            return fail(
                HA_RESTART,
                format!("[sluice] cannot read from {}: {e}", f.from),
            )
        }
    };
    let end = from.plus(bytes.len() as u64);
    let gate = {
        let mut st = ha.lock();
        let confirmed = Replication::confirmed_locked(&st);
        let gate = if sync {
            confirmed
        } else {
            CommitLogOffset::UNGATED
        };
        if let Some(s) = st
            .sessions
            .get_mut(&f.replica_id)
            .filter(|s| s.id == f.session)
        {
            s.verified = s.verified.max(end);
            if end >= written {
                s.caught_up_target = end;
            }
            s.confirmed_sent = gate;
        }
        gate
    };
    let mut out = RemotingCommand::success().with_body(bytes);
    out.ext_fields.insert(FIELD_EPOCH, epoch.to_string());
    out.ext_fields.insert(FIELD_AT, f.from.to_string());
    out.ext_fields
        .insert(FIELD_CONFIRMED, gate.get().to_string());
    out
}

fn metadata<D: Disk, C: Clock>(b: &Broker<D, C>) -> RemotingCommand {
    let body = Metadata {
        topics: String::from_utf8_lossy(&b.topics().to_json()).into_owned(),
        offsets: String::from_utf8_lossy(&b.offsets().to_json()).into_owned(),
        groups: serde_json::to_string(&b.subscription_groups().snapshot()).unwrap_or_default(),
        delay: String::from_utf8_lossy(&b.delay_progress().to_json()).into_owned(),
        timer: String::from_utf8_lossy(&b.timers().persisted_json()).into_owned(),
    };
    RemotingCommand::success().with_body(json_body(&body))
}

/// Moves the consumer-visibility gate (SYNC mode) and wakes SYNC sends.
pub(crate) fn publish<D: Disk, C: Clock>(b: &Broker<D, C>, ha: &Replication) {
    if ha.config().mode == ReplicationMode::Sync {
        let confirmed = Replication::confirmed_locked(&ha.lock());
        b.store().set_confirmed(confirmed);
    }
    ha.bump_acks();
}

/// The master's periodic duty with fixed roles: drops silent sessions,
/// adds caught-up replicas to the in-sync set and removes those that
/// stopped keeping up.
pub(crate) async fn maintain<D: Disk, C: Clock>(b: Arc<Broker<D, C>>) {
    let Some(ha) = b.replication() else {
        return;
    };
    let period = Duration::from_millis((ha.config().fetch_wait_ms / 4).clamp(20, 500));
    loop {
        tokio::time::sleep(period).await;
        let plan = plan_in_sync(&b, ha);
        let mut changed = plan.sessions_dropped;
        {
            let mut st = ha.lock();
            for id in &plan.leaving {
                tracing::warn!(replica = id, "replica leaves the in-sync set");
                changed |= st.in_sync.remove(id);
            }
            for id in &plan.joining {
                tracing::info!(replica = id, "replica joins the in-sync set");
                changed |= st.in_sync.insert(*id);
            }
        }
        if changed {
            publish(&b, ha);
        }
    }
}

/// What one review of the in-sync set found.
#[derive(Debug, Default)]
pub(crate) struct InSyncPlan {
    /// Silent sessions were dropped.
    pub(crate) sessions_dropped: bool,
    /// Caught-up replicas that hold everything confirmed: they may join.
    pub(crate) joining: Vec<u64>,
    /// In-sync replicas without a session, or not caught up for too long.
    pub(crate) leaving: Vec<u64>,
}

/// Reviews the sessions and the in-sync set (dropping silent sessions);
/// the caller applies the plan — at once with fixed roles, through the
/// controller otherwise (joins locally first, leaves only once approved, so
/// the local set always contains the controller's).
pub(crate) fn plan_in_sync<D: Disk, C: Clock>(b: &Broker<D, C>, ha: &Replication) -> InSyncPlan {
    let now = b.clock().monotonic();
    let held = b.store().held_offset();
    let idle = Duration::from_millis(ha.config().session_idle_ms);
    let lag_limit = Duration::from_millis(ha.config().not_caught_up_ms);
    let mut st = ha.lock();
    if !matches!(st.role, Role::Master { .. }) {
        return InSyncPlan::default();
    }
    let before = st.sessions.len();
    st.sessions
        .retain(|_, s| now.saturating_sub(s.last_seen) <= idle);
    let leaving = st
        .in_sync
        .iter()
        .copied()
        .filter(|id| {
            st.sessions
                .get(id)
                .is_none_or(|s| now.saturating_sub(s.caught_up_at) > lag_limit)
        })
        .collect();
    // Joining: caught up, and holding everything already confirmed — so
    // every message acknowledged so far is on it.
    let confirmed = Replication::confirmed_locked(&st).min(held);
    let joining = st
        .sessions
        .iter()
        .filter(|(id, s)| {
            !st.in_sync.contains(id) && s.acked >= confirmed && s.acked >= s.caught_up_target
        })
        .map(|(id, _)| *id)
        .collect();
    InSyncPlan {
        sessions_dropped: st.sessions.len() != before,
        joining,
        leaving,
    }
}
