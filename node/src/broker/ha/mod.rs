//! Replication of a broker group's CommitLog from its master to replicas
//! (RocketMQ's "HA"), on its own port.
//!
//! - [`epochs`]: the epoch history and the divergence point of two logs.
//! - `protocol`: the request codes and messages of the HA port.
//! - `master`: sessions, the in-sync set, acknowledgements and the
//!   confirmed offset; serving handshakes and fetches.
//! - `port`: the HA port, behind the group-secret gate when the group has
//!   a secret (`crate::peer_auth`).
//! - `follower`: a replica's loop — handshake, truncate a divergent tail,
//!   copy bytes verbatim, report what it holds, copy metadata.
//!
//! Unlike RocketMQ 4.x, a master never trusts an offset it has not
//! verified: a replica identifies itself in a handshake, the master itself
//! computes where the replica's log agrees with its own (from both epoch
//! histories), and an acknowledgement counts only up to bytes the master
//! actually sent on that session.

mod controlled;
pub mod epochs;
mod follower;
mod master;
mod port;
mod protocol;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sluice_core::disk::Disk;
use sluice_core::{Clock, CommitLogOffset};
use tokio::sync::watch;

use crate::broker::Broker;
use crate::peer_auth::SharedSecret;

pub(crate) use controlled::run as run_controlled;
pub use epochs::{divergence_point, EpochEntry, EpochHistory, EPOCHS_FILE};
pub(crate) use follower::run as run_follower;
pub(crate) use master::{maintain as maintain_in_sync, publish as publish_gate};
pub(crate) use port::bind as bind_port;
pub use protocol::{HA_FETCH, HA_HANDSHAKE, HA_METADATA};

/// When a send is acknowledged relative to the replicas.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplicationMode {
    /// After the local store only (RocketMQ's `ASYNC_MASTER`).
    Async,
    /// Once every member of the in-sync set holds the message (RocketMQ's
    /// `SYNC_MASTER`, with 5.x's all-in-sync acknowledgement); consumers
    /// never see past what the in-sync set holds.
    Sync,
}

/// Replication settings of one broker.
#[derive(Clone, Debug)]
pub struct ReplicationConfig {
    /// SYNC or ASYNC replication.
    pub mode: ReplicationMode,
    /// Address the HA port listens on (default: the broker port + 1).
    pub ha_listen: Option<String>,
    /// Address replicas are told to reach the HA port at (default: the
    /// advertised host with the HA port).
    pub ha_advertised: Option<String>,
    /// A replica's master HA address, for fixed roles without a controller.
    pub master_ha_addr: Option<String>,
    /// Controller addresses. Empty: fixed roles (broker id 0 is the
    /// master). Otherwise the controllers decide who is master, and fail
    /// over automatically; every broker of the group then needs a distinct
    /// broker id of 1 or more.
    pub controller_addrs: Vec<String>,
    /// The group's shared secret: with it, the HA port serves only
    /// replicas that prove they hold it (and replicas follow only a master
    /// that proves it too). `None`: the port is open, as before.
    pub group_secret: Option<SharedSecret>,
    /// The controllers' cluster secret, proven on every connection to a
    /// controller. `None`: controllers without a secret.
    pub controller_secret: Option<SharedSecret>,
    /// Heartbeat period to the controllers (RocketMQ 5: 1 s).
    pub controller_heartbeat_ms: u64,
    /// Members of the in-sync set, the master included, needed for a SYNC
    /// acknowledgement; fewer answers `SLAVE_NOT_AVAILABLE` (RocketMQ:
    /// a `SYNC_MASTER` needs its slave). Default 2.
    pub min_in_sync: usize,
    /// Longest a SYNC send waits for the in-sync set before answering
    /// `FLUSH_SLAVE_TIMEOUT` (RocketMQ 4.9.8's `slaveTimeout`: 3 s).
    pub ack_timeout_ms: u64,
    /// An in-sync replica further behind than this makes SYNC sends answer
    /// `SLAVE_NOT_AVAILABLE` at once (RocketMQ: 256 MiB).
    pub fall_behind_max_bytes: u64,
    /// A replica not caught up for this long leaves the in-sync set
    /// (RocketMQ 5's `haMaxTimeSlaveNotCatchup`: 15 s).
    pub not_caught_up_ms: u64,
    /// Most bytes one fetch returns.
    pub fetch_bytes_max: usize,
    /// Longest a fetch waits at the master for new bytes.
    pub fetch_wait_ms: u64,
    /// A session with no fetch for this long is dropped.
    pub session_idle_ms: u64,
    /// How often a replica copies topics, consumer offsets and
    /// subscription groups from its master.
    pub metadata_sync_ms: u64,
    /// The simulation's mutant, never set in production: the master
    /// believes the offset a replica claims at its handshake (no
    /// truncation, counted as held), as RocketMQ 4.x trusts any 8 bytes on
    /// its HA port.
    #[doc(hidden)]
    pub mutant_trust_claimed_offset: bool,
}

