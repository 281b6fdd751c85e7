//! A run plan: the workload shape and a timed fault list, both derived from
//! the run seed through named sub-streams. Printing a `Plan` shows every
//! derived setting, so a failure report is self-contained.

use rand::Rng;

pub use crate::fault::Fault;
use crate::fault::{push_crash, push_restart};
use crate::rng::{substream, Salt};

mod cluster;
mod disk;
mod mutants;
mod pop;
mod retry;
#[cfg(test)]
mod tests;
mod transactions;

pub use disk::OFFSET_PERSIST_MS;

/// What the producers do.
#[derive(Clone, Debug, PartialEq, Eq)]
#[expect(clippy::struct_excessive_bools, reason = "independent switches")]
pub struct Workload {
    /// Sequential producers, each on its own client host.
    pub producers: u32,
    /// Messages each producer sends (each with a fresh id; no retries).
    pub messages_per_producer: u32,
    /// Queues of the topic; producer `p` sends message `k` to queue
    /// `(p + k) % queues`.
    pub queues: i32,
    /// Longest pause between two sends of one producer.
    pub send_gap_ms_max: u64,
    /// Sets the `WAIT` property: `false` makes a `SYNC_FLUSH` broker answer
    /// before the sync (the "skip the flush wait" mutant).
    pub wait_for_flush: bool,
    /// Times a producer re-sends the same id after a send that was not
    /// acknowledged (0: every send is tried once).
    pub retries_max: u32,
    /// Pause after a send that was not acknowledged.
    pub fail_backoff_ms: u64,
    /// One long-polling consumer per queue reads while producers send.
    pub long_poll_consumers: bool,
    /// Members of one clustering push-consumer group, each on its own
    /// host, consuming while producers send (0: no group).
    pub group_members: u32,
    /// Mutant: the group's handler reports success for every message but
    /// loses every fifth one it is given — a consumer that commits before
    /// it processes.
    pub lossy_group_handler: bool,
    /// Whether messages are delayed or transactional (read later, at a
    /// position of their own) rather than stored for now.
    pub deferral: Deferral,
    /// How long the drain waits before reading, so every delayed message
    /// is due (its delay, plus any backward step of the broker's clock).
    pub drain_wait_ms: u64,
    /// Name servers of the cluster (1: the default single one). With more,
    /// brokers register with, and clients ask, every one of them.
    pub namesrvs: u32,
    /// POP consumers of one group (server-side leases and acks) reading
    /// while producers send (0: none).
    pub pop_consumers: u32,
    /// With transactions: some ENDs are sent again, or only, seconds later
    /// (to the group's master then), and an END that failed is re-sent.
    pub late_ends: bool,
}

/// Messages of a workload that are not simply stored for now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Deferral {
    /// Every message is for now.
    Off,
    /// About half the messages ask for a delay: a delay level of 1 s, 5 s
    /// or 10 s, or a timer of 0.5–10 s. They reach their queue later, at an
    /// offset of their own, and never before their delay has passed.
    Delays,
    /// Mutant: like `Delays`, but a delayed message asks the broker for a
    /// much shorter delay than the history records — the broker, as the
    /// oracle sees it, delivers early.
    EarlyDelays,
    /// Every message is transactional: a half, then (mostly) a commit or
    /// rollback decided up front; some are ended twice, some left to the
    /// broker's check-back, and one producer may die right after a half.
    Transactions,
}

