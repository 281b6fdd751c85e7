//! The swarm generator: a seed picks one scenario family (weighted), and
//! that family's plan constructor derives the workload and the fault plan
//! from the same seed, switching its own fault classes on or off. The
//! flush mode and oracle setting are the ones the family's scenario test
//! uses, so a sweep judges every run exactly as its scenario test would.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::plan::Plan;
use crate::rng::{substream, Salt};

/// Salt of the sub-stream that picks the family. It is not a
/// [`crate::Salt`] so that no existing stream's values move; like those,
/// it keeps the choice independent of every other stream of the seed.
const FAMILY_SALT: u64 = 0x7377_6172_6d66_616d;

/// The broker's flush mode for a run (mapped onto the store's own type by
/// `sim`, so this crate stays free of the storage engine).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Flush {
    /// Acknowledge after the sync (`SYNC_FLUSH`).
    Sync,
    /// Acknowledge from the page cache (`ASYNC_FLUSH`).
    Async,
}

/// A scenario family: one plan constructor with its settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Family {
    /// [`Plan::broker_crash`] under `SYNC_FLUSH`.
    BrokerCrash,
    /// [`Plan::broker_crash`] on a device without power-safe overwrite.
    BrokerCrashGarbageSectors,
    /// [`Plan::fsync_eio`]: a failed sync fences the broker.
    FsyncEio,
    /// [`Plan::fsync_eio_page_cache_survives`].
    FsyncEioPageCacheSurvives,
    /// [`Plan::producer_retry`]: held, late and retried sends.
    ProducerRetry,
    /// [`Plan::long_poll_partition`]: long-polling consumers cut off.
    LongPollPartition,
    /// [`Plan::group_consumption`]: a consumer group across crashes and cuts.
    GroupConsumption,
    /// [`Plan::replica_partition`] under SYNC replication.
    ReplicaPartitionSync,
    /// [`Plan::replica_partition`] under ASYNC replication.
    ReplicaPartitionAsync,
    /// [`Plan::replicas_across_crashes`].
    ReplicasAcrossCrashes,
    /// [`Plan::failover`]: a master crash and an election.
    Failover,
    /// [`Plan::isolated_master`]: the master cut off from its group.
    IsolatedMaster,
    /// [`Plan::clock_skew`]: delayed messages while the broker's clock jumps.
    ClockSkew,
    /// [`Plan::transactions`]: transactional messages across crashes.
    Transactions,
    /// [`Plan::slow_disk`]: syncs slower than the producers' timeout.
    SlowDisk,
    /// [`Plan::disk_full`]: the broker's disk fills up, then frees.
    DiskFull,
    /// [`Plan::read_eio`]: CommitLog reads fail with EIO.
    ReadEio,
    /// [`Plan::consume_queue_lost`]: ConsumeQueues deleted while down.
    ConsumeQueueLost,
    /// [`Plan::offsets_lost_in_crash`]: committed offsets not yet persisted.
    OffsetsLostInCrash,
    /// [`Plan::namesrv_partition`]: two name servers, brokers and clients
    /// cut off from them, stale routes across a failover.
    NamesrvPartition,
    /// [`Plan::consumer_crash`]: a group member's host crashes around a
    /// rebalance.
    ConsumerCrash,
    /// [`Plan::replica_clock_skew`]: replicas' clocks stepped and drifting
    /// across a failover with delayed messages.
    ReplicaClockSkew,
    /// [`Plan::producer_retry_across_restart`]: retried sends whose first
    /// attempt was stored before a broker restart (the dedupe window).
    ProducerRetryAcrossRestart,
    /// [`Plan::transaction_ends`]: duplicate and late ENDs across slow
    /// syncs and crashes.
    TransactionEnds,
    /// [`Plan::transaction_ends_failover`]: duplicate and late ENDs across
    /// a failover.
    TransactionEndsFailover,
    /// [`Plan::pop_consumption`]: POP consumers across broker crashes.
    PopConsumption,
    /// [`Plan::pop_failover`]: POP consumers across a failover.
    PopFailover,
}

