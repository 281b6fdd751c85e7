//! The fault registry's definitions: every fault a plan can inject, what
//! heals each one and the class it counts under in a sweep. Each is one
//! exhaustive `match` over [`Fault`], so a new fault that forgets its heal
//! or its class does not compile. (The simulation's `nemesis` applies them.)

/// One injected fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Crash the broker host; with `power_loss` its disk loses (or tears)
    /// every page not yet synced.
    CrashBroker {
        /// Also lose the page cache.
        power_loss: bool,
    },
    /// Start the crashed broker again (it recovers from its disk).
    RestartBroker,
    /// The broker disk's next segment sync fails with EIO (fsyncgate
    /// semantics: the pages are marked clean but not persisted).
    FailNextSync,
    /// Hold every message between the broker and the producers (delivered
    /// late, at the release).
    HoldProducers,
    /// Deliver what was held.
    ReleaseProducers,
    /// Drop every message between the broker and the producers.
    PartitionProducers,
    /// Heal that partition.
    RepairProducers,
    /// Drop every message between the broker and the consumers.
    PartitionConsumers,
    /// Heal that partition.
    RepairConsumers,
    /// Drop every message between the broker and one consumer-group member.
    PartitionMember {
        /// The member (`0..group_members`).
        member: u32,
    },
    /// Heal that partition.
    RepairMember {
        /// The member.
        member: u32,
    },
    /// Drop every message between the first broker (the initial master)
    /// and replica `replica`.
    PartitionReplica {
        /// The replica (`0..replicas`).
        replica: u32,
    },
    /// Heal that partition.
    RepairReplica {
        /// The replica.
        replica: u32,
    },
    /// Crash replica `replica`'s host; with `power_loss` its disk loses
    /// every page not yet synced.
    CrashReplica {
        /// The replica.
        replica: u32,
        /// Also lose the page cache.
        power_loss: bool,
    },
    /// Start that replica again.
    RestartReplica {
        /// The replica.
        replica: u32,
    },
    /// Crash controller `controller` (`0..controllers`), losing its page
    /// cache.
    CrashController {
        /// The controller.
        controller: u32,
    },
    /// Start that controller again.
    RestartController {
        /// The controller.
        controller: u32,
    },
    /// Cut the first broker off from its replicas and the controllers (not
    /// from clients or name servers): an isolated master.
    IsolateBroker,
    /// Heal that isolation.
    RejoinBroker,
    /// Step the first broker's wall clock by `by_ms` (an NTP jump; a
    /// negative step moves it back). Monotonic time is untouched.
    StepBrokerClock {
        /// The step, in milliseconds.
        by_ms: i64,
    },
    /// Every sync of the broker's disk takes `sync_ms` longer (a slow or
    /// overloaded device), until [`Fault::HealBrokerDisk`].
    SlowBrokerDisk {
        /// The extra latency of each sync, in milliseconds.
        sync_ms: u64,
    },
    /// The broker's disk syncs at its normal speed again.
    HealBrokerDisk,
    /// A one-way partition: everything the broker sends to the producers
    /// is dropped, while their requests still arrive (and are stored).
    CutResponsesToProducers,
    /// Heal that one-way partition.
    RestoreResponsesToProducers,
    /// The broker's device fills up: creating a file (a CommitLog or
    /// ConsumeQueue segment, an index file, a metadata file) fails with
    /// ENOSPC until [`Fault::FreeBrokerDisk`].
    FillBrokerDisk,
    /// Space returns on the broker's device.
    FreeBrokerDisk,
    /// The broker's next `count` reads of its CommitLog fail with EIO.
    FailBrokerReads {
        /// How many reads fail.
        count: u32,
    },
    /// ConsumeQueue files of the broker are deleted: with `first_only` the
    /// first (oldest) file of each queue, else every ConsumeQueue and index
    /// file. Applied only while the broker is down (else ignored); it
    /// rebuilds them from the CommitLog when it starts.
    LoseConsumeQueues {
        /// Only each queue's first file.
        first_only: bool,
    },
    /// Drop every message between broker `broker` (0: the first broker;
    /// `i + 1`: replica `i`) and name server `namesrv`: the broker's
    /// registration there expires if the cut lasts.
    PartitionBrokerFromNamesrv {
        /// The broker.
        broker: u32,
        /// The name server (`0..namesrvs`).
        namesrv: u32,
    },
    /// Heal that partition.
    RepairBrokerFromNamesrv {
        /// The broker.
        broker: u32,
        /// The name server.
        namesrv: u32,
    },
    /// Drop every message between the producers and name server
    /// `namesrv`: their route lookups must go to another one.
    PartitionClientsFromNamesrv {
        /// The name server.
        namesrv: u32,
    },
    /// Heal that partition.
    RepairClientsFromNamesrv {
        /// The name server.
        namesrv: u32,
    },
    /// Consumer-group member `member` starts now (it joins the group, which
    /// rebalances); until then it does not run.
    JoinMember {
        /// The member (`0..group_members`).
        member: u32,
    },
    /// Crash group member `member`'s host (its process dies with whatever
    /// it consumed but had not committed): the broker must drop it and the
    /// others take its queues.
    CrashMember {
        /// The member.
        member: u32,
    },
    /// Start crashed member `member` again: a new process with the same
    /// client id, which rejoins the group and resumes from the group's
    /// committed offsets (a deploy's restart). Ignored unless it crashed.
    RestartMember {
        /// The member.
        member: u32,
    },
    /// Step replica `replica`'s wall clock by `by_ms` (negative: back).
    /// Monotonic time is untouched.
    StepReplicaClock {
        /// The replica.
        replica: u32,
        /// The step, in milliseconds.
        by_ms: i64,
    },
}

