//! The controller's wire contract: request and response codes (in a range
//! RocketMQ does not use), the requests' extFields, and the JSON bodies
//! answered. Decoding never panics: bad input becomes a remark.

use std::str::FromStr;

use serde::{Deserialize, Serialize};
use sluice_net::{ExtFields, RemotingCommand};

/// A raft message between controllers (oneway; body = protobuf `Message`).
pub const RAFT_MESSAGE: i32 = 1950;
/// A broker's heartbeat; answered with its group's [`GroupView`].
pub const BROKER_HEARTBEAT: i32 = 1951;
/// The master replaces its in-sync set; answered with the [`GroupView`].
pub const ALTER_IN_SYNC: i32 = 1952;
/// Every group, controller and member; answered with [`ClusterMetadata`].
pub const GET_METADATA: i32 = 1953;

/// This controller is not the raft leader; the remark holds the leader's
/// address when known, else is empty.
pub const NOT_LEADER: i32 = 1960;
/// The sender is not the master at the epoch it claims.
pub const FENCED: i32 = 1961;
/// The change was proposed but not applied in time (or was lost to a
/// leader change); the caller may retry.
pub const NOT_APPLIED: i32 = 1962;
/// The request is malformed or can never apply.
pub const INVALID_REQUEST: i32 = 1963;

/// One broker group as the controller sees it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupView {
    /// The broker group (RocketMQ broker name).
    pub group: String,
    /// The master's replica id, once elected.
    pub master_id: Option<u64>,
    /// The master's broker address.
    pub master_addr: Option<String>,
    /// The master's HA address.
    pub master_ha_addr: Option<String>,
    /// 0 before the first master, +1 per election.
    pub master_epoch: u32,
    /// Replicas in sync with the master (contains it), ascending.
    pub in_sync: Vec<u64>,
    /// +1 per change of `in_sync`.
    pub in_sync_epoch: u32,
}

/// One controller peer.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PeerView {
    /// Raft id.
    pub id: u64,
    /// Address.
    pub addr: String,
    /// Whether it is the raft leader (as the answering leader knows).
    pub leader: bool,
}

/// One replica with what the leader heard from it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemberView {
    /// Its broker group.
    pub group: String,
    /// Its replica id.
    pub replica_id: u64,
    /// Broker address.
    pub broker_addr: String,
    /// HA address.
    pub ha_addr: String,
    /// The CommitLog end it last reported to this leader.
    pub max_offset: Option<u64>,
    /// Whether it heartbeated within the broker timeout.
    pub alive: bool,
}

/// The answer to [`GET_METADATA`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterMetadata {
    /// Every broker group, by name.
    pub groups: Vec<GroupView>,
    /// Every replica of every group.
    pub members: Vec<MemberView>,
    /// The controller peers.
    pub controllers: Vec<PeerView>,
    /// The raft leader's id.
    pub leader_id: Option<u64>,
}

/// A broker's heartbeat.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BrokerHeartbeat {
    /// Its broker group.
    pub group: String,
    /// Its replica id (stable across restarts).
    pub replica_id: u64,
    /// Where clients reach it.
    pub broker_addr: String,
    /// Where slaves reach its HA service.
    pub ha_addr: String,
    /// The last master epoch it knows.
    pub epoch: u32,
    /// Its CommitLog end.
    pub max_offset: u64,
    /// The broker's first heartbeats after it started, until one is
    /// answered. A master that restarted may have lost an unsynced tail
    /// its replicas hold, so it must never go on writing in its old epoch:
    /// the controller renews the mastership (a new epoch, given to the
    /// alive in-sync replica with the most data).
    pub restarted: bool,
}

/// The master's request to replace its in-sync set.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AlterInSync {
    /// Its broker group.
    pub group: String,
    /// The master's replica id.
    pub master_id: u64,
    /// The epoch it is master in.
    pub master_epoch: u32,
    /// The new set; must contain the master.
    pub in_sync: Vec<u64>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct InSyncBody {
    in_sync: Vec<u64>,
}

