//! One run of a plan: build the cluster, start the producers (and the
//! consumers the plan asks for), apply the timed faults while stepping the
//! simulation (the safety phase; a consumer group then runs until it has
//! caught up), make sure the broker is up, drain every queue (the liveness
//! phase), and judge the history with the oracle.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::{Mutex, PoisonError};

use rand::Rng;
use scenarios::{substream, Deferral, Fault, Plan, Salt};
use sluice_core::testing::{SimDisk, SimDiskConfig, SimDiskStats};
use sluice_core::{buggify::SiteReport, disk::Disk as _, FlushMode};
use sluice_node::testing::{SimClock, Skew};

use crate::group::{member_host, monitor, GroupProgress, MONITOR};
use crate::harness::{
    add_broker, add_broker_host_after, add_controller, broker_config, builder, controller_host,
    crash_broker, replica_host, replication_config, slow_syncs, slower_syncs, BROKER, HA_PORT,
};
use crate::history::{trace_hash, Entry, Event, History};
use crate::oracle::replicas::{acks_without_replica, check_agreement, check_caught_up, LogImage};
use crate::oracle::{
    check, check_group, early_deliveries, GroupBounds, OracleConfig, Verdict, Violation,
};
use crate::transactions::produce_transactions;
use crate::workload::{drain, long_poll, produce};

/// With a consumer group, the broker drops a member silent this long (at
/// its next 10 s expiry pass), so a long partition can make the group
/// rebalance; members heartbeat every second.
const GROUP_CLIENT_IDLE_MS: u64 = 3_000;
/// With a consumer group, the broker persists committed offsets this often.
const GROUP_OFFSET_PERSIST_MS: u64 = 1_000;
/// Slack on top of the persist period before a committed offset is surely
/// on disk (the maintenance loop's tick and the write itself).
const OFFSET_PERSIST_SLACK_MS: u64 = 1_000;

/// With transactions, a half left open this long is checked back.
const TRANSACTION_TIMEOUT_MS: u64 = 1_000;
/// With transactions, the broker looks for halves to check this often.
const TRANSACTION_CHECK_INTERVAL_MS: u64 = 500;

/// Everything a run produced.
#[derive(Debug)]
pub struct RunReport {
    /// The plan that ran.
    pub plan: Plan,
    /// The recorded history.
    pub entries: Vec<Entry>,
    /// Simulated time at the end.
    pub end_ms: u64,
    /// The broker disk's counters (which faults fired).
    pub disk: SimDiskStats,
    /// The oracle's verdict.
    pub verdict: Verdict,
    /// Hash of the history and end time: equal runs, equal hashes.
    pub trace_hash: u64,
    /// The BUGGIFY sites the run reached (empty unless the plan enables
    /// them).
    pub buggify: Vec<SiteReport>,
}

/// Serialises simulations within a process: tokio's task ids come from
/// one process-global counter (see [`align_task_ids`]), so simulations
/// running at once on two threads would perturb each other.
static ONE_SIMULATION_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Task-id residue every run starts at (a multiple of tokio's shard count).
const TASK_ID_PERIOD: u64 = 64;

/// tokio's current-thread runtime keeps spawned tasks in 4 lists chosen by
/// task id — a process-global counter — and drops them list by list when
/// the runtime goes (a turmoil crash). That order decides which peer sees
/// its connection close first, so without this a seed's trace depended on
/// the runs before it in the process (found by the determinism test).
/// Burns task ids until the next one is a multiple of [`TASK_ID_PERIOD`].
fn align_task_ids() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("invariant: a bare current-thread runtime builds");
    rt.block_on(async {
        loop {
            let task = tokio::spawn(async {});
            let id: u64 = task.id().to_string().parse().unwrap_or(0);
            let _ = task.await;
            if id % TASK_ID_PERIOD == TASK_ID_PERIOD - 1 {
                return;
            }
        }
    });
}

