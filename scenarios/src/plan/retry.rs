//! Plans of retried sends: requests held past the producers' timeout and
//! answers cut one way, and those cuts across a broker restart — sends
//! stored before the crash are retried after it, and only the rebuilt
//! dedupe window keeps them from being stored twice.

use rand::Rng;

use super::{push_crash, push_restart, workload, Fault, Plan, TimedFault};
use crate::rng::{substream, Salt};

/// How often the broker saves its dedupe window in
/// `producer_retry_across_restart` (the broker's default, 10 s, is longer
/// than the run).
pub const DEDUPE_SAVE_MS: u64 = 150;

impl Plan {
    /// Scenario `producer_retry_indeterminate`: the broker's links to the
    /// producers are held past the request timeout and then released (so
    /// requests the producers gave up on are stored late), sometimes then
    /// partitioned and healed; producers re-send the same id after every
    /// unacknowledged attempt.
    pub fn producer_retry(seed: u64) -> Self {
        let mut workload = workload(seed);
        workload.retries_max = 3;
        let mut rng = substream(seed, Salt::Faults);
        let mut at_ms = rng.random_range(20..=workload.expected_ms().max(60) / 2);
        let mut faults = Vec::new();
        let mut push = |at_ms: u64, fault: Fault| faults.push(TimedFault { at_ms, fault });
        push(at_ms, Fault::HoldProducers);
        at_ms += rng.random_range(2_100..=4_000);
        push(at_ms, Fault::ReleaseProducers);
        if rng.random_bool(0.5) {
            at_ms += rng.random_range(50..=500);
            push(at_ms, Fault::PartitionProducers);
            at_ms += rng.random_range(100..=3_000);
            push(at_ms, Fault::RepairProducers);
        }
        // Drawn after everything above, so the earlier faults of a seed
        // stay what they were before this fault existed.
        if rng.random_bool(0.5) {
            at_ms += rng.random_range(50..=500);
            push(at_ms, Fault::CutResponsesToProducers);
            at_ms += rng.random_range(100..=3_000);
            push(at_ms, Fault::RestoreResponsesToProducers);
        }
        Self::new(seed, workload, faults, None)
    }

    /// Scenario `producer_retry_across_restart`: answers to producers are
    /// cut (requests still arrive and are stored), the broker crashes —
    /// usually a bare process crash that keeps the page cache — and
    /// restarts while the cut lasts, and the cut is restored later;
    /// producers re-send the same message (same `UNIQ_KEY`) after every
    /// unacknowledged attempt.
    pub fn producer_retry_across_restart(seed: u64) -> Self {
        let mut workload = workload(seed);
        workload.retries_max = 4;
        let mut rng = substream(seed, Salt::Faults);
        let mut at_ms = rng.random_range(20..=workload.expected_ms().max(60) / 3);
        let mut faults = vec![TimedFault {
            at_ms,
            fault: Fault::CutResponsesToProducers,
        }];
        at_ms += rng.random_range(200..=1_500);
        push_crash(&mut faults, at_ms, rng.random_bool(0.25));
        at_ms += rng.random_range(50..=500);
        push_restart(&mut faults, at_ms);
        at_ms += rng.random_range(1_500..=3_000);
        faults.push(TimedFault {
            at_ms,
            fault: Fault::RestoreResponsesToProducers,
        });
        let mut plan = Self::new(seed, workload, faults, None);
        // Saves land during the run, so the crash falls between two and
        // the restart replays what was stored after the last.
        plan.tuning.dedupe_save_interval_ms = Some(DEDUPE_SAVE_MS);
        plan
    }

    /// The same plan with a broker that does not rebuild its dedupe window
    /// after a restart or promotion (a mutant).
    #[must_use]
    pub fn without_dedupe_rebuild(mut self) -> Self {
        self.tuning.mutant_dedupe_not_rebuilt = true;
        self
    }

    /// The same plan with a broker that reads its saved dedupe window back
    /// without replaying the log written since the save (a mutant).
    #[must_use]
    pub fn without_saved_window_replay(mut self) -> Self {
        self.tuning.mutant_dedupe_saved_not_replayed = true;
        self
    }
}
