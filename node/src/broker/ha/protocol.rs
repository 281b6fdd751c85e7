//! The HA port's requests, in remoting frames with JSON bodies (Sluice's
//! own protocol: only Sluice brokers speak it). A fetch's answer carries
//! the CommitLog bytes verbatim as its body, its numbers in `extFields`.

use serde::{Deserialize, Serialize};
use sluice_net::RemotingCommand;

use super::epochs::EpochHistory;

/// A replica introduces itself; the master answers where to truncate.
pub const HA_HANDSHAKE: i32 = 3_300;
/// A replica reports what it holds and asks for the bytes after it.
pub const HA_FETCH: i32 = 3_301;
/// A replica copies topics, consumer offsets and subscription groups.
pub const HA_METADATA: i32 = 3_302;

/// Response code: the session is unknown or the request breaks the
/// protocol; the replica starts over with a handshake.
pub const HA_RESTART: i32 = 3_390;

/// Handshake request body.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Handshake {
    /// Broker group name.
    pub group: String,
    /// The replica's id in the group.
    pub replica_id: u64,
    /// The replica's epoch history.
    pub epochs: EpochHistory,
    /// The replica's CommitLog written end.
    pub end: u64,
    /// The replica's CommitLog segment size (must equal the master's).
    pub segment_bytes: u64,
}

/// Handshake response body.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HandshakeReply {
    /// Session to name in fetches.
    pub session: u64,
    /// The master's epoch.
    pub epoch: u32,
    /// The master's epoch history, which the replica adopts.
    pub epochs: EpochHistory,
    /// Where the replica's log stops agreeing with the master's.
    pub truncate_to: u64,
}

/// Fetch request body.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Fetch {
    /// Session from the handshake.
    pub session: u64,
    /// The replica's id.
    pub replica_id: u64,
    /// The master epoch the replica follows.
    pub epoch: u32,
    /// The replica's written end: send bytes from here.
    pub from: u64,
    /// What the replica holds for sure (durable in its flush mode).
    pub held: u64,
}

/// Metadata response body: the master's files, verbatim.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Metadata {
    /// `topics.json`.
    pub topics: String,
    /// `consumerOffset.json`.
    pub offsets: String,
    /// `subscriptionGroup.json`.
    pub groups: String,
    /// `delayOffset.json`.
    #[serde(default)]
    pub delay: String,
    /// `timerProgress.json` (as last persisted).
    #[serde(default)]
    pub timer: String,
}

/// Fetch response `extFields`: the epoch, the offset of the body's first
/// byte, and the offset the in-sync set holds (`u64::MAX`: no gate).
pub(crate) const FIELD_EPOCH: &str = "epoch";
pub(crate) const FIELD_AT: &str = "at";
pub(crate) const FIELD_CONFIRMED: &str = "confirmed";

/// A JSON body for a request or response.
pub(crate) fn json_body<T: Serialize>(value: &T) -> Vec<u8> {
    serde_json::to_vec(value).unwrap_or_default()
}

/// Parses a JSON body, naming what failed.
pub(crate) fn parse_body<T: for<'de> Deserialize<'de>>(cmd: &RemotingCommand) -> Result<T, String> {
    serde_json::from_slice(&cmd.body).map_err(|e| format!("bad HA body: {e}"))
}

/// A `u64` from `extFields`.
pub(crate) fn ext_u64(cmd: &RemotingCommand, key: &str) -> Result<u64, String> {
    cmd.ext_fields
        .get(key)
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("HA response without a valid {key}"))
}
