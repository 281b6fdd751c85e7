//! Scenario `long_poll_across_partition`: one long-polling consumer per
//! queue reads while producers send; the consumers are partitioned from
//! the broker for a while and healed. No wake-up may be lost: every
//! acknowledged message reaches its consumer promptly — once the cut has
//! ended and a request stalled by it has timed out — and the history stays
//! valid.

use scenarios::{Fault, Plan};
use sim::client::REQUEST_TIMEOUT_MS;
use sim::oracle::{late_deliveries, WakeupBounds};
use sim::run::run_judged;
use sim::seeds::for_each_seed;
use sim::workload::LONG_POLL_HOLD;
use sluice_core::FlushMode;

const SEEDS: std::ops::RangeInclusive<u64> = 1..=64;
/// A connected consumer gets a new message this fast (a lost wake-up
/// would take a whole hold).
const DELIVERY_MS_MAX: u64 = 500;

fn cut(plan: &Plan) -> Option<(u64, u64)> {
    let at = |wanted: Fault| {
        plan.faults
            .iter()
            .find(|f| f.fault == wanted)
            .map(|f| f.at_ms)
    };
    Some((at(Fault::PartitionConsumers)?, at(Fault::RepairConsumers)?))
}

#[test]
fn long_polling_consumers_get_every_message_promptly_across_a_partition() {
    for_each_seed(
        "long_poll_across_partition",
        "long_polling_consumers_get_every_message_promptly_across_a_partition",
        SEEDS.clone(),
        |seed| {
            let plan = Plan::long_poll_partition(seed);
            let report = run_judged(&plan, FlushMode::Sync)?;
            let hold_ms = u64::try_from(LONG_POLL_HOLD.as_millis()).unwrap_or(u64::MAX);
            let late = late_deliveries(
                &report.entries,
                WakeupBounds {
                    delivery_ms_max: DELIVERY_MS_MAX,
                    cut_ms: cut(&plan),
                    stall_ms_max: REQUEST_TIMEOUT_MS + hold_ms,
                },
            );
            if !late.is_empty() {
                let first: Vec<_> = late.iter().take(5).collect();
                return Err(report.describe(&format!(
                    "{} late deliveries (id, acked ms, delivered ms), first: {first:?}",
                    late.len()
                )));
            }
            Ok(())
        },
    );
}
