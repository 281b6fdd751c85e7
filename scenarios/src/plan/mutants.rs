//! Mutants: the same plans with the broker, the producers or the group
//! handler broken on purpose, which the oracle must catch
//! (`sim/tests/mutants.rs`).

use super::{Deferral, Plan};

impl Plan {
    /// The same plan with the producers skipping the flush wait (a mutant:
    /// the broker acknowledges before the sync).
    #[must_use]
    pub fn without_flush_wait(mut self) -> Self {
        self.workload.wait_for_flush = false;
        self
    }

    /// The same plan with delayed messages delivered early (a mutant).
    #[must_use]
    pub fn with_early_delays(mut self) -> Self {
        self.workload.deferral = Deferral::EarlyDelays;
        self
    }

    /// The same plan with a broker whose ConsumeQueue rebuild points each
    /// entry at the record before (a mutant).
    #[must_use]
    pub fn with_shifted_rebuild(mut self) -> Self {
        self.tuning.mutant_shifted_rebuild = true;
        self
    }

    /// The same plan with a broker that records no stats (a mutant).
    #[must_use]
    pub fn without_stats(mut self) -> Self {
        self.tuning.mutant_no_stats = true;
        self
    }

    /// The same plan with a broker whose disk-pressure retention deletes
    /// the oldest segments whether consumed or not, as RocketMQ's does (a
    /// mutant of the `consumed` default).
    #[must_use]
    pub fn with_forced_retention(mut self) -> Self {
        self.tuning.mutant_force_retention = true;
        self
    }

    /// The same plan with a broker that answers a POP ack before it is
    /// durable (a mutant).
    #[must_use]
    pub fn with_pop_acks_not_durable(mut self) -> Self {
        self.tuning.mutant_pop_ack_not_durable = true;
        self
    }

    /// The same plan with a broker whose POP leases never expire (a
    /// mutant: a message left unacked is never received again).
    #[must_use]
    pub fn with_pop_leases_never_expiring(mut self) -> Self {
        self.tuning.mutant_pop_never_revives = true;
        self
    }

    /// The same plan with a group handler that loses messages it reports
    /// as consumed (a mutant).
    #[must_use]
    pub fn with_lossy_group_handler(mut self) -> Self {
        self.workload.lossy_group_handler = true;
        self
    }
}
