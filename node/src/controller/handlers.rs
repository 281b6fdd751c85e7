//! Controller request handlers, one per request code, each of the one
//! shape `async fn(&Context, &RequestContext, &RemotingCommand) -> Reply`
//! (see `crate::dispatch`). Only the raft
//! leader answers brokers; others answer `NOT_LEADER` with the leader's
//! address. Writes answer after their command applied, or `NOT_APPLIED`.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use protobuf::Message as _;
use sluice_core::Clock;
use sluice_net::remoting::response_code;
use sluice_net::{RemotingCommand, RequestContext};
use tokio::sync::{mpsc, oneshot};

use super::api::{
    self, AlterInSync, BrokerHeartbeat, ClusterMetadata, GroupView, MemberView, PeerView,
};
use super::consensus::{lock, Input, ProposeError, SharedRef};
use super::state::{choose_renewed_master, Applied, Command, Member, Rejection};
use super::ControllerConfig;
use crate::dispatch::{route, Refusal, Reply, Route, Routes};

/// What every handler needs.
pub struct Context<C: Clock> {
    /// Identity, peers and timeouts.
    pub config: ControllerConfig,
    /// State shared with the driver.
    pub shared: SharedRef,
    /// The driver's input.
    pub inputs: mpsc::Sender<Input>,
    /// Liveness time.
    pub clock: C,
}

/// Routes the controller's codes to their handlers.
pub fn routes<C: Clock>(context: &Arc<Context<C>>) -> Routes<Context<C>> {
    let table: &[(i32, Route<Context<C>>)] = &[
        (api::RAFT_MESSAGE, route!(raft_message)),
        (api::BROKER_HEARTBEAT, route!(heartbeat)),
        (api::ALTER_IN_SYNC, route!(alter_in_sync)),
        (api::GET_METADATA, route!(metadata)),
    ];
    Routes::new("controller", Arc::clone(context), table)
}

/// A peer's raft message, sent oneway (the success answer is dropped).
async fn raft_message<C: Clock>(
    ctx: &Context<C>,
    _: &RequestContext,
    request: &RemotingCommand,
) -> Reply {
    match raft::eraftpb::Message::parse_from_bytes(&request.body) {
        // A full queue drops the message; raft resends.
        Ok(message) => drop(ctx.inputs.try_send(Input::Raft(Box::new(message)))),
        Err(error) => tracing::debug!(%error, "undecodable raft message dropped"),
    }
    Ok(RemotingCommand::success())
}

async fn heartbeat<C: Clock>(
    ctx: &Context<C>,
    _: &RequestContext,
    request: &RemotingCommand,
) -> Reply {
    let heartbeat = BrokerHeartbeat::from_request(request)
        .map_err(|reason| invalid(format!("BROKER_HEARTBEAT: {reason}")))?;
    let member = Member {
        broker_addr: heartbeat.broker_addr.clone(),
        ha_addr: heartbeat.ha_addr.clone(),
    };
    let (needs_join, was_master) = {
        let shared = lock(&ctx.shared);
        leading(ctx, &shared)?;
        let group = shared.state.groups.get(&heartbeat.group);
        (
            group.is_none_or(|group| {
                group.master.is_none() || group.members.get(&heartbeat.replica_id) != Some(&member)
            }),
            group.is_some_and(|g| g.master == Some(heartbeat.replica_id)),
        )
    };
    if needs_join {
        let join = Command::Join {
            group: heartbeat.group.clone(),
            replica_id: heartbeat.replica_id,
            member,
        };
        propose(ctx, join).await?;
    }
    let renew = {
        let mut shared = lock(&ctx.shared);
        leading(ctx, &shared)?;
        let now = ctx.clock.monotonic();
        shared.liveness.record(
            &heartbeat.group,
            heartbeat.replica_id,
            heartbeat.max_offset,
            now,
        );
        // Only a broker that was master before this heartbeat restarted as
        // one; the first member of a new group was just made master.
        if was_master {
            renewal(ctx, &shared, &heartbeat, now)?
        } else {
            None
        }
    };
    if let Some(command) = renew {
        tracing::info!(group = %heartbeat.group, master = heartbeat.replica_id, "master restarted; renewing the mastership at a new epoch");
        propose(ctx, command).await?;
    }
    let shared = lock(&ctx.shared);
    leading(ctx, &shared)?;
    match shared.state.groups.get(&heartbeat.group) {
        Some(group) => Ok(view_response(&group.view(&heartbeat.group))),
        None => Err(not_applied("the group is not known yet".into())),
    }
}

/// The renewal a restarted master's heartbeat calls for, if it is the
/// master: the in-sync replica with the most data takes a new epoch. Until
/// every in-sync member has heartbeated to this leader the heartbeat is
/// refused (the broker keeps saying it restarted, and takes no role): the
/// restarted master may have lost a tail only an unheard replica holds.
fn renewal<C: Clock>(
    ctx: &Context<C>,
    shared: &super::consensus::Shared,
    heartbeat: &BrokerHeartbeat,
    now: Duration,
) -> Result<Option<Command>, Refusal> {
    if !heartbeat.restarted {
        return Ok(None);
    }
    let Some(group) = shared.state.groups.get(&heartbeat.group) else {
        return Ok(None);
    };
    if group.master != Some(heartbeat.replica_id) {
        return Ok(None);
    }
    let timeout = Duration::from_millis(ctx.config.broker_timeout_ms);
    let alive = shared.liveness.alive(&heartbeat.group, now, timeout);
    match choose_renewed_master(group, &alive) {
        Ok(new_master) => Ok(Some(Command::Renew {
            group: heartbeat.group.clone(),
            master_epoch: group.master_epoch,
            new_master,
        })),
        Err(unheard) => Err(not_applied(format!(
            "the restarted master of {} waits for in-sync replicas {unheard:?} to report \
             their offsets before a new epoch",
            heartbeat.group
        ))),
    }
}

