//! The raft driver: one task owns raft-rs's `RawNode`, ticks it on a tokio
//! interval (simulated under turmoil), steps peer messages, proposes
//! commands, persists every `Ready` through the disk seam *before* sending
//! its messages or applying what it acknowledges, applies committed
//! commands to the state machine and answers their proposers. On the leader
//! it also runs the failover check each tick.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use protobuf::Message as _;
use raft::eraftpb::{EntryType, Message};
use raft::{RawNode, StateRole, Storage as _};
use sluice_core::disk::Disk;
use sluice_core::Clock;
use sluice_net::{RemotingCommand, RpcClient, Transport};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::MissedTickBehavior;

use super::api::RAFT_MESSAGE;
use super::liveness::Liveness;
use super::log_store::LogStore;
use super::server::REALM;
use super::state::{choose_master, Applied, Command, ControllerState, Rejection};
use super::{ControllerConfig, ControllerError};
use crate::peer_auth::{AuthError, Prover};

/// Raft messages queued per peer before new ones are dropped (raft resends).
const OUTBOX_MESSAGES_MAX: usize = 1_024;
/// Readies handled back to back before the loop waits for input again.
const READY_ROUNDS_MAX: usize = 16;

/// What handlers and the driver share.
#[derive(Debug, Default)]
pub struct Shared {
    /// The state machine as applied on this controller.
    pub state: ControllerState,
    /// The raft leader as this controller knows it.
    pub leader_id: Option<u64>,
    /// Whether this controller is the raft leader.
    pub is_leader: bool,
    /// Whether, as leader, it has applied every entry of earlier terms (up
    /// to its own first entry); until then its state may be stale and it
    /// must not answer from it.
    pub caught_up: bool,
    /// Broker heartbeats, kept on the leader only.
    pub liveness: Liveness,
    /// Set when persisting failed; the controller stopped.
    pub failed: Option<String>,
}

/// The shared state behind its lock.
pub type SharedRef = Arc<Mutex<Shared>>;

/// Locks the shared state (a panicked holder leaves it consistent: every
/// change under the lock is a single assignment or a pure `apply`).
pub fn lock(shared: &SharedRef) -> MutexGuard<'_, Shared> {
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Why a proposal did not apply.
#[derive(Debug)]
pub enum ProposeError {
    /// This controller is not the leader.
    NotLeader,
    /// It applied, but changed nothing.
    Rejected(Rejection),
    /// Leadership changed before it was applied; it may or may not apply.
    Lost,
}

/// Work for the driver.
pub enum Input {
    /// A message from a peer.
    Raft(Box<Message>),
    /// A command to replicate; the reply comes once it applied.
    Propose {
        /// The change.
        command: Command,
        /// Where the outcome goes.
        reply: oneshot::Sender<Result<Applied, ProposeError>>,
    },
}

type Reply = oneshot::Sender<Result<Applied, ProposeError>>;

/// The driver's state; lives in one task.
pub struct Driver<D: Disk, C: Clock> {
    node: RawNode<LogStore>,
    config: ControllerConfig,
    disk: D,
    clock: C,
    path: String,
    shared: SharedRef,
    outboxes: BTreeMap<u64, mpsc::Sender<Message>>,
    /// Log index → (term proposed in, proposer).
    pending: BTreeMap<u64, (u64, Reply)>,
    /// Group → (master epoch an election was proposed for, tick).
    elections_proposed: BTreeMap<String, (u32, u64)>,
    /// (group, epoch) for which "no candidate" was logged.
    no_candidate_logged: BTreeSet<(String, u32)>,
    /// The last log index applied to `shared.state`.
    applied: u64,
    /// The index of this leader's first entry of its term.
    term_start: u64,
    ticks: u64,
}

