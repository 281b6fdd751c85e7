//! Three controllers under turmoil: they elect a raft leader, make the first
//! heartbeating broker master at epoch 1, fail over to an in-sync slave at
//! epoch 2 (never to a replica outside the in-sync set), survive the crash
//! of their leader with power loss (each `SimDisk` lives outside its host),
//! and a restarted controller catches up. The same seed gives the same run.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sluice_core::testing::SimDisk;
use sluice_net::TurmoilTransport;
use sluice_node::controller::{
    AlterInSync, BrokerHeartbeat, Controller, ControllerClient, ControllerConfig, GroupView,
};
use sluice_node::testing::SimClock;

const GROUP: &str = "broker-a";
const PORT: u16 = 9878;
const BROKER_TIMEOUT_MS: u64 = 3_000;
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

fn host(id: u64) -> String {
    format!("ctl{id}")
}

fn peers() -> BTreeMap<u64, String> {
    (1..=3)
        .map(|id| (id, format!("{}:{PORT}", host(id))))
        .collect()
}

/// Each controller's applied view of [`GROUP`], sampled every 100 ms.
type Views = Arc<Mutex<BTreeMap<u64, GroupView>>>;

enum Fault {
    PowerLoss(u64),
    Restart(u64),
}

type Faults = Arc<Mutex<Vec<Fault>>>;

/// One heartbeat answer: (replica, master epoch, master).
type Answer = (u64, u32, Option<u64>);
type Answers = Arc<Mutex<Vec<Answer>>>;

/// What one run observed: the first raft leader, every heartbeat answer
/// of the background loops in order, and the final view.
type Outcome = (Option<u64>, Vec<Answer>, GroupView);

struct Cluster {
    sim: turmoil::Sim<'static>,
    disks: BTreeMap<u64, SimDisk>,
    views: Views,
    faults: Faults,
}

impl Cluster {
    fn new(seed: u64) -> Self {
        let mut builder = turmoil::Builder::new();
        builder
            .epoch(std::time::UNIX_EPOCH)
            .rng_seed(seed)
            .tick_duration(Duration::from_millis(1))
            .min_message_latency(Duration::from_micros(100))
            .max_message_latency(Duration::from_millis(5))
            .simulation_duration(Duration::from_secs(120));
        let mut cluster = Self {
            sim: builder.build(),
            disks: BTreeMap::new(),
            views: Views::default(),
            faults: Faults::default(),
        };
        for id in 1..=3 {
            let disk = SimDisk::new(seed ^ id);
            cluster.disks.insert(id, disk.clone());
            let views = Arc::clone(&cluster.views);
            cluster.sim.host(host(id), move || {
                let disk = disk.clone();
                let views = Arc::clone(&views);
                async move {
                    let config = ControllerConfig {
                        broker_timeout_ms: BROKER_TIMEOUT_MS,
                        apply_timeout_ms: 2_000,
                        log_entries_max: 8,
                        ..ControllerConfig::new(id, peers(), format!("0.0.0.0:{PORT}"))
                    };
                    let clock = SimClock::new(0);
                    let controller =
                        Controller::start(config, disk, clock, &TurmoilTransport).await?;
                    loop {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        if let Some(view) = controller.group(GROUP) {
                            views.lock().expect("views").insert(id, view);
                        }
                    }
                }
            });
        }
        cluster
    }

    /// Runs to the end, applying the faults the client asks for.
    fn run(mut self) {
        loop {
            let done = self.sim.step().expect("simulation succeeds");
            let faults: Vec<Fault> = std::mem::take(&mut *self.faults.lock().expect("faults"));
            for fault in faults {
                match fault {
                    Fault::PowerLoss(id) => {
                        self.sim.crash(host(id));
                        self.disks[&id].power_loss();
                        self.views.lock().expect("views").remove(&id);
                    }
                    Fault::Restart(id) => self.sim.bounce(host(id)),
                }
            }
            if done {
                return;
            }
        }
    }
}

fn client() -> ControllerClient<TurmoilTransport> {
    ControllerClient::new(
        TurmoilTransport,
        peers().into_values().collect(),
        REQUEST_TIMEOUT,
    )
}

fn heartbeat(replica_id: u64, max_offset: u64) -> BrokerHeartbeat {
    BrokerHeartbeat {
        group: GROUP.into(),
        replica_id,
        broker_addr: format!("b{replica_id}:10911"),
        ha_addr: format!("b{replica_id}:10912"),
        epoch: 0,
        max_offset,
        restarted: false,
    }
}

