//! A replicated broker group in a run: the controllers and replicas (each
//! on a disk of its own, seeded from the run's disk stream after the first
//! broker's), and the checks of their logs after the run.

use rand::Rng;
use scenarios::{substream, Fault, Plan, Salt};
use sluice_core::testing::{SimDisk, SimDiskConfig};

use crate::harness::{
    add_broker_host_after, add_controller, replica_host, replication_config, slow_syncs, BROKER,
    HA_PORT,
};
use crate::history::Entry;
use crate::oracle::replicas::{acks_without_replica, check_agreement, check_caught_up, LogImage};
use crate::oracle::Violation;
use sluice_node::testing::Skew;

/// Starts the plan's controllers, each on its own disk; returns the disks.
pub(crate) fn add_controllers(sim: &mut turmoil::Sim<'_>, plan: &Plan) -> Vec<SimDisk> {
    let count = plan.replication.map_or(0, |r| r.controllers);
    let mut seeds = substream(plan.seed, Salt::Disk);
    // The broker's and the replicas' disks take the stream's first values.
    for _ in 0..4 {
        let _: u64 = seeds.random();
    }
    (0..count)
        .map(|i| {
            let disk = SimDisk::new(seeds.random());
            add_controller(sim, i, count, &disk);
            disk
        })
        .collect()
}

/// With controllers, replicas start this late (see `add_replicas`).
const REPLICA_START_DELAY: std::time::Duration = std::time::Duration::from_millis(2_500);

/// Adds the plan's replicas (each on its own disk) and makes `config` the
/// master's: broker id 0 of a replicated group. Returns the replicas' disks.
pub(crate) fn add_replicas(
    sim: &mut turmoil::Sim<'_>,
    plan: &Plan,
    config: &mut sluice_node::broker::BrokerConfig,
    skews: &[Skew],
) -> Vec<SimDisk> {
    let Some(set) = plan.replication else {
        return Vec::new();
    };
    let mut master = replication_config(set.sync, None, set.controllers);
    master.mutant_trust_claimed_offset = set.trust_claimed_offset;
    // With controllers every broker needs an id of 1 or more; with fixed
    // roles id 0 is the master.
    let first_id = i64::from(set.controllers > 0);
    config.broker_id = first_id;
    config.replication = Some(master);
    let mut seeds = substream(plan.seed, Salt::Disk);
    let _master_disk_seed: u64 = seeds.random();
    (0..set.replicas)
        .map(|i| {
            let disk = SimDisk::with_config(
                seeds.random(),
                SimDiskConfig {
                    garbage_sectors: plan.garbage_sectors,
                    // Half the seeds verify the log ahead of recovery's walk
                    // (inline), half walk alone.
                    helper_inline: plan.seed % 2 == 1,
                    ..SimDiskConfig::default()
                },
            );
            slow_syncs(&disk);
            let mut rc = config.clone();
            rc.broker_id = first_id + i64::from(i) + 1;
            let master_ha = (set.controllers == 0).then(|| format!("{BROKER}:{HA_PORT}"));
            let mut replica = replication_config(set.sync, master_ha, set.controllers);
            replica.mutant_trust_claimed_offset = set.trust_claimed_offset;
            rc.replication = Some(replica);
            // With controllers the first broker to heartbeat is the first
            // master: replicas start once the controllers have elected it.
            let delay = if set.controllers > 0 {
                REPLICA_START_DELAY
            } else {
                std::time::Duration::ZERO
            };
            add_broker_host_after(
                sim,
                &replica_host(i),
                &disk,
                &rc,
                &skews[usize::try_from(i).unwrap_or(usize::MAX)],
                delay,
            );
            disk
        })
        .collect()
}

/// With replicas: the logs must agree and be caught up, and a SYNC master
/// with one replica must not acknowledge while it is cut off.
pub(crate) fn replica_violations(
    plan: &Plan,
    disk: &SimDisk,
    replicas: &[SimDisk],
    config: &sluice_node::broker::BrokerConfig,
    entries: &[Entry],
) -> Result<Vec<Violation>, String> {
    let Some(set) = plan.replication else {
        return Ok(Vec::new());
    };
    let mut logs = vec![log_image(BROKER, disk, config)?];
    for (i, d) in replicas.iter().enumerate() {
        let host = replica_host(u32::try_from(i).unwrap_or(u32::MAX));
        logs.push(log_image(&host, d, config)?);
    }
    let mut found = check_agreement(&logs);
    found.extend(check_caught_up(&logs));
    if set.sync && set.replicas == 1 {
        found.extend(acks_without_replica(entries, &replica_cuts(plan)));
    }
    Ok(found.into_iter().map(Violation::Replica).collect())
}

/// The windows during which the first replica was cut off from the master.
fn replica_cuts(plan: &Plan) -> Vec<(u64, u64)> {
    let mut cuts = Vec::new();
    let mut open = None;
    for f in &plan.faults {
        match f.fault {
            Fault::PartitionReplica { replica: 0 } => open = open.or(Some(f.at_ms)),
            Fault::RepairReplica { replica: 0 } => {
                if let Some(start) = open.take() {
                    cuts.push((start, f.at_ms));
                }
            }
            _ => {}
        }
    }
    cuts
}

/// The CommitLog `disk` holds, recovered as a replica would open it (no
/// pad of its own), read whole.
fn log_image(
    host: &str,
    disk: &SimDisk,
    config: &sluice_node::broker::BrokerConfig,
) -> Result<LogImage, String> {
    disk.set_sync_delay(None);
    let store_config = sluice_core::StoreConfig {
        replicated: true,
        ..config.store.clone()
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async {
        let store = sluice_core::MessageStore::open(
            disk.clone(),
            sluice_node::testing::SimClock::new(0),
            store_config,
        )
        .await
        .map_err(|e| format!("{host}: cannot open the store after the run: {e}"))?;
        let log = store.commit_log();
        let start = log.min_offset();
        let mut bytes = Vec::new();
        let mut at = start;
        loop {
            let chunk = log
                .read_units(at, 1 << 20)
                .map_err(|e| format!("{host}: cannot read the log at {}: {e}", at.get()))?;
            if chunk.is_empty() {
                break;
            }
            at = at.plus(chunk.len() as u64);
            bytes.extend_from_slice(&chunk);
        }
        Ok(LogImage {
            host: host.to_owned(),
            start: start.get(),
            bytes,
        })
    })
}