/// Every family with its weight (out of [`WEIGHT_TOTAL`]). The cheap
/// single-broker families weigh more; the replicated ones, which simulate
/// seconds of elections and catch-up, less.
pub const FAMILIES: [(Family, u32); 27] = [
    (Family::BrokerCrash, 4),
    (Family::BrokerCrashGarbageSectors, 2),
    (Family::FsyncEio, 2),
    (Family::FsyncEioPageCacheSurvives, 2),
    (Family::ProducerRetry, 2),
    (Family::LongPollPartition, 2),
    (Family::GroupConsumption, 2),
    (Family::ReplicaPartitionSync, 1),
    (Family::ReplicaPartitionAsync, 1),
    (Family::ReplicasAcrossCrashes, 2),
    (Family::Failover, 1),
    (Family::IsolatedMaster, 1),
    (Family::ClockSkew, 2),
    (Family::Transactions, 2),
    (Family::SlowDisk, 2),
    (Family::DiskFull, 1),
    (Family::ReadEio, 1),
    (Family::ConsumeQueueLost, 1),
    (Family::OffsetsLostInCrash, 1),
    (Family::NamesrvPartition, 1),
    (Family::ConsumerCrash, 1),
    (Family::ReplicaClockSkew, 1),
    (Family::ProducerRetryAcrossRestart, 2),
    (Family::TransactionEnds, 2),
    (Family::TransactionEndsFailover, 1),
    (Family::PopConsumption, 2),
    (Family::PopFailover, 1),
];

/// The sum of the weights in [`FAMILIES`].
pub const WEIGHT_TOTAL: u32 = 43;