/// Broker settings a scenario changes from the harness's defaults.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[expect(clippy::struct_excessive_bools, reason = "independent switches")]
pub struct BrokerTuning {
    /// Tiny segments and index files, each rolling over every few messages.
    pub tiny_files: bool,
    /// Committed-offset persistence period (`None`: the harness's default).
    pub offset_persist_interval_ms: Option<u64>,
    /// The dedupe window's save period (`None`: the broker's default).
    pub dedupe_save_interval_ms: Option<u64>,
    /// Mutant: rebuilt ConsumeQueue entries point at the record of the offset before.
    pub mutant_shifted_rebuild: bool,
    /// Mutant: no stats recorded (`stats = false`): figures undercount what clients saw.
    pub mutant_no_stats: bool,
    /// Mutant: the dedupe window is not rebuilt on restart or promotion.
    pub mutant_dedupe_not_rebuilt: bool,
    /// Mutant: a saved dedupe window is read back without the log written since.
    pub mutant_dedupe_saved_not_replayed: bool,
    /// Mutant: the "already committed?" lookup of a transaction misses.
    pub mutant_commit_lookup_misses: bool,
    /// Mutant: disk pressure deletes unread segments (`force`, RocketMQ's).
    pub mutant_force_retention: bool,
    /// Mutant: a POP ack is answered before it is durable.
    pub mutant_pop_ack_not_durable: bool,
    /// Mutant: POP leases never expire (unacked messages never return).
    pub mutant_pop_never_revives: bool,
}

/// A replicated broker group: the first broker and its replicas.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplicaSet {
    /// SYNC replication (the in-sync set acknowledges) or ASYNC.
    pub sync: bool,
    /// Replicas besides the first broker.
    pub replicas: u32,
    /// Mutant: the master trusts a replica's handshake offset (no truncation), as 4.x.
    pub trust_claimed_offset: bool,
    /// Controllers electing masters (0: fixed roles, the first broker is the master).
    pub controllers: u32,
}

/// A fault at a simulated time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimedFault {
    /// Simulated time since the start of the run.
    pub at_ms: u64,
    /// What happens.
    pub fault: Fault,
}

/// Everything a seed decides about a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The run seed.
    pub seed: u64,
    /// The producers' work.
    pub workload: Workload,
    /// Faults in time order.
    pub faults: Vec<TimedFault>,
    /// Broker wall-clock skew (its `Clock` only; turmoil has no skew).
    pub broker_skew_ms: i64,
    /// The broker's device lacks power-safe overwrite: at a power loss a
    /// sector being rewritten may hold garbage.
    pub garbage_sectors: bool,
    /// Replication, when the broker has replicas.
    pub replication: Option<ReplicaSet>,
    /// The BUGGIFY fault points of the production code are enabled: rare
    /// legal paths (a busy broker, an early long-poll answer, a late
    /// timer tick, an early rebalance, …) are taken now and then.
    pub buggify: bool,
    /// Broker settings changed from the harness's defaults.
    pub tuning: BrokerTuning,
}

fn workload(seed: u64) -> Workload {
    let mut rng = substream(seed, Salt::Workload);
    Workload {
        producers: rng.random_range(1..=3),
        messages_per_producer: rng.random_range(40..=100),
        queues: rng.random_range(1..=4),
        send_gap_ms_max: rng.random_range(0..=40),
        wait_for_flush: true,
        retries_max: 0,
        fail_backoff_ms: 50,
        long_poll_consumers: false,
        group_members: 0,
        lossy_group_handler: false,
        deferral: Deferral::Off,
        drain_wait_ms: 0,
        namesrvs: 1,
        pop_consumers: 0,
        late_ends: false,
    }
}

impl Workload {
    /// A rough length of the producing phase without faults, used to place
    /// faults while producers are still sending (each send takes a few
    /// milliseconds of simulated network and sync time).
    pub fn expected_ms(&self) -> u64 {
        u64::from(self.messages_per_producer) * (self.send_gap_ms_max / 2 + 4)
    }
}

/// The longest delay of a delayed message (delay level 3).
pub const DELAY_MS_MAX: u64 = 10_000;
/// The largest step of the broker's clock in `clock_skew_delays`.
const CLOCK_STEP_MS_MAX: i64 = 5_000;

/// About when the first master has an in-sync replica and producers get
/// acknowledgements (a controller election, the first broker's heartbeat,
/// then its replicas start 2.5 s in and catch up).
const FIRST_MASTER_MS: u64 = 3_500;

/// A workload long enough to span a failover: producers still have
/// messages to send once a new master is elected.
fn replicated_workload(seed: u64) -> Workload {
    let mut w = workload(seed);
    w.messages_per_producer = w.messages_per_producer.max(80);
    w.send_gap_ms_max = w.send_gap_ms_max.max(40);
    // Like an application backing off, rather than burning through its
    // messages while the group has no master.
    w.fail_backoff_ms = 400;
    w
}