impl Fault {
    /// The fault that heals, restarts or releases what this one started
    /// (`None`: nothing does — it is a heal itself, or stands alone). A
    /// shrinker drops each fault with its heal, so a missing heal here
    /// would leave a shrunk plan broken where the original was not.
    #[must_use]
    pub fn heal(self) -> Option<Self> {
        match self {
            Self::CrashBroker { .. } => Some(Self::RestartBroker),
            Self::IsolateBroker => Some(Self::RejoinBroker),
            Self::SlowBrokerDisk { .. } => Some(Self::HealBrokerDisk),
            Self::FillBrokerDisk => Some(Self::FreeBrokerDisk),
            Self::HoldProducers => Some(Self::ReleaseProducers),
            Self::PartitionProducers => Some(Self::RepairProducers),
            Self::CutResponsesToProducers => Some(Self::RestoreResponsesToProducers),
            Self::PartitionConsumers => Some(Self::RepairConsumers),
            Self::PartitionMember { member } => Some(Self::RepairMember { member }),
            // A member that joins late is "healed" by its crash: the
            // shrinker drops both or neither.
            Self::JoinMember { member } => Some(Self::CrashMember { member }),
            Self::CrashMember { member } => Some(Self::RestartMember { member }),
            Self::PartitionReplica { replica } => Some(Self::RepairReplica { replica }),
            Self::CrashReplica { replica, .. } => Some(Self::RestartReplica { replica }),
            Self::CrashController { controller } => Some(Self::RestartController { controller }),
            Self::PartitionBrokerFromNamesrv { broker, namesrv } => {
                Some(Self::RepairBrokerFromNamesrv { broker, namesrv })
            }
            Self::PartitionClientsFromNamesrv { namesrv } => {
                Some(Self::RepairClientsFromNamesrv { namesrv })
            }
            // Heals themselves.
            Self::RestartBroker
            | Self::RejoinBroker
            | Self::HealBrokerDisk
            | Self::FreeBrokerDisk
            | Self::ReleaseProducers
            | Self::RepairProducers
            | Self::RestoreResponsesToProducers
            | Self::RepairConsumers
            | Self::RepairMember { .. }
            | Self::RestartMember { .. }
            | Self::RepairReplica { .. }
            | Self::RestartReplica { .. }
            | Self::RestartController { .. }
            | Self::RepairBrokerFromNamesrv { .. }
            | Self::RepairClientsFromNamesrv { .. }
            // One-shot faults, which nothing undoes.
            | Self::StepBrokerClock { .. }
            | Self::StepReplicaClock { .. }
            | Self::FailNextSync
            | Self::FailBrokerReads { .. }
            | Self::LoseConsumeQueues { .. } => None,
        }
    }

    /// Whether this fault heals what `opener` started.
    #[must_use]
    pub fn closes(self, opener: Self) -> bool {
        opener.heal() == Some(self)
    }