/// Reads the raft state from `disk` (or starts fresh) and builds the node.
pub fn open<D: Disk, C: Clock>(
    config: &ControllerConfig,
    disk: D,
    clock: C,
    shared: SharedRef,
) -> Result<Driver<D, C>, ControllerError> {
    let path = format!("{}/raft-state", config.data_dir.trim_end_matches('/'));
    let storage_error = |reason: String| ControllerError::Storage {
        path: path.clone(),
        reason,
    };
    let store = match disk.read_small(&path) {
        Ok(Some(bytes)) => LogStore::decode(&bytes).map_err(storage_error)?,
        Ok(None) => LogStore::new(config.peers.keys().copied().collect()),
        Err(error) => return Err(storage_error(error.to_string())),
    };
    let state = decode_state(store.snapshot_data()).map_err(storage_error)?;
    let applied = store.snapshot_applied_index();
    lock(&shared).state = state;
    let election_tick = config.election_ticks_own();
    let raft_config = raft::Config {
        id: config.id,
        election_tick,
        heartbeat_tick: config.heartbeat_ticks,
        // A one-value range: raft-rs draws from [min, max) with its thread
        // RNG, so the timeout is deterministic and differs per id instead.
        min_election_tick: election_tick,
        max_election_tick: election_tick + 1,
        applied,
        check_quorum: true,
        pre_vote: true,
        max_size_per_msg: 1 << 20,
        max_inflight_msgs: 256,
        ..raft::Config::default()
    };
    raft_config.validate()?;
    let node = RawNode::new(
        &raft_config,
        store,
        &super::logger::tracing_logger(config.id),
    )?;
    Ok(Driver {
        node,
        config: config.clone(),
        disk,
        clock,
        path,
        shared,
        outboxes: BTreeMap::new(),
        pending: BTreeMap::new(),
        elections_proposed: BTreeMap::new(),
        no_candidate_logged: BTreeSet::new(),
        applied,
        term_start: u64::MAX,
        ticks: 0,
    })
}

fn decode_state(data: &[u8]) -> Result<ControllerState, String> {
    if data.is_empty() {
        return Ok(ControllerState::default());
    }
    serde_json::from_slice(data).map_err(|error| format!("bad state snapshot: {error}"))
}

impl<D: Disk, C: Clock> Driver<D, C> {
    /// Starts one sender task per other peer over `transport`.
    pub fn connect_peers<T: Transport>(
        &mut self,
        transport: &T,
    ) -> Vec<tokio::task::JoinHandle<()>> {
        let rpc = RpcClient::new(transport.clone(), self.config.rpc.clone());
        let timeout =
            Duration::from_millis(self.config.tick_ms * self.config.election_ticks as u64);
        let mut tasks = Vec::new();
        for (id, addr) in &self.config.peers {
            if *id == self.config.id {
                continue;
            }
            let (tx, rx) = mpsc::channel(OUTBOX_MESSAGES_MAX);
            self.outboxes.insert(*id, tx);
            let prover =
                self.config.secret.clone().map(|secret| {
                    Prover::new(secret, REALM, format!("controller/{}", self.config.id))
                });
            tasks.push(tokio::spawn(send_loop(
                rpc.clone(),
                (addr.clone(), prover),
                rx,
                timeout,
            )));
        }
        tasks
    }