/// Heartbeats every second as long as `alive` holds the replica; every
/// view it gets back is recorded, and epochs must never go backwards.
fn heartbeat_loop(
    replica_id: u64,
    max_offset: u64,
    alive: Arc<Mutex<bool>>,
    seen: Answers,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let client = client();
        let mut last_epoch = 0;
        while *alive.lock().expect("alive") {
            if let Ok(view) = client.heartbeat(&heartbeat(replica_id, max_offset)).await {
                assert!(
                    view.master_epoch >= last_epoch,
                    "epoch went back from {last_epoch} to {}",
                    view.master_epoch
                );
                last_epoch = view.master_epoch;
                seen.lock()
                    .expect("seen")
                    .push((replica_id, view.master_epoch, view.master_id));
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    })
}

async fn eventually_master(
    client: &ControllerClient<TurmoilTransport>,
    replica: u64,
    master: u64,
) -> GroupView {
    for _ in 0..40 {
        if let Ok(view) = client.heartbeat(&heartbeat(replica, 0)).await {
            if view.master_id == Some(master) {
                return view;
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!("replica {master} never became master");
}

/// Cuts the power of the controller leader; the other two must keep serving
/// the same state; 10 s later the old leader restarts and must catch up.
async fn crash_and_restart_leader(
    client: &ControllerClient<TurmoilTransport>,
    faults: &Faults,
    views: &Views,
) -> turmoil::Result {
    let leader_now = client.metadata().await?.leader_id.expect("a leader");
    faults
        .lock()
        .expect("faults")
        .push(Fault::PowerLoss(leader_now));
    tokio::time::sleep(Duration::from_secs(10)).await;
    let view = client.heartbeat(&heartbeat(2, 90)).await?;
    assert_eq!(
        (view.master_id, view.master_epoch),
        (Some(2), 2),
        "state survived"
    );
    let metadata = client.metadata().await?;
    assert_ne!(metadata.leader_id, Some(leader_now), "a new leader serves");
    faults
        .lock()
        .expect("faults")
        .push(Fault::Restart(leader_now));
    tokio::time::sleep(Duration::from_secs(10)).await;
    let caught_up = views.lock().expect("views").get(&leader_now).cloned();
    let caught_up = caught_up.expect("the restarted controller reports a view");
    assert_eq!(
        (
            caught_up.master_id,
            caught_up.master_epoch,
            caught_up.in_sync_epoch
        ),
        (Some(2), 2, 3),
        "the restarted controller caught up"
    );
    Ok(())
}

/// When the scenario cuts power, relative to the master failover.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Crash {
    Never,
    /// The controller leader, once the new master is elected.
    LeaderAfterFailover,
    /// The controller leader, 1.5 s after the master went silent (before
    /// the 3 s broker timeout ends, so the election falls to its successor).
    LeaderDuringFailover,
    /// All three controllers at once, after the failover.
    AllAfterFailover,
}

/// Heartbeats brokers 1 and 2 (1 becomes master), lets the master put 2 in
/// sync, and checks that a non-master is fenced. Returns the raft leader.
async fn form_group(client: &ControllerClient<TurmoilTransport>) -> turmoil::Result<Option<u64>> {
    tokio::time::sleep(Duration::from_secs(3)).await;
    let first = client.heartbeat(&heartbeat(1, 100)).await?;
    let first = (first.master_id, first.master_epoch);
    assert_eq!(first, (Some(1), 1), "first broker is master");
    let second = client.heartbeat(&heartbeat(2, 100)).await?;
    assert_eq!(
        second.master_id,
        Some(1),
        "a second broker joins as a member"
    );
    let leader = client.metadata().await?.leader_id;
    let alter = |master_id, in_sync| AlterInSync {
        group: GROUP.into(),
        master_id,
        master_epoch: 1,
        in_sync,
    };
    assert_eq!(client.alter_in_sync(&alter(1, vec![1, 2])).await?, 2);
    let stale = client.alter_in_sync(&alter(2, vec![2])).await;
    assert!(
        matches!(
            stale,
            Err(sluice_node::controller::ControllerError::Fenced(_))
        ),
        "a non-master is fenced: {stale:?}"
    );
    Ok(leader)
}

/// Power to every controller goes, then comes back; the state must have
/// been on their disks.
async fn power_cycle_all(
    client: &ControllerClient<TurmoilTransport>,
    faults: &Faults,
) -> turmoil::Result {
    faults
        .lock()
        .expect("faults")
        .extend((1..=3).map(Fault::PowerLoss));
    tokio::time::sleep(Duration::from_secs(2)).await;
    faults
        .lock()
        .expect("faults")
        .extend((1..=3).map(Fault::Restart));
    let view = eventually_master(client, 2, 2).await;
    assert_eq!(
        (view.master_epoch, view.in_sync_epoch),
        (2, 3),
        "state survived power loss"
    );
    Ok(())
}

/// Drives the failover scenario and returns what was observed.
fn failover_run(seed: u64, crash: Crash) -> Outcome {
    let mut cluster = Cluster::new(seed);
    let faults = Arc::clone(&cluster.faults);
    let views = Arc::clone(&cluster.views);
    let outcome = Arc::new(Mutex::new(None));
    let out = Arc::clone(&outcome);
    cluster.sim.client("brokers", async move {
        let client = client();
        let leader = form_group(&client).await?;
        let answers = Answers::default();
        let master_alive = Arc::new(Mutex::new(true));
        let slaves_alive = Arc::new(Mutex::new(true));
        let master = heartbeat_loop(1, 100, Arc::clone(&master_alive), Arc::clone(&answers));
        let slave = heartbeat_loop(2, 90, Arc::clone(&slaves_alive), Arc::clone(&answers));
        // Replica 3 is ahead of everyone but never in sync: never elected.
        let outsider = heartbeat_loop(3, 1_000, Arc::clone(&slaves_alive), Arc::clone(&answers));
        tokio::time::sleep(Duration::from_secs(2)).await;

        *master_alive.lock().expect("alive") = false;
        master.await?;
        let mut crashed = None;
        if crash == Crash::LeaderDuringFailover {
            tokio::time::sleep(Duration::from_millis(1_500)).await;
            let leader_now = client.metadata().await?.leader_id.expect("a leader");
            faults
                .lock()
                .expect("faults")
                .push(Fault::PowerLoss(leader_now));
            crashed = Some(leader_now);
        }
        let elected = eventually_master(&client, 2, 2).await;
        assert_eq!(elected.master_epoch, 2, "exactly one election");
        assert_eq!(elected.in_sync, vec![2]);

        match crash {
            Crash::Never => tokio::time::sleep(Duration::from_secs(5)).await,
            Crash::LeaderAfterFailover => {
                crash_and_restart_leader(&client, &faults, &views).await?;
            }
            Crash::LeaderDuringFailover => {
                let id = crashed.expect("crashed");
                faults.lock().expect("faults").push(Fault::Restart(id));
                tokio::time::sleep(Duration::from_secs(10)).await;
                let view = views.lock().expect("views").get(&id).cloned();
                let view = view.expect("the restarted controller reports a view");
                assert_eq!(
                    (view.master_id, view.master_epoch),
                    (Some(2), 2),
                    "caught up"
                );
            }
            Crash::AllAfterFailover => power_cycle_all(&client, &faults).await?,
        }
        *slaves_alive.lock().expect("alive") = false;
        slave.await?;
        outsider.await?;
        let last = client.metadata().await?;
        let view = last
            .groups
            .into_iter()
            .find(|g| g.group == GROUP)
            .expect("group");
        let observed = std::mem::take(&mut *answers.lock().expect("answers"));
        assert!(
            observed.iter().all(|(_, _, master)| *master != Some(3)),
            "the out-of-sync replica was never master"
        );
        *out.lock().expect("outcome") = Some((leader, observed, view));
        Ok(())
    });
    cluster.run();
    let outcome = outcome.lock().expect("outcome").take();
    outcome.expect("the client finished")
}

#[test]
fn in_sync_slave_is_elected_at_epoch_two_when_master_goes_silent() {
    let (leader, _, view) = failover_run(1, Crash::Never);
    assert!(leader.is_some(), "a controller leader was elected");
    assert_eq!(view.master_id, Some(2));
    assert_eq!(view.master_epoch, 2);
}

#[test]
fn leader_power_loss_keeps_epoch_and_master_and_restarted_controller_catches_up() {
    for seed in [2, 3] {
        let (_, seen, view) = failover_run(seed, Crash::LeaderAfterFailover);
        assert_eq!(
            (view.master_id, view.master_epoch),
            (Some(2), 2),
            "seed {seed}"
        );
        assert!(seen.iter().any(|(_, epoch, _)| *epoch == 2), "seed {seed}");
    }
}

#[test]
fn leader_power_loss_during_failover_elects_once_and_restarted_controller_catches_up() {
    for seed in [4, 5] {
        let (_, _, view) = failover_run(seed, Crash::LeaderDuringFailover);
        assert_eq!(
            (view.master_id, view.master_epoch),
            (Some(2), 2),
            "seed {seed}"
        );
    }
}

#[test]
fn power_loss_of_every_controller_keeps_master_and_epoch() {
    let (_, _, view) = failover_run(6, Crash::AllAfterFailover);
    assert_eq!(
        (view.master_id, view.master_epoch, view.in_sync_epoch),
        (Some(2), 2, 3)
    );
}

#[test]
fn same_seed_gives_the_same_election_outcome() {
    let first = failover_run(7, Crash::LeaderDuringFailover);
    let second = failover_run(7, Crash::LeaderDuringFailover);
    assert_eq!(first.0, second.0, "same controller leader");
    assert_eq!(
        first.1, second.1,
        "same heartbeat answers in the same order"
    );
    assert_eq!(first.2, second.2, "same final view");
}

#[test]
fn replica_outside_in_sync_set_is_never_elected() {
    let mut sim = Cluster::new(11);
    sim.sim.client("brokers", async {
        let client = client();
        tokio::time::sleep(Duration::from_secs(3)).await;
        let first = client.heartbeat(&heartbeat(1, 10)).await?;
        assert_eq!(first.master_id, Some(1));
        // Replica 2 heartbeats with far more data, but the master never
        // added it to the in-sync set; then the master goes silent.
        for _ in 0..15 {
            let view = client.heartbeat(&heartbeat(2, 10_000)).await?;
            assert_eq!(
                (view.master_id, view.master_epoch),
                (Some(1), 1),
                "no unclean election"
            );
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        let metadata = client.metadata().await?;
        let member = metadata
            .members
            .iter()
            .find(|m| m.replica_id == 1)
            .expect("the old master is still a member");
        assert!(!member.alive, "the silent master is reported dead");
        let replica = metadata
            .members
            .iter()
            .find(|m| m.replica_id == 2)
            .expect("member 2");
        assert_eq!((replica.alive, replica.max_offset), (true, Some(10_000)));
        Ok(())
    });
    sim.run();
}

#[test]
fn log_is_compacted_and_a_lagging_controller_catches_up_from_a_snapshot() {
    let mut cluster = Cluster::new(21);
    let disks = cluster.disks.clone();
    let faults = Arc::clone(&cluster.faults);
    let views = Arc::clone(&cluster.views);
    cluster.sim.client("brokers", async move {
        let client = client();
        tokio::time::sleep(Duration::from_secs(3)).await;
        client.heartbeat(&heartbeat(1, 0)).await?;
        client.heartbeat(&heartbeat(2, 0)).await?;
        let leader = client.metadata().await?.leader_id.expect("a leader");
        let lagging = (1..=3).find(|id| *id != leader).expect("a follower");
        faults
            .lock()
            .expect("faults")
            .push(Fault::PowerLoss(lagging));
        tokio::time::sleep(Duration::from_secs(1)).await;
        // 40 changes: five times the log bound of 8 entries.
        let mut in_sync_epoch = 0;
        for round in 0..40 {
            client.heartbeat(&heartbeat(1, 0)).await?;
            let in_sync = if round % 2 == 0 { vec![1, 2] } else { vec![1] };
            let alter = AlterInSync {
                group: GROUP.into(),
                master_id: 1,
                master_epoch: 1,
                in_sync,
            };
            in_sync_epoch = client.alter_in_sync(&alter).await?;
        }
        assert_eq!(in_sync_epoch, 41);
        faults.lock().expect("faults").push(Fault::Restart(lagging));
        tokio::time::sleep(Duration::from_secs(5)).await;
        let view = views.lock().expect("views").get(&lagging).cloned();
        let view = view.expect("the restarted controller reports a view");
        assert_eq!(view.in_sync_epoch, 41, "caught up past the compacted log");
        Ok(())
    });
    cluster.run();
    for (id, disk) in &disks {
        let bytes = disk
            .durable_contents("controller/raft-state")
            .expect("raft state on disk")
            .len();
        // Uncompacted, 40+ entries of ~150 bytes each would not fit.
        assert!(bytes < 3_000, "controller {id} keeps {bytes} bytes");
    }
}

#[test]
fn followers_answer_not_leader_with_the_leaders_address() {
    use sluice_net::remoting::response_code;
    use sluice_net::{RemotingCommand, RpcClient, RpcConfig};
    use sluice_node::controller::api;

    let mut cluster = Cluster::new(31);
    cluster.sim.client("tool", async {
        tokio::time::sleep(Duration::from_secs(3)).await;
        let rpc = RpcClient::new(TurmoilTransport, RpcConfig::default());
        let mut leaders = Vec::new();
        let mut hints = Vec::new();
        for (id, addr) in peers() {
            let request = RemotingCommand::request(api::GET_METADATA);
            let answer = rpc.invoke(&addr, request, REQUEST_TIMEOUT).await?;
            match answer.code {
                response_code::SUCCESS => leaders.push(addr),
                api::NOT_LEADER => hints.push(answer.remark.unwrap_or_default()),
                code => panic!("controller {id} answered {code}"),
            }
        }
        assert_eq!(leaders.len(), 1, "exactly one leader answers");
        assert_eq!(hints, vec![leaders[0].clone(); 2], "followers point at it");
        Ok(())
    });
    cluster.run();
}
