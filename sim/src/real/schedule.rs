//! The fault schedule of a real-process chaos run: a fixed list of timed
//! faults derived from one seed. Its first round injects every fault class
//! once, in a seeded order; further rounds (the long mode) draw classes at
//! random until the budget is spent. One fault is active at a time, and
//! each is healed after its hold.

use rand::seq::SliceRandom;
use rand::Rng;
use scenarios::{substream, Salt};

/// A fault class: what the run's figures count faults under.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Class {
    /// Two-way cuts between node namespaces (nftables).
    Partition,
    /// One-way drops: one direction of a link dropped, the other delivered.
    OneWay,
    /// Random packet loss on the master's links (nftables `numgen`).
    Loss,
    /// A slow link: the master's interface throttled by a token bucket,
    /// so its packets queue (latency) and overflow (drops).
    SlowLink,
    /// `SIGSTOP` of the master for longer than the controller's timeout.
    Pause,
    /// `kill -9` of the master, then a restart.
    KillMaster,
    /// `kill -9` of a replica, then a restart.
    KillReplica,
    /// The master's data filesystem filled to the last block.
    DiskFull,
    /// A step of the master's wall clock (libfaketime).
    ClockStep,
}

impl Class {
    /// Every class, in report order.
    pub const ALL: [Class; 9] = [
        Class::Partition,
        Class::OneWay,
        Class::Loss,
        Class::SlowLink,
        Class::Pause,
        Class::KillMaster,
        Class::KillReplica,
        Class::DiskFull,
        Class::ClockStep,
    ];
}

/// One fault. "Master" is whichever broker the name server routes as the
/// master when the fault starts; "replica `i`" the `i`-th other broker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChaosFault {
    /// Cut the master off from the controller and its replicas (clients
    /// still reach it): the controller elects another master.
    IsolateMaster,
    /// Cut the master off from replica `replica`.
    PartitionReplica {
        /// Which replica (0 or 1).
        replica: u8,
    },
    /// The master's packets to the controller are dropped; the
    /// controller's still arrive.
    MuteMasterToController,
    /// The master's packets to the clients are dropped (its answers are
    /// lost); the clients' requests still arrive and are stored.
    CutResponsesToClients,
    /// `percent` of the master's packets, both ways, dropped at random.
    Loss {
        /// Drop probability in percent.
        percent: u8,
    },
    /// The master's interface throttled to `kbit_s`.
    SlowLink {
        /// Rate in kilobits per second.
        kbit_s: u32,
    },
    /// `SIGSTOP` the master; `SIGCONT` at the heal.
    PauseMaster,
    /// `kill -9` the master; start it again at the heal.
    KillMaster,
    /// `kill -9` replica `replica`; start it again at the heal.
    KillReplica {
        /// Which replica (0 or 1).
        replica: u8,
    },
    /// Fill the master's data filesystem; free it at the heal.
    FillMasterDisk,
    /// Step the master's wall clock by `by_s`; step it back at the heal.
    StepMasterClock {
        /// The step, in seconds (negative: backwards).
        by_s: i64,
    },
}

impl ChaosFault {
    /// The class it counts under.
    pub fn class(self) -> Class {
        match self {
            Self::IsolateMaster | Self::PartitionReplica { .. } => Class::Partition,
            Self::MuteMasterToController | Self::CutResponsesToClients => Class::OneWay,
            Self::Loss { .. } => Class::Loss,
            Self::SlowLink { .. } => Class::SlowLink,
            Self::PauseMaster => Class::Pause,
            Self::KillMaster => Class::KillMaster,
            Self::KillReplica { .. } => Class::KillReplica,
            Self::FillMasterDisk => Class::DiskFull,
            Self::StepMasterClock { .. } => Class::ClockStep,
        }
    }
}

/// A fault at a time, held for a while, then healed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    /// When it starts, in ms after the workload started.
    pub at_ms: u64,
    /// The fault.
    pub fault: ChaosFault,
    /// How long it lasts before the heal.
    pub hold_ms: u64,
}

/// The controller fails a master over after this much silence; pauses and
/// isolations hold longer than it.
pub const BROKER_TIMEOUT_MS: u64 = 3_000;
/// Quiet time after each heal, for the group to settle (a restarted
/// broker catching up, a failover finishing) before the next fault.
const SETTLE_MS: std::ops::RangeInclusive<u64> = 3_000..=5_000;
/// Quiet time before the first fault, with the workload running.
const WARM_UP_MS: u64 = 5_000;

