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
use sluice_core::buggify::SiteReport;
use sluice_core::testing::{SimDisk, SimDiskConfig, SimDiskStats};
use sluice_core::FlushMode;

use crate::group::{monitor, GroupProgress, MONITOR};
use crate::harness::{add_broker, broker_config, builder, replica_host, slow_syncs, BROKER};
use crate::history::{trace_hash, Entry, Event, History, Injected};
use crate::nemesis::{self, Cluster};
use crate::oracle::{
    check, check_group, early_deliveries, GroupBounds, OracleConfig, Verdict, Violation,
};
use crate::replica_group::{add_controllers, add_replicas, replica_violations};
use crate::transactions::produce_transactions;
use crate::workload::{drain, long_poll, produce};
use sluice_node::testing::Skew;

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

/// The lock that runs one simulation at a time in this process.
fn one_simulation_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    // A panic in another run only poisons the lock; the guarded state is ().
    ONE_SIMULATION_AT_A_TIME
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
}

/// Runs `plan` against a broker in `flush_mode` and checks the history.
/// `Err` when the simulation itself fails (a host returned an error or
/// panicked, or the time budget ran out).
pub fn run_plan(
    plan: &Plan,
    flush_mode: FlushMode,
    oracle: OracleConfig,
) -> Result<RunReport, String> {
    let _one = one_simulation_at_a_time();
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
            // Half the seeds verify the log ahead of recovery's walk
            // (inline), half walk alone.
            helper_inline: plan.seed % 2 == 1,
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
    let cluster = Cluster {
        plan,
        broker_disk: &disk,
        broker_skew: &broker_skew,
        replica_skews: &replica_skews,
        replica_disks: &replicas,
        controller_disks: &controllers,
        history: &history,
        progress: &progress,
    };
    safety_phase(&mut sim, &cluster)?;
    // A plan shrunk to a fill without its free must still drain.
    disk.set_full(false);
    liveness_phase(&mut sim, plan, replicas.len(), &history)?;
    let end_ms = now_ms(&sim);
    let figures = crate::stats_check::take_figures();
    drop(sim);
    let entries = history.entries();
    let verdict = judge(plan, oracle, &entries, &disk, &replicas, &config, &figures)?;
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
        history.record_at(now_ms(sim), restart_for_drain(BROKER));
    }
    for i in 0..replicas {
        let host = replica_host(u32::try_from(i).unwrap_or(u32::MAX));
        if !sim.is_host_running(host.as_str()) {
            sim.bounce(host.as_str());
            history.record_at(now_ms(sim), restart_for_drain(&host));
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
        // Retention sees a full device while it is full (it lasts ~1 s).
        config.retention_interval_ms = TINY_FILES_RETENTION_INTERVAL_MS;
    }
    if plan.tuning.mutant_force_retention {
        config.store.disk_pressure_retention = sluice_core::DiskPressureRetention::Force;
    }
    config.store.mutant_shifted_rebuild = plan.tuning.mutant_shifted_rebuild;
    config.stats = !plan.tuning.mutant_no_stats;
    config.mutant_dedupe_not_rebuilt = plan.tuning.mutant_dedupe_not_rebuilt;
    config.mutant_dedupe_saved_not_replayed = plan.tuning.mutant_dedupe_saved_not_replayed;
    if let Some(ms) = plan.tuning.dedupe_save_interval_ms {
        config.dedupe_save_interval_ms = ms;
    }
    config.mutant_commit_lookup_misses = plan.tuning.mutant_commit_lookup_misses;
    config.mutant_pop_ack_not_durable = plan.tuning.mutant_pop_ack_not_durable;
    config.mutant_pop_never_revives = plan.tuning.mutant_pop_never_revives;
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
    figures: &std::collections::BTreeMap<String, sluice_node::broker::BrokerStatsSnapshot>,
) -> Result<Verdict, String> {
    let events: Vec<Event> = entries.iter().map(|e| e.event.clone()).collect();
    let mut verdict = check(&events, oracle);
    if config.dedupe_window_ms > 0 && config.dedupe_window_keys > 0 {
        verdict
            .violations
            .extend(crate::oracle::stored_twice(&events));
    }
    verdict
        .violations
        .extend(crate::stats_check::violations(plan, entries, figures));
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
    if plan.workload.pop_consumers > 0 {
        let pop = crate::oracle::pop::check_pop(entries, oracle.acked_must_survive);
        verdict
            .violations
            .extend(pop.into_iter().map(Violation::Pop));
    }
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
    for c in 0..plan.workload.pop_consumers {
        let consumer = crate::pop::pop_consume(
            plan.seed,
            c,
            plan.workload.clone(),
            Rc::clone(&progress.producers_finished),
            history.clone(),
        );
        sim.client(format!("pop{c}"), consumer);
    }
    crate::routes::start_watcher(sim, plan, &progress, history);
    progress
}

/// Steps until every client finished and every planned fault was applied
/// (by the nemesis, each at its time). A consumer group runs on until its
/// monitor sees it caught up, which it only looks for once `progress` says
/// the faults are all applied.
fn safety_phase(sim: &mut turmoil::Sim<'_>, cluster: &Cluster<'_>) -> Result<(), String> {
    let mut faults = cluster.plan.faults.iter().peekable();
    loop {
        let now = now_ms(sim);
        while let Some(f) = faults.next_if(|f| f.at_ms <= now) {
            nemesis::inject(sim, cluster, f.fault, now);
        }
        if faults.peek().is_none() {
            cluster.progress.faults_applied.set(true);
        }
        let clients_done = sim.step().map_err(|e| format!("safety phase: {e}"))?;
        if clients_done && faults.peek().is_none() {
            return Ok(());
        }
    }
}

/// Retention period of a broker on tiny files, whose disk-full faults
/// last 0.3–1.5 s: disk-pressure retention and the reject ratio get to run.
const TINY_FILES_RETENTION_INTERVAL_MS: u64 = 250;

/// Tiny files: a CommitLog segment holds a handful of records (each group
/// commit pads to a 512 B sector), a ConsumeQueue segment 8 entries, an
/// index file 4 keys — so all three roll over every few messages.
fn tiny_files(store: &mut sluice_core::StoreConfig) {
    store.commit_log_segment_bytes = 4 * 1024;
    store.cq_entries_per_segment = 8;
    store.index_slots = 4;
    store.index_entries = 4;
}

/// How long replicas get, after the drain, to fetch what is left.
const REPLICAS_SETTLE: std::time::Duration = std::time::Duration::from_secs(3);

/// Host name of producer `p`.
pub(crate) fn producer_host(p: u32) -> String {
    format!("producer{p}")
}

/// Host name of the consumer of queue `q`.
pub(crate) fn consumer_host(q: i32) -> String {
    format!("consumer{q}")
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

/// The liveness phase started `host` again: it was down when the safety
/// phase ended.
fn restart_for_drain(host: &str) -> Event {
    Event::Fault {
        fault: Injected::RestartForDrain {
            host: host.to_owned(),
        },
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
            match &e.event {
                Event::Fault { fault } => println!("{:>7} ms  fault: {fault}", e.at_ms),
                event => println!("{:>7} ms  {event:?}", e.at_ms),
            }
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
