//! Mutants: the broker broken on purpose must fail the oracle within a
//! bounded number of seeds, or the oracle (or the scenario) is too weak.
//!
//! - "Skip the flush wait": producers set `WAIT=false`, so the `SYNC_FLUSH`
//!   broker acknowledges from the page cache before the sync — exactly the
//!   ack-before-sync bug — while the oracle still demands `SYNC_FLUSH` safety.
//! - `ASYNC_FLUSH` acknowledges from the page cache by design; judged by
//!   the `SYNC_FLUSH` promise, crashes must show the loss.
//! - A consumer group whose handler reports success for messages it loses
//!   (commit before processing) must show unconsumed acknowledged messages.
//! - A SYNC-replicated master that acknowledges before the in-sync set
//!   holds the message (producers send `WAIT=false`): a master crash and
//!   failover must show the loss.
//! - A master that trusts the offset a replica claims at its handshake (as
//!   RocketMQ 4.x trusts 8 bytes on its HA port) skips the truncation of a
//!   replica's divergent tail: after a master power loss with `ASYNC_FLUSH`,
//!   the logs must be caught disagreeing.
//! - A broker that does not rebuild its dedupe window of retried sends on
//!   restart must be caught storing a retry twice when the retry crosses a
//!   restart (`StoredTwice`).
//! - A broker whose "already committed?" lookup of a transaction misses
//!   must be caught storing a committed transaction twice
//!   (`CommittedTwice`) when a late END or a check-back meets a commit
//!   that survived a crash without its op record (apache/rocketmq #5574),
//!   within [`TRANSACTION_SEEDS_MAX`] seeds of `transaction_duplicate_ends`.
//! - A broker whose disk-pressure retention deletes the oldest segments
//!   whether consumed or not (`force`, RocketMQ's behaviour) must be caught
//!   losing acknowledged messages when its device fills up before anyone
//!   read them (no live consumers: only the drain reads, after the free).
//! - A broker that records no stats must be caught undercounting the
//!   messages clients saw acknowledged and read (its figures are what
//!   `/metrics` exports).

use scenarios::Plan;
use sim::oracle::pop::PopViolation;
use sim::oracle::replicas::ReplicaViolation;
use sim::oracle::{OracleConfig, Violation};
use sim::run::{run_plan, run_verdict};
use sluice_core::FlushMode;

/// Each mutant must be caught within this many seeds.
const SEEDS_MAX: u64 = 8;
/// Seeds tried for the saved dedupe window's mutant.
const SAVED_WINDOW_SEEDS_MAX: u64 = 200;
/// The bound for the transaction mutant: its window (a crash tearing a
/// commit from its op record) needs the right crash, not just any.
const TRANSACTION_SEEDS_MAX: u64 = 100;

/// The first seed whose run, built by `plan` (broker crashes or
/// failovers), loses or moves an acknowledged message under `flush_mode`.
fn first_catching_seed(plan: impl Fn(u64) -> Plan, flush_mode: FlushMode) -> Option<u64> {
    (0..SEEDS_MAX).find(|&seed| {
        run_verdict(&plan(seed), flush_mode)
            .expect("simulation runs")
            .violations
            .iter()
            .any(|v| {
                matches!(
                    v,
                    Violation::LostAck { .. }
                        | Violation::MovedAck { .. }
                        | Violation::InconsistentOffset { .. }
                )
            })
    })
}

#[test]
fn oracle_catches_acknowledgement_before_sync() {
    let caught = first_catching_seed(
        |seed| Plan::broker_crash(seed).without_flush_wait(),
        FlushMode::Sync,
    );
    assert!(
        caught.is_some(),
        "ack-before-sync survived {SEEDS_MAX} seeds of broker crashes"
    );
}

#[test]
fn oracle_catches_async_flush_losing_acknowledged_messages() {
    let caught = first_catching_seed(Plan::broker_crash, FlushMode::Async);
    assert!(
        caught.is_some(),
        "ASYNC_FLUSH never lost an acknowledged message in {SEEDS_MAX} seeds of crashes"
    );
}

