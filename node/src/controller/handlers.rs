//! Controller request handlers, one per request code, each
//! `async fn(&Context, RemotingCommand) -> RemotingCommand`. Only the raft
//! leader answers brokers; others answer `NOT_LEADER` with the leader's
//! address. Writes answer after their command applied, or `NOT_APPLIED`.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use protobuf::Message as _;
use sluice_core::Clock;
use sluice_net::remoting::response_code;
use sluice_net::{HandlerTable, RemotingCommand, RequestContext};
use tokio::sync::{mpsc, oneshot};

use super::api::{
    self, AlterInSync, BrokerHeartbeat, ClusterMetadata, GroupView, MemberView, PeerView,
};
use super::consensus::{lock, Input, ProposeError, SharedRef};
use super::state::{choose_renewed_master, Applied, Command, Member, Rejection};
use super::ControllerConfig;

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
pub fn handler_table<C: Clock>(context: &Arc<Context<C>>) -> HandlerTable {
    let mut table = HandlerTable::new();
    let ctx = Arc::clone(context);
    table.register(
        api::RAFT_MESSAGE,
        move |_: RequestContext, request: RemotingCommand| {
            raft_message(&ctx, &request);
            std::future::ready(None)
        },
    );
    let ctx = Arc::clone(context);
    table.register(
        api::BROKER_HEARTBEAT,
        move |_: RequestContext, request: RemotingCommand| {
            let ctx = Arc::clone(&ctx);
            async move { Some(heartbeat(&ctx, &request).await) }
        },
    );
    let ctx = Arc::clone(context);
    table.register(
        api::ALTER_IN_SYNC,
        move |_: RequestContext, request: RemotingCommand| {
            let ctx = Arc::clone(&ctx);
            async move { Some(alter_in_sync(&ctx, &request).await) }
        },
    );
    let ctx = Arc::clone(context);
    table.register(
        api::GET_METADATA,
        move |_: RequestContext, _: RemotingCommand| std::future::ready(Some(metadata(&ctx))),
    );
    table
}

fn raft_message<C: Clock>(ctx: &Context<C>, request: &RemotingCommand) {
    match raft::eraftpb::Message::parse_from_bytes(&request.body) {
        // A full queue drops the message; raft resends.
        Ok(message) => drop(ctx.inputs.try_send(Input::Raft(Box::new(message)))),
        Err(error) => tracing::debug!(%error, "undecodable raft message dropped"),
    }
}

async fn heartbeat<C: Clock>(ctx: &Context<C>, request: &RemotingCommand) -> RemotingCommand {
    let heartbeat = match BrokerHeartbeat::from_request(request) {
        Ok(heartbeat) => heartbeat,
        Err(reason) => return invalid(format!("BROKER_HEARTBEAT: {reason}")),
    };
    let member = Member {
        broker_addr: heartbeat.broker_addr.clone(),
        ha_addr: heartbeat.ha_addr.clone(),
    };
    let (needs_join, was_master) = {
        let shared = lock(&ctx.shared);
        if let Some(answer) = not_leader(ctx, &shared) {
            return answer;
        }
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
        if let Err(answer) = propose(ctx, join).await {
            return answer;
        }
    }
    let renew = {
        let mut shared = lock(&ctx.shared);
        if let Some(answer) = not_leader(ctx, &shared) {
            return answer;
        }
        let now = ctx.clock.monotonic();
        shared.liveness.record(
            &heartbeat.group,
            heartbeat.replica_id,
            heartbeat.max_offset,
            now,
        );
        // Only a broker that was master before this heartbeat restarted as
        // one; the first member of a new group was just made master.
        was_master
            .then(|| renewal(ctx, &shared, &heartbeat, now))
            .flatten()
    };
    if let Some(command) = renew {
        tracing::info!(group = %heartbeat.group, master = heartbeat.replica_id, "master restarted; renewing the mastership at a new epoch");
        if let Err(answer) = propose(ctx, command).await {
            return answer;
        }
    }
    let shared = lock(&ctx.shared);
    if let Some(answer) = not_leader(ctx, &shared) {
        return answer;
    }
    match shared.state.groups.get(&heartbeat.group) {
        Some(group) => view_response(&group.view(&heartbeat.group)),
        None => not_applied("the group is not known yet".into()),
    }
}