impl Family {
    /// The family's name: its scenario's name, as reports print it.
    pub fn name(self) -> &'static str {
        match self {
            Self::BrokerCrash => "broker_crash",
            Self::BrokerCrashGarbageSectors => "broker_crash_garbage_sectors",
            Self::FsyncEio => "fsync_eio",
            Self::FsyncEioPageCacheSurvives => "fsync_eio_page_cache_survives",
            Self::ProducerRetry => "producer_retry",
            Self::LongPollPartition => "long_poll_partition",
            Self::GroupConsumption => "group_consumption",
            Self::ReplicaPartitionSync => "replica_partition_sync",
            Self::ReplicaPartitionAsync => "replica_partition_async",
            Self::ReplicasAcrossCrashes => "replicas_across_crashes",
            Self::Failover => "failover",
            Self::IsolatedMaster => "isolated_master",
            Self::ClockSkew => "clock_skew_delays",
            Self::Transactions => "transactions_across_crashes",
            Self::SlowDisk => "slow_disk",
            Self::DiskFull => "disk_full_recovers_service",
            Self::ReadEio => "commit_log_read_eio",
            Self::ConsumeQueueLost => "consume_queue_lost_rebuilt",
            Self::OffsetsLostInCrash => "offsets_lost_in_broker_crash",
            Self::NamesrvPartition => "namesrv_partition_stale_routes",
            Self::ConsumerCrash => "consumer_crash_during_rebalance",
            Self::ReplicaClockSkew => "replica_clock_skew",
            Self::ProducerRetryAcrossRestart => "producer_retry_across_restart",
            Self::TransactionEnds => "transaction_duplicate_ends",
            Self::TransactionEndsFailover => "transaction_duplicate_ends_failover",
            Self::PopConsumption => "pop_consumption_across_crashes",
            Self::PopFailover => "pop_consumption_across_failover",
        }
    }

    /// The family's plan for `seed`.
    pub fn plan(self, seed: u64) -> Plan {
        match self {
            Self::BrokerCrash => Plan::broker_crash(seed),
            Self::BrokerCrashGarbageSectors => {
                Plan::broker_crash(seed).without_power_safe_overwrite()
            }
            Self::FsyncEio => Plan::fsync_eio(seed),
            Self::FsyncEioPageCacheSurvives => Plan::fsync_eio_page_cache_survives(seed),
            Self::ProducerRetry => Plan::producer_retry(seed),
            Self::LongPollPartition => Plan::long_poll_partition(seed),
            Self::GroupConsumption => Plan::group_consumption(seed),
            Self::ReplicaPartitionSync => Plan::replica_partition(seed, true),
            Self::ReplicaPartitionAsync => Plan::replica_partition(seed, false),
            Self::ReplicasAcrossCrashes => Plan::replicas_across_crashes(seed),
            Self::Failover => Plan::failover(seed),
            Self::IsolatedMaster => Plan::isolated_master(seed),
            Self::ClockSkew => Plan::clock_skew(seed),
            Self::Transactions => Plan::transactions(seed),
            Self::SlowDisk => Plan::slow_disk(seed),
            Self::DiskFull => Plan::disk_full(seed),
            Self::ReadEio => Plan::read_eio(seed),
            Self::ConsumeQueueLost => Plan::consume_queue_lost(seed),
            Self::OffsetsLostInCrash => Plan::offsets_lost_in_crash(seed),
            Self::NamesrvPartition => Plan::namesrv_partition(seed),
            Self::ConsumerCrash => Plan::consumer_crash(seed),
            Self::ReplicaClockSkew => Plan::replica_clock_skew(seed),
            Self::ProducerRetryAcrossRestart => Plan::producer_retry_across_restart(seed),
            Self::TransactionEnds => Plan::transaction_ends(seed),
            Self::TransactionEndsFailover => Plan::transaction_ends_failover(seed),
            Self::PopConsumption => Plan::pop_consumption(seed),
            Self::PopFailover => Plan::pop_failover(seed),
        }
    }

    /// The flush mode the family's scenario test runs the broker in: the
    /// replicated families whose promise rests on replication run
    /// `ASYNC_FLUSH` (only the replicas keep an acknowledged message);
    /// everything else `SYNC_FLUSH`.
    pub fn flush(self) -> Flush {
        match self {
            Self::ReplicaPartitionSync
            | Self::ReplicaPartitionAsync
            | Self::Failover
            | Self::IsolatedMaster
            | Self::ReplicaClockSkew
            | Self::TransactionEndsFailover
            | Self::PopFailover => Flush::Async,
            Self::BrokerCrash
            | Self::BrokerCrashGarbageSectors
            | Self::FsyncEio
            | Self::FsyncEioPageCacheSurvives
            | Self::ProducerRetry
            | Self::LongPollPartition
            | Self::GroupConsumption
            | Self::ReplicasAcrossCrashes
            | Self::ClockSkew
            | Self::Transactions
            | Self::SlowDisk
            | Self::DiskFull
            | Self::ReadEio
            | Self::ConsumeQueueLost
            | Self::OffsetsLostInCrash
            | Self::NamesrvPartition
            | Self::ConsumerCrash
            | Self::ProducerRetryAcrossRestart
            | Self::TransactionEnds
            | Self::PopConsumption => Flush::Sync,
        }
    }

    /// Whether the oracle demands that every acknowledged message survive.
    /// Every family's scenario promises it (by sync, or by replication).
    pub fn acked_must_survive(self) -> bool {
        true
    }

    /// The family with weight-point `point` (`0..WEIGHT_TOTAL`).
    fn at_weight(point: u32) -> Self {
        let mut left = point;
        for (family, weight) in FAMILIES {
            if left < weight {
                return family;
            }
            left -= weight;
        }
        unreachable!("invariant: the weight point is below WEIGHT_TOTAL")
    }
}

/// Everything a seed decides about one swarm run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SwarmRun {
    /// The family the seed picked.
    pub family: Family,
    /// The workload and faults (the family's plan for the seed; shrinking
    /// replaces it with a smaller one).
    pub plan: Plan,
    /// The broker's flush mode.
    pub flush: Flush,
    /// The oracle's demand that acknowledged messages survive.
    pub acked_must_survive: bool,
    /// The family's name (what reports group runs by).
    pub class: &'static str,
}

impl SwarmRun {
    /// The run seed `seed` stands for: same seed, same run.
    pub fn from_seed(seed: u64) -> Self {
        let point = SmallRng::seed_from_u64(seed ^ FAMILY_SALT).random_range(0..WEIGHT_TOTAL);
        Self::of_family(Family::at_weight(point), seed)
    }

