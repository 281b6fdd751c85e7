//! Scenario `namesrv_partition_stale_routes`: two name servers. The first
//! broker is cut off from one of them — mostly long enough for its
//! registration, and the topic's route, to expire there — and healed;
//! per seed the producers are cut off from a name server too, and (half
//! the seeds) the SYNC-replicated group's master is isolated so a replica
//! is elected while producers still hold the old master's route, with the
//! new master mostly unknown to one name server for a while.
//!
//! Safety: nothing acknowledged is lost or moved (an acknowledgement from a
//! deposed master would be lost when it truncates), no `(queue, offset)`
//! holds two messages, the replicas agree. Producers with a stale route
//! get errors and then, having re-fetched it, acknowledgements from the
//! new master. Liveness: after the heal every name server routes the live
//! master within `ROUTES_CONVERGE_MAX` (checked by the route watcher in
//! the run), and the drain reads everything acknowledged.

use scenarios::{Fault, Plan};
use sim::history::{Entry, Event};
use sim::oracle::Violation;
use sim::run::run_judged;
use sim::seeds::for_each_seed;
use sluice_core::FlushMode;

const SEEDS: std::ops::RangeInclusive<u64> = 1..=12;

/// What the seeds exercised, summed.
#[derive(Debug, Default)]
struct Coverage {
    /// Runs in which a name server dropped the topic's route (the broker's
    /// registration expired there) and routed it again later.
    routes_expired: usize,
    /// Runs with a failover in which a producer got an error after the
    /// isolation and an acknowledgement later (it re-fetched the route).
    stale_route_recovered: usize,
    /// Runs in which a name server routed the old master while the
    /// controller had elected another (a stale route at the name server).
    stale_at_namesrv: usize,
    /// The longest convergence after the heal.
    converge_ms_max: u64,
}

#[test]
fn stale_routes_never_lose_acknowledged_messages_and_routes_converge() {
    let mut seen = Coverage::default();
    for_each_seed(
        "namesrv_partition_stale_routes",
        "stale_routes_never_lose_acknowledged_messages_and_routes_converge",
        SEEDS,
        |seed| {
            let plan = Plan::namesrv_partition(seed);
            let report = run_judged(&plan, FlushMode::Sync)?;
            if route_expired_and_returned(&report.entries) {
                seen.routes_expired += 1;
            }
            if plan.replication.is_some() {
                if recovered_after_isolation(&report.entries) {
                    seen.stale_route_recovered += 1;
                }
                if two_masters_routed(&report.entries) {
                    seen.stale_at_namesrv += 1;
                }
            }
            for e in &report.entries {
                if let Event::RoutesConverged { after_ms } = e.event {
                    seen.converge_ms_max = seen.converge_ms_max.max(after_ms);
                }
            }
            Ok(())
        },
    );
    assert!(seen.routes_expired > 0, "{seen:?}");
    assert!(seen.stale_route_recovered > 0, "{seen:?}");
    assert!(seen.stale_at_namesrv > 0, "{seen:?}");
}

/// Whether some name server routed the topic, then nothing, then a master
/// again.
fn route_expired_and_returned(entries: &[Entry]) -> bool {
    let mut state = std::collections::BTreeMap::new();
    for e in entries {
        if let Event::RouteSeen { namesrv, master } = &e.event {
            let phase = state.entry(*namesrv).or_insert(0);
            *phase = match (*phase, master.is_some()) {
                (0, true) => 1,
                (1, false) => 2,
                (2, true) => return true,
                (p, _) => p,
            };
        }
    }
    false
}

/// Whether a producer's send failed after the isolation began and one of
/// its sends was acknowledged after that failure.
fn recovered_after_isolation(entries: &[Entry]) -> bool {
    let Some(isolated) = entries
        .iter()
        .find(|e| e.event.planned_fault() == Some(Fault::IsolateBroker))
    else {
        return false;
    };
    let mut failed = false;
    for e in entries.iter().filter(|e| e.at_ms >= isolated.at_ms) {
        match e.event {
            Event::SendFail { .. } | Event::SendInfo { .. } => failed = true,
            Event::SendOk { .. } if failed => return true,
            _ => {}
        }
    }
    false
}

