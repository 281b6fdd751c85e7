//! sim: the deterministic simulation harness (turmoil + the simulated disk),
//! the history oracle and the failure scenarios (`cargo test -p sim`).
//!
//! Nothing is implemented yet; see the simulation issue.

// Without tokio_unstable turmoil cannot seed tokio's RNG and panics in
// simulated hosts are swallowed, so every result would be meaningless.
#[cfg(not(tokio_unstable))]
compile_error!(
    "build with --cfg tokio_unstable (set in .cargo/config.toml; a RUSTFLAGS env var replaces it)"
);
