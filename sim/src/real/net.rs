//! The lab network of a real-process chaos run: one Linux network
//! namespace per node, each joined by a veth pair to a bridge in the root
//! namespace (where the test's clients run, at the bridge's address), and
//! the faults on it — nftables drops (both ways, one way, random loss)
//! inside a node's namespace and a token-bucket throttle on its interface.
//! Dropping a [`Lab`] deletes the namespaces (and their veths) and the
//! bridge, even when the run failed.

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

/// Labs made by this process so far: part of the names, so parallel
/// tests (and parallel processes, through the pid) never collide.
static LABS: AtomicU32 = AtomicU32::new(0);

/// Runs `program args`, its output on success, else a description.
pub fn run(program: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{program}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "{program} {}: {} {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Whether `program flag` (a version flag) runs.
pub fn have(program: &str, flag: &str) -> bool {
    Command::new(program)
        .arg(flag)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Which direction of a node's traffic a drop applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Packets the node sends.
    Out,
    /// Both.
    Both,
}

/// The bridge, the namespaces and their addresses.
#[derive(Debug)]
pub struct Lab {
    prefix: String,
    subnet: String,
    namespaces: Vec<String>,
    bridge_up: bool,
}

impl Lab {
    /// A bridge and `nodes` namespaces, each with an address and a
    /// filter table (when `nft` is usable). `Err` when namespaces cannot
    /// be made here (not root, no `ip`): the caller skips.
    pub fn new(nodes: usize, with_nft: bool) -> Result<Self, String> {
        let n = LABS.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let prefix = format!("sc{:x}{n}", pid & 0xf_ffff);
        let subnet = format!("10.{}.{}", 100 + (pid >> 8) % 100 + n % 50, pid % 256);
        let mut lab = Self {
            prefix,
            subnet,
            namespaces: Vec::new(),
            bridge_up: false,
        };
        let bridge = lab.bridge();
        run("ip", &["link", "add", &bridge, "type", "bridge"])?;
        lab.bridge_up = true;
        run(
            "ip",
            &[
                "addr",
                "add",
                &format!("{}/24", lab.host_ip()),
                "dev",
                &bridge,
            ],
        )?;
        run("ip", &["link", "set", &bridge, "up"])?;
        for i in 0..nodes {
            lab.add_node(i, with_nft)?;
        }
        Ok(lab)
    }

    fn bridge(&self) -> String {
        format!("{}br", self.prefix)
    }

    fn add_node(&mut self, i: usize, with_nft: bool) -> Result<(), String> {
        let ns = format!("{}n{i}", self.prefix);
        run("ip", &["netns", "add", &ns])?;
        self.namespaces.push(ns.clone());
        let veth = format!("{}v{i}", self.prefix);
        run(
            "ip",
            &[
                "link", "add", &veth, "type", "veth", "peer", "name", "eth0", "netns", &ns,
            ],
        )?;
        run(
            "ip",
            &["link", "set", &veth, "master", &self.bridge(), "up"],
        )?;
        let addr = format!("{}/24", self.ip(i));
        run("ip", &["-n", &ns, "addr", "add", &addr, "dev", "eth0"])?;
        run("ip", &["-n", &ns, "link", "set", "eth0", "up"])?;
        run("ip", &["-n", &ns, "link", "set", "lo", "up"])?;
        if with_nft {
            self.nft(i, &["add", "table", "inet", "chaos"])?;
            for (chain, hook) in [("in", "input"), ("out", "output")] {
                let spec = format!("{{ type filter hook {hook} priority 0; }}");
                self.nft(i, &["add", "chain", "inet", "chaos", chain, &spec])?;
            }
        }
        Ok(())
    }

    /// The namespace of node `i`.
    pub fn ns(&self, i: usize) -> &str {
        &self.namespaces[i]
    }

    /// The address of node `i`.
    pub fn ip(&self, i: usize) -> String {
        format!("{}.{}", self.subnet, 10 + i)
    }

    /// The root namespace's address on the bridge: where the clients are.
    pub fn host_ip(&self) -> String {
        format!("{}.1", self.subnet)
    }

    fn nft(&self, i: usize, args: &[&str]) -> Result<String, String> {
        let mut all = vec!["netns", "exec", self.ns(i), "nft"];
        all.extend_from_slice(args);
        run("ip", &all)
    }

    /// Drops node `i`'s packets from and/or to `peers` (addresses).
    pub fn cut(&self, i: usize, peers: &[String], direction: Direction) -> Result<(), String> {
        for peer in peers {
            if direction == Direction::Both {
                self.nft(
                    i,
                    &[
                        "add", "rule", "inet", "chaos", "in", "ip", "saddr", peer, "drop",
                    ],
                )?;
            }
            self.nft(
                i,
                &[
                    "add", "rule", "inet", "chaos", "out", "ip", "daddr", peer, "drop",
                ],
            )?;
        }
        Ok(())
    }

    /// Drops `percent` of node `i`'s packets on its interface, both ways.
    pub fn loss(&self, i: usize, percent: u8) -> Result<(), String> {
        let p = percent.to_string();
        for chain in ["in", "out"] {
            self.nft(
                i,
                &[
                    "add", "rule", "inet", "chaos", chain, "iifname", "!=", "lo", "oifname", "!=",
                    "lo", "numgen", "random", "mod", "100", "<", &p, "drop",
                ],
            )?;
        }
        Ok(())
    }

    /// Throttles node `i`'s interface to `kbit_s` (token bucket: packets
    /// queue up to 300 ms, then drop).
    pub fn throttle(&self, i: usize, kbit_s: u32) -> Result<(), String> {
        let rate = format!("{kbit_s}kbit");
        run(
            "ip",
            &[
                "netns",
                "exec",
                self.ns(i),
                "tc",
                "qdisc",
                "add",
                "dev",
                "eth0",
                "root",
                "tbf",
                "rate",
                &rate,
                "burst",
                "32kbit",
                "latency",
                "300ms",
            ],
        )
        .map(drop)
    }

    /// Removes every drop and throttle of node `i`.
    pub fn heal(&self, i: usize, with_nft: bool) {
        if with_nft {
            for chain in ["in", "out"] {
                let _ = self.nft(i, &["flush", "chain", "inet", "chaos", chain]);
            }
        }
        let _ = run(
            "ip",
            &[
                "netns",
                "exec",
                self.ns(i),
                "tc",
                "qdisc",
                "del",
                "dev",
                "eth0",
                "root",
            ],
        );
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        // Deleting a namespace deletes its end of the veth, and so the pair.
        for ns in &self.namespaces {
            let _ = run("ip", &["netns", "del", ns]);
        }
        if self.bridge_up {
            let _ = run("ip", &["link", "del", &self.bridge()]);
        }
    }
}