impl Plan {
    /// A plan of `seed` with the broker's clock skew drawn from its stream
    /// and a power-safe device.
    fn new(
        seed: u64,
        workload: Workload,
        faults: Vec<TimedFault>,
        replication: Option<ReplicaSet>,
    ) -> Self {
        Self {
            seed,
            workload,
            faults,
            broker_skew_ms: skew(seed),
            garbage_sectors: false,
            replication,
            buggify: false,
            tuning: BrokerTuning::default(),
        }
    }
}

impl Plan {
    /// The same plan with the BUGGIFY fault points enabled (or not).
    #[must_use]
    pub fn with_buggify(mut self, on: bool) -> Self {
        self.buggify = on;
        self
    }
}

fn skew(seed: u64) -> i64 {
    substream(seed, Salt::Clock).random_range(-60_000..=60_000)
}

impl Plan {
    /// Scenario `broker_crash_torn_tail_sync_flush`: one or two crashes of
    /// the broker while producers send — most with power loss, some a bare
    /// process crash, some right after a restart (a crash during recovery)
    /// — each followed by a restart.
    pub fn broker_crash(seed: u64) -> Self {
        let workload = workload(seed);
        let mut rng = substream(seed, Salt::Faults);
        let crashes = rng.random_range(1..=2);
        let window_ms = workload.expected_ms().max(40) / crashes;
        let mut at_ms = 0;
        let mut faults = Vec::new();
        for i in 0..crashes {
            at_ms += if i > 0 && rng.random_bool(0.25) {
                rng.random_range(1..=30)
            } else {
                rng.random_range(20..=window_ms)
            };
            push_crash(&mut faults, at_ms, rng.random_bool(0.75));
            at_ms += rng.random_range(50..=2_000);
            push_restart(&mut faults, at_ms);
        }
        Self::new(seed, workload, faults, None)
    }

    /// Scenario `fsync_eio_fences_the_broker`: one sync fails mid-stream;
    /// later the broker crashes with power loss and restarts.
    pub fn fsync_eio(seed: u64) -> Self {
        Self::fsync_eio_with(seed, true)
    }

    /// Like [`Plan::fsync_eio`], but the first crash after the failed sync
    /// is a bare process crash that keeps the page cache (whose failed
    /// pages are clean yet never persisted); a power-loss crash follows
    /// while producers still send.
    pub fn fsync_eio_page_cache_survives(seed: u64) -> Self {
        Self::fsync_eio_with(seed, false)
    }

    fn fsync_eio_with(seed: u64, power_loss: bool) -> Self {
        let workload = workload(seed);
        let mut rng = substream(seed, Salt::Faults);
        let mut at_ms = rng.random_range(20..=workload.expected_ms().max(60) / 3);
        let mut faults = vec![TimedFault {
            at_ms,
            fault: Fault::FailNextSync,
        }];
        at_ms += rng.random_range(100..=600);
        push_crash(&mut faults, at_ms, power_loss);
        at_ms += rng.random_range(50..=500);
        push_restart(&mut faults, at_ms);
        if !power_loss {
            at_ms += rng.random_range(100..=800);
            push_crash(&mut faults, at_ms, true);
            at_ms += rng.random_range(50..=500);
            push_restart(&mut faults, at_ms);
        }
        Self::new(seed, workload, faults, None)
    }

    /// Scenario `long_poll_across_partition`: long-polling consumers (one
    /// per queue) are cut off from the broker while producers send, then
    /// healed; every message must still reach them promptly.
    pub fn long_poll_partition(seed: u64) -> Self {
        let mut workload = workload(seed);
        workload.long_poll_consumers = true;
        let mut rng = substream(seed, Salt::Faults);
        let start_ms = rng.random_range(20..=workload.expected_ms().max(60) / 2);
        let end_ms = start_ms + rng.random_range(300..=3_000);
        let faults = vec![
            TimedFault {
                at_ms: start_ms,
                fault: Fault::PartitionConsumers,
            },
            TimedFault {
                at_ms: end_ms,
                fault: Fault::RepairConsumers,
            },
        ];
        Self::new(seed, workload, faults, None)
    }

