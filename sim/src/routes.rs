//! Two or more name servers: their hosts (with a short broker expiry, so a
//! cut-off broker's registration really expires within a run; the faults
//! that cut brokers or producers off from one are the nemesis's), and the
//! route watcher. The watcher records what every name server routes for the
//! topic and, once the run has settled, waits at most
//! [`ROUTES_CONVERGE_MAX`] until every one routes the live master — the
//! first broker, or the master the controller elected.

use std::rc::Rc;
use std::time::Duration;

use scenarios::{Fault, Plan};
use sluice_client::Error;
use sluice_net::body::MASTER_ID;
use sluice_net::TurmoilTransport;
use sluice_node::broker::BrokerConfig;
use sluice_node::controller::ControllerClient;
use sluice_node::namesrv::NameServerConfig;

use crate::client::{client_of, SimClient};
use crate::group::GroupProgress;
use crate::harness::{
    add_namesrv, add_namesrv_host, broker_addr, controller_addrs, namesrv_addrs, secrets, BROKER,
    BROKER_NAME,
};
use crate::history::{Entry, Event, History};
use crate::oracle::Violation;
use crate::workload::TOPIC;

/// With several name servers, a broker silent this long is dropped.
pub const NAMESRV_BROKER_EXPIRY_MS: u64 = 3_000;
/// With several name servers, they look for silent brokers this often.
const NAMESRV_SCAN_INTERVAL_MS: u64 = 500;
/// With several name servers, brokers register this often.
const REGISTER_INTERVAL_MS: u64 = 1_000;
/// After the run settled, every name server routes the live master within
/// this long: a registration interval to reach every name server, plus an
/// election and the replicas' catch-up after a failover, with margin.
pub const ROUTES_CONVERGE_MAX: Duration = Duration::from_secs(15);
/// Host name of the route watcher.
pub const ROUTE_WATCHER: &str = "routes";
/// How often the watcher asks every name server.
const WATCH_INTERVAL: Duration = Duration::from_millis(200);
/// Timeout of one question to a name server or the controller.
const WATCH_TIMEOUT: Duration = Duration::from_millis(500);

/// Starts the plan's name servers. One keeps the defaults of every other
/// scenario; several get a short broker expiry, and `broker` (the config
/// replicas copy) registers with all of them every second.
pub fn add_namesrvs(sim: &mut turmoil::Sim<'_>, plan: &Plan, broker: &mut BrokerConfig) {
    let count = plan.workload.namesrvs;
    if count <= 1 {
        add_namesrv(sim);
        return;
    }
    let config = NameServerConfig {
        broker_expiry_ms: NAMESRV_BROKER_EXPIRY_MS,
        scan_interval_ms: NAMESRV_SCAN_INTERVAL_MS,
        ..NameServerConfig::default()
    };
    for i in 0..count {
        add_namesrv_host(sim, i, &config);
    }
    broker.namesrv_addrs = namesrv_addrs(count);
    broker.register_interval_ms = REGISTER_INTERVAL_MS;
}

/// Starts the route watcher when the plan runs several name servers.
pub fn start_watcher(
    sim: &mut turmoil::Sim<'_>,
    plan: &Plan,
    progress: &Rc<GroupProgress>,
    history: &History,
) {
    if plan.workload.namesrvs > 1 {
        let watcher = watch_routes(
            plan.workload.namesrvs,
            plan.replication.is_some_and(|r| r.controllers > 0),
            Rc::clone(progress),
            history.clone(),
        );
        sim.client(ROUTE_WATCHER, watcher);
    }
}

/// The route watcher: records each name server's route of the topic when it
/// changes; once `progress` says the run settled, ends as soon as every
/// name server routes the live master, or after [`ROUTES_CONVERGE_MAX`].
async fn watch_routes(
    namesrvs: u32,
    elected: bool,
    progress: Rc<GroupProgress>,
    history: History,
) -> turmoil::Result {
    let clients: Vec<SimClient> = namesrv_addrs(namesrvs)
        .into_iter()
        .zip(0_u32..)
        .map(|(addr, i)| {
            client_of(&format!("{ROUTE_WATCHER}{i}"), 600 + i, &[addr], |c| {
                c.request_timeout = WATCH_TIMEOUT;
            })
        })
        .collect();
    let controller = elected.then(|| {
        ControllerClient::new(TurmoilTransport, controller_addrs(1), WATCH_TIMEOUT)
            .with_secret(secrets().1, "sim/route-watcher")
    });
    let mut last: Vec<Option<Option<String>>> = vec![None; clients.len()];
    let mut settled_at = None;
    loop {
        let mut now = Vec::with_capacity(clients.len());
        for (i, client) in (0_u32..).zip(&clients) {
            let Some(master) = routed_master(client).await else {
                now.push(None);
                continue;
            };
            let slot = &mut last[usize::try_from(i).unwrap_or(usize::MAX)];
            if slot.as_ref() != Some(&master) {
                history.record(Event::RouteSeen {
                    namesrv: i,
                    master: master.clone(),
                });
                *slot = Some(master.clone());
            }
            now.push(master);
        }
        if progress.settled() {
            let since = *settled_at.get_or_insert_with(tokio::time::Instant::now);
            let master = live_master(controller.as_ref()).await;
            let converged = master.is_some() && now.iter().all(|m| *m == master);
            let waited = since.elapsed();
            if converged {
                history.record(Event::RoutesConverged {
                    after_ms: u64::try_from(waited.as_millis()).unwrap_or(u64::MAX),
                });
                return Ok(());
            }
            if waited >= ROUTES_CONVERGE_MAX {
                history.record(Event::RoutesNotConverged {
                    routes: now,
                    master,
                });
                return Ok(());
            }
        }
        tokio::time::sleep(WATCH_INTERVAL).await;
    }
}

