//! One real-process chaos run: start the cluster, run the workload while
//! the nemesis applies the schedule, heal everything, check that sends are
//! acknowledged again (liveness), drain every queue, and hand the history
//! to the simulation's oracle (`oracle::check` and the dedupe check).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::cluster::{Cluster, Tools};
use super::schedule::{schedule, Class, Step};
use super::workload::{drain, long_poll, Recorder, Sender, QUEUES};
use crate::history::{Entry, Event, Injected};
use crate::oracle::{check, stored_twice, OracleConfig, Verdict};

/// What a run is asked to do.
#[derive(Clone, Copy, Debug)]
pub struct ChaosConfig {
    /// The schedule's seed.
    pub seed: u64,
    /// How long the fault schedule runs, in ms (it always has its first
    /// round, every class once).
    pub budget_ms: u64,
    /// Sequential producers.
    pub producers: u32,
}

/// What a run did and what the oracle said.
#[derive(Clone, Debug)]
pub struct Report {
    /// The schedule run.
    pub steps: Vec<Step>,
    /// Faults injected, per class.
    pub injected: BTreeMap<Class, u32>,
    /// Classes not injectable here, and why.
    pub skipped: BTreeMap<Class, String>,
    /// Steps that failed to apply, and why.
    pub failed_steps: Vec<String>,
    /// Every recorded event.
    pub events: Vec<Event>,
    /// The same, with the ms since the start of the run.
    pub entries: Vec<Entry>,
    /// Queues whose head retention had removed when the drain read them,
    /// with the first offset still stored.
    pub floors: BTreeMap<i32, u64>,
    /// The oracle's verdict (with the dedupe check's violations).
    pub verdict: Verdict,
    /// Acknowledged sends after the final heal.
    pub acked_after_heal: u64,
    /// Distinct messages the long-polling consumers received.
    pub delivered: usize,
    /// Wall time of the run, in ms.
    pub elapsed_ms: u64,
}

/// How long sends continue after the final heal: longer than the
/// broker's retention pass interval (10 s), which is when a broker that
/// refused puts on a full disk notices the space came back.
const TAIL: Duration = Duration::from_secs(15);
/// How long the group may take to route a master at start.
const FIRST_MASTER_TIMEOUT: Duration = Duration::from_secs(30);

/// The history judged by the oracle exactly as a simulation's: SYNC
/// replication with the flush wait means no acknowledged message may be
/// lost; the broker's dedupe window is on, so no retried send may be
/// stored twice.
pub fn judge(events: &[Event]) -> Verdict {
    let mut verdict = check(
        events,
        OracleConfig {
            acked_must_survive: true,
        },
    );
    verdict.violations.extend(stored_twice(events));
    verdict
}

/// Runs the chaos test. `Err` when the cluster could not be set up or
/// never elected a master (a skip is decided before, by the caller).
pub async fn run(config: ChaosConfig) -> Result<Report, String> {
    let tools = Tools::probe();
    let steps = schedule(config.seed, config.budget_ms);
    let mut cluster = Cluster::new(tools)?;
    let rec = Recorder::new();
    start(&mut cluster, &rec).await?;
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    let mut acked = Vec::new();
    for p in 0..config.producers {
        let sender = Sender::new(&cluster.namesrv_addr, p);
        acked.push(Arc::clone(&sender.acked));
        tasks.push(tokio::spawn(sender.run(rec.clone(), Arc::clone(&stop))));
    }
    for q in 0..QUEUES {
        let (ns, rec, stop) = (cluster.namesrv_addr.clone(), rec.clone(), Arc::clone(&stop));
        tasks.push(tokio::spawn(long_poll(ns, q, rec, stop)));
    }
    let mut report = Report {
        steps: steps.clone(),
        injected: BTreeMap::new(),
        skipped: BTreeMap::new(),
        failed_steps: Vec::new(),
        events: Vec::new(),
        entries: Vec::new(),
        floors: BTreeMap::new(),
        verdict: Verdict::default(),
        acked_after_heal: 0,
        delivered: 0,
        elapsed_ms: 0,
    };
    let outcome = nemesis(&mut cluster, &steps, &rec, tools, &mut report).await;
    let healed = cluster.heal_all().await;
    let total = || acked.iter().map(|a| a.load(Ordering::Relaxed)).sum::<u64>();
    let before_tail = total();
    tokio::time::sleep(TAIL).await;
    report.acked_after_heal = total() - before_tail;
    stop.store(true, Ordering::Release);
    for t in tasks {
        let _ = t.await;
    }
    outcome?;
    healed?;
    // Read from a master: a replica answers "nothing new" at its own end.
    let probe = cluster.client("chaos-drain-probe");
    let deadline = tokio::time::Instant::now() + FIRST_MASTER_TIMEOUT;
    while cluster.master(&probe).await.is_none() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    report.floors = drain(&cluster.namesrv_addr, &rec).await;
    report.entries = rec.history.entries();
    report.events = rec.history.events();
    report.verdict = judge(&report.events);
    report.delivered = delivered(&report.events);
    report.elapsed_ms = rec.now_ms();
    Ok(report)
}