/// With `SIM_LOG` set (an `EnvFilter`, e.g. `sluice_node=debug`), the
/// production code's logs of the run go to stderr.
fn init_logging() {
    if let Ok(filter) = std::env::var("SIM_LOG") {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_writer(std::io::stderr)
            .try_init();
    }
}

/// Runs `plan` against a broker in `flush_mode` and checks the history.
/// `Err` when the simulation itself fails (a host returned an error or
/// panicked, or the time budget ran out).
pub fn run_plan(
    plan: &Plan,
    flush_mode: FlushMode,
    oracle: OracleConfig,
) -> Result<RunReport, String> {
    // A panic in another run only poisons the lock; the guarded state is ().
    let _one = ONE_SIMULATION_AT_A_TIME
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    align_task_ids();
    init_logging();
    let buggify = plan
        .buggify
        .then(|| sluice_core::buggify::enable(substream(plan.seed, Salt::Buggify).random()));
    let history = History::default();
    let disk = SimDisk::with_config(
        substream(plan.seed, Salt::Disk).random(),
        SimDiskConfig {
            garbage_sectors: plan.garbage_sectors,
            ..SimDiskConfig::default()
        },
    );
    slow_syncs(&disk);
    let mut sim = builder(plan.seed).build();
    let mut config = plan_broker_config(plan, flush_mode);
    crate::routes::add_namesrvs(&mut sim, plan, &mut config);
    let controllers = add_controllers(&mut sim, plan);
    let replica_skews: Vec<Skew> = (0..plan.replication.map_or(0, |r| r.replicas))
        .map(|_| Skew::new(plan.broker_skew_ms))
        .collect();
    let replicas = add_replicas(&mut sim, plan, &mut config, &replica_skews);
    let broker_skew = Skew::new(plan.broker_skew_ms);
    add_broker(&mut sim, &disk, &config, &broker_skew);
    let progress = start_clients(&mut sim, plan, &history);
    let disks = Disks {
        broker: &disk,
        broker_skew: &broker_skew,
        replica_skews: &replica_skews,
        replicas: &replicas,
        controllers: &controllers,
    };
    safety_phase(&mut sim, plan, &disks, &history, &progress)?;
    // A plan shrunk to a fill without its free must still drain.
    disk.set_full(false);
    liveness_phase(&mut sim, plan, replicas.len(), &history)?;
    let end_ms = now_ms(&sim);
    drop(sim);
    let entries = history.entries();
    let verdict = judge(plan, oracle, &entries, &disk, &replicas, &config)?;
    let report = RunReport {
        plan: plan.clone(),
        trace_hash: trace_hash(&entries, end_ms),
        verdict,
        entries,
        end_ms,
        disk: disk.stats(),
        buggify: sluice_core::buggify::report(),
    };
    drop(buggify);
    if std::env::var_os("SIM_TRACE").is_some() {
        report.print_trace();
    }
    Ok(report)
}

/// Runs `plan` in `flush_mode` with the oracle demanding that every
/// acknowledged message survive, as the scenario tests do. `Err` is
/// readable: the simulation's error with the plan, or the oracle's failure.
pub fn run_judged(plan: &Plan, flush_mode: FlushMode) -> Result<RunReport, String> {
    let report = run_plan(
        plan,
        flush_mode,
        OracleConfig {
            acked_must_survive: true,
        },
    )
    .map_err(|e| format!("{e}\n  plan: {plan:?}"))?;
    match report.failure() {
        Some(failure) => Err(failure),
        None => Ok(report),
    }
}

/// The oracle's verdict on `plan` run in `flush_mode`, demanding that
/// every acknowledged message survive (how mutant tests ask whether the
/// oracle caught a broken broker). `Err` when the simulation itself fails.
pub fn run_verdict(plan: &Plan, flush_mode: FlushMode) -> Result<Verdict, String> {
    run_plan(
        plan,
        flush_mode,
        OracleConfig {
            acked_must_survive: true,
        },
    )
    .map(|report| report.verdict)
}