    /// The class this fault counts under once applied, if it starts one
    /// (a heal or a restart does not; a disk fault counts once the disk
    /// reports that it happened, see [`FaultClass::TornPages`] and after).
    #[must_use]
    pub fn class(self) -> Option<FaultClass> {
        match self {
            Self::CrashBroker { power_loss: true } => Some(FaultClass::BrokerPowerLoss),
            Self::CrashBroker { power_loss: false } => Some(FaultClass::BrokerProcessCrash),
            Self::IsolateBroker => Some(FaultClass::MasterIsolation),
            Self::StepBrokerClock { .. } => Some(FaultClass::ClockStep),
            Self::SlowBrokerDisk { .. } => Some(FaultClass::SlowDisk),
            Self::HoldProducers => Some(FaultClass::ProducerHold),
            Self::PartitionProducers => Some(FaultClass::ProducerPartition),
            Self::CutResponsesToProducers => Some(FaultClass::ProducerOneWayPartition),
            Self::PartitionConsumers => Some(FaultClass::ConsumerPartition),
            Self::PartitionMember { .. } => Some(FaultClass::MemberPartition),
            Self::CrashMember { .. } => Some(FaultClass::MemberCrash),
            Self::PartitionReplica { .. } => Some(FaultClass::ReplicaPartition),
            Self::CrashReplica { .. } => Some(FaultClass::ReplicaCrash),
            Self::StepReplicaClock { .. } => Some(FaultClass::ReplicaClockStep),
            Self::CrashController { .. } => Some(FaultClass::ControllerCrash),
            Self::PartitionBrokerFromNamesrv { .. } => Some(FaultClass::NamesrvBrokerPartition),
            Self::PartitionClientsFromNamesrv { .. } => Some(FaultClass::NamesrvClientPartition),
            Self::RestartBroker
            | Self::RejoinBroker
            | Self::HealBrokerDisk
            | Self::ReleaseProducers
            | Self::RepairProducers
            | Self::RestoreResponsesToProducers
            | Self::RepairConsumers
            | Self::RepairMember { .. }
            | Self::JoinMember { .. }
            | Self::RestartMember { .. }
            | Self::RepairReplica { .. }
            | Self::RestartReplica { .. }
            | Self::RestartController { .. }
            | Self::RepairBrokerFromNamesrv { .. }
            | Self::RepairClientsFromNamesrv { .. }
            // These count once the disk reports that they happened.
            | Self::FailNextSync
            | Self::FillBrokerDisk
            | Self::FreeBrokerDisk
            | Self::FailBrokerReads { .. }
            | Self::LoseConsumeQueues { .. } => None,
        }
    }

    /// Whether this fault crashes a host (a broker, replica, controller or
    /// consumer-group member).
    #[must_use]
    pub fn crashes_a_host(self) -> bool {
        self.class().is_some_and(FaultClass::is_host_crash)
    }
}

