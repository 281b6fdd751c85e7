//! The POP family: consumers of one group receive under short leases and
//! ack per message (leaving a fifth of first deliveries unacked) while
//! producers send and the broker crashes and restarts.

use rand::Rng;

use super::{push_crash, push_restart, workload, Plan};
use crate::rng::{substream, Salt};

impl Plan {
    /// Scenario `pop_consumption_across_crashes`: 1–3 POP consumers of one
    /// group on 1–4 queues; 0–2 broker crashes (mostly with power loss),
    /// each followed by a restart, while producers send and consumers ack.
    pub fn pop_consumption(seed: u64) -> Self {
        let mut workload = workload(seed);
        workload.pop_consumers = substream(seed, Salt::Group).random_range(1..=3);
        let mut rng = substream(seed, Salt::Faults);
        let crashes = rng.random_range(0..=2_u64);
        let window_ms = workload.expected_ms().max(60);
        let mut faults = Vec::new();
        let mut at_ms = 0;
        for _ in 0..crashes {
            at_ms += rng.random_range(20..=window_ms);
            push_crash(&mut faults, at_ms, rng.random_bool(0.75));
            at_ms += rng.random_range(50..=2_000);
            push_restart(&mut faults, at_ms);
        }
        Self::new(seed, workload, faults, None)
    }

    /// Scenario `pop_consumption_across_failover`: [`Plan::failover`] (a
    /// SYNC-replicated group whose master crashes while producers send; a
    /// replica is elected) with 1–2 POP consumers acking meanwhile. Leases
    /// and acks are CommitLog records, so the new master rebuilds them
    /// from what it replicated: no acked message comes back, none is lost.
    pub fn pop_failover(seed: u64) -> Self {
        let mut plan = Self::failover(seed);
        plan.workload.pop_consumers = substream(seed, Salt::Group).random_range(1..=2);
        plan
    }
}