/// A fault of `class` with seeded parameters, and its hold.
fn draw(class: Class, rng: &mut impl Rng) -> (ChaosFault, u64) {
    let replica = rng.random_range(0..=1u8);
    let past_timeout = BROKER_TIMEOUT_MS + rng.random_range(2_000..=4_000);
    let hold = rng.random_range(4_000..=7_000);
    match class {
        Class::Partition if rng.random_bool(0.5) => (ChaosFault::IsolateMaster, past_timeout),
        Class::Partition => (ChaosFault::PartitionReplica { replica }, hold),
        Class::OneWay if rng.random_bool(0.5) => (ChaosFault::MuteMasterToController, past_timeout),
        Class::OneWay => (ChaosFault::CutResponsesToClients, hold),
        Class::Loss => (
            ChaosFault::Loss {
                percent: rng.random_range(10..=30),
            },
            hold,
        ),
        Class::SlowLink => (
            ChaosFault::SlowLink {
                kbit_s: rng.random_range(1_000..=4_000),
            },
            hold,
        ),
        Class::Pause => (ChaosFault::PauseMaster, past_timeout),
        Class::KillMaster => (ChaosFault::KillMaster, hold),
        Class::KillReplica => (ChaosFault::KillReplica { replica }, hold),
        Class::DiskFull => (ChaosFault::FillMasterDisk, rng.random_range(6_000..=9_000)),
        Class::ClockStep => {
            let by_s = rng.random_range(60..=900) * if rng.random_bool(0.5) { 1 } else { -1 };
            (ChaosFault::StepMasterClock { by_s }, hold)
        }
    }
}

/// The schedule of seed `seed`: every class once (seeded order), then
/// random classes while the next step still ends within `budget_ms`.
pub fn schedule(seed: u64, budget_ms: u64) -> Vec<Step> {
    let mut rng = substream(seed, Salt::Faults);
    let mut classes = Class::ALL.to_vec();
    classes.shuffle(&mut rng);
    let mut steps = Vec::new();
    let mut at_ms = WARM_UP_MS;
    for round in 0.. {
        let class = match classes.get(round) {
            Some(c) => *c,
            None => Class::ALL[rng.random_range(0..Class::ALL.len())],
        };
        let (fault, hold_ms) = draw(class, &mut rng);
        let end_ms = at_ms + hold_ms + rng.random_range(SETTLE_MS);
        if round >= classes.len() && end_ms > budget_ms {
            break;
        }
        steps.push(Step {
            at_ms,
            fault,
            hold_ms,
        });
        at_ms = end_ms;
    }
    steps
}

/// When the last step of `steps` has healed and settled.
pub fn end_ms(steps: &[Step]) -> u64 {
    steps
        .last()
        .map_or(WARM_UP_MS, |s| s.at_ms + s.hold_ms + SETTLE_MS.end())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn every_class_is_scheduled_even_on_a_zero_budget() {
        for seed in 0..32 {
            let steps = schedule(seed, 0);
            let classes: BTreeSet<Class> = steps.iter().map(|s| s.fault.class()).collect();
            assert_eq!(classes.len(), Class::ALL.len(), "seed {seed}: {steps:?}");
        }
    }

    #[test]
    fn steps_do_not_overlap_and_pauses_outlast_the_timeout() {
        let steps = schedule(7, 600_000);
        assert!(steps.len() > Class::ALL.len());
        for pair in steps.windows(2) {
            assert!(pair[0].at_ms + pair[0].hold_ms < pair[1].at_ms, "{pair:?}");
        }
        for s in &steps {
            if matches!(s.fault, ChaosFault::PauseMaster | ChaosFault::IsolateMaster) {
                assert!(s.hold_ms > BROKER_TIMEOUT_MS, "{s:?}");
            }
        }
        assert!(end_ms(&steps) <= 600_000 + 20_000);
    }

    #[test]
    fn a_seed_gives_one_schedule_and_another_seed_another() {
        assert_eq!(schedule(3, 60_000), schedule(3, 60_000));
        assert_ne!(schedule(3, 60_000), schedule(4, 60_000));
    }
}