/// Declares [`FaultClass`] with its report names: the enum, `ALL` in
/// declaration (report) order, `name()` and `named()`, all from one list.
macro_rules! fault_classes {
    ($($(#[doc = $doc:literal])+ $class:ident => $name:literal,)+) => {
        /// A kind of fault, counted in a sweep when it actually fired in a run.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
        pub enum FaultClass {
            $($(#[doc = $doc])+ $class,)+
        }

        impl FaultClass {
            /// Every class, in report order.
            pub const ALL: [Self; [$(Self::$class),+].len()] = [$(Self::$class),+];

            /// The class's name in reports.
            #[must_use]
            pub fn name(self) -> &'static str {
                match self {
                    $(Self::$class => $name,)+
                }
            }
        }
    };
}

fault_classes! {
    /// The broker crashed and lost its page cache.
    BrokerPowerLoss => "broker_power_loss",
    /// The broker process crashed; the page cache survived.
    BrokerProcessCrash => "broker_process_crash",
    /// A power loss tore a dirty page of the broker's disk (per sector).
    TornPages => "torn_pages",
    /// A power loss lost a dirty page of the broker's disk.
    LostPages => "lost_pages",
    /// A power loss left garbage sectors on the broker's disk.
    GarbagePages => "garbage_pages",
    /// A sync of the broker's disk failed with EIO.
    SyncEio => "sync_eio",
    /// A replica was cut off from the first broker.
    ReplicaPartition => "replica_partition",
    /// A replica crashed.
    ReplicaCrash => "replica_crash",
    /// A controller crashed.
    ControllerCrash => "controller_crash",
    /// The first broker was cut off from its replicas and controllers.
    MasterIsolation => "master_isolation",
    /// The producers' messages were held and delivered late.
    ProducerHold => "producer_hold",
    /// The producers were cut off from the broker.
    ProducerPartition => "producer_partition",
    /// The long-polling consumers were cut off from the broker.
    ConsumerPartition => "consumer_partition",
    /// A consumer-group member was cut off from the broker.
    MemberPartition => "member_partition",
    /// The broker's wall clock was stepped forward or back.
    ClockStep => "clock_step",
    /// A BUGGIFY fault point of the production code fired.
    Buggify => "buggify",
    /// The broker's disk synced slowly for a while.
    SlowDisk => "slow_disk",
    /// The broker's answers to the producers were dropped (one way).
    ProducerOneWayPartition => "producer_one_way_partition",
    /// The broker's disk refused to create a file for lack of space.
    DiskFull => "disk_full",
    /// A read of the broker's CommitLog failed with EIO.
    ReadEio => "read_eio",
    /// The broker's ConsumeQueue and index files were deleted while down.
    ConsumeQueueLost => "consume_queue_lost",
    /// A broker was cut off from a name server.
    NamesrvBrokerPartition => "namesrv_broker_partition",
    /// The producers were cut off from a name server.
    NamesrvClientPartition => "namesrv_client_partition",
    /// A consumer-group member's host crashed.
    MemberCrash => "member_crash",
    /// A replica's wall clock was stepped forward or back.
    ReplicaClockStep => "replica_clock_step",
}

impl FaultClass {
    /// The class named `name` in reports.
    #[must_use]
    pub fn named(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.name() == name)
    }

    /// Whether the class is a crash of some host.
    #[must_use]
    pub fn is_host_crash(self) -> bool {
        match self {
            Self::BrokerPowerLoss
            | Self::BrokerProcessCrash
            | Self::ReplicaCrash
            | Self::ControllerCrash
            | Self::MemberCrash => true,
            Self::TornPages
            | Self::LostPages
            | Self::GarbagePages
            | Self::SyncEio
            | Self::ReplicaPartition
            | Self::MasterIsolation
            | Self::ProducerHold
            | Self::ProducerPartition
            | Self::ConsumerPartition
            | Self::MemberPartition
            | Self::ClockStep
            | Self::Buggify
            | Self::SlowDisk
            | Self::ProducerOneWayPartition
            | Self::DiskFull
            | Self::ReadEio
            | Self::ConsumeQueueLost
            | Self::NamesrvBrokerPartition
            | Self::NamesrvClientPartition
            | Self::ReplicaClockStep => false,
        }
    }
}

/// Adds a broker crash (with or without power loss) at `at_ms`.
pub(crate) fn push_crash(faults: &mut Vec<crate::plan::TimedFault>, at_ms: u64, power_loss: bool) {
    faults.push(crate::plan::TimedFault {
        at_ms,
        fault: Fault::CrashBroker { power_loss },
    });
}

/// Adds a broker restart at `at_ms`.
pub(crate) fn push_restart(faults: &mut Vec<crate::plan::TimedFault>, at_ms: u64) {
    faults.push(crate::plan::TimedFault {
        at_ms,
        fault: Fault::RestartBroker,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fault_classes_have_distinct_names_that_read_back() {
        for class in FaultClass::ALL {
            assert_eq!(FaultClass::named(class.name()), Some(class));
        }
        assert_eq!(FaultClass::named("no_such_class"), None);
    }

    #[test]
    fn a_heal_closes_its_opener_and_only_it() {
        let crash = Fault::CrashReplica {
            replica: 1,
            power_loss: true,
        };
        assert!(Fault::RestartReplica { replica: 1 }.closes(crash));
        assert!(!Fault::RestartReplica { replica: 0 }.closes(crash));
        assert!(Fault::RestartBroker.closes(Fault::CrashBroker { power_loss: false }));
        assert!(!Fault::RestartBroker.closes(Fault::RestartBroker));
        let cut = Fault::PartitionBrokerFromNamesrv {
            broker: 1,
            namesrv: 0,
        };
        assert!(Fault::RepairBrokerFromNamesrv {
            broker: 1,
            namesrv: 0
        }
        .closes(cut));
        assert!(!Fault::RepairBrokerFromNamesrv {
            broker: 0,
            namesrv: 0
        }
        .closes(cut));
    }

    #[test]
    fn heals_start_no_class_and_have_no_heal_of_their_own() {
        let openers = [
            Fault::CrashBroker { power_loss: true },
            Fault::IsolateBroker,
            Fault::SlowBrokerDisk { sync_ms: 5 },
            Fault::FillBrokerDisk,
            Fault::HoldProducers,
            Fault::PartitionProducers,
            Fault::CutResponsesToProducers,
            Fault::PartitionConsumers,
            Fault::PartitionMember { member: 2 },
            Fault::CrashMember { member: 2 },
            Fault::PartitionReplica { replica: 1 },
            Fault::CrashReplica {
                replica: 1,
                power_loss: false,
            },
            Fault::CrashController { controller: 2 },
            Fault::PartitionBrokerFromNamesrv {
                broker: 1,
                namesrv: 1,
            },
            Fault::PartitionClientsFromNamesrv { namesrv: 1 },
        ];
        for opener in openers {
            let heal = opener.heal().expect("an opener has a heal");
            assert_eq!(heal.class(), None, "{heal:?} starts nothing");
            assert_eq!(heal.heal(), None, "{heal:?} is healed by nothing");
        }
    }

    #[test]
    fn crashes_are_the_faults_that_take_a_host_down() {
        assert!(Fault::CrashBroker { power_loss: false }.crashes_a_host());
        assert!(Fault::CrashMember { member: 0 }.crashes_a_host());
        assert!(Fault::CrashController { controller: 0 }.crashes_a_host());
        assert!(!Fault::RestartBroker.crashes_a_host());
        assert!(!Fault::IsolateBroker.crashes_a_host());
        assert!(!Fault::FailNextSync.crashes_a_host());
    }
}
