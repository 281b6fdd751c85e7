//! The cluster of a real-process chaos run: a name server with an embedded
//! controller and a broker group (a master and two replicas, SYNC
//! replication, controller-driven failover), each `sluice-node` process in
//! its own namespace, each broker's data on its own loop-mounted ext4; and
//! the nemesis applying a [`ChaosFault`] to it and healing it. Fields drop
//! in order: processes first, then filesystems, then the network, then the
//! work directory.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::disk::LoopFs;
use super::net::{have, Direction, Lab};
use super::procs::{faketime_lib, Proc};
use super::schedule::{ChaosFault, Class, BROKER_TIMEOUT_MS};
use sluice_core::message::DEFAULT_TOPIC;

use super::workload::{client, RealClient, GROUP, TOPIC};

/// Brokers in the group.
pub const BROKERS: usize = 3;
/// Size of each broker's filesystem (a sparse image: only what is written
/// takes space).
const BROKER_FS_MB: u64 = 256;
/// How long a process may take to print its ready line.
const START_TIMEOUT: Duration = Duration::from_secs(20);
const NAMESRV_READY: &str = "sluice name server listening";
const BROKER_READY: &str = "sluice broker listening";

/// Which fault tools this machine has.
#[derive(Clone, Copy, Debug)]
pub struct Tools {
    /// `nft` (partitions, one-way drops, loss).
    pub nft: bool,
    /// `tc` with the `tbf` qdisc (slow links).
    pub tc: bool,
    /// libfaketime (clock steps).
    pub faketime: bool,
}

impl Tools {
    /// What is installed.
    pub fn probe() -> Self {
        Self {
            nft: have("nft", "--version"),
            tc: have("tc", "-V"),
            faketime: faketime_lib().is_some(),
        }
    }

    /// Why `class` cannot be injected here, if it cannot.
    pub fn missing_for(self, class: Class) -> Option<&'static str> {
        match class {
            Class::Partition | Class::OneWay | Class::Loss if !self.nft => {
                Some("nft is not installed (apt-get install nftables)")
            }
            Class::SlowLink if !self.tc => Some("tc is not installed (iproute2)"),
            Class::ClockStep if !self.faketime => {
                Some("libfaketime is not installed (apt-get install faketime)")
            }
            _ => None,
        }
    }
}

/// A directory removed when dropped.
#[derive(Debug)]
struct WorkDir(PathBuf);