    /// Scenario `slow_disk`: the broker's disk turns slow for a while —
    /// every sync takes 20 ms to 4 s longer, beyond the producers' 2 s
    /// request timeout for some seeds — while producers send with
    /// `SYNC_FLUSH` and up to two retries; for half the seeds the broker
    /// also loses power while the disk is slow, with syncs in flight. A
    /// send that timed out is indeterminate; nothing acknowledged may be
    /// lost.
    pub fn slow_disk(seed: u64) -> Self {
        let mut workload = workload(seed);
        workload.retries_max = 2;
        let mut rng = substream(seed, Salt::Faults);
        let start_ms = rng.random_range(20..=workload.expected_ms().max(60) / 2);
        let sync_ms = if rng.random_bool(0.5) {
            rng.random_range(20..=300)
        } else {
            rng.random_range(300..=4_000)
        };
        let heal_ms = start_ms + rng.random_range(500..=4_000);
        let mut faults = vec![
            TimedFault {
                at_ms: start_ms,
                fault: Fault::SlowBrokerDisk { sync_ms },
            },
            TimedFault {
                at_ms: heal_ms,
                fault: Fault::HealBrokerDisk,
            },
        ];
        if rng.random_bool(0.5) {
            let at_ms = rng.random_range(start_ms + 1..heal_ms);
            push_crash(&mut faults, at_ms, true);
            push_restart(&mut faults, at_ms + rng.random_range(50..=1_000));
        }
        faults.sort_by_key(|f| f.at_ms);
        Self::new(seed, workload, faults, None)
    }

    /// Scenario `clock_skew_delays`: about half the messages are delayed
    /// (levels of 1–10 s) and long-polling consumers read every queue while
    /// the broker's wall clock is stepped 1–3 times, forward or back by up
    /// to 5 s; per seed the broker also loses power and restarts. No
    /// delayed message may be lost, and none may arrive earlier than its
    /// delay minus the forward steps of the broker's clock.
    pub fn clock_skew(seed: u64) -> Self {
        let mut workload = workload(seed);
        workload.deferral = Deferral::Delays;
        workload.long_poll_consumers = true;
        let mut rng = substream(seed, Salt::Faults);
        let window_ms = workload.expected_ms().max(60) + DELAY_MS_MAX;
        let mut faults = Vec::new();
        let mut back_ms = 0;
        for _ in 0..rng.random_range(1..=3) {
            let by_ms = rng.random_range(-CLOCK_STEP_MS_MAX..=CLOCK_STEP_MS_MAX);
            back_ms += by_ms.min(0).unsigned_abs();
            faults.push(TimedFault {
                at_ms: rng.random_range(20..=window_ms),
                fault: Fault::StepBrokerClock { by_ms },
            });
        }
        if rng.random_bool(0.5) {
            let at_ms = rng.random_range(20..=window_ms);
            push_crash(&mut faults, at_ms, true);
            push_restart(&mut faults, at_ms + rng.random_range(50..=2_000));
        }
        faults.sort_by_key(|f| f.at_ms);
        workload.drain_wait_ms = DELAY_MS_MAX + back_ms + 2_000;
        Self::new(seed, workload, faults, None)
    }

