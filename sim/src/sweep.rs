//! The seeded swarm sweep: run one swarm seed (`scenarios::SwarmRun`) as
//! its family's scenario test would judge it, record which fault classes
//! actually fired, sum outcomes over a sweep, and shrink a failing plan by
//! dropping its faults (each with its heal) while it still fails.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use scenarios::swarm::FAMILIES;
pub use scenarios::FaultClass;
use scenarios::{Family, Fault, Flush, Plan, SwarmRun};
use sluice_core::FlushMode;

use crate::client::REQUEST_TIMEOUT_MS;
use crate::history::{Entry, Event};
use crate::oracle::{
    acks_after_fence, late_deliveries, skipped_deliveries, OracleConfig, WakeupBounds,
};
use crate::run::{run_plan, RunReport};
use crate::workload::LONG_POLL_HOLD;

/// A connected long-polling consumer gets a new message this fast (as in
/// the `long_poll_across_partition` scenario).
const DELIVERY_MS_MAX: u64 = 500;

/// What one seed's run came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeedOutcome {
    /// The run seed.
    pub seed: u64,
    /// Its family.
    pub family: Family,
    /// `None` when the run passed; else the readable failure (its first
    /// line names the first violations).
    pub failure: Option<String>,
    /// The fault classes that actually fired.
    pub fired: BTreeSet<FaultClass>,
    /// The BUGGIFY sites that fired.
    pub sites: BTreeSet<&'static str>,
    /// The run's trace hash (`None` if the simulation itself failed).
    pub trace_hash: Option<u64>,
}

impl SeedOutcome {
    /// The failure's first line: the first violations, or the error.
    pub fn first_violation(&self) -> Option<&str> {
        self.failure
            .as_deref()
            .map(|f| f.lines().next().unwrap_or(""))
    }
}

/// The store's flush mode for the swarm's.
pub fn flush_mode(flush: Flush) -> FlushMode {
    match flush {
        Flush::Sync => FlushMode::Sync,
        Flush::Async => FlushMode::Async,
    }
}

/// The cargo profile replay commands build with: `test` shares its
/// artifacts with `cargo test -p sim`, so a replay builds in seconds (see
/// `docs/simulation.md` for the measurement).
pub const SWEEP_PROFILE: &str = "test";

/// The command that replays swarm seed `seed` with its readable trace.
pub fn replay_command(seed: u64) -> String {
    format!("cargo run -p sim --profile {SWEEP_PROFILE} --bin sweep -- replay --seed {seed}")
}

/// Runs swarm seed `seed`.
pub fn run_seed(seed: u64) -> SeedOutcome {
    run_swarm(&SwarmRun::from_seed(seed))
}

/// Runs `run` and judges it as its family's scenario test does.
pub fn run_swarm(run: &SwarmRun) -> SeedOutcome {
    match run_report(run) {
        Ok(report) => SeedOutcome {
            seed: run.plan.seed,
            family: run.family,
            failure: judge(run, &report),
            fired: fired_classes(&report),
            sites: report
                .buggify
                .iter()
                .filter(|s| s.fired > 0)
                .map(|s| s.site)
                .collect(),
            trace_hash: Some(report.trace_hash),
        },
        Err(e) => SeedOutcome {
            seed: run.plan.seed,
            family: run.family,
            failure: Some(format!("simulation failed: {e}\n  plan: {:?}", run.plan)),
            fired: BTreeSet::new(),
            sites: BTreeSet::new(),
            trace_hash: None,
        },
    }
}

/// Runs `run`'s plan in its flush mode with its oracle setting.
pub fn run_report(run: &SwarmRun) -> Result<RunReport, String> {
    run_plan(
        &run.plan,
        flush_mode(run.flush),
        OracleConfig {
            acked_must_survive: run.acked_must_survive,
        },
    )
}

