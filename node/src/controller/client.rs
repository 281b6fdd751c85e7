//! `ControllerClient`: what a broker uses to reach the controllers. It
//! remembers the leader, follows `NOT_LEADER` hints, moves to the next
//! address on errors, and bounds every request and the whole call. With
//! the cluster secret it proves it on every connection it opens.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use serde::de::DeserializeOwned;
use sluice_net::remoting::response_code;
use sluice_net::{RemotingCommand, RpcClient, RpcConfig, Transport};

use super::api::{self, AlterInSync, BrokerHeartbeat, ClusterMetadata, GroupView};
use super::server::REALM;
use super::ControllerError;
use crate::peer_auth::{AuthError, Prover, SharedSecret};

/// Pause before another round over the controllers when none leads (an
/// election is under way).
const NO_LEADER_PAUSE: Duration = Duration::from_millis(200);

/// A client of the controller cluster. Cheap to share by reference; clone
/// the transport to build more.
pub struct ControllerClient<T: Transport> {
    rpc: RpcClient<T>,
    addrs: Vec<String>,
    leader: Mutex<Option<String>>,
    next: AtomicUsize,
    request_timeout: Duration,
    prover: Option<Prover>,
}

impl<T: Transport> ControllerClient<T> {
    /// A client of the controllers at `addrs`; each request waits at most
    /// `request_timeout`.
    pub fn new(transport: T, addrs: Vec<String>, request_timeout: Duration) -> Self {
        Self {
            rpc: RpcClient::new(transport, RpcConfig::default()),
            addrs,
            leader: Mutex::new(None),
            next: AtomicUsize::new(0),
            request_timeout,
            prover: None,
        }
    }

    /// This client, proving the cluster `secret` as `identity` (e.g.
    /// `broker/<group>/<id>`) on every connection before its first request.
    #[must_use]
    pub fn with_secret(mut self, secret: SharedSecret, identity: impl Into<String>) -> Self {
        self.prover = Some(Prover::new(secret, REALM, identity));
        self
    }

    async fn invoke(
        &self,
        addr: &str,
        request: RemotingCommand,
    ) -> Result<RemotingCommand, AuthError> {
        let Some(prover) = &self.prover else {
            return Ok(self.rpc.invoke(addr, request, self.request_timeout).await?);
        };
        let conn = prover
            .connection(&self.rpc, addr, self.request_timeout)
            .await?;
        Ok(conn.invoke(request, self.request_timeout).await?)
    }

    /// Heartbeats: registers the replica (the first of a group becomes its
    /// master) and returns the group's current view.
    pub async fn heartbeat(
        &self,
        heartbeat: &BrokerHeartbeat,
    ) -> Result<GroupView, ControllerError> {
        self.call(|| heartbeat.to_request()).await
    }

    /// Replaces the in-sync set; returns its new epoch. Fails with
    /// [`ControllerError::Fenced`] unless the caller is the master at
    /// `master_epoch`.
    pub async fn alter_in_sync(&self, alter: &AlterInSync) -> Result<u32, ControllerError> {
        let view: GroupView = self.call(|| alter.to_request()).await?;
        Ok(view.in_sync_epoch)
    }

    /// Every group, member and controller, from the leader.
    pub async fn metadata(&self) -> Result<ClusterMetadata, ControllerError> {
        self.call(|| RemotingCommand::request(api::GET_METADATA))
            .await
    }

    /// The leader this client last heard of.
    pub fn leader(&self) -> Option<String> {
        self.leader
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn set_leader(&self, leader: Option<String>) {
        *self.leader.lock().unwrap_or_else(PoisonError::into_inner) = leader;
    }

    fn target(&self) -> Option<String> {
        if let Some(leader) = self.leader() {
            return Some(leader);
        }
        if self.addrs.is_empty() {
            return None;
        }
        let at = self.next.load(Ordering::Relaxed) % self.addrs.len();
        Some(self.addrs[at].clone())
    }

    fn rotate(&self) {
        self.set_leader(None);
        self.next.fetch_add(1, Ordering::Relaxed);
    }

    async fn call<R: DeserializeOwned>(
        &self,
        request: impl Fn() -> RemotingCommand,
    ) -> Result<R, ControllerError> {
        let attempts = 3 * self.addrs.len().max(1);
        let mut last_error = String::from("no controller address");
        for attempt in 0..attempts {
            let Some(addr) = self.target() else { break };
            match self.invoke(&addr, request()).await {
                Ok(response) if response.code == response_code::SUCCESS => {
                    self.set_leader(Some(addr));
                    return serde_json::from_slice(&response.body)
                        .map_err(|error| ControllerError::Decode(error.to_string()));
                }
                Ok(response) if response.code == api::NOT_LEADER => {
                    let hint = response.remark.unwrap_or_default();
                    last_error = format!("{addr} is not the leader");
                    if hint.is_empty() || hint == addr {
                        self.rotate();
                        if (attempt + 1) % self.addrs.len().max(1) == 0 {
                            tokio::time::sleep(NO_LEADER_PAUSE).await;
                        }
                    } else {
                        self.set_leader(Some(hint));
                    }
                }
                Ok(response) if response.code == api::FENCED => {
                    return Err(ControllerError::Fenced(response.remark.unwrap_or_default()));
                }
                Ok(response) => {
                    return Err(ControllerError::Rejected {
                        code: response.code,
                        remark: response.remark.unwrap_or_default(),
                    });
                }
                Err(error) => {
                    last_error = format!("{addr}: {error}");
                    self.rotate();
                }
            }
        }
        Err(ControllerError::NoLeader(last_error))
    }
}