/// Starts the name server and the first broker, waits for it to be
/// routed as master, starts the replicas, and waits for a SYNC send to be
/// acknowledged (a replica is in sync).
async fn start(cluster: &mut Cluster, rec: &Recorder) -> Result<(), String> {
    cluster.start_namesrv_and_first().await?;
    // The first broker becomes master on its first heartbeat; SYNC sends
    // are acknowledged once a replica is in sync.
    let probe = cluster.client("chaos-start-probe");
    let deadline = tokio::time::Instant::now() + FIRST_MASTER_TIMEOUT;
    while cluster.master(&probe).await.is_none() {
        if tokio::time::Instant::now() > deadline {
            return Err("no master was elected".into());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    cluster.start_replicas().await?;
    let mut warm = Sender::new(&cluster.namesrv_addr, 99);
    while !warm.send_next(rec).await {
        if tokio::time::Instant::now() > deadline {
            let last = rec.history.events().into_iter().last();
            return Err(format!("no SYNC send was acknowledged; the last: {last:?}"));
        }
    }
    Ok(())
}

/// Applies each step at its time and heals it after its hold, recording
/// every fault in the history.
async fn nemesis(
    cluster: &mut Cluster,
    steps: &[Step],
    rec: &Recorder,
    tools: Tools,
    report: &mut Report,
) -> Result<(), String> {
    let probe = cluster.client("chaos-probe");
    let start_ms = rec.now_ms();
    for step in steps {
        let class = step.fault.class();
        let wait = (start_ms + step.at_ms).saturating_sub(rec.now_ms());
        tokio::time::sleep(Duration::from_millis(wait)).await;
        if let Some(why) = tools.missing_for(class) {
            report.skipped.insert(class, why.to_owned());
            continue;
        }
        let master = cluster.master(&probe).await.unwrap_or(0);
        match cluster.apply(step.fault, master) {
            Ok((target, what)) => {
                let names = cluster.broker_names();
                rec.record(Event::Fault {
                    fault: Injected::Real {
                        class: format!("{class:?}"),
                        what: format!("{what} on {}", names[target]),
                    },
                });
                *report.injected.entry(class).or_default() += 1;
                tokio::time::sleep(Duration::from_millis(step.hold_ms)).await;
                cluster.heal(step.fault, target).await?;
                rec.record(Event::Fault {
                    fault: Injected::RealHealed {
                        class: format!("{class:?}"),
                        what: format!("{what} on {}", names[target]),
                    },
                });
            }
            Err(e) => report.failed_steps.push(format!("{step:?}: {e}")),
        }
    }
    Ok(())
}

/// Distinct messages the long-polling consumers received.
fn delivered(events: &[Event]) -> usize {
    let mut ids = std::collections::BTreeSet::new();
    for e in events {
        if let Event::Delivered { records, .. } = e {
            ids.extend(records.iter().map(|(_, id)| id.as_str()));
        }
    }
    ids.len()
}

impl Report {
    /// The figures docs/chaos.md records, one per line.
    pub fn summary(&self) -> String {
        use std::fmt::Write as _;
        let s = self.verdict.summary;
        let mut out = String::new();
        let _ = writeln!(out, "faults injected per class:");
        for class in Class::ALL {
            let n = self.injected.get(&class).copied().unwrap_or(0);
            match self.skipped.get(&class) {
                Some(why) => {
                    let _ = writeln!(out, "  {class:?}: {n} (skipped: {why})");
                }
                None => {
                    let _ = writeln!(out, "  {class:?}: {n}");
                }
            }
        }
        for e in &self.entries {
            if let Event::Fault { fault } = &e.event {
                let _ = writeln!(out, "  {:>7} ms  {fault}", e.at_ms);
            }
        }
        for f in &self.failed_steps {
            let _ = writeln!(out, "  step not applied: {f}");
        }
        let _ = writeln!(
            out,
            "sends: {} messages invoked, {} acknowledged, {} failed, {} indeterminate \
             ({} of them stored anyway)",
            s.invoked, s.acked, s.failed, s.indeterminate, s.recovered
        );
        let _ = writeln!(
            out,
            "reads: {} distinct messages delivered to the long-polling consumers, {} read by \
             the drain, {} read at more than one offset",
            self.delivered, s.read, s.duplicated
        );
        if !self.floors.is_empty() {
            let _ = writeln!(
                out,
                "retention floors met by the drain (queue: first stored offset): {:?}",
                self.floors
            );
        }
        let _ = writeln!(
            out,
            "liveness: {} sends acknowledged in the {} s after the final heal",
            self.acked_after_heal,
            TAIL.as_secs()
        );
        let _ = writeln!(
            out,
            "verdict: {} violations; wall time {} s",
            self.verdict.violations.len(),
            self.elapsed_ms / 1_000
        );
        for v in self.verdict.violations.iter().take(20) {
            let _ = writeln!(out, "  {v}");
        }
        out
    }
}