impl Default for ReplicationConfig {
    fn default() -> Self {
        Self {
            mode: ReplicationMode::Async,
            ha_listen: None,
            ha_advertised: None,
            master_ha_addr: None,
            controller_addrs: Vec::new(),
            group_secret: None,
            controller_secret: None,
            controller_heartbeat_ms: 1_000,
            min_in_sync: 2,
            ack_timeout_ms: 3_000,
            fall_behind_max_bytes: 256 << 20,
            not_caught_up_ms: 15_000,
            fetch_bytes_max: 1 << 20,
            fetch_wait_ms: 1_000,
            session_idle_ms: 5_000,
            metadata_sync_ms: 5_000,
            mutant_trust_claimed_offset: false,
        }
    }
}

/// What this broker is in its group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    /// Not decided yet (a controller has not answered).
    Unknown,
    /// The master of `epoch`: takes writes, serves replicas.
    Master {
        /// The master epoch.
        epoch: u32,
    },
    /// A replica following the master at `master_ha`.
    Replica {
        /// The master's HA address, when known.
        master_ha: Option<String>,
    },
}

/// Why a SYNC send was not acknowledged by the in-sync set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReplicaAckError {
    /// Too few in-sync members, or one too far behind
    /// (`SLAVE_NOT_AVAILABLE`). The message is stored.
    NotAvailable(String),
    /// The in-sync set did not confirm in time (`FLUSH_SLAVE_TIMEOUT`).
    /// The message is stored.
    Timeout,
    /// This broker stopped being the master while waiting.
    NotMaster,
}

/// One replica's session at the master.
#[derive(Clone, Debug)]
pub(crate) struct Session {
    pub(crate) id: u64,
    pub(crate) epoch: u32,
    /// Bytes below this are verified to agree with the master's log: the
    /// divergence point, then everything sent on this session.
    pub(crate) verified: CommitLogOffset,
    /// What the replica reported it holds (capped by `verified`).
    pub(crate) acked: CommitLogOffset,
    /// Master's written end when the last fetch was answered with
    /// everything up to it; acking it means "caught up".
    pub(crate) caught_up_target: CommitLogOffset,
    pub(crate) last_seen: Duration,
    pub(crate) caught_up_at: Duration,
    /// The confirmed offset last sent on this session: a fetch answers at
    /// once when it has moved, so the replica's readers are not held back.
    pub(crate) confirmed_sent: CommitLogOffset,
}

/// Replication state shared by the broker's handlers and duties.
pub(crate) struct State {
    pub(crate) role: Role,
    pub(crate) epochs: EpochHistory,
    pub(crate) sessions: BTreeMap<u64, Session>,
    /// In-sync replicas (the master itself not included).
    pub(crate) in_sync: BTreeSet<u64>,
    /// What this broker last held as a replica, for `cluster` views.
    pub(crate) replica_held: CommitLogOffset,
    /// Where replicas reach this broker's HA port.
    pub(crate) ha_addr: String,
    /// The controller leader last heard of (controller mode only).
    pub(crate) controller_leader: Option<String>,
}

/// A broker's replication: configuration, role, epochs, and wake-ups.
pub struct Replication {
    config: ReplicationConfig,
    me: u64,
    pub(crate) state: Mutex<State>,
    /// The master's written end, to wake parked fetches.
    written: watch::Sender<CommitLogOffset>,
    /// Bumped whenever an acknowledgement, the in-sync set or the role
    /// changes, to wake SYNC sends.
    acks: watch::Sender<u64>,
    /// Bumped when the role changes, to restart the follower loop.
    roles: watch::Sender<u64>,
    next_session: AtomicU64,
}

impl Replication {
    /// Replication for broker `me` with `epochs` loaded from disk.
    pub(crate) fn new(config: ReplicationConfig, me: u64, epochs: EpochHistory) -> Self {
        Self {
            config,
            me,
            state: Mutex::new(State {
                role: Role::Unknown,
                epochs,
                sessions: BTreeMap::new(),
                in_sync: BTreeSet::new(),
                replica_held: CommitLogOffset::default(),
                ha_addr: String::new(),
                controller_leader: None,
            }),
            written: watch::channel(CommitLogOffset::default()).0,
            acks: watch::channel(0).0,
            roles: watch::channel(0).0,
            next_session: AtomicU64::new(1),
        }
    }

    /// The settings in force.
    pub fn config(&self) -> &ReplicationConfig {
        &self.config
    }

    /// This broker's id in its group.
    pub fn me(&self) -> u64 {
        self.me
    }

    /// The current role.
    pub fn role(&self) -> Role {
        self.lock().role.clone()
    }

    /// The epoch history.
    pub fn epochs(&self) -> EpochHistory {
        self.lock().epochs.clone()
    }

    /// Where replicas reach this broker's HA port (empty before serving).
    pub fn ha_addr(&self) -> String {
        self.lock().ha_addr.clone()
    }

    pub(crate) fn set_ha_addr(&self, addr: String) {
        self.lock().ha_addr = addr;
    }

