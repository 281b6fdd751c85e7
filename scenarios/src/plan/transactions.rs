//! Plans of transactional producers: halves ended once, twice, late or
//! not at all (left to the broker's check-back), across broker crashes,
//! slow syncs and failovers — every committed transaction must be stored
//! once in its real topic, and no rolled-back one ever.

use rand::Rng;

use super::{
    push_crash, push_restart, replicated_workload, workload, Deferral, Fault, Plan, ReplicaSet,
    TimedFault, FIRST_MASTER_MS,
};
use crate::rng::{substream, Salt};

/// Check-backs come 1–1.5 s after a half is left open (see the sim's
/// broker settings); the drain leaves time for them and for a restart.
const CHECK_BACK_WAIT_MS: u64 = 6_000;

impl Plan {
    /// Scenario `transactions_across_crashes`: 2–3 producers of one group
    /// send every message as a transaction (a half, then commit or roll
    /// back as decided up front; some ended twice, some left to the
    /// broker's check-back). Per seed (swarm style) the broker loses power
    /// and restarts once or twice, between halves and their ends, and/or
    /// the first producer dies right after a half, so another member of
    /// the group must answer its check-back. Every committed transaction
    /// whose half was acknowledged is read exactly once; no rolled-back
    /// one is ever read.
    pub fn transactions(seed: u64) -> Self {
        let mut workload = workload(seed);
        workload.deferral = Deferral::Transactions;
        workload.producers = workload.producers.max(2);
        let mut rng = substream(seed, Salt::Faults);
        let window_ms = workload.expected_ms().max(60);
        let mut faults = Vec::new();
        if rng.random_bool(0.7) {
            let mut at_ms = 0;
            for _ in 0..rng.random_range(1..=2) {
                at_ms += rng.random_range(20..=window_ms);
                push_crash(&mut faults, at_ms, true);
                at_ms += rng.random_range(50..=2_000);
                push_restart(&mut faults, at_ms);
            }
        }
        workload.drain_wait_ms = CHECK_BACK_WAIT_MS;
        Self::new(seed, workload, faults, None)
    }

    /// Scenario `transaction_duplicate_ends`: like
    /// [`Plan::transactions`], with ENDs that are duplicated, delayed by
    /// seconds and re-sent after a failure (so they arrive after a restart,
    /// racing the check-backs of their halves), while the broker's syncs
    /// turn slow for a while — so ENDs pile up in a group commit — and it
    /// crashes, mostly losing power, with ENDs in flight: a commit can
    /// survive without its op record, and only the "already committed?"
    /// lookup stops a late END or a check-back from committing it again.
    /// Once or twice per seed.
    pub fn transaction_ends(seed: u64) -> Self {
        let mut workload = workload(seed);
        workload.deferral = Deferral::Transactions;
        workload.late_ends = true;
        // Enough producers that a group commit holds several ENDs.
        workload.producers += 2;
        let mut rng = substream(seed, Salt::Faults);
        let window_ms = workload.expected_ms().max(60);
        let mut faults = Vec::new();
        let mut at_ms = 0;
        for _ in 0..rng.random_range(2..=4) {
            at_ms += rng.random_range(20..=window_ms / 2);
            let sync_ms = rng.random_range(100..=1_200);
            faults.push(TimedFault {
                at_ms,
                fault: Fault::SlowBrokerDisk { sync_ms },
            });
            at_ms += rng.random_range(50..=sync_ms.max(60));
            push_crash(&mut faults, at_ms, rng.random_bool(0.85));
            faults.push(TimedFault {
                at_ms: at_ms + 1,
                fault: Fault::HealBrokerDisk,
            });
            at_ms += rng.random_range(50..=2_000);
            push_restart(&mut faults, at_ms);
        }
        workload.drain_wait_ms = CHECK_BACK_WAIT_MS;
        Self::new(seed, workload, faults, None)
    }

    /// Scenario `transaction_duplicate_ends_failover`: the ENDs of
    /// [`Plan::transaction_ends`] against a SYNC-replicated group with
    /// controllers (`ASYNC_FLUSH`, as in [`Plan::failover`]): the master
    /// crashes — mostly losing its page cache — with halves open and ENDs
    /// in flight, a replica is elected and inherits the transactions (its
    /// tracker reads the replicated half and op queues), late ENDs go to
    /// it, and the old master rejoins as a replica.
    pub fn transaction_ends_failover(seed: u64) -> Self {
        let mut workload = replicated_workload(seed);
        // A half and its END take less time than a plain send with its
        // backoffs: more of them, more slowly, keep the producers busy
        // past the replicas' catch-up and the crash.
        workload.messages_per_producer = workload.messages_per_producer.max(150);
        workload.send_gap_ms_max = workload.send_gap_ms_max.max(80);
        workload.deferral = Deferral::Transactions;
        workload.late_ends = true;
        workload.producers = workload.producers.max(2);
        let mut rng = substream(seed, Salt::Faults);
        let replicas = rng.random_range(1..=2);
        let controllers = if rng.random_bool(0.5) { 3 } else { 1 };
        let at_ms = FIRST_MASTER_MS + rng.random_range(20..=workload.expected_ms() / 2);
        let mut faults = Vec::new();
        push_crash(&mut faults, at_ms, rng.random_bool(0.75));
        push_restart(&mut faults, at_ms + rng.random_range(4_000..=9_000));
        workload.drain_wait_ms = CHECK_BACK_WAIT_MS;
        let replication = ReplicaSet {
            sync: true,
            replicas,
            trust_claimed_offset: false,
            controllers,
        };
        Self::new(seed, workload, faults, Some(replication))
    }

    /// The same plan with a broker whose "already committed?" lookup of a
    /// transaction always misses (a mutant).
    #[must_use]
    pub fn with_commit_lookup_missing(mut self) -> Self {
        self.tuning.mutant_commit_lookup_misses = true;
        self
    }
}