#[test]
fn the_unbroken_broker_is_not_flagged_on_the_same_seeds() {
    assert_eq!(
        first_catching_seed(Plan::broker_crash, FlushMode::Sync),
        None,
        "the oracle flags a correct SYNC_FLUSH broker"
    );
}

#[test]
fn oracle_catches_a_consumer_group_that_loses_messages() {
    let caught = (0..SEEDS_MAX).find(|&seed| {
        run_verdict(
            &Plan::group_consumption(seed).with_lossy_group_handler(),
            FlushMode::Sync,
        )
        .expect("simulation runs")
        .violations
        .iter()
        .any(|v| matches!(v, Violation::NotConsumed { .. }))
    });
    assert!(
        caught.is_some(),
        "a lossy group handler survived {SEEDS_MAX} seeds"
    );
}

/// The first seed whose replicated run, built by `plan` on an `ASYNC_FLUSH`
/// master (which loses its unsynced tail at a power loss), ends with two
/// logs disagreeing.
fn first_diverging_seed(plan: impl Fn(u64) -> Plan) -> Option<u64> {
    (0..SEEDS_MAX * 2).find(|&seed| {
        let report = run_plan(
            &plan(seed),
            FlushMode::Async,
            OracleConfig {
                acked_must_survive: false,
            },
        )
        .expect("simulation runs");
        report
            .verdict
            .violations
            .iter()
            .any(|v| matches!(v, Violation::Replica(ReplicaViolation::Diverged { .. })))
    })
}

/// Seeds a POP mutant gets to be caught in (some seeds crash nothing).
const POP_SEEDS_MAX: u64 = 24;

/// The first seed whose POP run, built by `plan`, has a POP violation
/// that `kind` accepts.
fn first_pop_violation(
    plan: impl Fn(u64) -> Plan,
    kind: impl Fn(&PopViolation) -> bool,
) -> Option<u64> {
    (0..POP_SEEDS_MAX).find(|&seed| {
        run_verdict(&plan(seed), FlushMode::Sync)
            .expect("simulation runs")
            .violations
            .iter()
            .any(|v| matches!(v, Violation::Pop(p) if kind(p)))
    })
}

#[test]
fn oracle_catches_pop_acks_answered_before_they_are_durable() {
    let after_ack = |v: &PopViolation| matches!(v, PopViolation::DeliveredAfterAck { .. });
    let caught = first_pop_violation(
        |seed| Plan::pop_consumption(seed).with_pop_acks_not_durable(),
        after_ack,
    );
    assert!(caught.is_some(), "an ack lost in a crash went unnoticed");
    let unbroken = first_pop_violation(Plan::pop_consumption, |_| true);
    assert_eq!(unbroken, None, "the unbroken broker was flagged");
}

#[test]
fn oracle_catches_pop_leases_that_never_expire() {
    let caught = first_pop_violation(
        |seed| Plan::pop_consumption(seed).with_pop_leases_never_expiring(),
        |v| matches!(v, PopViolation::NeverAcked { .. }),
    );
    assert!(
        caught.is_some(),
        "unacked messages never returned and nobody noticed"
    );
}

#[test]
fn oracle_catches_a_master_trusting_claimed_replica_offsets() {
    let caught =
        first_diverging_seed(|seed| Plan::replicas_across_crashes(seed).trusting_claimed_offsets());
    assert!(
        caught.is_some(),
        "a master trusting claimed offsets survived {} seeds",
        SEEDS_MAX * 2
    );
}

#[test]
fn replicas_of_the_unbroken_master_agree_on_the_same_seeds() {
    assert_eq!(
        first_diverging_seed(Plan::replicas_across_crashes),
        None,
        "replica logs disagree although the master verifies offsets"
    );
}

#[test]
fn oracle_catches_acknowledgement_before_the_in_sync_set_holds_it() {
    let caught = first_catching_seed(
        |seed| {
            Plan::failover(seed)
                .cutting_replicas_before_crash()
                .without_flush_wait()
        },
        FlushMode::Async,
    );
    assert!(
        caught.is_some(),
        "acknowledging before the in-sync set holds a message survived {SEEDS_MAX} failovers"
    );
}