/// The master `client`'s name server routes for the topic: `Some(None)`
/// when it has no route or no master in it, `None` when it cannot be
/// asked.
async fn routed_master(client: &SimClient) -> Option<Option<String>> {
    match client.refresh_route(TOPIC).await {
        Ok(route) => Some(
            route
                .broker_datas
                .iter()
                .find(|b| b.broker_name == BROKER_NAME)
                .and_then(|b| b.broker_addrs.get(&MASTER_ID).cloned()),
        ),
        Err(Error::NoRoute(_)) => Some(None),
        Err(_) => None,
    }
}

/// The live master: the one the controller elected, or the first broker.
async fn live_master(controller: Option<&ControllerClient<TurmoilTransport>>) -> Option<String> {
    let Some(controller) = controller else {
        return Some(broker_addr(BROKER));
    };
    let metadata = controller.metadata().await.ok()?;
    metadata
        .groups
        .into_iter()
        .find(|g| g.group == BROKER_NAME)
        .and_then(|g| g.master_addr)
}

/// After a cut between a broker and a name server heals, the name server
/// may still expire the broker this long: the registration sent into the
/// cut stalls its connection (turmoil's TCP does not retransmit) until the
/// request times out (6 s), and expiry and its scan take their time.
const EXPIRY_AFTER_HEAL_MS: u64 = 6_000 + NAMESRV_BROKER_EXPIRY_MS + 1_000;

/// With several name servers: the run must record that the routes
/// converged (else a liveness violation), and — for a lone broker — no
/// name server may drop its route unless the broker was cut off from that
/// name server (a reachable name server kept hearing from the broker).
pub fn route_violations(plan: &Plan, entries: &[Entry]) -> Vec<Violation> {
    if plan.workload.namesrvs <= 1 {
        return Vec::new();
    }
    let mut found = if plan.replication.is_none() {
        drops_while_reachable(plan, entries)
    } else {
        Vec::new()
    };
    found.extend(unconverged(entries));
    found
}

/// Routes of the first broker that a name server dropped with no cut of
/// the broker from it to explain the expiry.
fn drops_while_reachable(plan: &Plan, entries: &[Entry]) -> Vec<Violation> {
    let explained = |namesrv: u32, at_ms: u64| {
        plan.faults.iter().any(|cut| {
            cut.fault == (Fault::PartitionBrokerFromNamesrv { broker: 0, namesrv })
                && cut.at_ms <= at_ms
                && plan.faults.iter().any(|heal| {
                    heal.fault == (Fault::RepairBrokerFromNamesrv { broker: 0, namesrv })
                        && heal.at_ms >= cut.at_ms
                        && at_ms <= heal.at_ms + EXPIRY_AFTER_HEAL_MS
                })
        })
    };
    let mut routed = std::collections::BTreeSet::new();
    let mut found = Vec::new();
    for e in entries {
        if let Event::RouteSeen { namesrv, master } = &e.event {
            if master.is_some() {
                routed.insert(*namesrv);
            } else if routed.contains(namesrv) && !explained(*namesrv, e.at_ms) {
                found.push(Violation::RouteDropped {
                    namesrv: *namesrv,
                    at_ms: e.at_ms,
                });
            }
        }
    }
    found
}

/// A violation unless the watcher recorded that the routes converged.
fn unconverged(entries: &[Entry]) -> Vec<Violation> {
    for e in entries.iter().rev() {
        match &e.event {
            Event::RoutesConverged { .. } => return Vec::new(),
            Event::RoutesNotConverged { routes, master } => {
                return vec![Violation::RoutesNotConverged {
                    routes: routes.clone(),
                    master: master.clone(),
                }]
            }
            _ => {}
        }
    }
    vec![Violation::RoutesNotConverged {
        routes: Vec::new(),
        master: None,
    }]
}
