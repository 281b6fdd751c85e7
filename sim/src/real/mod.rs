//! Real chaos: the simulation's oracle judging real `sluice-node`
//! processes under real faults (`cargo test -p sim --test real_chaos`;
//! docs/chaos.md). Linux only, as root: each node runs in its own network
//! namespace, each broker's data on its own loop-mounted ext4.
//!
//! Module map:
//! - [`schedule`]: the fault classes and the seeded fault schedule.
//! - `net`: namespaces, veths and a bridge; nftables drops and loss, a
//!   token-bucket throttle.
//! - `disk`: a loop-mounted filesystem per broker, and filling it.
//! - `procs`: `sluice-node` processes: start, `kill -9`, `SIGSTOP`/`SIGCONT`,
//!   libfaketime clock steps.
//! - `cluster`: the name server + controller and the broker group, and
//!   applying and healing each fault.
//! - [`workload`]: producers, long-polling consumers and the drain, on the
//!   production client, recording the history.
//! - [`run`]: one run and its report, judged by `oracle::check`.

mod cluster;
mod disk;
mod net;
mod procs;
pub mod run;
pub mod schedule;
pub mod workload;

pub use cluster::Tools;
pub use run::{judge, run, ChaosConfig, Report};

/// The schedule's seed when `SLUICE_CHAOS_SEED` is not set.
pub const SEED_DEFAULT: u64 = 21;

/// Why real chaos cannot run on this machine (not Linux, not root, no
/// network namespaces, no `mkfs.ext4`), or `None` when it can.
pub fn unavailable() -> Option<String> {
    if !cfg!(target_os = "linux") {
        return Some("not Linux".into());
    }
    match net::run("id", &["-u"]) {
        Ok(uid) if uid.trim() == "0" => {}
        Ok(uid) => return Some(format!("not root (uid {})", uid.trim())),
        Err(e) => return Some(e),
    }
    let probe = format!("scprobe{}", std::process::id());
    if let Err(e) = net::run("ip", &["netns", "add", &probe]) {
        return Some(format!("cannot make a network namespace: {e}"));
    }
    let _ = net::run("ip", &["netns", "del", &probe]);
    if !net::have("mkfs.ext4", "-V") {
        return Some("mkfs.ext4 is not installed".into());
    }
    None
}

/// The run's configuration from the environment: `SLUICE_CHAOS_SEED`
/// (default [`SEED_DEFAULT`]) and `SLUICE_CHAOS_SECONDS` (how long the
/// fault schedule runs; it always has the first round, which injects every
/// class once in about 90 s; default 0: that round alone, the bounded CI
/// mode).
pub fn config_from_env() -> ChaosConfig {
    let var = |name: &str| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
    };
    ChaosConfig {
        seed: var("SLUICE_CHAOS_SEED").unwrap_or(SEED_DEFAULT),
        budget_ms: var("SLUICE_CHAOS_SECONDS")
            .unwrap_or(0)
            .saturating_mul(1_000),
        producers: 2,
    }
}
