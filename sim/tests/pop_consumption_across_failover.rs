//! Scenario `pop_consumption_across_failover`: POP consumers ack while the
//! master of a SYNC-replicated group crashes and a replica is elected.
//! An ack is answered only once the in-sync replicas hold its record, so
//! the new master, rebuilding the leases from its log, never hands an
//! acked position out again, and every acknowledged send is acked by the
//! group in the end.

use scenarios::Plan;
use sim::run::run_judged;
use sim::seeds::for_each_seed;
use sluice_core::FlushMode;

const SEEDS: std::ops::RangeInclusive<u64> = 1..=6;

#[test]
fn pop_consumers_lose_and_repeat_nothing_acked_across_a_failover() {
    for_each_seed(
        "pop_consumption_across_failover",
        "pop_consumers_lose_and_repeat_nothing_acked_across_a_failover",
        SEEDS,
        |seed| run_judged(&Plan::pop_failover(seed), FlushMode::Async).map(|_| ()),
    );
}
