//! Seed lists for the scenario tests: each test has a committed default
//! list; `SIM_SEED=n` replays one seed (`SIM_SEEDS=k` with it sweeps
//! `n..n+k`), `SIM_SEEDS=k` alone sweeps `0..k`. A failure names every
//! failing seed with the exact command that replays it; `SIM_TRACE=1`
//! prints each run's history.

use std::fmt::Write as _;

/// The seeds to run: the environment's choice, else `defaults`.
pub fn seeds(defaults: impl IntoIterator<Item = u64>) -> Vec<u64> {
    let env = |name: &str| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
    };
    match (env("SIM_SEED"), env("SIM_SEEDS")) {
        (Some(first), Some(count)) => (first..first.saturating_add(count)).collect(),
        (Some(seed), None) => vec![seed],
        (None, Some(count)) => (0..count).collect(),
        (None, None) => defaults.into_iter().collect(),
    }
}

/// The command that replays `seed` of test `name` in test target `target`.
pub fn replay_command(target: &str, name: &str, seed: u64) -> String {
    format!(
        "SIM_SEED={seed} SIM_SEEDS=1 SIM_TRACE=1 cargo test -p sim --test {target} {name} -- --exact --nocapture"
    )
}

/// Runs `run` for every seed; panics after the last one if any failed,
/// listing each failure's seed, message and replay command.
pub fn for_each_seed(
    target: &str,
    name: &str,
    defaults: impl IntoIterator<Item = u64>,
    mut run: impl FnMut(u64) -> Result<(), String>,
) {
    let mut report = String::new();
    let seeds = seeds(defaults);
    for &seed in &seeds {
        if let Err(message) = run(seed) {
            let _ = writeln!(
                report,
                "seed {seed} failed: {message}\n  replay: {}",
                replay_command(target, name, seed)
            );
        }
    }
    assert!(
        report.is_empty(),
        "{name}: failures among {} seeds\n{report}",
        seeds.len()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replay_command_names_the_seed_and_the_test() {
        let c = replay_command("broker_crash", "torn_tail", 17);
        assert_eq!(
            c,
            "SIM_SEED=17 SIM_SEEDS=1 SIM_TRACE=1 cargo test -p sim --test broker_crash torn_tail -- --exact --nocapture"
        );
    }

    #[test]
    #[should_panic(expected = "seed 3 failed: boom")]
    fn a_failing_seed_is_reported_with_its_replay_command() {
        for_each_seed("t", "n", [1, 3], |s| {
            if s == 3 {
                Err("boom".into())
            } else {
                Ok(())
            }
        });
    }
}