/// Heals the cluster (restarts whatever is down) and drains every queue;
/// with replicas, a quiet spell lets them fetch what the drain left.
fn liveness_phase(
    sim: &mut turmoil::Sim<'_>,
    plan: &Plan,
    replicas: usize,
    history: &History,
) -> Result<(), String> {
    if !sim.is_host_running(BROKER) {
        sim.bounce(BROKER);
        history.record_at(now_ms(sim), fault_event("restart broker for the drain"));
    }
    for i in 0..replicas {
        let host = replica_host(u32::try_from(i).unwrap_or(u32::MAX));
        if !sim.is_host_running(host.as_str()) {
            sim.bounce(host.as_str());
            history.record_at(
                now_ms(sim),
                fault_event(&format!("restart {host} for the drain")),
            );
        }
    }
    sim.client(
        "drain",
        drain(
            plan.seed,
            plan.workload.queues,
            plan.workload.drain_wait_ms,
            plan.workload.deferral == Deferral::Transactions,
            plan.workload.namesrvs,
            history.clone(),
        ),
    );
    sim.run().map_err(|e| format!("drain phase: {e}"))?;
    if replicas > 0 {
        // A quiet spell: replicas fetch whatever the drain left behind.
        sim.client("settle", async {
            tokio::time::sleep(REPLICAS_SETTLE).await;
            Ok(())
        });
        sim.run().map_err(|e| format!("settle phase: {e}"))?;
    }
    Ok(())
}

/// How often the broker persists committed offsets in a run of `plan`.
fn offset_persist_ms(plan: &Plan) -> u64 {
    plan.tuning
        .offset_persist_interval_ms
        .unwrap_or(GROUP_OFFSET_PERSIST_MS)
}

/// The first broker's configuration for `plan`: the harness's, with the
/// settings its consumer group, transactions and tuning ask for.
fn plan_broker_config(plan: &Plan, flush_mode: FlushMode) -> sluice_node::broker::BrokerConfig {
    let mut config = broker_config(flush_mode);
    if plan.workload.group_members > 0 {
        config.client_idle_ms = GROUP_CLIENT_IDLE_MS;
        config.offset_persist_interval_ms = offset_persist_ms(plan);
    }
    if plan.tuning.tiny_files {
        tiny_files(&mut config.store);
    }
    config.store.mutant_shifted_rebuild = plan.tuning.mutant_shifted_rebuild;
    if plan.workload.deferral == Deferral::Transactions {
        config.transaction_timeout_ms = TRANSACTION_TIMEOUT_MS;
        config.transaction_check_interval_ms = TRANSACTION_CHECK_INTERVAL_MS;
    }
    config
}

/// The oracle's verdict on a run's history: the history checks, the
/// timing, group, replica and route checks the plan calls for.
fn judge(
    plan: &Plan,
    oracle: OracleConfig,
    entries: &[Entry],
    disk: &SimDisk,
    replicas: &[SimDisk],
    config: &sluice_node::broker::BrokerConfig,
) -> Result<Verdict, String> {
    let events: Vec<Event> = entries.iter().map(|e| e.event.clone()).collect();
    let mut verdict = check(&events, oracle);
    verdict
        .violations
        .extend(early_deliveries(entries, forward_steps_ms(plan)));
    if plan.workload.group_members > 0 {
        let bounds = group_bounds(plan, offset_persist_ms(plan) + OFFSET_PERSIST_SLACK_MS);
        verdict.violations.extend(check_group(entries, &bounds));
        verdict
            .violations
            .extend(crate::member_crash::unexplained_duplicates(plan, entries));
    }
    verdict
        .violations
        .extend(replica_violations(plan, disk, replicas, config, entries)?);
    verdict
        .violations
        .extend(crate::routes::route_violations(plan, entries));
    Ok(verdict)
}

