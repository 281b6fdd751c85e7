//! The seeded swarm sweep: swarm seeds run through the sweep library pass,
//! report the fault classes that fired and add up in a summary; shrinking a
//! failing mutant plan keeps it failing with fewer faults, each crash still
//! followed by its restart.

use scenarios::{Family, Fault, Flush, Plan, SwarmRun};
use sim::sweep::{run_seed, run_swarm, shrink, shrink_failing, FaultClass, SweepSummary};

/// A handful of swarm seeds spanning several families.
const SEEDS: std::ops::Range<u64> = 0..8;

#[test]
fn swarm_seeds_pass_and_report_what_fired() {
    let mut summary = SweepSummary::default();
    for seed in SEEDS {
        let outcome = run_seed(seed);
        assert_eq!(outcome.seed, seed);
        assert_eq!(outcome.family, SwarmRun::from_seed(seed).family);
        assert_eq!(outcome.failure, None, "seed {seed}");
        // A run with planned faults fires at least one class (a
        // transactions run may plan none: its producer dying after a half
        // is no fault class; seed 3 draws such a run since the swarm has
        // seventeen families).
        let planned = !SwarmRun::from_seed(seed).plan.faults.is_empty();
        assert!(
            !planned || !outcome.fired.is_empty(),
            "seed {seed} ({}): no fault class fired",
            outcome.family.name()
        );
        summary.add(&outcome);
    }
    assert_eq!(summary.seeds_run, SEEDS.end - SEEDS.start);
    assert_eq!(summary.families.values().sum::<u64>(), summary.seeds_run);
    assert!(
        summary.families.len() >= 3,
        "too few families: {:?}",
        summary.families
    );
    assert!(summary.failures.is_empty());
}

#[test]
fn a_swarm_seed_replays_to_the_same_trace() {
    let seed = SEEDS.start + 1;
    let first = run_seed(seed);
    assert!(first.trace_hash.is_some());
    assert_eq!(run_seed(seed), first);
}

/// The ack-before-sync mutant of `sim/tests/mutants.rs`: producers skip the
/// flush wait of a `SYNC_FLUSH` broker that the oracle still holds to it.
fn ack_before_sync(seed: u64) -> SwarmRun {
    SwarmRun::of_family(Family::BrokerCrash, seed)
        .with_plan(Plan::broker_crash(seed).without_flush_wait())
}

/// The `ASYNC_FLUSH` mutant of `sim/tests/mutants.rs`: a broker that
/// acknowledges from the page cache, held to the `SYNC_FLUSH` promise.
fn async_flush(seed: u64) -> SwarmRun {
    let mut run = SwarmRun::of_family(Family::BrokerCrash, seed);
    run.flush = Flush::Async;
    run
}

fn crashes(plan: &Plan) -> usize {
    plan.faults
        .iter()
        .filter(|f| matches!(f.fault, Fault::CrashBroker { .. }))
        .count()
}

/// Every crash is directly followed by its restart.
fn well_formed(plan: &Plan) -> bool {
    plan.faults.len() % 2 == 0
        && plan.faults.chunks(2).all(|pair| {
            matches!(pair[0].fault, Fault::CrashBroker { .. })
                && pair[1].fault == Fault::RestartBroker
        })
}

/// The first seed below 32 whose run has two crashes and fails, shrunk.
fn shrink_first_two_crash_failure(mutant: fn(u64) -> SwarmRun) -> (SwarmRun, sim::sweep::Shrunk) {
    (0..32)
        .map(mutant)
        .filter(|run| crashes(&run.plan) == 2)
        .find_map(|run| shrink_failing(&run).map(|shrunk| (run, shrunk)))
        .expect("the mutant fails on some two-crash seed below 32")
}

#[test]
fn shrinking_an_ack_before_sync_mutant_keeps_it_failing_with_fewer_faults() {
    let (run, shrunk) = shrink_first_two_crash_failure(ack_before_sync);
    assert_eq!(run.flush, Flush::Sync);
    assert!(run.acked_must_survive);
    let small = &shrunk.run.plan;
    assert!(
        small.faults.len() < run.plan.faults.len(),
        "nothing dropped: {small:?}"
    );
    assert!(well_formed(small), "{small:?}");
    assert!(small.workload.messages_per_producer <= run.plan.workload.messages_per_producer);
    assert!(small.workload.producers <= run.plan.workload.producers);
    let again = run_swarm(&shrunk.run);
    assert!(again.failure.is_some(), "the shrunk plan passes: {small:?}");
}

#[test]
fn shrinking_an_async_flush_loss_keeps_exactly_one_power_loss() {
    let (run, shrunk) = shrink_first_two_crash_failure(async_flush);
    let small = &shrunk.run.plan;
    // A page-cache ack is lost only at a power loss: one crash (with its
    // restart) must stay, and one is surplus.
    assert_eq!(
        small.faults.iter().map(|f| f.fault).collect::<Vec<_>>(),
        vec![
            Fault::CrashBroker { power_loss: true },
            Fault::RestartBroker
        ],
        "from {:?}",
        run.plan.faults
    );
    let again = run_swarm(&shrunk.run);
    assert!(again.failure.is_some(), "the shrunk plan passes: {small:?}");
    assert!(again.fired.contains(&FaultClass::BrokerPowerLoss));
}

#[test]
fn a_passing_run_is_not_shrunk_and_shrinking_keeps_what_the_failure_needs() {
    let passing = SwarmRun::of_family(Family::BrokerCrash, 2);
    assert!(shrink_failing(&passing).is_none());
    // A failure that needs every fault keeps every fault; the workload
    // still shrinks to one producer of one message.
    let mutant = ack_before_sync(2);
    let shrunk = shrink(&mutant, |r| r.plan.faults.len() == mutant.plan.faults.len());
    assert_eq!(shrunk.run.plan.faults, mutant.plan.faults);
    assert_eq!(shrunk.run.plan.workload.producers, 1);
    assert_eq!(shrunk.run.plan.workload.messages_per_producer, 1);
}