    /// Runs until `stop` flips, `inputs` closes, or persisting fails.
    pub async fn run(mut self, mut inputs: mpsc::Receiver<Input>, mut stop: watch::Receiver<bool>) {
        if self.config.peers.len() == 1 {
            // A lone controller need not wait out an election timeout.
            let _ = self.node.campaign();
        }
        let mut ticker = tokio::time::interval(Duration::from_millis(self.config.tick_ms));
        ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                biased;
                _ = stop.wait_for(|stop| *stop) => break,
                _ = ticker.tick() => {
                    self.ticks += 1;
                    self.node.tick();
                    if lock(&self.shared).caught_up {
                        self.check_masters();
                    }
                }
                input = inputs.recv() => match input {
                    Some(input) => self.on_input(input),
                    None => break,
                },
            }
            if let Err(reason) = self.on_ready().await {
                tracing::error!(id = self.config.id, %reason, "controller stops: raft state not persisted");
                lock(&self.shared).failed = Some(reason);
                self.fail_pending();
                break;
            }
        }
    }

    fn on_input(&mut self, input: Input) {
        match input {
            Input::Raft(message) => {
                let from_peer = self.config.peers.contains_key(&message.from);
                if message.to != self.config.id
                    || !from_peer
                    || raft::raw_node::is_local_msg(message.get_msg_type())
                {
                    tracing::debug!(from = message.from, to = message.to, "raft message dropped");
                    return;
                }
                if let Err(error) = self.node.step(*message) {
                    tracing::debug!(%error, "raft message refused");
                }
            }
            Input::Propose { command, reply } => self.propose(&command, Some(reply)),
        }
    }

    fn propose(&mut self, command: &Command, reply: Option<Reply>) {
        if self.node.raft.state != StateRole::Leader {
            if let Some(reply) = reply {
                let _ = reply.send(Err(ProposeError::NotLeader));
            }
            return;
        }
        let data = serde_json::to_vec(command).expect("invariant: commands serialize");
        match self.node.propose(Vec::new(), data) {
            Ok(()) => {
                let index = self.node.raft.raft_log.last_index();
                let term = self.node.raft.term;
                if let Some(reply) = reply {
                    self.pending.insert(index, (term, reply));
                }
            }
            Err(error) => {
                tracing::debug!(%error, "proposal dropped");
                if let Some(reply) = reply {
                    let _ = reply.send(Err(ProposeError::NotLeader));
                }
            }
        }
    }

    async fn on_ready(&mut self) -> Result<(), String> {
        for _ in 0..READY_ROUNDS_MAX {
            if !self.node.has_ready() {
                return Ok(());
            }
            let mut ready = self.node.ready();
            let mut dirty = false;
            if let Some(soft) = ready.ss() {
                self.on_role(soft.leader_id, soft.raft_state);
            }
            if !ready.snapshot().is_empty() {
                let snapshot = ready.snapshot().clone();
                let state = decode_state(&snapshot.data)?;
                lock(&self.shared).state = state;
                self.applied = snapshot.get_metadata().index;
                self.node.mut_store().apply_snapshot(snapshot);
                dirty = true;
            }
            self.apply(ready.take_committed_entries());
            if !ready.entries().is_empty() {
                self.node.mut_store().append(ready.entries())?;
                dirty = true;
            }
            if let Some(hard_state) = ready.hs() {
                self.node.mut_store().set_hard_state(hard_state.clone());
                dirty = true;
            }
            dirty |= self.maybe_compact()?;
            if dirty {
                self.persist().await?;
            }
            // Only now, with the log and vote durable, may peers hear of them.
            self.send(ready.take_messages());
            self.send(ready.take_persisted_messages());
            let mut light = self.node.advance(ready);
            if let Some(commit) = light.commit_index() {
                // Raft recovers a lost commit index; the next write keeps it.
                self.node.mut_store().set_commit(commit);
            }
            self.send(light.take_messages());
            self.apply(light.take_committed_entries());
            self.node.advance_apply();
        }
        Ok(())
    }

    fn on_role(&mut self, leader_id: u64, role: StateRole) {
        let is_leader = role == StateRole::Leader;
        let was_leader = {
            let mut shared = lock(&self.shared);
            let was_leader = shared.is_leader;
            shared.is_leader = is_leader;
            shared.leader_id = (leader_id != 0).then_some(leader_id);
            if is_leader && !was_leader {
                shared.liveness.reset(self.clock.monotonic());
                // raft-rs appended this term's empty entry on becoming leader.
                self.term_start = self.node.raft.raft_log.last_index();
                shared.caught_up = self.applied >= self.term_start;
            }
            if !is_leader {
                shared.caught_up = false;
            }
            was_leader
        };
        if is_leader && !was_leader {
            tracing::info!(
                id = self.config.id,
                term = self.node.raft.term,
                "controller became leader"
            );
            self.elections_proposed.clear();
        }
        if was_leader && !is_leader {
            tracing::info!(
                id = self.config.id,
                leader = leader_id,
                "controller lost leadership"
            );
            self.fail_pending();
        }
    }

    fn fail_pending(&mut self) {
        for (_, (_, reply)) in std::mem::take(&mut self.pending) {
            let _ = reply.send(Err(ProposeError::Lost));
        }
    }

    fn apply(&mut self, entries: Vec<raft::eraftpb::Entry>) {
        if entries.is_empty() {
            return;
        }
        self.apply_entries(entries);
        if self.applied >= self.term_start {
            let mut shared = lock(&self.shared);
            shared.caught_up = shared.is_leader;
        }
    }

    fn apply_entries(&mut self, entries: Vec<raft::eraftpb::Entry>) {
        for entry in entries {
            self.applied = self.applied.max(entry.index);
            if entry.data.is_empty() || entry.get_entry_type() != EntryType::EntryNormal {
                continue;
            }
            let outcome = match serde_json::from_slice::<Command>(&entry.data) {
                Ok(command) => {
                    let outcome = lock(&self.shared).state.apply(&command);
                    if let Ok(Applied::Elected(epoch)) = &outcome {
                        tracing::info!(group = command.group(), epoch, "master elected");
                    }
                    outcome.map_err(ProposeError::Rejected)
                }
                Err(error) => {
                    tracing::error!(index = entry.index, %error, "undecodable command skipped");
                    Err(ProposeError::Rejected(Rejection::Invalid(
                        error.to_string(),
                    )))
                }
            };
            if let Some((term, reply)) = self.pending.remove(&entry.index) {
                let outcome = if term == entry.term {
                    outcome
                } else {
                    Err(ProposeError::Lost)
                };
                let _ = reply.send(outcome);
            }
        }
    }

    fn maybe_compact(&mut self) -> Result<bool, String> {
        if self.node.store().entry_count() <= self.config.log_entries_max {
            return Ok(false);
        }
        // The snapshot holds the state as applied, so it is cut exactly at
        // the last applied entry (which must be in the local log).
        let applied = self.applied;
        if self
            .node
            .store()
            .last_index()
            .map_or(true, |last| applied > last)
        {
            return Ok(false);
        }
        let data = serde_json::to_vec(&lock(&self.shared).state).map_err(|e| e.to_string())?;
        self.node.mut_store().compact(applied, data)?;
        Ok(true)
    }

    async fn persist(&self) -> Result<(), String> {
        let bytes = self.node.store().encode()?;
        self.disk
            .replace_atomically(&self.path, &bytes)
            .await
            .map_err(|error| format!("{}: {error}", self.path))
    }

    fn send(&self, messages: Vec<Message>) {
        for message in messages {
            if let Some(outbox) = self.outboxes.get(&message.to) {
                // A full outbox means the peer is gone or slow; raft resends.
                let _ = outbox.try_send(message);
            }
        }
    }

    /// On the leader: for every group whose master is silent past the broker
    /// timeout, propose the best in-sync, alive replica at the next epoch.
    fn check_masters(&mut self) {
        let now = self.clock.monotonic();
        let timeout = Duration::from_millis(self.config.broker_timeout_ms);
        let retry_ticks = 2 * self.config.election_ticks_own() as u64;
        let mut proposals = Vec::new();
        {
            let shared = lock(&self.shared);
            for (name, group) in &shared.state.groups {
                let Some(master) = group.master else { continue };
                if !shared.liveness.master_silent(name, master, now, timeout) {
                    continue;
                }
                let alive = shared.liveness.alive(name, now, timeout);
                let Some(new_master) = choose_master(group, &alive) else {
                    if self
                        .no_candidate_logged
                        .insert((name.clone(), group.master_epoch))
                    {
                        tracing::warn!(
                            group = %name, master, epoch = group.master_epoch,
                            in_sync = ?group.in_sync,
                            "master silent but no alive in-sync replica to elect; waiting"
                        );
                    }
                    continue;
                };
                let recent = self
                    .elections_proposed
                    .get(name)
                    .is_some_and(|(epoch, tick)| {
                        *epoch == group.master_epoch
                            && self.ticks.saturating_sub(*tick) < retry_ticks
                    });
                if !recent {
                    proposals.push(Command::Elect {
                        group: name.clone(),
                        master_epoch: group.master_epoch,
                        new_master,
                    });
                }
            }
        }
        for command in proposals {
            if let Command::Elect {
                group,
                master_epoch,
                new_master,
            } = &command
            {
                tracing::info!(%group, old_epoch = master_epoch, new_master, "master silent; proposing election");
                self.elections_proposed
                    .insert(group.clone(), (*master_epoch, self.ticks));
            }
            self.propose(&command, None);
        }
    }
}