/// Starts the plan's clients: the producers, and the long-polling
/// consumers or the consumer group (members and offset monitor) it asks for.
fn start_clients(sim: &mut turmoil::Sim<'_>, plan: &Plan, history: &History) -> Rc<GroupProgress> {
    let finished = Rc::new(Cell::new(0));
    for p in 0..plan.workload.producers {
        let (seed, workload, history, finished) = (
            plan.seed,
            plan.workload.clone(),
            history.clone(),
            Rc::clone(&finished),
        );
        if plan.workload.deferral == Deferral::Transactions {
            let producer = produce_transactions(seed, p, workload, history, finished);
            sim.client(producer_host(p), producer);
        } else {
            sim.client(
                producer_host(p),
                produce(seed, p, workload, history, finished),
            );
        }
    }
    if plan.workload.long_poll_consumers {
        for q in 0..plan.workload.queues {
            let consumer = long_poll(
                q,
                plan.workload.producers,
                Rc::clone(&finished),
                history.clone(),
            );
            sim.client(consumer_host(q), consumer);
        }
    }
    let progress = Rc::new(GroupProgress {
        producers_finished: finished,
        producers: plan.workload.producers,
        queues: plan.workload.queues,
        ..GroupProgress::default()
    });
    if plan.workload.group_members > 0 {
        for m in 0..plan.workload.group_members {
            crate::member_crash::start_member(sim, plan, m, &progress, history, false);
        }
        sim.client(MONITOR, monitor(Rc::clone(&progress), history.clone()));
    }
    crate::routes::start_watcher(sim, plan, &progress, history);
    progress
}

/// Steps until every client finished and every planned fault was applied.
/// A consumer group runs on until its monitor sees it caught up, which it
/// only looks for once `progress` says the faults are all applied.
/// The disks and wall-clock skews of a run's hosts, which outlive them.
struct Disks<'a> {
    broker: &'a SimDisk,
    broker_skew: &'a Skew,
    replica_skews: &'a [Skew],
    replicas: &'a [SimDisk],
    controllers: &'a [SimDisk],
}

