//! `NameServerConfig`: where the name server listens and how it expires
//! silent brokers. Every default matches RocketMQ 4.x.

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use sluice_net::RpcConfig;

use crate::acl::Acl;

/// RocketMQ's name server port.
pub const DEFAULT_LISTEN_ADDR: &str = "127.0.0.1:9876";
/// A broker silent this long is dropped (RocketMQ 4.x: 120 s).
pub const DEFAULT_BROKER_EXPIRY_MS: u64 = 120_000;
/// How often silent brokers are looked for (RocketMQ 4.x: 10 s).
pub const DEFAULT_SCAN_INTERVAL_MS: u64 = 10_000;
/// How long shutdown waits for in-flight requests.
pub const DEFAULT_SHUTDOWN_GRACE_MS: u64 = 3_000;
/// A connection on which nothing arrives this long is closed (RocketMQ's
/// `serverChannelMaxIdleTimeSeconds`: 120 s).
pub const DEFAULT_IDLE_TIMEOUT_MS: u64 = 120_000;

/// Name server settings. Deserializes from a TOML/JSON table in which every
/// field is optional.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NameServerConfig {
    /// `host:port` to listen on; port 0 picks a free port.
    /// Default [`DEFAULT_LISTEN_ADDR`] (`127.0.0.1:9876`).
    pub listen_addr: String,
    /// A broker not heard from (registration or data-version query) for
    /// longer than this is dropped. Default [`DEFAULT_BROKER_EXPIRY_MS`] (120 s).
    pub broker_expiry_ms: u64,
    /// Interval of the scan that drops silent brokers.
    /// Default [`DEFAULT_SCAN_INTERVAL_MS`] (10 s).
    pub scan_interval_ms: u64,
    /// Fill a route's `orderTopicConf` from the `ORDER_TOPIC_CONFIG` KV
    /// namespace, as RocketMQ's `orderMessageEnable`. Default `false`.
    pub order_message_enable: bool,
    /// How long shutdown lets in-flight requests finish.
    /// Default [`DEFAULT_SHUTDOWN_GRACE_MS`] (3 s).
    pub shutdown_grace_ms: u64,
    /// RPC tuning (frame limits, queue sizes). Default [`RpcConfig::default`]
    /// with an idle timeout of [`DEFAULT_IDLE_TIMEOUT_MS`]; not read from
    /// config files.
    #[serde(skip, default = "default_rpc")]
    pub rpc: RpcConfig,
    /// Access control before every request (`None`: open); shared with a
    /// broker in the same process and reloaded in place.
    #[serde(skip)]
    pub acl: Option<Arc<Acl>>,
}

impl Default for NameServerConfig {
    fn default() -> Self {
        Self {
            listen_addr: DEFAULT_LISTEN_ADDR.to_owned(),
            broker_expiry_ms: DEFAULT_BROKER_EXPIRY_MS,
            scan_interval_ms: DEFAULT_SCAN_INTERVAL_MS,
            order_message_enable: false,
            shutdown_grace_ms: DEFAULT_SHUTDOWN_GRACE_MS,
            rpc: default_rpc(),
            acl: None,
        }
    }
}

fn default_rpc() -> RpcConfig {
    RpcConfig {
        idle_timeout: Some(Duration::from_millis(DEFAULT_IDLE_TIMEOUT_MS)),
        ..RpcConfig::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_config_keeps_every_other_default() {
        let config: NameServerConfig =
            serde_json::from_str(r#"{"broker_expiry_ms": 5000}"#).expect("parses");
        assert_eq!(config.broker_expiry_ms, 5_000);
        assert_eq!(config.listen_addr, DEFAULT_LISTEN_ADDR);
        assert_eq!(config.scan_interval_ms, DEFAULT_SCAN_INTERVAL_MS);
        assert_eq!(
            config.rpc.idle_timeout,
            Some(Duration::from_millis(DEFAULT_IDLE_TIMEOUT_MS))
        );
    }

    #[test]
    fn unknown_config_keys_are_rejected() {
        let parsed = serde_json::from_str::<NameServerConfig>(r#"{"brokerExpiryMs": 5000}"#);
        assert!(parsed.is_err());
    }
}