    /// Scenario `group_consumption_across_faults`: a clustering push-consumer
    /// group of 2–3 members (each on its own host) consumes at least two
    /// queues while producers send. Per seed, one or both fault classes
    /// (swarm style): the broker loses power and restarts; one member is
    /// partitioned from the broker for up to 12 s — long enough, at times,
    /// for the broker to expel it so the group rebalances — and healed.
    pub fn group_consumption(seed: u64) -> Self {
        let mut workload = workload(seed);
        workload.queues = workload.queues.max(2);
        workload.group_members = substream(seed, Salt::Group).random_range(2..=3);
        let mut rng = substream(seed, Salt::Faults);
        let crash = rng.random_bool(0.7);
        let partition = !crash || rng.random_bool(0.6);
        let window_ms = workload.expected_ms().max(60);
        let mut faults = Vec::new();
        if crash {
            let at_ms = rng.random_range(20..=window_ms);
            push_crash(&mut faults, at_ms, true);
            push_restart(&mut faults, at_ms + rng.random_range(50..=2_000));
        }
        if partition {
            let member = rng.random_range(0..workload.group_members);
            let at_ms = rng.random_range(20..=window_ms);
            faults.push(TimedFault {
                at_ms,
                fault: Fault::PartitionMember { member },
            });
            faults.push(TimedFault {
                at_ms: at_ms + rng.random_range(500..=12_000),
                fault: Fault::RepairMember { member },
            });
        }
        faults.sort_by_key(|f| f.at_ms);
        Self::new(seed, workload, faults, None)
    }

    /// Scenario `replica_partition`: one replica is cut off from the
    /// master for 1–6 s while producers send, then healed. Under SYNC
    /// replication no send made during the cut may be acknowledged; under
    /// ASYNC sends go on and the replica catches up after the heal.
    pub fn replica_partition(seed: u64, sync: bool) -> Self {
        let workload = workload(seed);
        let mut rng = substream(seed, Salt::Faults);
        let at_ms = rng.random_range(20..=workload.expected_ms().max(60) / 2);
        let faults = vec![
            TimedFault {
                at_ms,
                fault: Fault::PartitionReplica { replica: 0 },
            },
            TimedFault {
                at_ms: at_ms + rng.random_range(1_000..=6_000),
                fault: Fault::RepairReplica { replica: 0 },
            },
        ];
        let replication = ReplicaSet {
            sync,
            replicas: 1,
            trust_claimed_offset: false,
            controllers: 0,
        };
        Self::new(seed, workload, faults, Some(replication))
    }

    /// Scenario `replicas_across_crashes`: a SYNC or ASYNC group of a
    /// master and one or two replicas; per seed (swarm style) replicas
    /// crash (mostly with power loss) and restart, and/or the master
    /// crashes and restarts — it then starts a new epoch, and replicas
    /// holding a tail it lost truncate it before following.
    pub fn replicas_across_crashes(seed: u64) -> Self {
        let workload = workload(seed);
        let mut rng = substream(seed, Salt::Faults);
        let replicas = rng.random_range(1..=2);
        let sync = rng.random_bool(0.5);
        let replica_crash = rng.random_bool(0.7);
        let master_crash = !replica_crash || rng.random_bool(0.5);
        let window_ms = workload.expected_ms().max(60);
        let mut faults = Vec::new();
        if replica_crash {
            let replica = rng.random_range(0..replicas);
            let at_ms = rng.random_range(20..=window_ms);
            faults.push(TimedFault {
                at_ms,
                fault: Fault::CrashReplica {
                    replica,
                    power_loss: rng.random_bool(0.75),
                },
            });
            faults.push(TimedFault {
                at_ms: at_ms + rng.random_range(50..=3_000),
                fault: Fault::RestartReplica { replica },
            });
        }
        if master_crash {
            let at_ms = rng.random_range(20..=window_ms);
            push_crash(&mut faults, at_ms, rng.random_bool(0.75));
            push_restart(&mut faults, at_ms + rng.random_range(50..=2_000));
        }
        faults.sort_by_key(|f| f.at_ms);
        let replication = ReplicaSet {
            sync,
            replicas,
            trust_claimed_offset: false,
            controllers: 0,
        };
        Self::new(seed, workload, faults, Some(replication))
    }