/// The oracle's failure, else the family's own timing checks' failure:
/// no ack after a fence (the EIO families) and no late long-poll delivery.
pub fn judge(run: &SwarmRun, report: &RunReport) -> Option<String> {
    if let Some(failure) = report.failure() {
        return Some(failure);
    }
    match run.family {
        Family::FsyncEio | Family::FsyncEioPageCacheSurvives => {
            let crash_ms = first_at(&run.plan, |f| matches!(f, Fault::CrashBroker { .. }));
            let late = acks_after_fence(&report.entries, fenced, crash_ms.unwrap_or(u64::MAX));
            (!late.is_empty())
                .then(|| report.describe(&format!("acknowledged while fenced: {late:?}")))
        }
        Family::LongPollPartition => {
            let cut = first_at(&run.plan, |f| *f == Fault::PartitionConsumers)
                .zip(first_at(&run.plan, |f| *f == Fault::RepairConsumers));
            let hold_ms = u64::try_from(LONG_POLL_HOLD.as_millis()).unwrap_or(u64::MAX);
            let late = late_deliveries(
                &report.entries,
                WakeupBounds {
                    delivery_ms_max: DELIVERY_MS_MAX,
                    cut_ms: cut,
                    stall_ms_max: REQUEST_TIMEOUT_MS + hold_ms,
                },
            );
            (!late.is_empty()).then(|| {
                let first: Vec<_> = late.iter().take(5).collect();
                report.describe(&format!(
                    "{} late deliveries (id, acked ms, delivered ms), first: {first:?}",
                    late.len()
                ))
            })
        }
        Family::DiskFull | Family::ReadEio | Family::ConsumeQueueLost => {
            let skipped = skipped_deliveries(&report.entries);
            (!skipped.is_empty())
                .then(|| report.describe(&format!("long-polling consumers skipped {skipped:?}")))
        }
        _ => None,
    }
}

/// A producer saw the broker refuse a send because it is fenced.
fn fenced(e: &Event) -> bool {
    matches!(e, Event::SendInfo { reason, .. } if reason.starts_with("SERVICE_NOT_AVAILABLE"))
}

fn first_at(plan: &Plan, wanted: impl Fn(&Fault) -> bool) -> Option<u64> {
    plan.faults
        .iter()
        .find(|f| wanted(&f.fault))
        .map(|f| f.at_ms)
}

/// The fault classes that fired: the plan's faults the history records as
/// injected, and what the broker disk's counters say happened to it.
pub fn fired_classes(report: &RunReport) -> BTreeSet<FaultClass> {
    injected_classes(&report.entries)
        .into_iter()
        .chain(
            [
                (report.disk.pages_torn, FaultClass::TornPages),
                (report.disk.pages_lost, FaultClass::LostPages),
                (report.disk.pages_garbage, FaultClass::GarbagePages),
                (report.disk.eio_injected, FaultClass::SyncEio),
                (
                    report.buggify.iter().map(|s| s.fired).sum(),
                    FaultClass::Buggify,
                ),
                (report.disk.enospc, FaultClass::DiskFull),
                (report.disk.read_eio_injected, FaultClass::ReadEio),
                (report.disk.files_lost, FaultClass::ConsumeQueueLost),
            ]
            .into_iter()
            .filter(|(count, _)| *count > 0)
            .map(|(_, class)| class),
        )
        .collect()
}

/// The classes of the planned faults the history records as injected.
fn injected_classes(entries: &[Entry]) -> BTreeSet<FaultClass> {
    entries
        .iter()
        .filter_map(|e| e.event.planned_fault())
        .filter_map(Fault::class)
        .collect()
}

/// One failing seed in a sweep.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SweepFailure {
    /// The seed.
    pub seed: u64,
    /// Its family's name.
    pub family: &'static str,
    /// The failure's first line.
    pub first_violation: String,
}

/// What a sweep (or a share of one) found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SweepSummary {
    /// Seeds run.
    pub seeds_run: u64,
    /// Runs per family name.
    pub families: BTreeMap<&'static str, u64>,
    /// Runs in which each fault class fired.
    pub fired: BTreeMap<FaultClass, u64>,
    /// Runs in which each BUGGIFY site fired.
    pub sites: BTreeMap<String, u64>,
    /// The failing seeds, in the order they ran.
    pub failures: Vec<SweepFailure>,
}