/// Sends one peer its raft messages, oneway, each on a connection proven
/// first when the cluster has a secret.
async fn send_loop<T: Transport>(
    rpc: RpcClient<T>,
    (addr, prover): (String, Option<Prover>),
    mut outbox: mpsc::Receiver<Message>,
    timeout: Duration,
) {
    let mut refused = false;
    while let Some(message) = outbox.recv().await {
        let body = match message.write_to_bytes() {
            Ok(body) => body,
            Err(error) => {
                tracing::error!(%error, "raft message not encodable");
                continue;
            }
        };
        let request = RemotingCommand::request(RAFT_MESSAGE).with_body(body);
        let sent = match &prover {
            None => rpc
                .invoke_oneway(&addr, request, timeout)
                .await
                .map_err(AuthError::from),
            Some(prover) => match prover.connection(&rpc, &addr, timeout).await {
                Ok(conn) => conn
                    .invoke_oneway(request, timeout)
                    .await
                    .map_err(AuthError::from),
                Err(error) => Err(error),
            },
        };
        match sent {
            Ok(()) => refused = false,
            // A peer that refuses or cannot prove the secret is said once
            // per run of refusals; network errors are routine.
            Err(error @ (AuthError::Refused { .. } | AuthError::PeerUnproven(_))) if !refused => {
                refused = true;
                tracing::warn!(%addr, %error, "raft peer authentication failed");
            }
            Err(error) => tracing::debug!(%addr, %error, "raft message not sent"),
        }
    }
}
