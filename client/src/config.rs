//! Client configuration shared by producers, consumers and the admin API.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use sluice_net::RpcConfig;

/// Settings of one client instance (one connection pool, one heartbeat).
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// Name server addresses, tried in turn.
    pub namesrv_addrs: Vec<String>,
    /// Distinguishes instances in one process; part of the client ID.
    pub instance_name: String,
    /// The address this client reports (client ID, born host, message IDs).
    pub client_ip: IpAddr,
    /// Process ID folded into message IDs.
    pub pid: u32,
    /// Timeout of one request to a name server or broker.
    pub request_timeout: Duration,
    /// How often routes of known topics are refreshed (RocketMQ: 30 s).
    pub poll_name_server_interval: Duration,
    /// How often heartbeats go to every broker (RocketMQ: 30 s).
    pub heartbeat_interval: Duration,
    /// How often consumers persist their offsets (RocketMQ: 5 s).
    pub persist_offset_interval: Duration,
    /// How often consumers rebalance even without a notification (RocketMQ: 20 s).
    pub rebalance_interval: Duration,
    /// Connection tuning.
    pub rpc: RpcConfig,
}

impl ClientConfig {
    /// A configuration for the name servers in `namesrv`, separated by `;`
    /// as RocketMQ spells them (`"10.0.0.1:9876;10.0.0.2:9876"`).
    pub fn new(namesrv: &str) -> Self {
        Self {
            namesrv_addrs: namesrv
                .split(';')
                .map(str::trim)
                .filter(|a| !a.is_empty())
                .map(str::to_owned)
                .collect(),
            instance_name: std::process::id().to_string(),
            client_ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
            pid: std::process::id(),
            request_timeout: Duration::from_secs(3),
            poll_name_server_interval: Duration::from_secs(30),
            heartbeat_interval: Duration::from_secs(30),
            persist_offset_interval: Duration::from_secs(5),
            rebalance_interval: Duration::from_secs(20),
            rpc: RpcConfig::default(),
        }
    }

    /// Sets the instance name (builder style).
    #[must_use]
    pub fn with_instance_name(mut self, name: impl Into<String>) -> Self {
        self.instance_name = name.into();
        self
    }

    /// Signs every request with `access_key`/`secret_key` (RocketMQ ACL
    /// 1.0, as `AclClientRPCHook`), builder style.
    #[must_use]
    pub fn with_credentials(
        mut self,
        access_key: impl Into<String>,
        secret_key: impl Into<String>,
    ) -> Self {
        self.rpc.credentials = Some(sluice_net::Credentials::new(access_key, secret_key));
        self
    }

    /// The client ID brokers know this client by: `ip@instance`.
    pub fn client_id(&self) -> String {
        format!("{}@{}", self.client_ip, self.instance_name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namesrv_list_splits_on_semicolons() {
        let c = ClientConfig::new(" a:1; b:2;;").with_instance_name("x");
        assert_eq!(c.namesrv_addrs, ["a:1", "b:2"]);
        assert_eq!(c.client_id(), "127.0.0.1@x");
    }
}
