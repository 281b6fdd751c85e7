//! The broker's own figures judged against the history: a broker that
//! served every acknowledged send and every read a client saw must have
//! counted at least that many messages in and out (`BrokerStats`, the
//! figures `/metrics` exports). Checked where one broker incarnation
//! served the whole run: no crash or restart of it and no replication
//! (where replicas serve reads and a failover moves the writes).

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use scenarios::{Fault, Plan};
use sluice_core::testing::SimDisk;
use sluice_node::broker::{Broker, BrokerStatsSnapshot};
use sluice_node::testing::SimClock;

use crate::harness::BROKER;
use crate::history::{Entry, Event};
use crate::oracle::Violation;

type SimBroker = Broker<SimDisk, SimClock>;

thread_local! {
    /// Each host's latest broker incarnation (turmoil runs every host on
    /// the test's thread).
    static LIVE: RefCell<BTreeMap<String, Arc<SimBroker>>> = RefCell::default();
}

/// Records `broker` as the one `host` runs now.
pub fn register(host: &str, broker: &Arc<SimBroker>) {
    LIVE.with(|live| {
        live.borrow_mut()
            .insert(host.to_owned(), Arc::clone(broker))
    });
}

/// Every registered broker's figures, clearing the registry for the next
/// run.
pub fn take_figures() -> BTreeMap<String, BrokerStatsSnapshot> {
    let live = LIVE.with(|live| std::mem::take(&mut *live.borrow_mut()));
    live.into_iter()
        .map(|(host, broker)| (host, broker.figures(usize::MAX)))
        .collect()
}

/// What the first broker's figures must hold, when one incarnation of it
/// served the whole run.
pub fn violations(
    plan: &Plan,
    entries: &[Entry],
    figures: &BTreeMap<String, BrokerStatsSnapshot>,
) -> Vec<Violation> {
    let restarted = plan
        .faults
        .iter()
        .any(|f| matches!(f.fault, Fault::CrashBroker { .. } | Fault::RestartBroker));
    let Some(snap) = figures
        .get(BROKER)
        .filter(|_| !restarted && plan.replication.is_none())
    else {
        return Vec::new();
    };
    let (acked, read) = seen(entries);
    let mut found = Vec::new();
    for (figure, counted, seen) in [
        ("messages_in_total", snap.messages_in_total, acked),
        ("messages_out_total", snap.messages_out_total, read),
    ] {
        if counted < seen {
            found.push(Violation::StatsUndercount {
                figure,
                counted,
                seen,
            });
        }
    }
    found
}

/// Distinct messages acknowledged, and distinct `(queue, offset)` records
/// clients read.
fn seen(entries: &[Entry]) -> (u64, u64) {
    let mut acked = BTreeSet::new();
    let mut read = BTreeSet::new();
    for e in entries {
        match &e.event {
            Event::SendOk { id, .. } => {
                acked.insert(id.as_str());
            }
            Event::Poll { queue, records }
            | Event::Delivered { queue, records }
            | Event::Consumed { queue, records, .. } => {
                read.extend(records.iter().map(|(offset, _)| (*queue, *offset)));
            }
            _ => {}
        }
    }
    (acked.len() as u64, read.len() as u64)
}