fn safety_phase(
    sim: &mut turmoil::Sim<'_>,
    plan: &Plan,
    disks: &Disks<'_>,
    history: &History,
    progress: &Rc<GroupProgress>,
) -> Result<(), String> {
    let mut faults = plan.faults.iter().peekable();
    loop {
        let now = now_ms(sim);
        while let Some(f) = faults.next_if(|f| f.at_ms <= now) {
            match f.fault {
                Fault::CrashBroker { power_loss } => {
                    crash_broker(sim);
                    if power_loss {
                        disks.broker.power_loss();
                    } else {
                        disks.broker.process_crash();
                    }
                }
                Fault::RestartBroker => sim.bounce(BROKER),
                Fault::FailNextSync => disks.broker.fail_next_sync(),
                Fault::HoldProducers => each_producer(plan, |p| sim.hold(BROKER, p)),
                Fault::ReleaseProducers => each_producer(plan, |p| sim.release(BROKER, p)),
                Fault::PartitionProducers => each_producer(plan, |p| sim.partition(BROKER, p)),
                Fault::RepairProducers => each_producer(plan, |p| sim.repair(BROKER, p)),
                Fault::PartitionConsumers => each_consumer(plan, |c| sim.partition(BROKER, c)),
                Fault::RepairConsumers => each_consumer(plan, |c| sim.repair(BROKER, c)),
                Fault::PartitionMember { member } => sim.partition(BROKER, member_host(member)),
                Fault::RepairMember { member } => sim.repair(BROKER, member_host(member)),
                Fault::PartitionReplica { replica } => {
                    sim.partition(BROKER, replica_host(replica));
                }
                Fault::RepairReplica { replica } => sim.repair(BROKER, replica_host(replica)),
                Fault::CrashReplica {
                    replica,
                    power_loss,
                } => {
                    sim.crash(replica_host(replica));
                    if let Some(d) = usize::try_from(replica)
                        .ok()
                        .and_then(|i| disks.replicas.get(i))
                    {
                        if power_loss {
                            d.power_loss();
                        } else {
                            d.process_crash();
                        }
                    }
                }
                Fault::RestartReplica { replica } => sim.bounce(replica_host(replica)),
                Fault::CrashController { controller } => {
                    sim.crash(controller_host(controller));
                    if let Some(d) = usize::try_from(controller)
                        .ok()
                        .and_then(|i| disks.controllers.get(i))
                    {
                        d.power_loss();
                    }
                }
                Fault::RestartController { controller } => sim.bounce(controller_host(controller)),
                Fault::IsolateBroker => each_peer(disks, |peer| sim.partition(BROKER, peer)),
                Fault::RejoinBroker => each_peer(disks, |peer| sim.repair(BROKER, peer)),
                Fault::StepBrokerClock { by_ms } => disks.broker_skew.step(by_ms),
                fault @ (Fault::SlowBrokerDisk { .. }
                | Fault::HealBrokerDisk
                | Fault::FillBrokerDisk
                | Fault::FreeBrokerDisk
                | Fault::FailBrokerReads { .. }
                | Fault::LoseConsumeQueues { .. }) => apply_disk_fault(sim, disks.broker, fault),
                Fault::CutResponsesToProducers => {
                    each_producer(plan, |p| sim.partition_oneway(BROKER, p));
                }
                Fault::RestoreResponsesToProducers => {
                    each_producer(plan, |p| sim.repair_oneway(BROKER, p));
                }
                fault @ (Fault::PartitionBrokerFromNamesrv { .. }
                | Fault::RepairBrokerFromNamesrv { .. }
                | Fault::PartitionClientsFromNamesrv { .. }
                | Fault::RepairClientsFromNamesrv { .. }) => {
                    crate::routes::apply_fault(sim, plan, fault);
                }
                Fault::StepReplicaClock { replica, by_ms } => {
                    if let Some(skew) = usize::try_from(replica)
                        .ok()
                        .and_then(|i| disks.replica_skews.get(i))
                    {
                        skew.step(by_ms);
                    }
                }
                fault @ (Fault::JoinMember { .. }
                | Fault::CrashMember { .. }
                | Fault::RestartMember { .. }) => {
                    crate::member_crash::apply_fault(sim, plan, fault, now, progress, history);
                }
            }
            history.record_at(now, fault_event(&format!("{:?}", f.fault)));
        }
        if faults.peek().is_none() {
            progress.faults_applied.set(true);
        }
        let clients_done = sim.step().map_err(|e| format!("safety phase: {e}"))?;
        if clients_done && faults.peek().is_none() {
            return Ok(());
        }
    }
}

/// Applies a fault of the broker's disk: slow syncs, a full device, failing
/// reads, lost ConsumeQueue files.
fn apply_disk_fault(sim: &mut turmoil::Sim<'_>, disk: &SimDisk, fault: Fault) {
    match fault {
        Fault::SlowBrokerDisk { sync_ms } => slower_syncs(disk, sync_ms),
        Fault::HealBrokerDisk => slow_syncs(disk),
        Fault::FillBrokerDisk => disk.set_full(true),
        Fault::FreeBrokerDisk => disk.set_full(false),
        Fault::FailBrokerReads { count } => disk.fail_reads_under(COMMIT_LOG_DIR, count),
        Fault::LoseConsumeQueues { first_only } => lose_consume_queues(sim, disk, first_only),
        _ => {}
    }
}

/// The broker's CommitLog, ConsumeQueue and index directories on its disk
/// (under the store root of [`broker_config`]).
const COMMIT_LOG_DIR: &str = "store/commitlog";
const CONSUME_QUEUE_DIR: &str = "store/consumequeue";
const INDEX_DIR: &str = "store/index";

