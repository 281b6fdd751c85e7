use super::*;

#[test]
fn disk_scenarios_heal_what_they_break() {
    let mut restarted_while_full = 0;
    for seed in 0..100 {
        let full = Plan::disk_full(seed);
        assert!(full.tuning.tiny_files);
        let kinds: Vec<Fault> = full.faults.iter().map(|f| f.fault).collect();
        if kinds.len() == 2 {
            assert_eq!(kinds, [Fault::FillBrokerDisk, Fault::FreeBrokerDisk]);
        } else {
            // Crashed and restarted strictly while the disk is full.
            assert!(matches!(
                kinds.as_slice(),
                [
                    Fault::FillBrokerDisk,
                    Fault::CrashBroker { .. },
                    Fault::RestartBroker,
                    Fault::FreeBrokerDisk
                ]
            ));
            assert!(full.faults.windows(2).all(|w| w[0].at_ms < w[1].at_ms));
            restarted_while_full += 1;
        }
        let lost = Plan::consume_queue_lost(seed);
        assert!(matches!(lost.faults[0].fault, Fault::CrashBroker { .. }));
        assert!(matches!(
            lost.faults[1].fault,
            Fault::LoseConsumeQueues { .. }
        ));
        assert_eq!(lost.faults[2].fault, Fault::RestartBroker);
        assert!(lost.faults.windows(2).all(|w| w[0].at_ms < w[1].at_ms));
        let reads = Plan::read_eio(seed);
        assert!(!reads.faults.is_empty());
        assert!(reads.workload.long_poll_consumers);
    }
    assert!(
        (20..=47).contains(&restarted_while_full),
        "about a third restart while full: {restarted_while_full} of 100"
    );
}

#[test]
fn offset_crashes_land_between_two_persistences() {
    for seed in 0..100 {
        let plan = Plan::offsets_lost_in_crash(seed);
        let crash = plan.faults[0].at_ms;
        let into_period = crash % OFFSET_PERSIST_MS;
        assert!(
            into_period >= OFFSET_PERSIST_MS * 2 / 5,
            "seed {seed}: {crash}"
        );
        assert!(crash >= OFFSET_PERSIST_MS);
        assert_eq!(
            plan.tuning.offset_persist_interval_ms,
            Some(OFFSET_PERSIST_MS)
        );
    }
}

#[test]
fn a_seed_always_derives_the_same_plan() {
    assert_eq!(Plan::broker_crash(42), Plan::broker_crash(42));
    assert_eq!(Plan::fsync_eio(42), Plan::fsync_eio(42));
}

#[test]
fn crash_plans_restart_after_every_crash_in_time_order() {
    for seed in 0..200 {
        let plan = Plan::broker_crash(seed);
        assert!(plan.faults.windows(2).all(|w| w[0].at_ms < w[1].at_ms));
        for pair in plan.faults.chunks(2) {
            assert!(matches!(pair[0].fault, Fault::CrashBroker { .. }));
            assert_eq!(pair[1].fault, Fault::RestartBroker);
        }
    }
}

#[test]
fn group_plans_heal_what_they_break_and_vary_the_fault_mix() {
    let mut mixes = std::collections::BTreeSet::new();
    for seed in 0..200 {
        let plan = Plan::group_consumption(seed);
        let w = &plan.workload;
        assert!((2..=3).contains(&w.group_members) && w.queues >= 2);
        assert!(plan.faults.windows(2).all(|p| p[0].at_ms <= p[1].at_ms));
        let count = |f: fn(&Fault) -> bool| plan.faults.iter().filter(|t| f(&t.fault)).count();
        let crashes = count(|f| matches!(f, Fault::CrashBroker { power_loss: true }));
        assert_eq!(crashes, count(|f| *f == Fault::RestartBroker));
        let cuts = count(|f| matches!(f, Fault::PartitionMember { .. }));
        assert_eq!(cuts, count(|f| matches!(f, Fault::RepairMember { .. })));
        assert!(crashes + cuts > 0, "seed {seed} injects nothing");
        mixes.insert((crashes, cuts));
    }
    assert_eq!(mixes.len(), 3, "{mixes:?}");
}

#[test]
fn seeds_vary_the_workload() {
    let shapes: std::collections::BTreeSet<_> = (0..50)
        .map(|s| {
            let w = Plan::broker_crash(s).workload;
            (w.producers, w.queues)
        })
        .collect();
    assert!(shapes.len() > 4, "{shapes:?}");
}

