//! Plans of the cluster scenarios: name-server partitions and stale
//! routes, a consumer crash during a rebalance, replica clock steps.

use rand::Rng;

use super::{
    replicated_workload, workload, Fault, Plan, ReplicaSet, TimedFault, CLOCK_STEP_MS_MAX,
    DELAY_MS_MAX, FIRST_MASTER_MS,
};
use crate::rng::{substream, Salt};

/// Name servers in the name-server scenarios.
const NAMESRVS: u32 = 2;

/// Pushes `open` at `at_ms` and `close` `for_ms` later.
fn cut(faults: &mut Vec<TimedFault>, at_ms: u64, for_ms: u64, open: Fault, close: Fault) {
    faults.push(TimedFault { at_ms, fault: open });
    faults.push(TimedFault {
        at_ms: at_ms + for_ms,
        fault: close,
    });
}

impl Plan {
    /// Scenario `namesrv_partition_stale_routes`: two name servers; the
    /// first broker is cut off from one of them — mostly for 4–8 s, past
    /// the sim's broker expiry, so its registration (and the topic's
    /// route) expires there — and healed; per seed the producers are cut
    /// off from a name server too. Per seed (swarm style) the broker group
    /// is SYNC-replicated with a controller, and its master is isolated
    /// for 5–10 s so a replica is elected while producers still hold the
    /// old master's route; mostly the new master is also cut off from one
    /// name server during the failover, so that name server keeps routing
    /// the old master. Producers with a stale route must get errors, never
    /// an acknowledgement that is lost; after the heal every name server
    /// routes the live master.
    pub fn namesrv_partition(seed: u64) -> Self {
        let mut rng = substream(seed, Salt::Faults);
        let replicated = rng.random_bool(0.5);
        let mut workload = if replicated {
            replicated_workload(seed)
        } else {
            workload(seed)
        };
        workload.namesrvs = NAMESRVS;
        let start_ms = if replicated { FIRST_MASTER_MS } else { 0 };
        let window_ms = workload.expected_ms().max(200) / 2;
        let mut faults = Vec::new();
        let namesrv = rng.random_range(0..NAMESRVS);
        let at_ms = start_ms + rng.random_range(20..=window_ms);
        let for_ms = if rng.random_bool(0.75) {
            rng.random_range(4_000..=8_000)
        } else {
            rng.random_range(300..=2_000)
        };
        cut(
            &mut faults,
            at_ms,
            for_ms,
            Fault::PartitionBrokerFromNamesrv { broker: 0, namesrv },
            Fault::RepairBrokerFromNamesrv { broker: 0, namesrv },
        );
        if rng.random_bool(0.6) {
            let namesrv = rng.random_range(0..NAMESRVS);
            let at_ms = start_ms + rng.random_range(20..=window_ms);
            cut(
                &mut faults,
                at_ms,
                rng.random_range(1_000..=6_000),
                Fault::PartitionClientsFromNamesrv { namesrv },
                Fault::RepairClientsFromNamesrv { namesrv },
            );
        }
        if replicated {
            let at_ms = start_ms + rng.random_range(20..=window_ms);
            let for_ms = rng.random_range(5_000..=10_000);
            cut(
                &mut faults,
                at_ms,
                for_ms,
                Fault::IsolateBroker,
                Fault::RejoinBroker,
            );
            if rng.random_bool(0.75) {
                // The replica that becomes master, unknown to one name
                // server until after the old master rejoined.
                let namesrv = rng.random_range(0..NAMESRVS);
                cut(
                    &mut faults,
                    at_ms.saturating_sub(rng.random_range(0..=1_000)),
                    for_ms + rng.random_range(500..=4_000),
                    Fault::PartitionBrokerFromNamesrv { broker: 1, namesrv },
                    Fault::RepairBrokerFromNamesrv { broker: 1, namesrv },
                );
            }
        }
        faults.sort_by_key(|f| f.at_ms);
        let replication = replicated.then_some(ReplicaSet {
            sync: true,
            replicas: 1,
            trust_claimed_offset: false,
            controllers: 1,
        });
        Self::new(seed, workload, faults, replication)
    }
}

