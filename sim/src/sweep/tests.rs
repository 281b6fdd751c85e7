use scenarios::TimedFault;

use super::*;
use crate::history::Injected;

fn at(at_ms: u64, fault: Fault) -> TimedFault {
    TimedFault { at_ms, fault }
}

fn plan_with(faults: Vec<TimedFault>) -> SwarmRun {
    let run = SwarmRun::of_family(Family::BrokerCrash, 1);
    let mut plan = run.plan.clone();
    plan.faults = faults;
    run.with_plan(plan)
}

#[test]
fn units_pair_each_fault_with_its_own_heal() {
    let run = plan_with(vec![
        at(10, Fault::CrashBroker { power_loss: true }),
        at(20, Fault::PartitionReplica { replica: 1 }),
        at(30, Fault::PartitionReplica { replica: 0 }),
        at(40, Fault::RestartBroker),
        at(50, Fault::FailNextSync),
        at(60, Fault::RepairReplica { replica: 0 }),
        at(70, Fault::RepairReplica { replica: 1 }),
    ]);
    assert_eq!(
        fault_units(&run.plan),
        vec![vec![0, 3], vec![1, 6], vec![2, 5], vec![4]]
    );
    let smaller = without_unit(&run.plan, &[1, 6]);
    assert_eq!(smaller.faults.len(), 5);
    assert!(!smaller
        .faults
        .iter()
        .any(|f| matches!(f.fault, Fault::RepairReplica { replica: 1 })));
}

#[test]
fn every_plan_of_every_family_splits_into_well_formed_units() {
    for (family, _) in FAMILIES {
        for seed in 0..50 {
            let plan = family.plan(seed);
            let units = fault_units(&plan);
            assert_eq!(units.iter().map(Vec::len).sum::<usize>(), plan.faults.len());
            for unit in units {
                let first = plan.faults[unit[0]].fault;
                // Every fault that starts a class ends with its heal
                // (a clock step or a member's crash has none: it
                // stands alone).
                let heals = !matches!(
                    first,
                    Fault::StepBrokerClock { .. }
                        | Fault::StepReplicaClock { .. }
                        | Fault::CrashMember { .. }
                );
                if first.class().is_some() && heals {
                    assert_eq!(unit.len(), 2, "{family:?} seed {seed}: {plan:?}");
                }
            }
        }
    }
}

#[test]
fn shrinking_keeps_only_the_fault_that_makes_it_fail() {
    let run = plan_with(vec![
        at(10, Fault::CrashBroker { power_loss: true }),
        at(40, Fault::RestartBroker),
        at(50, Fault::PartitionReplica { replica: 0 }),
        at(60, Fault::RepairReplica { replica: 0 }),
        at(70, Fault::CrashBroker { power_loss: false }),
        at(80, Fault::RestartBroker),
    ]);
    let fails = |r: &SwarmRun| {
        r.plan
            .faults
            .iter()
            .any(|f| f.fault == Fault::CrashBroker { power_loss: false })
    };
    let shrunk = shrink(&run, fails);
    let faults: Vec<Fault> = shrunk.run.plan.faults.iter().map(|f| f.fault).collect();
    assert_eq!(
        faults,
        vec![
            Fault::CrashBroker { power_loss: false },
            Fault::RestartBroker
        ]
    );
    assert_eq!(shrunk.run.plan.workload.producers, 1);
    assert_eq!(shrunk.run.plan.workload.messages_per_producer, 1);
}

#[test]
fn shrinking_stops_where_the_workload_becomes_too_small_to_fail() {
    let run = plan_with(vec![
        at(10, Fault::CrashBroker { power_loss: true }),
        at(40, Fault::RestartBroker),
    ]);
    let fails = |r: &SwarmRun| r.plan.workload.messages_per_producer >= 10;
    let shrunk = shrink(&run, fails);
    assert!(shrunk.run.plan.faults.is_empty());
    let m = shrunk.run.plan.workload.messages_per_producer;
    assert!((10..20).contains(&m), "{m}");
}

#[test]
fn shrinking_halves_messages_when_dropping_a_producer_would_pass() {
    let mut run = plan_with(Vec::new());
    run.plan.workload.producers = 3;
    let fails = |r: &SwarmRun| r.plan.workload.producers >= 3;
    let shrunk = shrink(&run, fails);
    assert_eq!(shrunk.run.plan.workload.producers, 3);
    assert_eq!(shrunk.run.plan.workload.messages_per_producer, 1);
}

#[test]
fn summaries_survive_the_line_protocol_and_merge() {
    let mut a = SweepSummary::default();
    a.add(&SeedOutcome {
        seed: 7,
        family: Family::Failover,
        failure: Some("1 violation(s), first: lost\n  plan: …".into()),
        fired: [FaultClass::BrokerPowerLoss, FaultClass::ControllerCrash].into(),
        sites: ["sluice_node::broker::register:27"].into(),
        trace_hash: Some(1),
    });
    a.add(&SeedOutcome {
        seed: 9,
        family: Family::BrokerCrash,
        failure: None,
        fired: [FaultClass::BrokerPowerLoss].into(),
        sites: BTreeSet::new(),
        trace_hash: Some(2),
    });
    let parsed = SweepSummary::parse(&a.to_lines()).expect("parses");
    assert_eq!(parsed, a);
    assert_eq!(
        parsed.failures[0].first_violation,
        "1 violation(s), first: lost"
    );
    let mut merged = parsed.clone();
    merged.merge(&a);
    assert_eq!(merged.seeds_run, 4);
    assert_eq!(merged.fired.get(&FaultClass::BrokerPowerLoss), Some(&4));
    assert_eq!(merged.families.get("failover"), Some(&2));
    assert_eq!(
        merged.sites.get("sluice_node::broker::register:27"),
        Some(&2)
    );
    assert!(SweepSummary::parse("seeds x").is_err());
    assert!(SweepSummary::parse("family nope 1").is_err());
}

#[test]
fn only_faults_the_history_records_as_injected_count_as_fired() {
    let fault = |at_ms, fault| Entry {
        at_ms,
        event: Event::Fault { fault },
    };
    let entries = [
        fault(
            10,
            Injected::Planned(Fault::CrashBroker { power_loss: true }),
        ),
        fault(20, Injected::Planned(Fault::RestartBroker)),
        fault(
            30,
            Injected::RestartForDrain {
                host: "replica0".into(),
            },
        ),
    ];
    assert_eq!(
        injected_classes(&entries),
        [FaultClass::BrokerPowerLoss].into()
    );
}

#[test]
fn the_report_lists_failures_with_replay_and_every_class() {
    let mut s = SweepSummary::default();
    s.add(&SeedOutcome {
        seed: 12,
        family: Family::FsyncEio,
        failure: Some("acknowledged while fenced".into()),
        fired: [FaultClass::SyncEio].into(),
        sites: BTreeSet::new(),
        trace_hash: None,
    });
    let text = s.report(2.0, |seed| format!("replay {seed}"));
    assert!(
        text.contains("seeds run: 1 in 2.0 s (0.50 seeds/s)"),
        "{text}"
    );
    assert!(text.contains("seed 12 (fsync_eio): acknowledged while fenced"));
    assert!(text.contains("replay: replay 12"));
    for class in FaultClass::ALL {
        assert!(text.contains(class.name()), "{text}");
    }
}