impl Drop for WorkDir {
    fn drop(&mut self) {
        if std::env::var_os("SLUICE_CHAOS_KEEP").is_some() {
            eprintln!("real chaos: logs kept in {}", self.0.display());
            return;
        }
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The running cluster.
#[derive(Debug)]
pub struct Cluster {
    namesrv: Proc,
    brokers: Vec<Proc>,
    disks: Vec<LoopFs>,
    lab: Lab,
    tools: Tools,
    _dir: WorkDir,
    /// The name server's address.
    pub namesrv_addr: String,
}

/// The broker TOML of broker `id` (1-based) at `ip`.
fn broker_toml(id: usize, ip: &str, namesrv_ip: &str, data: &Path) -> String {
    format!(
        "broker_name = \"{GROUP}\"\nbroker_id = {id}\nlisten = \"{ip}:10911\"\n\
         listen_vip = false\nnamesrv_addrs = [\"{namesrv_ip}:9876\"]\ndata_dir = \"{}\"\n\
         flush_mode = \"async\"\ncommit_log_segment_bytes = 1048576\n\
         index_slots = 1024\nindex_entries = 4096\ntimer_log_segment_bytes = 5600000\n\
         [replication]\nmode = \"sync\"\ncontroller_addrs = [\"{namesrv_ip}:9878\"]\n\
         ha_listen = \"{ip}:10912\"\ncontroller_heartbeat_ms = 300\n\
         not_caught_up_ms = 3000\nack_timeout_ms = 2000\n[acl]\nmode = \"off\"\n",
        data.display()
    )
}

impl Cluster {
    /// Makes the network, filesystems and processes (not started). `Err`
    /// when this machine cannot (not root, no namespaces): skip.
    pub fn new(tools: Tools) -> Result<Self, String> {
        let lab = Lab::new(1 + BROKERS, tools.nft)?;
        let dir = std::env::temp_dir().join(format!("sluice-{}", lab.ns(0)));
        std::fs::create_dir_all(&dir).map_err(|e| format!("work dir: {e}"))?;
        let dir = WorkDir(dir);
        let ip0 = lab.ip(0);
        let namesrv_addr = format!("{ip0}:9876");
        let args = [
            "namesrv",
            "--listen",
            &namesrv_addr,
            "--controller-id",
            "1",
            "--controller-peers",
            &format!("1={ip0}:9878"),
            "--controller-data-dir",
            &dir.0.join("controller").to_string_lossy(),
            "--broker-timeout-ms",
            &BROKER_TIMEOUT_MS.to_string(),
            "--acl-mode",
            "off",
        ]
        .map(str::to_owned)
        .to_vec();
        let namesrv = Proc::new("namesrv", lab.ns(0), args, &dir.0, false);
        let mut disks = Vec::new();
        let mut brokers = Vec::new();
        for id in 1..=BROKERS {
            let fs = LoopFs::new(
                &dir.0.join(format!("broker{id}.img")),
                &dir.0.join(format!("broker{id}")),
                BROKER_FS_MB,
            )?;
            let toml = broker_toml(id, &lab.ip(id), &ip0, &fs.path().join("data"));
            let path = dir.0.join(format!("broker{id}.toml"));
            std::fs::write(&path, toml).map_err(|e| format!("broker toml: {e}"))?;
            let args = ["broker", "--config", &path.to_string_lossy()]
                .map(str::to_owned)
                .to_vec();
            let name = format!("broker{id}");
            brokers.push(Proc::new(&name, lab.ns(id), args, &dir.0, tools.faketime));
            disks.push(fs);
        }
        Ok(Self {
            namesrv,
            brokers,
            disks,
            lab,
            tools,
            _dir: dir,
            namesrv_addr,
        })
    }

    /// Starts the name server and the first broker; the others once the
    /// first is master (the first to heartbeat the controller).
    pub async fn start_namesrv_and_first(&mut self) -> Result<(), String> {
        self.namesrv.start(NAMESRV_READY, START_TIMEOUT).await?;
        self.brokers[0].start(BROKER_READY, START_TIMEOUT).await
    }

    /// Starts the replicas.
    pub async fn start_replicas(&mut self) -> Result<(), String> {
        for b in &mut self.brokers[1..] {
            b.start(BROKER_READY, START_TIMEOUT).await?;
        }
        Ok(())
    }

    /// A client of this cluster.
    pub fn client(&self, name: &str) -> RealClient {
        client(&self.namesrv_addr, name)
    }

    /// The broker (index) the name server routes as master, if any.
    pub async fn master(&self, probe: &RealClient) -> Option<usize> {
        // Before the first send creates the topic, the default topic's
        // route names the brokers.
        let route = match probe.refresh_route(TOPIC).await {
            Ok(r) => r,
            Err(_) => probe.refresh_route(DEFAULT_TOPIC).await.ok()?,
        };
        let addr = route
            .broker_datas
            .iter()
            .find(|b| b.broker_name == GROUP)
            .and_then(|b| b.broker_addrs.get(&0).cloned())?;
        (0..BROKERS).find(|&i| addr.starts_with(&format!("{}:", self.lab.ip(i + 1))))
    }

    /// The `replica`-th broker other than `master`.
    fn replica(master: usize, replica: u8) -> usize {
        (0..BROKERS)
            .filter(|&i| i != master)
            .nth(usize::from(replica))
            .unwrap_or((master + 1) % BROKERS)
    }

    /// Applies `fault` with `master` as the master; the broker it hit and
    /// a description. `Err`: the tool failed or is missing.
    pub fn apply(&mut self, fault: ChaosFault, master: usize) -> Result<(usize, String), String> {
        if let Some(why) = self.tools.missing_for(fault.class()) {
            return Err(why.to_owned());
        }
        let node = master + 1;
        let lab = &self.lab;
        let target = match fault {
            ChaosFault::KillReplica { replica } => Self::replica(master, replica),
            _ => master,
        };
        match fault {
            ChaosFault::IsolateMaster => {
                let peers: Vec<String> = (0..=BROKERS)
                    .filter(|&i| i != node)
                    .map(|i| lab.ip(i))
                    .collect();
                lab.cut(node, &peers, Direction::Both)?;
            }
            ChaosFault::PartitionReplica { replica } => {
                let other = Self::replica(master, replica) + 1;
                lab.cut(node, &[lab.ip(other)], Direction::Both)?;
            }
            ChaosFault::MuteMasterToController => lab.cut(node, &[lab.ip(0)], Direction::Out)?,
            ChaosFault::CutResponsesToClients => {
                lab.cut(node, &[lab.host_ip()], Direction::Out)?;
            }
            ChaosFault::Loss { percent } => lab.loss(node, percent)?,
            ChaosFault::SlowLink { kbit_s } => lab.throttle(node, kbit_s)?,
            ChaosFault::PauseMaster => self.brokers[master].pause(),
            ChaosFault::KillMaster | ChaosFault::KillReplica { .. } => self.brokers[target].kill9(),
            ChaosFault::FillMasterDisk => {
                let bytes = self.disks[master].fill()?;
                return Ok((target, format!("{fault:?}: {} MiB filler", bytes >> 20)));
            }
            ChaosFault::StepMasterClock { by_s } => {
                if !self.brokers[master].set_clock_offset(by_s) {
                    return Err("the broker does not run under libfaketime".into());
                }
            }
        }
        Ok((target, format!("{fault:?}")))
    }

    /// Heals `fault`, applied to broker `target`.
    pub async fn heal(&mut self, fault: ChaosFault, target: usize) -> Result<(), String> {
        match fault {
            ChaosFault::PauseMaster => self.brokers[target].resume(),
            ChaosFault::KillMaster | ChaosFault::KillReplica { .. } => {
                self.brokers[target]
                    .start(BROKER_READY, START_TIMEOUT)
                    .await?;
            }
            ChaosFault::FillMasterDisk => self.disks[target].free(),
            ChaosFault::StepMasterClock { .. } => {
                self.brokers[target].set_clock_offset(0);
            }
            _ => self.lab.heal(target + 1, self.tools.nft),
        }
        Ok(())
    }

    /// Heals everything: every link, disk and clock; every broker resumed
    /// and running.
    pub async fn heal_all(&mut self) -> Result<(), String> {
        for i in 0..=BROKERS {
            self.lab.heal(i, self.tools.nft);
        }
        for (b, fs) in self.brokers.iter_mut().zip(&self.disks) {
            fs.free();
            b.resume();
            b.set_clock_offset(0);
            if !b.is_up() {
                b.start(BROKER_READY, START_TIMEOUT).await?;
            }
        }
        Ok(())
    }

    /// The broker processes' names, in index order.
    pub fn broker_names(&self) -> Vec<String> {
        self.brokers.iter().map(|b| b.name().to_owned()).collect()
    }
}