    /// The controller leader this broker last heard of (`None`: fixed
    /// roles, or no controller answered yet).
    pub fn controller_leader(&self) -> Option<String> {
        self.lock().controller_leader.clone()
    }

    /// The in-sync replicas (the master not included).
    pub fn in_sync(&self) -> BTreeSet<u64> {
        self.lock().in_sync.clone()
    }

    /// Each connected replica's acknowledged offset.
    pub fn replica_acks(&self) -> BTreeMap<u64, CommitLogOffset> {
        self.lock()
            .sessions
            .iter()
            .map(|(id, s)| (*id, s.acked))
            .collect()
    }

    pub(crate) fn trusts_claimed_offset(&self) -> bool {
        self.config.mutant_trust_claimed_offset
    }

    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .expect("invariant: replication lock not poisoned")
    }

    pub(crate) fn next_session_id(&self) -> u64 {
        self.next_session.fetch_add(1, Ordering::Relaxed)
    }

    pub(crate) fn note_written(&self, end: CommitLogOffset) {
        self.written.send_replace(end);
    }

    pub(crate) fn written_rx(&self) -> watch::Receiver<CommitLogOffset> {
        self.written.subscribe()
    }

    pub(crate) fn bump_acks(&self) {
        self.acks.send_modify(|v| *v += 1);
    }

    pub(crate) fn roles_rx(&self) -> watch::Receiver<u64> {
        self.roles.subscribe()
    }

    /// Sets the role and wakes everyone who depends on it.
    pub(crate) fn set_role(&self, role: Role) {
        {
            let mut st = self.lock();
            if st.role == role {
                return;
            }
            tracing::info!(from = ?st.role, to = ?role, "replication role changes");
            st.role = role;
            st.sessions.clear();
            st.in_sync.clear();
        }
        self.roles.send_modify(|v| *v += 1);
        self.bump_acks();
    }

    /// The offset every in-sync replica holds (`UNGATED` with no in-sync
    /// replica): the consumer-visibility gate of a SYNC master.
    pub(crate) fn confirmed_locked(st: &State) -> CommitLogOffset {
        st.in_sync
            .iter()
            .map(|id| {
                st.sessions
                    .get(id)
                    .map_or(CommitLogOffset::default(), |s| s.acked)
            })
            .min()
            .unwrap_or(CommitLogOffset::UNGATED)
    }

    /// Waits until every in-sync replica holds `[0, end)` (SYNC mode).
    pub async fn await_replicated(
        &self,
        end: CommitLogOffset,
        master_written: CommitLogOffset,
    ) -> Result<(), ReplicaAckError> {
        if self.config.mode == ReplicationMode::Async {
            return Ok(());
        }
        let mut rx = self.acks.subscribe();
        let wait = async {
            loop {
                {
                    let st = self.lock();
                    if !matches!(st.role, Role::Master { .. }) {
                        return Err(ReplicaAckError::NotMaster);
                    }
                    if st.in_sync.len() + 1 < self.config.min_in_sync {
                        return Err(ReplicaAckError::NotAvailable(format!(
                            "{} of the {} in-sync replicas needed",
                            st.in_sync.len() + 1,
                            self.config.min_in_sync
                        )));
                    }
                    let confirmed = Self::confirmed_locked(&st);
                    if confirmed >= end {
                        return Ok(());
                    }
                    let behind = master_written.bytes_since(confirmed);
                    if behind > self.config.fall_behind_max_bytes {
                        return Err(ReplicaAckError::NotAvailable(format!(
                            "an in-sync replica is {behind} bytes behind"
                        )));
                    }
                }
                if rx.changed().await.is_err() {
                    return Err(ReplicaAckError::Timeout);
                }
            }
        };
        tokio::time::timeout(Duration::from_millis(self.config.ack_timeout_ms), wait)
            .await
            .unwrap_or(Err(ReplicaAckError::Timeout))
    }
}

/// The replication state of a broker of a replicated group.
pub(crate) fn replication_of(
    config: &super::BrokerConfig,
    rc: &ReplicationConfig,
    epochs: EpochHistory,
) -> crate::Result<Replication> {
    let me = u64::try_from(config.broker_id)
        .map_err(|_| crate::Error::Config(format!("broker_id {} is negative", config.broker_id)))?;
    if me == 0 && !rc.controller_addrs.is_empty() {
        return Err(crate::Error::Config(
            "with controllers, every broker of the group needs a broker_id of 1 \
             or more (the master registers as 0 whichever it is)"
                .to_owned(),
        ));
    }
    Ok(Replication::new(rc.clone(), me, epochs))
}

/// Tells `ha` the written end after every append to `broker`'s store (and
/// now), so parked replica fetches wake.
pub(crate) fn listen_appends<D: Disk, C: Clock>(broker: &Arc<Broker<D, C>>, ha: &Replication) {
    let me = Arc::downgrade(broker);
    broker.store().set_append_listener(Arc::new(move |end| {
        if let Some(b) = me.upgrade() {
            if let Some(ha) = b.replication() {
                ha.note_written(end);
            }
        }
    }));
    ha.note_written(broker.store().commit_log().written());
}