/// The renewal a restarted master's heartbeat calls for, if it is the
/// master: the alive in-sync replica with the most data takes a new epoch.
fn renewal<C: Clock>(
    ctx: &Context<C>,
    shared: &super::consensus::Shared,
    heartbeat: &BrokerHeartbeat,
    now: Duration,
) -> Option<Command> {
    if !heartbeat.restarted {
        return None;
    }
    let group = shared.state.groups.get(&heartbeat.group)?;
    if group.master != Some(heartbeat.replica_id) {
        return None;
    }
    let timeout = Duration::from_millis(ctx.config.broker_timeout_ms);
    let alive = shared.liveness.alive(&heartbeat.group, now, timeout);
    let new_master = choose_renewed_master(group, &alive)?;
    Some(Command::Renew {
        group: heartbeat.group.clone(),
        master_epoch: group.master_epoch,
        new_master,
    })
}

async fn alter_in_sync<C: Clock>(ctx: &Context<C>, request: &RemotingCommand) -> RemotingCommand {
    let alter = match AlterInSync::from_request(request) {
        Ok(alter) => alter,
        Err(reason) => return invalid(format!("ALTER_IN_SYNC: {reason}")),
    };
    if let Some(answer) = not_leader(ctx, &lock(&ctx.shared)) {
        return answer;
    }
    let command = Command::AlterInSync {
        group: alter.group.clone(),
        master_id: alter.master_id,
        master_epoch: alter.master_epoch,
        in_sync: alter.in_sync.iter().copied().collect::<BTreeSet<u64>>(),
    };
    match propose(ctx, command).await {
        Ok(_) => {
            let shared = lock(&ctx.shared);
            match shared.state.groups.get(&alter.group) {
                Some(group) => view_response(&group.view(&alter.group)),
                None => not_applied("the group vanished".into()),
            }
        }
        Err(answer) => answer,
    }
}

fn metadata<C: Clock>(ctx: &Context<C>) -> RemotingCommand {
    let shared = lock(&ctx.shared);
    if let Some(answer) = not_leader(ctx, &shared) {
        return answer;
    }
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
    json_response(&answer)
}

/// `NOT_LEADER` (remark: the leader's address, if known, never itself)
/// unless this controller leads and has applied every earlier term's entry;
/// a controller whose storage failed answers an error.
fn not_leader<C: Clock>(
    ctx: &Context<C>,
    shared: &super::consensus::Shared,
) -> Option<RemotingCommand> {
    if let Some(reason) = &shared.failed {
        return Some(RemotingCommand::response(
            response_code::SYSTEM_ERROR,
            format!("controller stopped: {reason}"),
        ));
    }
    if shared.is_leader && shared.caught_up {
        return None;
    }
    let leader_addr = shared
        .leader_id
        .filter(|id| *id != ctx.config.id)
        .and_then(|id| ctx.config.peers.get(&id))
        .cloned()
        .unwrap_or_default();
    Some(RemotingCommand::response(api::NOT_LEADER, leader_addr))
}

/// Proposes `command` and waits (bounded) until it applied.
async fn propose<C: Clock>(ctx: &Context<C>, command: Command) -> Result<Applied, RemotingCommand> {
    let (reply, outcome) = oneshot::channel();
    if ctx
        .inputs
        .try_send(Input::Propose { command, reply })
        .is_err()
    {
        return Err(RemotingCommand::response(
            response_code::SYSTEM_BUSY,
            "controller busy or stopped",
        ));
    }
    let timeout = Duration::from_millis(ctx.config.apply_timeout_ms);
    match tokio::time::timeout(timeout, outcome).await {
        Ok(Ok(Ok(applied))) => Ok(applied),
        Ok(Ok(Err(ProposeError::NotLeader))) => Err(not_leader(ctx, &lock(&ctx.shared))
            .unwrap_or_else(|| not_applied("leadership moved".into()))),
        Ok(Ok(Err(ProposeError::Rejected(Rejection::Fenced(reason))))) => {
            Err(RemotingCommand::response(api::FENCED, reason))
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

fn invalid(reason: String) -> RemotingCommand {
    RemotingCommand::response(api::INVALID_REQUEST, reason)
}

fn not_applied(reason: String) -> RemotingCommand {
    RemotingCommand::response(api::NOT_APPLIED, reason)
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