#[test]
fn the_unbroken_group_loses_nothing_on_the_same_failovers() {
    assert_eq!(
        first_catching_seed(
            |seed| Plan::failover(seed).cutting_replicas_before_crash(),
            FlushMode::Async
        ),
        None,
        "a SYNC-replicated group lost an acknowledged message in a failover"
    );
}

#[test]
fn oracle_catches_a_broker_whose_stats_undercount() {
    let undercounts = |plan: Plan| {
        run_verdict(&plan, FlushMode::Async)
            .expect("simulation runs")
            .violations
            .into_iter()
            .filter(|v| matches!(v, Violation::StatsUndercount { .. }))
            .count()
    };
    // No broker crash: one incarnation served every send and read.
    let plan = |seed| Plan::long_poll_partition(seed);
    assert_eq!(undercounts(plan(3)), 0, "a counting broker passes");
    assert_eq!(
        undercounts(plan(3).without_stats()),
        2,
        "messages in and out both undercounted"
    );
}

/// True when the oracle judges a message of `plan`'s run stored twice.
fn stored_twice(plan: &Plan) -> bool {
    run_verdict(plan, FlushMode::Sync)
        .expect("simulation runs")
        .violations
        .iter()
        .any(|v| matches!(v, Violation::StoredTwice { .. }))
}

/// `mutant` (a broken dedupe path on `producer_retry_across_restart`) is
/// caught storing a retry twice within `seeds` seeds, and the seed that
/// catches it passes with the broker whole.
fn catches_storing_twice(what: &str, seeds: u64, mutant: impl Fn(Plan) -> Plan) {
    let caught =
        (0..seeds).find(|&seed| stored_twice(&mutant(Plan::producer_retry_across_restart(seed))));
    let Some(seed) = caught else {
        panic!("{what} survived {seeds} seeds of restarts");
    };
    assert!(
        !stored_twice(&Plan::producer_retry_across_restart(seed)),
        "the whole broker stores a retry twice on seed {seed}"
    );
}

#[test]
fn oracle_catches_a_dedupe_window_not_rebuilt_after_a_restart() {
    catches_storing_twice(
        "a dedupe window not rebuilt",
        SEEDS_MAX,
        Plan::without_dedupe_rebuild,
    );
}

#[test]
fn oracle_catches_a_saved_dedupe_window_read_back_without_the_log_since() {
    catches_storing_twice(
        "a saved window read back without its replay",
        SAVED_WINDOW_SEEDS_MAX,
        Plan::without_saved_window_replay,
    );
}

#[test]
fn oracle_catches_a_transaction_committed_again_after_a_crash() {
    let committed_twice = |plan: &Plan| {
        run_verdict(plan, FlushMode::Sync)
            .expect("simulation runs")
            .violations
            .iter()
            .any(|v| matches!(v, Violation::CommittedTwice { .. }))
    };
    let caught = (0..TRANSACTION_SEEDS_MAX)
        .find(|&seed| committed_twice(&Plan::transaction_ends(seed).with_commit_lookup_missing()));
    let Some(seed) = caught else {
        panic!("a missing commit lookup survived {TRANSACTION_SEEDS_MAX} seeds of late ENDs");
    };
    assert!(
        !committed_twice(&Plan::transaction_ends(seed)),
        "the unbroken broker commits a transaction twice on seed {seed}"
    );
}

/// A full-disk plan whose messages nobody reads before the drain.
fn full_disk_unread(seed: u64) -> Plan {
    let mut plan = Plan::disk_full(seed);
    plan.workload.long_poll_consumers = false;
    plan
}

#[test]
fn oracle_catches_disk_pressure_deleting_unread_messages() {
    let forced = |seed| full_disk_unread(seed).with_forced_retention();
    let Some(seed) = first_catching_seed(forced, FlushMode::Sync) else {
        panic!("forced disk-pressure retention survived {SEEDS_MAX} seeds of full disks");
    };
    let verdict = run_verdict(&full_disk_unread(seed), FlushMode::Sync).expect("simulation runs");
    assert!(
        verdict.violations.is_empty(),
        "the consumed-only default fails seed {seed}: {:?}",
        verdict.violations
    );
}
