//! `sweep`: the seeded swarm sweep over `sim::sweep`. `sweep` runs swarm
//! seeds in order until done or the wall-time budget is spent (with
//! `--jobs J`, in J child processes on interleaved shares of the seeds);
//! `replay` prints one seed's trace and verdict; `shrink` prints the
//! smallest failing plan of a failing seed. Exit code 1 on any failure.

use std::process::{Command as Process, ExitCode, Stdio};
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use scenarios::SwarmRun;
use sim::sweep::{judge, replay_command, run_report, run_swarm, shrink_failing, SweepSummary};

#[derive(Parser)]
#[command(name = "sweep", about = "Sluice seeded swarm sweep, replay and shrink")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Runs swarm seeds `A..B` in order until done or the budget is spent.
    Sweep {
        /// Seeds to run: `A..B` (B excluded).
        #[arg(long, value_parser = parse_range)]
        seeds: (u64, u64),
        /// Stop starting new seeds after this many seconds of wall time.
        #[arg(long)]
        budget_s: Option<u64>,
        /// Child processes, each running every J-th seed (runs within one
        /// process are serialised).
        #[arg(long, default_value_t = 1)]
        jobs: u64,
        /// Internal: run share `K/J` (seeds `A+K`, `A+K+J`, …) and print
        /// the summary as lines for the parent.
        #[arg(long, hide = true, value_parser = parse_share)]
        share: Option<(u64, u64)>,
    },
    /// Runs one seed and prints its trace and verdict.
    Replay {
        /// The seed.
        #[arg(long)]
        seed: u64,
    },
    /// Shrinks a failing seed's plan and prints the smallest failing plan.
    Shrink {
        /// The seed.
        #[arg(long)]
        seed: u64,
    },
}

fn parse_range(text: &str) -> Result<(u64, u64), String> {
    let (a, b) = text
        .split_once("..")
        .ok_or_else(|| format!("expected A..B, got {text:?}"))?;
    let a = a.trim().parse().map_err(|e| format!("{a:?}: {e}"))?;
    let b = b.trim().parse().map_err(|e| format!("{b:?}: {e}"))?;
    if a > b {
        return Err(format!("empty range {text:?}"));
    }
    Ok((a, b))
}

fn parse_share(text: &str) -> Result<(u64, u64), String> {
    let (k, j) = text
        .split_once('/')
        .ok_or_else(|| format!("expected K/J, got {text:?}"))?;
    let k: u64 = k.parse().map_err(|e| format!("{k:?}: {e}"))?;
    let j: u64 = j.parse().map_err(|e| format!("{j:?}: {e}"))?;
    if j == 0 || k >= j {
        return Err(format!("bad share {text:?}"));
    }
    Ok((k, j))
}

#[expect(
    clippy::disallowed_methods,
    reason = "the sweep's own elapsed wall time (budget and seeds/s), outside any simulation"
)]
fn wall_clock() -> Instant {
    Instant::now()
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Sweep {
            seeds,
            budget_s,
            jobs,
            share,
        } => sweep(seeds, budget_s.map(Duration::from_secs), jobs, share),
        Command::Replay { seed } => Ok(replay(seed)),
        Command::Shrink { seed } => Ok(shrink(seed)),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("sweep: {e}");
            ExitCode::from(2)
        }
    }
}

/// Runs the sweep (or, with `share`, one child's share of it); `Ok(true)`
/// when no seed failed.
fn sweep(
    seeds: (u64, u64),
    budget: Option<Duration>,
    jobs: u64,
    share: Option<(u64, u64)>,
) -> Result<bool, String> {
    let started = wall_clock();
    let summary = match share {
        Some(share) => {
            let summary = sweep_share(seeds, share, budget, started);
            print!("{}", summary.to_lines());
            return Ok(summary.failures.is_empty());
        }
        None if jobs > 1 => sweep_in_children(seeds, budget, jobs)?,
        None => sweep_share(seeds, (0, 1), budget, started),
    };
    print!(
        "{}",
        summary.report(started.elapsed().as_secs_f64(), replay_command)
    );
    Ok(summary.failures.is_empty())
}

/// How often a share reports its progress on stderr.
const PROGRESS_EVERY: u64 = 500;

