//! `ControllerConfig`: identity, peers, timing of the raft tick loop and of
//! broker liveness. Every raft timing is in ticks of `tick_ms`.

use std::collections::BTreeMap;

use sluice_net::RpcConfig;

use super::ControllerError;
use crate::peer_auth::SharedSecret;

/// RocketMQ 5's controller port.
pub const DEFAULT_LISTEN_ADDR: &str = "127.0.0.1:9878";
/// One raft tick.
pub const DEFAULT_TICK_MS: u64 = 100;
/// Ticks without a leader before a follower campaigns (before jitter).
pub const DEFAULT_ELECTION_TICKS: usize = 10;
/// Ticks between the leader's heartbeats.
pub const DEFAULT_HEARTBEAT_TICKS: usize = 2;
/// A broker silent this long is dead (RocketMQ 5's value).
pub const DEFAULT_BROKER_TIMEOUT_MS: u64 = 10_000;
/// Longest wait for a proposed change to be applied.
pub const DEFAULT_APPLY_TIMEOUT_MS: u64 = 3_000;
/// Most controller peers.
pub const PEERS_MAX: usize = 9;

/// How one controller runs.
#[derive(Clone, Debug)]
pub struct ControllerConfig {
    /// This controller's raft id (non-zero); a key of `peers`.
    pub id: u64,
    /// Every controller, itself included: raft id → address.
    pub peers: BTreeMap<u64, String>,
    /// Address to listen on.
    pub listen: String,
    /// Directory on the disk for the raft state.
    pub data_dir: String,
    /// One raft tick.
    pub tick_ms: u64,
    /// Election timeout in ticks; each controller adds `id % election_ticks`
    /// so that their timeouts differ and split votes do not repeat.
    pub election_ticks: usize,
    /// Leader heartbeat interval in ticks.
    pub heartbeat_ticks: usize,
    /// A broker silent this long counts as dead.
    pub broker_timeout_ms: u64,
    /// Longest wait for a proposed change to be applied.
    pub apply_timeout_ms: u64,
    /// Log entries kept before they are compacted into a snapshot.
    pub log_entries_max: usize,
    /// RPC tuning for serving and for talking to peers.
    pub rpc: RpcConfig,
    /// The cluster secret: with it, every connection to this controller —
    /// from a peer controller or a broker — must prove it first, and this
    /// controller proves it to its peers. `None`: no authentication.
    pub secret: Option<SharedSecret>,
}

impl ControllerConfig {
    /// A config with defaults for everything but identity and peers.
    pub fn new(id: u64, peers: BTreeMap<u64, String>, listen: impl Into<String>) -> Self {
        Self {
            id,
            peers,
            listen: listen.into(),
            data_dir: "controller".to_owned(),
            tick_ms: DEFAULT_TICK_MS,
            election_ticks: DEFAULT_ELECTION_TICKS,
            heartbeat_ticks: DEFAULT_HEARTBEAT_TICKS,
            broker_timeout_ms: DEFAULT_BROKER_TIMEOUT_MS,
            apply_timeout_ms: DEFAULT_APPLY_TIMEOUT_MS,
            log_entries_max: 256,
            rpc: RpcConfig::default(),
            secret: None,
        }
    }

    /// This controller's election timeout in ticks: the base plus a
    /// deterministic jitter from its id.
    pub fn election_ticks_own(&self) -> usize {
        let base = self.election_ticks.max(1);
        let jitter = usize::try_from(self.id % base as u64).unwrap_or(0);
        base + jitter
    }

    /// Checks the values that raft or the tick loop cannot work with.
    pub fn validate(&self) -> Result<(), ControllerError> {
        let bad = |reason: String| Err(ControllerError::Config(reason));
        if self.id == 0 {
            return bad("id must not be 0 (raft reserves it)".into());
        }
        if !self.peers.contains_key(&self.id) {
            return bad(format!(
                "peers do not include this controller's id {}",
                self.id
            ));
        }
        if self.peers.len() > PEERS_MAX {
            return bad(format!("over {PEERS_MAX} peers"));
        }
        if self.tick_ms == 0 || self.heartbeat_ticks == 0 {
            return bad("tick_ms and heartbeat_ticks must be positive".into());
        }
        if self.election_ticks <= self.heartbeat_ticks {
            return bad("election_ticks must exceed heartbeat_ticks".into());
        }
        if self.log_entries_max == 0 {
            return bad("log_entries_max must be positive".into());
        }
        Ok(())
    }
}

/// Parses `"1=127.0.0.1:9878;2=host:9878"` (`,` also separates).
pub fn parse_peers(spec: &str) -> Result<BTreeMap<u64, String>, ControllerError> {
    let mut peers = BTreeMap::new();
    for part in spec
        .split([';', ','])
        .map(str::trim)
        .filter(|p| !p.is_empty())
    {
        let (id, addr) = part
            .split_once('=')
            .ok_or_else(|| ControllerError::Config(format!("peer `{part}` is not id=addr")))?;
        let id: u64 = id
            .trim()
            .parse()
            .map_err(|_| ControllerError::Config(format!("peer id `{id}` is not a number")))?;
        let addr = addr.trim();
        if id == 0 || addr.is_empty() {
            return Err(ControllerError::Config(format!(
                "peer `{part}` has id 0 or no address"
            )));
        }
        if peers.insert(id, addr.to_owned()).is_some() {
            return Err(ControllerError::Config(format!(
                "peer id {id} appears twice"
            )));
        }
    }
    if peers.is_empty() {
        return Err(ControllerError::Config("no peers".into()));
    }
    Ok(peers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peers_parse_and_bad_ones_are_refused() {
        let peers = parse_peers("1=127.0.0.1:9878; 2=h2:9878;3=h3:9878").expect("parses");
        assert_eq!(peers.len(), 3);
        assert_eq!(peers[&2], "h2:9878");
        for bad in ["", "1", "x=h:1", "0=h:1", "1=h:1;1=h:2", "1="] {
            assert!(parse_peers(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn election_timeouts_differ_per_id() {
        let peers = parse_peers("1=a:1;2=b:1;3=c:1").expect("parses");
        let ticks: Vec<usize> = [1, 2, 3]
            .into_iter()
            .map(|id| ControllerConfig::new(id, peers.clone(), "a:1").election_ticks_own())
            .collect();
        assert_eq!(ticks, vec![11, 12, 13]);
    }

    #[test]
    fn config_without_self_in_peers_is_refused() {
        let peers = parse_peers("2=b:1").expect("parses");
        assert!(ControllerConfig::new(1, peers, "a:1").validate().is_err());
    }
}
