//! The nemesis: applies each planned fault (`scenarios::Fault`, where every
//! fault's heal and class are defined) to the running cluster and records
//! it in the history. One arm per fault, no wildcard: a new fault that is
//! not applied here does not compile.

use std::rc::Rc;

use scenarios::{Fault, Plan};
use sluice_core::disk::Disk as _;
use sluice_core::testing::SimDisk;

use crate::group::{member_host, GroupProgress};
use crate::harness::{
    controller_host, crash_broker, namesrv_host, replica_host, slow_syncs, slower_syncs, BROKER,
};
use crate::history::{Event, History, Injected};
use crate::run::{consumer_host, producer_host};
use sluice_node::testing::Skew;

/// What faults act on besides the simulation: the plan, the disks and
/// wall-clock skews that outlive their hosts, the history and the
/// consumer group's progress.
pub(crate) struct Cluster<'a> {
    pub plan: &'a Plan,
    pub broker_disk: &'a SimDisk,
    pub broker_skew: &'a Skew,
    pub replica_skews: &'a [Skew],
    pub replica_disks: &'a [SimDisk],
    pub controller_disks: &'a [SimDisk],
    pub history: &'a History,
    pub progress: &'a Rc<GroupProgress>,
}

/// Applies `fault` at simulated time `now_ms`, then records it.
pub(crate) fn inject(sim: &mut turmoil::Sim<'_>, cluster: &Cluster<'_>, fault: Fault, now_ms: u64) {
    apply(sim, cluster, fault, now_ms);
    cluster.history.record_at(
        now_ms,
        Event::Fault {
            fault: Injected::Planned(fault),
        },
    );
}

/// One arm per fault, grouped as `scenarios::fault` groups them.
fn apply(sim: &mut turmoil::Sim<'_>, c: &Cluster<'_>, fault: Fault, now_ms: u64) {
    let disk = c.broker_disk;
    match fault {
        // The first broker's process, its clock and its isolation.
        Fault::CrashBroker { power_loss } => {
            crash_broker(sim);
            lose_unsynced(disk, power_loss);
        }
        Fault::RestartBroker => sim.bounce(BROKER),
        Fault::IsolateBroker => each_peer(c, |peer| sim.partition(BROKER, peer)),
        Fault::RejoinBroker => each_peer(c, |peer| sim.repair(BROKER, peer)),
        Fault::StepBrokerClock { by_ms } => c.broker_skew.step(by_ms),
        // The first broker's disk.
        Fault::FailNextSync => disk.fail_next_sync(),
        Fault::SlowBrokerDisk { sync_ms } => slower_syncs(disk, sync_ms),
        Fault::HealBrokerDisk => slow_syncs(disk),
        Fault::FillBrokerDisk => disk.set_full(true),
        Fault::FreeBrokerDisk => disk.set_full(false),
        Fault::FailBrokerReads { count } => disk.fail_reads_under(COMMIT_LOG_DIR, count),
        Fault::LoseConsumeQueues { first_only } => lose_consume_queues(sim, disk, first_only),
        // The producers' and consumers' links to the broker.
        Fault::HoldProducers => each_producer(c, |p| sim.hold(BROKER, p)),
        Fault::ReleaseProducers => each_producer(c, |p| sim.release(BROKER, p)),
        Fault::PartitionProducers => each_producer(c, |p| sim.partition(BROKER, p)),
        Fault::RepairProducers => each_producer(c, |p| sim.repair(BROKER, p)),
        Fault::CutResponsesToProducers => each_producer(c, |p| sim.partition_oneway(BROKER, p)),
        Fault::RestoreResponsesToProducers => each_producer(c, |p| sim.repair_oneway(BROKER, p)),
        Fault::PartitionConsumers => each_consumer(c, |q| sim.partition(BROKER, q)),
        Fault::RepairConsumers => each_consumer(c, |q| sim.repair(BROKER, q)),
        // Consumer-group members.
        Fault::PartitionMember { member } => sim.partition(BROKER, member_host(member)),
        Fault::RepairMember { member } => sim.repair(BROKER, member_host(member)),
        Fault::JoinMember { member } => {
            crate::member_crash::start_member(sim, c.plan, member, c.progress, c.history, true);
        }
        Fault::CrashMember { member } => crash_member(sim, c, member, now_ms),
        Fault::RestartMember { member } => restart_member(sim, c, member),
        // Replicas and controllers.
        Fault::PartitionReplica { replica } => sim.partition(BROKER, replica_host(replica)),
        Fault::RepairReplica { replica } => sim.repair(BROKER, replica_host(replica)),
        Fault::CrashReplica {
            replica,
            power_loss,
        } => crash_replica(sim, c, replica, power_loss),
        Fault::RestartReplica { replica } => sim.bounce(replica_host(replica)),
        Fault::StepReplicaClock { replica, by_ms } => step_replica_clock(c, replica, by_ms),
        Fault::CrashController { controller } => crash_controller(sim, c, controller),
        Fault::RestartController { controller } => sim.bounce(controller_host(controller)),
        // Name servers.
        Fault::PartitionBrokerFromNamesrv { broker, namesrv } => {
            sim.partition(broker_host(broker), namesrv_host(namesrv));
        }
        Fault::RepairBrokerFromNamesrv { broker, namesrv } => {
            sim.repair(broker_host(broker), namesrv_host(namesrv));
        }
        Fault::PartitionClientsFromNamesrv { namesrv } => {
            each_producer(c, |p| sim.partition(p, namesrv_host(namesrv)));
        }
        Fault::RepairClientsFromNamesrv { namesrv } => {
            each_producer(c, |p| sim.repair(p, namesrv_host(namesrv)));
        }
    }
}