/// Deletes the broker's ConsumeQueue and index files, or only the first
/// file of each ConsumeQueue — only while it is down (a running broker's
/// open files are not pulled from under it); the disk counts what was lost.
fn lose_consume_queues(sim: &mut turmoil::Sim<'_>, disk: &SimDisk, first_only: bool) {
    if sim.is_host_running(BROKER) {
        return;
    }
    if !first_only {
        disk.remove_under(CONSUME_QUEUE_DIR);
        disk.remove_under(INDEX_DIR);
        return;
    }
    let list = |dir: &str| disk.list(dir).unwrap_or_default();
    for topic in list(CONSUME_QUEUE_DIR) {
        let topic_dir = format!("{CONSUME_QUEUE_DIR}/{topic}");
        for queue in list(&topic_dir) {
            let queue_dir = format!("{topic_dir}/{queue}");
            if let Some(first) = list(&queue_dir).first() {
                disk.remove_under(&format!("{queue_dir}/{first}"));
            }
        }
    }
}

/// Tiny files: a CommitLog segment holds a handful of records (each group
/// commit pads to a 512 B sector), a ConsumeQueue segment 8 entries, an
/// index file 4 keys — so all three roll over every few messages.
fn tiny_files(store: &mut sluice_core::StoreConfig) {
    store.commit_log_segment_bytes = 4 * 1024;
    store.cq_entries_per_segment = 8;
    store.index_slots = 4;
    store.index_entries = 4;
}

/// Every replica and controller host: the first broker's peers.
fn each_peer(disks: &Disks<'_>, mut f: impl FnMut(String)) {
    for i in 0..disks.replicas.len() {
        f(replica_host(u32::try_from(i).unwrap_or(u32::MAX)));
    }
    for i in 0..disks.controllers.len() {
        f(controller_host(u32::try_from(i).unwrap_or(u32::MAX)));
    }
}

/// Starts the plan's controllers, each on its own disk; returns the disks.
fn add_controllers(sim: &mut turmoil::Sim<'_>, plan: &Plan) -> Vec<SimDisk> {
    let count = plan.replication.map_or(0, |r| r.controllers);
    let mut seeds = substream(plan.seed, Salt::Disk);
    // The broker's and the replicas' disks take the stream's first values.
    for _ in 0..4 {
        let _: u64 = seeds.random();
    }
    (0..count)
        .map(|i| {
            let disk = SimDisk::new(seeds.random());
            add_controller(sim, i, count, &disk);
            disk
        })
        .collect()
}

/// With controllers, replicas start this late (see `add_replicas`).
const REPLICA_START_DELAY: std::time::Duration = std::time::Duration::from_millis(2_500);

/// How long replicas get, after the drain, to fetch what is left.
const REPLICAS_SETTLE: std::time::Duration = std::time::Duration::from_secs(3);

/// Adds the plan's replicas (each on its own disk) and makes `config` the
/// master's: broker id 0 of a replicated group. Returns the replicas' disks.
fn add_replicas(
    sim: &mut turmoil::Sim<'_>,
    plan: &Plan,
    config: &mut sluice_node::broker::BrokerConfig,
    skews: &[Skew],
) -> Vec<SimDisk> {
    let Some(set) = plan.replication else {
        return Vec::new();
    };
    let mut master = replication_config(set.sync, None, set.controllers);
    master.mutant_trust_claimed_offset = set.trust_claimed_offset;
    // With controllers every broker needs an id of 1 or more; with fixed
    // roles id 0 is the master.
    let first_id = i64::from(set.controllers > 0);
    config.broker_id = first_id;
    config.replication = Some(master);
    let mut seeds = substream(plan.seed, Salt::Disk);
    let _master_disk_seed: u64 = seeds.random();
    (0..set.replicas)
        .map(|i| {
            let disk = SimDisk::with_config(
                seeds.random(),
                SimDiskConfig {
                    garbage_sectors: plan.garbage_sectors,
                    ..SimDiskConfig::default()
                },
            );
            slow_syncs(&disk);
            let mut rc = config.clone();
            rc.broker_id = first_id + i64::from(i) + 1;
            let master_ha = (set.controllers == 0).then(|| format!("{BROKER}:{HA_PORT}"));
            let mut replica = replication_config(set.sync, master_ha, set.controllers);
            replica.mutant_trust_claimed_offset = set.trust_claimed_offset;
            rc.replication = Some(replica);
            // With controllers the first broker to heartbeat is the first
            // master: replicas start once the controllers have elected it.
            let delay = if set.controllers > 0 {
                REPLICA_START_DELAY
            } else {
                std::time::Duration::ZERO
            };
            add_broker_host_after(
                sim,
                &replica_host(i),
                &disk,
                &rc,
                &skews[usize::try_from(i).unwrap_or(usize::MAX)],
                delay,
            );
            disk
        })
        .collect()
}