impl SweepSummary {
    /// Counts one outcome.
    pub fn add(&mut self, outcome: &SeedOutcome) {
        self.seeds_run += 1;
        *self.families.entry(outcome.family.name()).or_default() += 1;
        for class in &outcome.fired {
            *self.fired.entry(*class).or_default() += 1;
        }
        for site in &outcome.sites {
            *self.sites.entry((*site).to_owned()).or_default() += 1;
        }
        if let Some(first) = outcome.first_violation() {
            self.failures.push(SweepFailure {
                seed: outcome.seed,
                family: outcome.family.name(),
                first_violation: first.to_owned(),
            });
        }
    }

    /// Adds another share's counts and failures.
    pub fn merge(&mut self, other: &Self) {
        self.seeds_run += other.seeds_run;
        for (family, n) in &other.families {
            *self.families.entry(family).or_default() += n;
        }
        for (class, n) in &other.fired {
            *self.fired.entry(*class).or_default() += n;
        }
        for (site, n) in &other.sites {
            *self.sites.entry(site.clone()).or_default() += n;
        }
        self.failures.extend(other.failures.iter().cloned());
        self.failures.sort_by_key(|f| f.seed);
    }

    /// The summary as lines of `key value…` (how a child process of a
    /// parallel sweep hands its share back); [`SweepSummary::parse`] reads
    /// them.
    pub fn to_lines(&self) -> String {
        let mut out = format!("seeds {}\n", self.seeds_run);
        for (family, n) in &self.families {
            let _ = writeln!(out, "family {family} {n}");
        }
        for (class, n) in &self.fired {
            let _ = writeln!(out, "fired {} {n}", class.name());
        }
        for (site, n) in &self.sites {
            let _ = writeln!(out, "site {site} {n}");
        }
        for f in &self.failures {
            let text = f.first_violation.replace(['\n', '\r'], " ");
            let _ = writeln!(out, "failure {} {} {text}", f.seed, f.family);
        }
        out
    }

    /// Reads [`SweepSummary::to_lines`]' output; `Err` names a bad line.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut summary = Self::default();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            summary
                .parse_line(line)
                .ok_or_else(|| format!("bad summary line: {line:?}"))?;
        }
        Ok(summary)
    }

    fn parse_line(&mut self, line: &str) -> Option<()> {
        let mut words = line.splitn(4, ' ');
        match words.next()? {
            "seeds" => self.seeds_run += words.next()?.parse::<u64>().ok()?,
            "family" => {
                let family = family_named(words.next()?)?;
                *self.families.entry(family.name()).or_default() +=
                    words.next()?.parse::<u64>().ok()?;
            }
            "fired" => {
                let class = FaultClass::named(words.next()?)?;
                *self.fired.entry(class).or_default() += words.next()?.parse::<u64>().ok()?;
            }
            "site" => {
                let site = words.next()?.to_owned();
                *self.sites.entry(site).or_default() += words.next()?.parse::<u64>().ok()?;
            }
            "failure" => {
                let seed = words.next()?.parse().ok()?;
                let family = family_named(words.next()?)?.name();
                let first_violation = words.next().unwrap_or("").to_owned();
                self.failures.push(SweepFailure {
                    seed,
                    family,
                    first_violation,
                });
            }
            _ => return None,
        }
        Some(())
    }

    /// The readable report: seeds, rate, failures with replay commands,
    /// and how often each family ran and each fault class fired.
    pub fn report(&self, elapsed_s: f64, replay: impl Fn(u64) -> String) -> String {
        let mut out = String::new();
        #[expect(
            clippy::cast_precision_loss,
            reason = "a rate for people to read; seed counts are far below 2^52"
        )]
        let rate = self.seeds_run as f64 / elapsed_s.max(f64::EPSILON);
        let _ = writeln!(
            out,
            "seeds run: {} in {elapsed_s:.1} s ({rate:.2} seeds/s)",
            self.seeds_run
        );
        let _ = writeln!(out, "failures: {}", self.failures.len());
        for f in &self.failures {
            let _ = writeln!(
                out,
                "  seed {} ({}): {}\n    replay: {}",
                f.seed,
                f.family,
                f.first_violation,
                replay(f.seed)
            );
        }
        let _ = writeln!(out, "runs per family:");
        for (family, _) in FAMILIES {
            let n = self.families.get(family.name()).copied().unwrap_or(0);
            let _ = writeln!(out, "  {:<32} {n}", family.name());
        }
        let _ = writeln!(out, "runs in which each fault class fired:");
        for class in FaultClass::ALL {
            let n = self.fired.get(&class).copied().unwrap_or(0);
            let _ = writeln!(out, "  {:<32} {n}", class.name());
        }
        let _ = writeln!(out, "runs in which each BUGGIFY site fired:");
        for (site, n) in &self.sites {
            let _ = writeln!(out, "  {site:<56} {n}");
        }
        out
    }
}