    /// The run of `family` for `seed`, with the family's settings; half
    /// the seeds (a sub-stream of their own) enable the BUGGIFY points.
    pub fn of_family(family: Family, seed: u64) -> Self {
        Self {
            family,
            plan: family.plan(seed).with_buggify(buggify(seed)),
            flush: family.flush(),
            acked_must_survive: family.acked_must_survive(),
            class: family.name(),
        }
    }

    /// The same run with another plan (a shrunk or mutated one).
    #[must_use]
    pub fn with_plan(mut self, plan: Plan) -> Self {
        self.plan = plan;
        self
    }
}

/// Whether swarm seed `seed` enables the BUGGIFY fault points.
fn buggify(seed: u64) -> bool {
    substream(seed, Salt::Buggify).random_bool(0.5)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn the_weights_add_up_to_the_total() {
        assert_eq!(FAMILIES.iter().map(|(_, w)| w).sum::<u32>(), WEIGHT_TOTAL);
        assert!(FAMILIES.iter().all(|(_, w)| *w > 0));
    }

    #[test]
    fn a_seed_always_derives_the_same_run() {
        for seed in [0, 1, 42, 9_999, u64::MAX] {
            assert_eq!(SwarmRun::from_seed(seed), SwarmRun::from_seed(seed));
        }
    }

    #[test]
    fn every_family_appears_within_a_thousand_seeds_near_its_weight() {
        let mut runs: BTreeMap<Family, u32> = BTreeMap::new();
        for seed in 0..1_000 {
            *runs.entry(SwarmRun::from_seed(seed).family).or_default() += 1;
        }
        for (family, weight) in FAMILIES {
            let got = runs.get(&family).copied().unwrap_or(0);
            let expected = 1_000 * weight / WEIGHT_TOTAL;
            assert!(
                got > expected / 2 && got < expected * 2,
                "{family:?}: {got} runs, about {expected} expected ({runs:?})"
            );
        }
    }

    #[test]
    fn a_run_carries_its_family_plan_and_settings() {
        for seed in 0..200 {
            let run = SwarmRun::from_seed(seed);
            assert_eq!(
                run.plan,
                run.family.plan(seed).with_buggify(run.plan.buggify)
            );
            assert_eq!(run.plan.seed, seed);
            assert_eq!(run.flush, run.family.flush());
            assert_eq!(run.class, run.family.name());
        }
    }

    #[test]
    fn families_use_the_settings_of_their_scenario_tests() {
        assert_eq!(Family::BrokerCrash.flush(), Flush::Sync);
        assert_eq!(Family::ReplicasAcrossCrashes.flush(), Flush::Sync);
        assert_eq!(Family::Failover.flush(), Flush::Async);
        assert_eq!(Family::ReplicaPartitionSync.flush(), Flush::Async);
        assert!(Family::BrokerCrashGarbageSectors.plan(3).garbage_sectors);
        assert!(!Family::BrokerCrash.plan(3).garbage_sectors);
        let sync = Family::ReplicaPartitionSync.plan(3).replication;
        let not_sync = Family::ReplicaPartitionAsync.plan(3).replication;
        assert_eq!(sync.map(|r| r.sync), Some(true));
        assert_eq!(not_sync.map(|r| r.sync), Some(false));
    }

    #[test]
    fn about_half_the_seeds_enable_buggify_and_scenario_plans_never_do() {
        let on = (0..1_000)
            .filter(|&seed| SwarmRun::from_seed(seed).plan.buggify)
            .count();
        assert!((400..=600).contains(&on), "{on} of 1000");
        assert!(FAMILIES.iter().all(|(f, _)| !f.plan(5).buggify));
    }

    #[test]
    fn family_names_are_distinct() {
        let names: std::collections::BTreeSet<_> = FAMILIES.iter().map(|(f, _)| f.name()).collect();
        assert_eq!(names.len(), FAMILIES.len());
    }
}