/// Most replica ids one in-sync set body may carry.
const IN_SYNC_IDS_MAX: usize = 1_024;

impl BrokerHeartbeat {
    /// The request command.
    pub fn to_request(&self) -> RemotingCommand {
        let mut request = RemotingCommand::request(BROKER_HEARTBEAT);
        let ext = &mut request.ext_fields;
        ext.insert("group", self.group.clone());
        ext.insert("replicaId", self.replica_id.to_string());
        ext.insert("brokerAddr", self.broker_addr.clone());
        ext.insert("haAddr", self.ha_addr.clone());
        ext.insert("epoch", self.epoch.to_string());
        ext.insert("maxOffset", self.max_offset.to_string());
        if self.restarted {
            ext.insert("restarted", "true");
        }
        request
    }

    /// Reads the request, naming the first bad field.
    pub fn from_request(request: &RemotingCommand) -> Result<Self, String> {
        let ext = &request.ext_fields;
        Ok(Self {
            group: field(ext, "group")?,
            replica_id: field(ext, "replicaId")?,
            broker_addr: field(ext, "brokerAddr")?,
            ha_addr: field(ext, "haAddr")?,
            epoch: field(ext, "epoch")?,
            max_offset: field(ext, "maxOffset")?,
            restarted: ext.get("restarted").is_some_and(|v| v == "true"),
        })
    }
}

impl AlterInSync {
    /// The request command (the set travels as a JSON body).
    pub fn to_request(&self) -> RemotingCommand {
        let mut request = RemotingCommand::request(ALTER_IN_SYNC);
        let ext = &mut request.ext_fields;
        ext.insert("group", self.group.clone());
        ext.insert("masterId", self.master_id.to_string());
        ext.insert("masterEpoch", self.master_epoch.to_string());
        let body = serde_json::to_vec(&InSyncBody {
            in_sync: self.in_sync.clone(),
        })
        .expect("invariant: a list of integers serializes");
        request.with_body(body)
    }

    /// Reads the request, naming the first bad field.
    pub fn from_request(request: &RemotingCommand) -> Result<Self, String> {
        let ext = &request.ext_fields;
        let body: InSyncBody = serde_json::from_slice(&request.body)
            .map_err(|error| format!("bad in-sync body: {error}"))?;
        if body.in_sync.len() > IN_SYNC_IDS_MAX {
            return Err(format!("over {IN_SYNC_IDS_MAX} in-sync ids"));
        }
        Ok(Self {
            group: field(ext, "group")?,
            master_id: field(ext, "masterId")?,
            master_epoch: field(ext, "masterEpoch")?,
            in_sync: body.in_sync,
        })
    }
}

fn field<T: FromStr>(ext: &ExtFields, key: &str) -> Result<T, String> {
    let raw = ext.get(key).ok_or_else(|| format!("missing `{key}`"))?;
    raw.parse().map_err(|_| format!("bad `{key}`: {raw:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heartbeat_round_trips_through_ext_fields() {
        let heartbeat = BrokerHeartbeat {
            group: "broker-a".into(),
            replica_id: 2,
            broker_addr: "b:10911".into(),
            ha_addr: "b:10912".into(),
            epoch: 3,
            max_offset: u64::MAX,
            restarted: true,
        };
        let decoded = BrokerHeartbeat::from_request(&heartbeat.to_request());
        assert_eq!(decoded, Ok(heartbeat));
    }

    #[test]
    fn alter_round_trips_and_bad_fields_are_named() {
        let alter = AlterInSync {
            group: "g".into(),
            master_id: 1,
            master_epoch: 2,
            in_sync: vec![1, 3],
        };
        let mut request = alter.to_request();
        assert_eq!(AlterInSync::from_request(&request), Ok(alter));
        request.ext_fields.insert("masterEpoch", "-1");
        let error = AlterInSync::from_request(&request).expect_err("negative epoch");
        assert!(error.contains("masterEpoch"), "{error}");
        request.body = bytes::Bytes::from_static(b"{");
        assert!(AlterInSync::from_request(&request).is_err());
    }
}