fn family_named(name: &str) -> Option<Family> {
    FAMILIES.iter().map(|(f, _)| *f).find(|f| f.name() == name)
}

/// The plan's faults as droppable units (indices into `plan.faults`): each
/// crash with the restart after it, each partition, hold or isolation with
/// its heal (`Fault::heal`); a fault nothing closes stands alone.
pub fn fault_units(plan: &Plan) -> Vec<Vec<usize>> {
    let mut taken = vec![false; plan.faults.len()];
    let mut units = Vec::new();
    for i in 0..plan.faults.len() {
        if taken[i] {
            continue;
        }
        taken[i] = true;
        let mut unit = vec![i];
        let opener = plan.faults[i].fault;
        if let Some(j) =
            (i + 1..plan.faults.len()).find(|&j| !taken[j] && plan.faults[j].fault.closes(opener))
        {
            taken[j] = true;
            unit.push(j);
        }
        units.push(unit);
    }
    units
}

/// `plan` without the faults at `unit`'s indices.
pub fn without_unit(plan: &Plan, unit: &[usize]) -> Plan {
    let mut smaller = plan.clone();
    smaller.faults = plan
        .faults
        .iter()
        .enumerate()
        .filter(|(i, _)| !unit.contains(i))
        .map(|(_, f)| *f)
        .collect();
    smaller
}

/// The result of shrinking.
#[derive(Clone, Debug)]
pub struct Shrunk {
    /// The smallest failing run found.
    pub run: SwarmRun,
    /// How many candidate runs it took.
    pub tries: u32,
}

/// Shrinks a run that `fails`: drops one fault unit at a time (see
/// [`fault_units`]), keeping each drop while the run still fails, until no
/// unit can go; then drops a producer or halves the messages per producer
/// while it still fails. The result never has more faults or work than `run`.
pub fn shrink(run: &SwarmRun, mut fails: impl FnMut(&SwarmRun) -> bool) -> Shrunk {
    let mut best = run.clone();
    let mut tries = 0;
    'drop: loop {
        for unit in fault_units(&best.plan) {
            let candidate = best.clone().with_plan(without_unit(&best.plan, &unit));
            tries += 1;
            if fails(&candidate) {
                best = candidate;
                continue 'drop;
            }
        }
        break;
    }
    'lower: loop {
        for smaller in smaller_workloads(&best.plan) {
            let candidate = best.clone().with_plan(smaller);
            tries += 1;
            if fails(&candidate) {
                best = candidate;
                continue 'lower;
            }
        }
        break;
    }
    Shrunk { run: best, tries }
}

/// `plan` with one producer fewer, and with half the messages per
/// producer (each only while there is something to take away).
fn smaller_workloads(plan: &Plan) -> Vec<Plan> {
    let mut smaller = Vec::new();
    if plan.workload.producers > 1 {
        let mut p = plan.clone();
        p.workload.producers -= 1;
        smaller.push(p);
    }
    if plan.workload.messages_per_producer > 1 {
        let mut p = plan.clone();
        p.workload.messages_per_producer /= 2;
        smaller.push(p);
    }
    smaller
}

/// Shrinks `run` if it fails when run for real; `None` if it passes.
pub fn shrink_failing(run: &SwarmRun) -> Option<Shrunk> {
    let fails = |r: &SwarmRun| run_swarm(r).failure.is_some();
    fails(run).then(|| shrink(run, fails))
}

#[cfg(test)]
mod tests;