/// With replicas: the logs must agree and be caught up, and a SYNC master
/// with one replica must not acknowledge while it is cut off.
fn replica_violations(
    plan: &Plan,
    disk: &SimDisk,
    replicas: &[SimDisk],
    config: &sluice_node::broker::BrokerConfig,
    entries: &[Entry],
) -> Result<Vec<Violation>, String> {
    let Some(set) = plan.replication else {
        return Ok(Vec::new());
    };
    let mut logs = vec![log_image(BROKER, disk, config)?];
    for (i, d) in replicas.iter().enumerate() {
        let host = replica_host(u32::try_from(i).unwrap_or(u32::MAX));
        logs.push(log_image(&host, d, config)?);
    }
    let mut found = check_agreement(&logs);
    found.extend(check_caught_up(&logs));
    if set.sync && set.replicas == 1 {
        found.extend(acks_without_replica(entries, &replica_cuts(plan)));
    }
    Ok(found.into_iter().map(Violation::Replica).collect())
}

/// The windows during which the first replica was cut off from the master.
fn replica_cuts(plan: &Plan) -> Vec<(u64, u64)> {
    let mut cuts = Vec::new();
    let mut open = None;
    for f in &plan.faults {
        match f.fault {
            Fault::PartitionReplica { replica: 0 } => open = open.or(Some(f.at_ms)),
            Fault::RepairReplica { replica: 0 } => {
                if let Some(start) = open.take() {
                    cuts.push((start, f.at_ms));
                }
            }
            _ => {}
        }
    }
    cuts
}

/// The CommitLog `disk` holds, recovered as a replica would open it (no
/// pad of its own), read whole.
fn log_image(
    host: &str,
    disk: &SimDisk,
    config: &sluice_node::broker::BrokerConfig,
) -> Result<LogImage, String> {
    disk.set_sync_delay(None);
    let store_config = sluice_core::StoreConfig {
        replicated: true,
        ..config.store.clone()
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async {
        let store = sluice_core::MessageStore::open(disk.clone(), SimClock::new(0), store_config)
            .await
            .map_err(|e| format!("{host}: cannot open the store after the run: {e}"))?;
        let log = store.commit_log();
        let start = log.min_offset();
        let mut bytes = Vec::new();
        let mut at = start;
        loop {
            let chunk = log
                .read_units(at, 1 << 20)
                .map_err(|e| format!("{host}: cannot read the log at {}: {e}", at.0))?;
            if chunk.is_empty() {
                break;
            }
            at = sluice_core::CommitLogOffset(at.0 + chunk.len() as u64);
            bytes.extend_from_slice(&chunk);
        }
        Ok(LogImage {
            host: host.to_owned(),
            start: start.0,
            bytes,
        })
    })
}

/// Host name of producer `p`.
pub(crate) fn producer_host(p: u32) -> String {
    format!("producer{p}")
}

fn each_producer(plan: &Plan, mut f: impl FnMut(String)) {
    for p in 0..plan.workload.producers {
        f(producer_host(p));
    }
}