async fn alter_in_sync<C: Clock>(
    ctx: &Context<C>,
    _: &RequestContext,
    request: &RemotingCommand,
) -> Reply {
    let alter = AlterInSync::from_request(request)
        .map_err(|reason| invalid(format!("ALTER_IN_SYNC: {reason}")))?;
    leading(ctx, &lock(&ctx.shared))?;
    let command = Command::AlterInSync {
        group: alter.group.clone(),
        master_id: alter.master_id,
        master_epoch: alter.master_epoch,
        in_sync: alter.in_sync.iter().copied().collect::<BTreeSet<u64>>(),
    };
    propose(ctx, command).await?;
    let shared = lock(&ctx.shared);
    match shared.state.groups.get(&alter.group) {
        Some(group) => Ok(view_response(&group.view(&alter.group))),
        None => Err(not_applied("the group vanished".into())),
    }
}

async fn metadata<C: Clock>(ctx: &Context<C>, _: &RequestContext, _: &RemotingCommand) -> Reply {
    let shared = lock(&ctx.shared);
    leading(ctx, &shared)?;
    let now = ctx.clock.monotonic();
    let timeout = Duration::from_millis(ctx.config.broker_timeout_ms);
    let mut answer = ClusterMetadata {
        leader_id: shared.leader_id,
        ..ClusterMetadata::default()
    };
    for (name, group) in &shared.state.groups {
        answer.groups.push(group.view(name));
        for (id, member) in &group.members {
            answer.members.push(MemberView {
                group: name.clone(),
                replica_id: *id,
                broker_addr: member.broker_addr.clone(),
                ha_addr: member.ha_addr.clone(),
                max_offset: shared.liveness.max_offset(name, *id),
                alive: shared.liveness.is_alive(name, *id, now, timeout),
            });
        }
    }
    answer.controllers = ctx
        .config
        .peers
        .iter()
        .map(|(id, addr)| PeerView {
            id: *id,
            addr: addr.clone(),
            leader: shared.leader_id == Some(*id),
        })
        .collect();
    Ok(json_response(&answer))
}

/// `NOT_LEADER` (remark: the leader's address, if known, never itself)
/// unless this controller leads and has applied every earlier term's entry;
/// a controller whose storage failed answers an error.
fn leading<C: Clock>(ctx: &Context<C>, shared: &super::consensus::Shared) -> Result<(), Refusal> {
    if let Some(reason) = &shared.failed {
        return Err(Refusal::system_error(format!(
            "controller stopped: {reason}"
        )));
    }
    if shared.is_leader && shared.caught_up {
        return Ok(());
    }
    let leader_addr = shared
        .leader_id
        .filter(|id| *id != ctx.config.id)
        .and_then(|id| ctx.config.peers.get(&id))
        .cloned()
        .unwrap_or_default();
    Err(Refusal::new(api::NOT_LEADER, leader_addr))
}

/// Proposes `command` and waits (bounded) until it applied.
async fn propose<C: Clock>(ctx: &Context<C>, command: Command) -> Result<Applied, Refusal> {
    let (reply, outcome) = oneshot::channel();
    if ctx
        .inputs
        .try_send(Input::Propose { command, reply })
        .is_err()
    {
        return Err(Refusal::new(
            response_code::SYSTEM_BUSY,
            "controller busy or stopped",
        ));
    }
    let timeout = Duration::from_millis(ctx.config.apply_timeout_ms);
    match tokio::time::timeout(timeout, outcome).await {
        Ok(Ok(Ok(applied))) => Ok(applied),
        Ok(Ok(Err(ProposeError::NotLeader))) => Err(leading(ctx, &lock(&ctx.shared))
            .err()
            .unwrap_or_else(|| not_applied("leadership moved".into()))),
        Ok(Ok(Err(ProposeError::Rejected(Rejection::Fenced(reason))))) => {
            Err(Refusal::new(api::FENCED, reason))
        }
        Ok(Ok(Err(ProposeError::Rejected(Rejection::Invalid(reason))))) => Err(invalid(reason)),
        Ok(Ok(Err(ProposeError::Lost))) => Err(not_applied("leadership changed".into())),
        Ok(Err(_)) => Err(not_applied("controller stopped".into())),
        Err(_) => Err(not_applied(format!(
            "not applied within {} ms",
            ctx.config.apply_timeout_ms
        ))),
    }
}

fn invalid(reason: String) -> Refusal {
    Refusal::new(api::INVALID_REQUEST, reason)
}

fn not_applied(reason: String) -> Refusal {
    Refusal::new(api::NOT_APPLIED, reason)
}

fn view_response(view: &GroupView) -> RemotingCommand {
    json_response(view)
}

fn json_response(body: &impl serde::Serialize) -> RemotingCommand {
    match serde_json::to_vec(body) {
        Ok(bytes) => RemotingCommand::success().with_body(bytes),
        Err(error) => RemotingCommand::response(response_code::SYSTEM_ERROR, error.to_string()),
    }
}