    /// Scenario `failover`: a SYNC-replicated group (master and one or two
    /// replicas, `ASYNC_FLUSH` everywhere, so only replication keeps
    /// acknowledged messages) with one or three controllers. The master
    /// crashes — mostly losing its page cache — while producers send, the
    /// controllers elect a replica, and the old master restarts later and
    /// rejoins as a replica (truncating what it wrote that nobody else
    /// holds). Per seed, a controller also crashes around the failover.
    pub fn failover(seed: u64) -> Self {
        let workload = replicated_workload(seed);
        let mut rng = substream(seed, Salt::Faults);
        let replicas = rng.random_range(1..=2);
        let controllers = if rng.random_bool(0.5) { 3 } else { 1 };
        let at_ms = FIRST_MASTER_MS + rng.random_range(20..=workload.expected_ms() / 2);
        let mut faults = Vec::new();
        push_crash(&mut faults, at_ms, rng.random_bool(0.75));
        push_restart(&mut faults, at_ms + rng.random_range(4_000..=9_000));
        if controllers == 3 && rng.random_bool(0.5) {
            let controller = rng.random_range(0..controllers);
            let crash_ms = at_ms + rng.random_range(0..=4_000);
            faults.push(TimedFault {
                at_ms: crash_ms,
                fault: Fault::CrashController { controller },
            });
            faults.push(TimedFault {
                at_ms: crash_ms + rng.random_range(500..=5_000),
                fault: Fault::RestartController { controller },
            });
        }
        faults.sort_by_key(|f| f.at_ms);
        let replication = ReplicaSet {
            sync: true,
            replicas,
            trust_claimed_offset: false,
            controllers,
        };
        Self::new(seed, workload, faults, Some(replication))
    }

    /// Scenario `isolated_master`: the master of a SYNC-replicated group
    /// with controllers is cut off from its replicas and the controllers —
    /// but not from producers — for 5–10 s; a replica is elected. The old
    /// master must acknowledge nothing meanwhile (every such ack would be
    /// lost when it rejoins and truncates), and rejoins as a replica.
    pub fn isolated_master(seed: u64) -> Self {
        let workload = replicated_workload(seed);
        let mut rng = substream(seed, Salt::Faults);
        let replicas = rng.random_range(1..=2);
        let at_ms = FIRST_MASTER_MS + rng.random_range(20..=workload.expected_ms() / 2);
        let faults = vec![
            TimedFault {
                at_ms,
                fault: Fault::IsolateBroker,
            },
            TimedFault {
                at_ms: at_ms + rng.random_range(5_000..=10_000),
                fault: Fault::RejoinBroker,
            },
        ];
        let replication = ReplicaSet {
            sync: true,
            replicas,
            trust_claimed_offset: false,
            controllers: 1,
        };
        Self::new(seed, workload, faults, Some(replication))
    }

    /// The same plan with every replica cut off from the master for the
    /// 800 ms before its first crash (healed 500 ms after it): what the
    /// master wrote in that window exists nowhere else when it crashes.
    #[must_use]
    pub fn cutting_replicas_before_crash(mut self) -> Self {
        let replicas = self.replication.map_or(0, |r| r.replicas);
        let Some(crash_ms) = self
            .faults
            .iter()
            .find(|f| matches!(f.fault, Fault::CrashBroker { .. }))
            .map(|f| f.at_ms)
        else {
            return self;
        };
        for replica in 0..replicas {
            self.faults.push(TimedFault {
                at_ms: crash_ms.saturating_sub(800),
                fault: Fault::PartitionReplica { replica },
            });
            self.faults.push(TimedFault {
                at_ms: crash_ms + 500,
                fault: Fault::RepairReplica { replica },
            });
        }
        self.faults.sort_by_key(|f| f.at_ms);
        self
    }

    /// The same plan with a master that trusts the offset a replica claims
    /// (a mutant).
    #[must_use]
    pub fn trusting_claimed_offsets(mut self) -> Self {
        if let Some(r) = &mut self.replication {
            r.trust_claimed_offset = true;
        }
        self
    }

    /// The same plan on a broker device without power-safe overwrite: at a
    /// power loss a sector being rewritten may come back as garbage.
    #[must_use]
    pub fn without_power_safe_overwrite(mut self) -> Self {
        self.garbage_sectors = true;
        self
    }

    /// The same plan with about half the messages delayed (delay levels and
    /// timers), and a drain that waits until they are all due.
    #[must_use]
    pub fn with_delays(mut self) -> Self {
        self.workload.deferral = Deferral::Delays;
        self.workload.drain_wait_ms = self.workload.drain_wait_ms.max(DELAY_MS_MAX + 2_000);
        self
    }
}