#[test]
fn namesrv_plans_heal_every_cut_and_vary_replication() {
    let mut replicated = std::collections::BTreeSet::new();
    for seed in 0..200 {
        let plan = Plan::namesrv_partition(seed);
        assert_eq!(plan.workload.namesrvs, 2);
        assert!(plan.faults.windows(2).all(|p| p[0].at_ms <= p[1].at_ms));
        let count = |f: &dyn Fn(&Fault) -> bool| plan.faults.iter().filter(|t| f(&t.fault)).count();
        let cuts = count(&|f| matches!(f, Fault::PartitionBrokerFromNamesrv { .. }));
        let heals = count(&|f| matches!(f, Fault::RepairBrokerFromNamesrv { .. }));
        assert!(cuts >= 1 && cuts == heals, "seed {seed}: {plan:?}");
        let isolations = count(&|f| *f == Fault::IsolateBroker);
        assert_eq!(isolations, usize::from(plan.replication.is_some()));
        replicated.insert(plan.replication.is_some());
    }
    assert_eq!(replicated.len(), 2);
    assert_eq!(Plan::broker_crash(7).workload.namesrvs, 1);
}

#[test]
fn consumer_crash_plans_crash_one_member_around_the_join() {
    let mut victims = std::collections::BTreeSet::new();
    let mut restarted = 0;
    for seed in 0..200 {
        let plan = Plan::consumer_crash(seed);
        let members = plan.workload.group_members;
        let joins: Vec<_> = plan
            .faults
            .iter()
            .filter(|f| {
                f.fault
                    == Fault::JoinMember {
                        member: members - 1,
                    }
            })
            .collect();
        let crashes: Vec<_> = plan
            .faults
            .iter()
            .filter_map(|f| match f.fault {
                Fault::CrashMember { member } => Some((f.at_ms, member)),
                _ => None,
            })
            .collect();
        assert_eq!(
            (joins.len(), crashes.len()),
            (1, 1),
            "seed {seed}: {plan:?}"
        );
        let (crash_ms, victim) = crashes[0];
        assert!(victim < members);
        if victim == members - 1 {
            assert!(
                crash_ms > joins[0].at_ms,
                "seed {seed}: the joiner crashes after it joined"
            );
        }
        assert!(crash_ms.abs_diff(joins[0].at_ms) <= 1_500);
        victims.insert(victim == members - 1);
        let restarts: Vec<_> = plan
            .faults
            .iter()
            .filter_map(|f| match f.fault {
                Fault::RestartMember { member } => Some((f.at_ms, member)),
                _ => None,
            })
            .collect();
        assert!(restarts.len() <= 1, "seed {seed}: {plan:?}");
        if let Some(&(restart_ms, member)) = restarts.first() {
            assert_eq!(member, victim, "seed {seed}: only the victim restarts");
            assert!(
                (crash_ms + 300..=crash_ms + 4_000).contains(&restart_ms),
                "seed {seed}: {plan:?}"
            );
            restarted += 1;
        }
    }
    assert_eq!(
        victims.len(),
        2,
        "both the joiner and an older member crash"
    );
    assert!(
        (60..=140).contains(&restarted),
        "about half the victims restart: {restarted} of 200"
    );
}

#[test]
fn replica_clock_plans_step_replicas_and_sometimes_drift() {
    let mut drifting = 0;
    for seed in 0..100 {
        let plan = Plan::replica_clock_skew(seed);
        let replicas = plan.replication.map_or(0, |r| r.replicas);
        let steps = plan
            .faults
            .iter()
            .filter(|f| match f.fault {
                Fault::StepReplicaClock { replica, by_ms } => {
                    assert!(replica < replicas && by_ms.abs() <= CLOCK_STEP_MS_MAX);
                    true
                }
                Fault::StepBrokerClock { .. } => true,
                _ => false,
            })
            .count();
        assert!(steps >= 1, "seed {seed}: {plan:?}");
        assert!(plan.faults.windows(2).all(|p| p[0].at_ms <= p[1].at_ms));
        assert_eq!(plan.workload.deferral, Deferral::Delays);
        if steps >= 10 {
            drifting += 1;
        }
    }
    assert!(drifting > 20 && drifting < 80, "{drifting}");
}