impl Plan {
    /// Scenario `consumer_crash_during_rebalance`: a clustering
    /// push-consumer group of 2–3 members consumes while producers send;
    /// the last member joins late, and one member's host crashes right
    /// around the rebalance that join starts — mostly while queues are
    /// being reassigned (up to 1.5 s after the join), sometimes just
    /// before it, sometimes the joiner itself; sometimes an older victim
    /// is cut off from the broker just before, so only its silence tells
    /// the broker it is gone; in half the plans the victim restarts 0.3–4 s
    /// later with the same client id (sometimes before the broker has
    /// expired its old connection) and rejoins. The broker must drop the
    /// dead member and the survivors take its queues: nothing acknowledged
    /// is lost, duplicates only where the crash (or a queue moving) explains
    /// them, committed offsets never skip, lag reaches zero.
    pub fn consumer_crash(seed: u64) -> Self {
        let mut workload = workload(seed);
        workload.queues = workload.queues.max(2);
        workload.group_members = substream(seed, Salt::Group).random_range(2..=3);
        let mut rng = substream(seed, Salt::Faults);
        let window_ms = workload.expected_ms().max(200);
        let joiner = workload.group_members - 1;
        let join_ms = rng.random_range(100..=window_ms / 2);
        let victim = if rng.random_bool(0.25) {
            joiner
        } else {
            rng.random_range(0..joiner)
        };
        let crash_ms = if victim == joiner {
            join_ms + rng.random_range(50..=1_500)
        } else {
            (join_ms + rng.random_range(0..=1_800)).saturating_sub(300)
        };
        let mut faults = vec![
            TimedFault {
                at_ms: join_ms,
                fault: Fault::JoinMember { member: joiner },
            },
            TimedFault {
                at_ms: crash_ms,
                fault: Fault::CrashMember { member: victim },
            },
        ];
        // Sometimes an older member is cut off from the broker just before
        // its crash, so its connection's close never arrives: the broker
        // must expire it by its silence instead.
        if victim != joiner && rng.random_bool(0.35) {
            let member = victim;
            faults.push(TimedFault {
                at_ms: crash_ms.saturating_sub(rng.random_range(0..=200)),
                fault: Fault::PartitionMember { member },
            });
            faults.push(TimedFault {
                at_ms: crash_ms + rng.random_range(500..=3_000),
                fault: Fault::RepairMember { member },
            });
        }
        if rng.random_bool(0.5) {
            faults.push(TimedFault {
                at_ms: crash_ms + rng.random_range(300..=4_000),
                fault: Fault::RestartMember { member: victim },
            });
        }
        faults.sort_by_key(|f| f.at_ms);
        Self::new(seed, workload, faults, None)
    }
}

/// Drift of one clock, as repeated small steps: how many, and how large.
const DRIFT_STEPS: std::ops::RangeInclusive<u32> = 10..=20;
const DRIFT_STEP_MS: std::ops::RangeInclusive<i64> = 20..=100;

impl Plan {
    /// Scenario `replica_clock_skew`: the failover plan with delayed
    /// messages and timers ([`Plan::failover`] with
    /// [`Plan::with_delays`]), and the replicas' wall clocks stepped 1–2
    /// times forward or back by up to 5 s; per seed one clock (the first
    /// broker's or a replica's) also drifts — 10–20 steps of 20–100 ms in
    /// one direction, every 250–750 ms. Long-polling consumers read every
    /// queue. Whichever broker is master when a
    /// delayed message falls due delivers it: none may be lost, none read
    /// earlier than its delay less what the steps can make one broker's
    /// clock run ahead of another's, and the replicas' logs must agree.
    pub fn replica_clock_skew(seed: u64) -> Self {
        let mut plan = Self::failover(seed).with_delays();
        // Read while messages fall due, so an early one would be seen (the
        // drain reads only once everything is due).
        plan.workload.long_poll_consumers = true;
        let replicas = plan.replication.map_or(1, |r| r.replicas).max(1);
        let mut rng = substream(seed, Salt::ClockSteps);
        let window_ms = FIRST_MASTER_MS + plan.workload.expected_ms() + DELAY_MS_MAX;
        let step = |broker: u32, by_ms: i64| match broker.checked_sub(1) {
            None => Fault::StepBrokerClock { by_ms },
            Some(replica) => Fault::StepReplicaClock { replica, by_ms },
        };
        for _ in 0..rng.random_range(1..=2) {
            let replica = rng.random_range(1..=replicas);
            let by_ms = rng.random_range(-CLOCK_STEP_MS_MAX..=CLOCK_STEP_MS_MAX);
            plan.faults.push(TimedFault {
                at_ms: rng.random_range(20..=window_ms),
                fault: step(replica, by_ms),
            });
        }
        if rng.random_bool(0.5) {
            let broker = rng.random_range(0..=replicas);
            let sign = if rng.random_bool(0.5) { 1 } else { -1 };
            let mut at_ms = rng.random_range(20..=window_ms / 2);
            for _ in 0..rng.random_range(DRIFT_STEPS) {
                at_ms += rng.random_range(250..=750);
                let by_ms = sign * rng.random_range(DRIFT_STEP_MS);
                plan.faults.push(TimedFault {
                    at_ms,
                    fault: step(broker, by_ms),
                });
            }
        }
        plan.faults.sort_by_key(|f| f.at_ms);
        let back_ms: u64 = plan
            .faults
            .iter()
            .filter_map(|f| match f.fault {
                Fault::StepBrokerClock { by_ms } | Fault::StepReplicaClock { by_ms, .. } => {
                    Some(by_ms.min(0).unsigned_abs())
                }
                _ => None,
            })
            .sum();
        plan.workload.drain_wait_ms = plan
            .workload
            .drain_wait_ms
            .max(DELAY_MS_MAX + back_ms + 2_000);
        plan
    }
}