/// Whether the name servers routed two different masters at one time.
fn two_masters_routed(entries: &[Entry]) -> bool {
    let mut now = std::collections::BTreeMap::new();
    for e in entries {
        if let Event::RouteSeen {
            namesrv,
            master: Some(master),
        } = &e.event
        {
            now.insert(*namesrv, master.clone());
            let distinct: std::collections::BTreeSet<_> = now.values().collect();
            if distinct.len() > 1 {
                return true;
            }
        } else if let Event::RouteSeen {
            namesrv,
            master: None,
        } = &e.event
        {
            now.remove(namesrv);
        }
    }
    false
}

/// The plans cut brokers and producers off from either name server, and
/// replicate about half the time.
#[test]
fn the_plans_cut_both_name_servers_off_brokers_and_producers() {
    let plans: Vec<Plan> = SEEDS.map(Plan::namesrv_partition).collect();
    let any =
        |f: &dyn Fn(&Fault) -> bool| plans.iter().flat_map(|p| &p.faults).any(|t| f(&t.fault));
    for ns in 0..2 {
        assert!(any(
            &|f| matches!(f, Fault::PartitionBrokerFromNamesrv { namesrv, .. } if *namesrv == ns)
        ));
    }
    assert!(any(&|f| matches!(
        f,
        Fault::PartitionClientsFromNamesrv { .. }
    )));
    assert!(any(&|f| matches!(
        f,
        Fault::PartitionBrokerFromNamesrv { broker: 1, .. }
    )));
    assert!(plans.iter().any(|p| p.replication.is_none()));
}

/// A run whose routes never converge is reported.
#[test]
fn unconverged_routes_are_a_violation() {
    let plan = Plan::namesrv_partition(1);
    let entries = [Entry {
        at_ms: 9,
        event: Event::RoutesNotConverged {
            routes: vec![Some("a".into()), None],
            master: Some("a".into()),
        },
    }];
    assert_eq!(
        sim::routes::route_violations(&plan, &entries),
        vec![Violation::RoutesNotConverged {
            routes: vec![Some("a".into()), None],
            master: Some("a".into()),
        }]
    );
    assert!(!sim::routes::route_violations(&plan, &[]).is_empty());
    assert!(sim::routes::route_violations(&Plan::broker_crash(1), &[]).is_empty());
}

/// A name server that drops a lone broker it was never cut off from is
/// reported; one that was cut off may.
#[test]
fn a_route_dropped_by_a_reachable_name_server_is_a_violation() {
    let mut plan = Plan::namesrv_partition(1);
    plan.replication = None;
    plan.faults = vec![
        scenarios::TimedFault {
            at_ms: 100,
            fault: Fault::PartitionBrokerFromNamesrv {
                broker: 0,
                namesrv: 0,
            },
        },
        scenarios::TimedFault {
            at_ms: 5_000,
            fault: Fault::RepairBrokerFromNamesrv {
                broker: 0,
                namesrv: 0,
            },
        },
    ];
    let seen = |at_ms, namesrv, master: Option<&str>| Entry {
        at_ms,
        event: Event::RouteSeen {
            namesrv,
            master: master.map(str::to_owned),
        },
    };
    let converged = Entry {
        at_ms: 9_000,
        event: Event::RoutesConverged { after_ms: 0 },
    };
    let expired_where_cut = [
        seen(10, 0, Some("b")),
        seen(10, 1, Some("b")),
        seen(3_600, 0, None),
        converged.clone(),
    ];
    assert_eq!(
        sim::routes::route_violations(&plan, &expired_where_cut),
        vec![]
    );
    let expired_elsewhere = [
        seen(10, 0, Some("b")),
        seen(10, 1, Some("b")),
        seen(3_600, 1, None),
        converged,
    ];
    assert_eq!(
        sim::routes::route_violations(&plan, &expired_elsewhere),
        vec![Violation::RouteDropped {
            namesrv: 1,
            at_ms: 3_600
        }]
    );
}