/// Host name of the consumer of queue `q`.
fn consumer_host(q: i32) -> String {
    format!("consumer{q}")
}

fn each_consumer(plan: &Plan, mut f: impl FnMut(String)) {
    if plan.workload.long_poll_consumers {
        for q in 0..plan.workload.queues {
            f(consumer_host(q));
        }
    }
}

/// The group checks' view of `plan`: its queues, the broker's outages
/// (each crash with the restart after it) and how long a committed offset
/// takes to be persisted.
fn group_bounds(plan: &Plan, persisted_after_ms: u64) -> GroupBounds {
    let mut outages_ms = Vec::new();
    let mut crashed_at = None;
    for f in &plan.faults {
        match f.fault {
            Fault::CrashBroker { .. } => crashed_at = crashed_at.or(Some(f.at_ms)),
            Fault::RestartBroker => {
                if let Some(crash_ms) = crashed_at.take() {
                    outages_ms.push((crash_ms, f.at_ms));
                }
            }
            _ => {}
        }
    }
    GroupBounds {
        queues: plan.workload.queues,
        outages_ms,
        persisted_after_ms,
    }
}

/// How far the broker's clock was stepped forward in all: a delayed
/// message may be delivered that much early (by the broker's clock it was
/// not). Only the sum bounds it: steps may add up while one waits.
///
/// With replicas' clocks stepped too, the broker that delivers a message
/// may not be the one that stored it (a failover), so what bounds the
/// earliness is how far one broker's clock can run ahead of another's:
/// every step counts, forward (the deliverer ahead) or back (the storer
/// behind).
fn forward_steps_ms(plan: &Plan) -> u64 {
    let replica_steps = plan
        .faults
        .iter()
        .any(|f| matches!(f.fault, Fault::StepReplicaClock { .. }));
    plan.faults
        .iter()
        .filter_map(|f| match f.fault {
            Fault::StepBrokerClock { by_ms } | Fault::StepReplicaClock { by_ms, .. }
                if replica_steps =>
            {
                Some(by_ms.unsigned_abs())
            }
            Fault::StepBrokerClock { by_ms } => u64::try_from(by_ms).ok(),
            _ => None,
        })
        .sum()
}

fn fault_event(description: &str) -> Event {
    Event::Fault {
        description: description.to_owned(),
    }
}

fn now_ms(sim: &turmoil::Sim<'_>) -> u64 {
    u64::try_from(sim.elapsed().as_millis()).unwrap_or(u64::MAX)
}

impl RunReport {
    /// `None` when the oracle found nothing; else a readable failure with
    /// the derived settings, counts, disk faults and the anomalies.
    pub fn failure(&self) -> Option<String> {
        if self.verdict.violations.is_empty() {
            return None;
        }
        Some(self.describe(&format!(
            "{} violation(s), first: {}",
            self.verdict.violations.len(),
            self.verdict
                .violations
                .iter()
                .take(5)
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        )))
    }

    /// Prints the history, the settings and the verdict (`SIM_TRACE=1`).
    #[expect(clippy::print_stdout, reason = "the readable trace of a replayed seed")]
    pub fn print_trace(&self) {
        for e in &self.entries {
            println!("{:>7} ms  {:?}", e.at_ms, e.event);
        }
        println!(
            "{}",
            self.describe(&format!("trace hash {:016x}", self.trace_hash))
        );
        for s in self.buggify.iter().filter(|s| s.fired > 0) {
            println!(
                "BUGGIFY {} fired {} of {} times",
                s.site, s.fired, s.reached
            );
        }
        for v in &self.verdict.violations {
            println!("VIOLATION {v}");
        }
    }

    /// `what`, followed by the plan, the counts and the disk faults.
    pub fn describe(&self, what: &str) -> String {
        format!(
            "{what}\n  plan: {:?}\n  summary: {:?}\n  disk: {:?}\n  end: {} ms",
            self.plan, self.verdict.summary, self.disk, self.end_ms
        )
    }
}