/// Crashes replica `replica`'s host; with `power_loss` its disk loses
/// every page not yet synced.
fn crash_replica(sim: &mut turmoil::Sim<'_>, c: &Cluster<'_>, replica: u32, power_loss: bool) {
    sim.crash(replica_host(replica));
    if let Some(disk) = nth(c.replica_disks, replica) {
        lose_unsynced(disk, power_loss);
    }
}

/// Steps replica `replica`'s wall clock by `by_ms`.
fn step_replica_clock(c: &Cluster<'_>, replica: u32, by_ms: i64) {
    if let Some(skew) = nth(c.replica_skews, replica) {
        skew.step(by_ms);
    }
}

/// Crashes controller `controller`'s host, losing its page cache.
fn crash_controller(sim: &mut turmoil::Sim<'_>, c: &Cluster<'_>, controller: u32) {
    sim.crash(controller_host(controller));
    if let Some(disk) = nth(c.controller_disks, controller) {
        disk.power_loss();
    }
}

/// A crashed host's disk: with `power_loss` it loses (or tears) every page
/// not yet synced, else only the process's state goes.
fn lose_unsynced(disk: &SimDisk, power_loss: bool) {
    if power_loss {
        disk.power_loss();
    } else {
        disk.process_crash();
    }
}

/// Item `i` of `items`, if there is one (a shrunk or hand-written plan may
/// name a replica or controller the run does not have).
fn nth<T>(items: &[T], i: u32) -> Option<&T> {
    usize::try_from(i).ok().and_then(|i| items.get(i))
}

/// Crashes group member `member`'s host (once): from `now_ms` on it owns
/// nothing, which the history records.
fn crash_member(sim: &mut turmoil::Sim<'_>, c: &Cluster<'_>, member: u32, now_ms: u64) {
    if !c.progress.crashed.borrow_mut().insert(member) {
        return;
    }
    sim.crash(member_host(member));
    c.progress.owned.borrow_mut().remove(&member);
    c.progress.owned_changed_ms.set(now_ms);
    c.history.record_at(
        now_ms,
        Event::Rebalanced {
            member,
            queues: Vec::new(),
        },
    );
}

/// Starts a crashed member's host again: the same software, so the same
/// client id, from nothing but the broker's state. A shrunk plan may
/// restart a member it never crashed: ignored.
fn restart_member(sim: &mut turmoil::Sim<'_>, c: &Cluster<'_>, member: u32) {
    if c.progress.crashed.borrow_mut().remove(&member) {
        sim.bounce(member_host(member));
    }
}

/// Host of broker `broker`: 0 is the first broker, `i + 1` replica `i`.
fn broker_host(broker: u32) -> String {
    match broker.checked_sub(1) {
        None => BROKER.to_owned(),
        Some(replica) => replica_host(replica),
    }
}

fn each_producer(c: &Cluster<'_>, mut f: impl FnMut(String)) {
    for p in 0..c.plan.workload.producers {
        f(producer_host(p));
    }
}

fn each_consumer(c: &Cluster<'_>, mut f: impl FnMut(String)) {
    if c.plan.workload.long_poll_consumers {
        for q in 0..c.plan.workload.queues {
            f(consumer_host(q));
        }
    }
}

/// Every replica and controller host: the first broker's peers.
fn each_peer(c: &Cluster<'_>, mut f: impl FnMut(String)) {
    for i in 0..c.replica_disks.len() {
        f(replica_host(u32::try_from(i).unwrap_or(u32::MAX)));
    }
    for i in 0..c.controller_disks.len() {
        f(controller_host(u32::try_from(i).unwrap_or(u32::MAX)));
    }
}

/// The broker's CommitLog, ConsumeQueue and index directories on its disk
/// (under the store root of `harness::broker_config`).
const COMMIT_LOG_DIR: &str = "store/commitlog";
const CONSUME_QUEUE_DIR: &str = "store/consumequeue";
const INDEX_DIR: &str = "store/index";

/// Deletes the broker's ConsumeQueue and index files, or only the first
/// file of each ConsumeQueue — only while it is down (a running broker's
/// open files are not pulled from under it); the disk counts what was lost.
fn lose_consume_queues(sim: &mut turmoil::Sim<'_>, disk: &SimDisk, first_only: bool) {
    if sim.is_host_running(BROKER) {
        return;
    }
    if !first_only {
        disk.remove_under(CONSUME_QUEUE_DIR);
        disk.remove_under(INDEX_DIR);
        return;
    }
    let list = |dir: &str| disk.list(dir).unwrap_or_default();
    for topic in list(CONSUME_QUEUE_DIR) {
        let topic_dir = format!("{CONSUME_QUEUE_DIR}/{topic}");
        for queue in list(&topic_dir) {
            let queue_dir = format!("{topic_dir}/{queue}");
            if let Some(first) = list(&queue_dir).first() {
                disk.remove_under(&format!("{queue_dir}/{first}"));
            }
        }
    }
}