/// Runs seeds `first + k, first + k + j, …` below `end` in order while the
/// budget lasts.
fn sweep_share(
    (first, end): (u64, u64),
    (k, j): (u64, u64),
    budget: Option<Duration>,
    started: Instant,
) -> SweepSummary {
    let mut summary = SweepSummary::default();
    let mut seed = first.saturating_add(k);
    while seed < end {
        if budget.is_some_and(|b| started.elapsed() >= b) {
            eprintln!("share {k}/{j}: budget spent before seed {seed}");
            break;
        }
        let outcome = run_swarm(&SwarmRun::from_seed(seed));
        if let Some(first) = outcome.first_violation() {
            eprintln!(
                "seed {seed} ({}) FAILED: {first}\n  replay: {}",
                outcome.family.name(),
                replay_command(seed)
            );
        }
        summary.add(&outcome);
        if summary.seeds_run % PROGRESS_EVERY == 0 {
            eprintln!(
                "share {k}/{j}: {} seeds, {} failed, {:.0} s",
                summary.seeds_run,
                summary.failures.len(),
                started.elapsed().as_secs_f64()
            );
        }
        seed = seed.saturating_add(j);
    }
    summary
}

/// Runs the sweep in `jobs` child processes of this binary, each on an
/// interleaved share of the seeds with the same budget, and merges what
/// they print. Each child prints only at its end, so reading them one
/// after another cannot block one on a full pipe while it works.
fn sweep_in_children(
    seeds: (u64, u64),
    budget: Option<Duration>,
    jobs: u64,
) -> Result<SweepSummary, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?;
    let mut children = Vec::new();
    for k in 0..jobs {
        let mut command = Process::new(&exe);
        command
            .arg("sweep")
            .arg(format!("--seeds={}..{}", seeds.0, seeds.1))
            .arg(format!("--share={k}/{jobs}"))
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        if let Some(b) = budget {
            command.arg(format!("--budget-s={}", b.as_secs()));
        }
        children.push(
            command
                .spawn()
                .map_err(|e| format!("cannot start share {k}/{jobs}: {e}"))?,
        );
    }
    let mut summary = SweepSummary::default();
    for (k, child) in children.into_iter().enumerate() {
        let out = child
            .wait_with_output()
            .map_err(|e| format!("share {k}/{jobs}: {e}"))?;
        let text = String::from_utf8_lossy(&out.stdout);
        let share = SweepSummary::parse(&text).map_err(|e| format!("share {k}/{jobs}: {e}"))?;
        // Exit 1 means failing seeds, which the summary lists; anything
        // else is a crash of the child itself.
        if !out.status.success() && share.failures.is_empty() {
            return Err(format!("share {k}/{jobs} exited with {}", out.status));
        }
        summary.merge(&share);
    }
    Ok(summary)
}

/// Runs `seed`, prints its trace and verdict; `true` when it passed.
fn replay(seed: u64) -> bool {
    let run = SwarmRun::from_seed(seed);
    println!(
        "seed {seed}: family {}, flush {:?}, acked_must_survive {}",
        run.class, run.flush, run.acked_must_survive
    );
    match run_report(&run) {
        Ok(report) => {
            report.print_trace();
            match judge(&run, &report) {
                None => {
                    println!("VERDICT seed {seed}: pass");
                    true
                }
                Some(failure) => {
                    println!("VERDICT seed {seed}: FAIL\n{failure}");
                    false
                }
            }
        }
        Err(e) => {
            println!("VERDICT seed {seed}: FAIL (simulation failed: {e})");
            false
        }
    }
}

/// Shrinks `seed`'s plan if it fails and prints the smallest failing plan;
/// `true` when the seed passes (nothing to shrink).
fn shrink(seed: u64) -> bool {
    let run = SwarmRun::from_seed(seed);
    let Some(shrunk) = shrink_failing(&run) else {
        println!("seed {seed} ({}) passes: nothing to shrink", run.class);
        return true;
    };
    let outcome = run_swarm(&shrunk.run);
    println!(
        "seed {seed} ({}): {} faults shrunk to {} in {} runs\nsmallest failing plan: {:#?}\nits failure: {}",
        run.class,
        run.plan.faults.len(),
        shrunk.run.plan.faults.len(),
        shrunk.tries,
        shrunk.run.plan,
        outcome.failure.as_deref().unwrap_or("none (flaky?)")
    );
    false
}
