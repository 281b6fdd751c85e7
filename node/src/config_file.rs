//! The broker's TOML configuration file: every field optional, defaulting
//! to RocketMQ's values (see `BrokerConfig::default`). Units are in the
//! names. The `[replication]` table is parsed in `replication`.
//!
//! ```toml
//! cluster_name = "DefaultCluster"
//! broker_name = "broker-a"
//! broker_id = 0
//! listen = "127.0.0.1:10911"
//! namesrv_addrs = ["127.0.0.1:9876"]
//! data_dir = "./sluice-data"
//! flush_mode = "async"            # or "sync" (group commit; ack after fsync)
//! auto_create_topic = true
//! commit_log_segment_bytes = 1073741824
//! index_slots = 5000000          # hash slots per index file (RocketMQ's)
//! index_entries = 20000000       # entries per index file (420 MB files)
//! index_sync_interval_ms = 10000 # the key index is synced this often (0: every checkpoint),
//! index_sync_lag_bytes = 268435456 # or once the log grew this much; a crash re-indexes the rest
//! file_reserved_hours = 72
//! disk_pressure_retention = "consumed" # above 75% disk use, delete early only segments every
//!                                 # group consumed ("force": oldest first, unread or not)
//! delay_levels = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
//! max_reconsume_times = 16
//! lock_expiry_ms = 60000
//! transaction_timeout_ms = 6000           # a half open this long is checked back
//! transaction_check_interval_ms = 60000   # how often halves are looked at
//! transaction_check_max = 15              # checks before a half is parked
//! enable_property_filter = true   # SQL92 filters (RocketMQ defaults to false)
//! auto_create_subscription_group = true
//! timer_precision_ms = 1000       # timer messages: slot width (up to this late, never early)
//! timer_max_delay_ms = 259200000  # farthest ahead a timer may be due (3 days; <= retention)
//! timer_log_segment_bytes = 56000000 # timer log file size (a multiple of 56)
//! grpc_listen = "127.0.0.1:10919"  # RocketMQ 5 gRPC clients (absent: broker port + 8;
//!                                   # standalone: 127.0.0.1:8081; "off": none)
//! metrics_listen = "127.0.0.1:5557" # HTTP: /metrics and the dashboard (absent: off;
//!                                   # standalone serves 127.0.0.1:5557 unless "off")
//! metrics_series_cap = 5000         # label sets per metric family; past it, `other`
//! stats = true                      # false: record nothing on the hot path (to measure its cost)
//! dedupe_window_ms = 600000         # a retried send (same UNIQ_KEY) stored this recently is not
//! dedupe_window_keys = 100000       # stored again; at least the newest this many keys (0: no dedupe)
//! dedupe_producer_lanes = 10000     # Sluice producers' numbered sends: exact beyond the window
//! dedupe_sequences_rebuild_ms = 600000 # log read on open to rebuild them (if longer than the window)
//! dedupe_save_interval_ms = 10000   # window saved this often under load, when sends pause and on
//!                                   # shutdown: a restart reads only the log since (0: never)
//! frame_deadline_ms = 30000         # close a connection that began a frame and stalled (0: never)
//! idle_timeout_ms = 120000          # close a connection silent this long (0: never)
//!
//! # TLS on every port this broker serves (absent: plain), and on its own
//! # dials (name servers, master, controllers) when `ca` or `insecure` is set.
//! [tls]
//! mode = "enforcing"                  # or "permissive" (TLS and plain) / "disabled"
//! cert = "/etc/sluice/broker.pem"     # certificate chain, leaf first (PEM)
//! key = "/etc/sluice/broker-key.pem"  # its private key (PEM)
//! client_ca = "/etc/sluice/ca.pem"    # optional: clients must present a certificate (mTLS)
//! ca = "/etc/sluice/ca.pem"           # trust for dials; makes them TLS
//! client_cert = "/etc/sluice/broker-client.pem"    # optional, with client_key: mTLS dials
//! client_key = "/etc/sluice/broker-client-key.pem"
//! server_name = "sluice.internal"     # optional: the name dialled certificates carry
//!
//! # Replication (absent: a lone broker, no HA port).
//! [replication]
//! mode = "sync"                       # or "async" (RocketMQ's SYNC_MASTER / ASYNC_MASTER)
//! ha_listen = "127.0.0.1:10912"       # default: the broker port + 1
//! ha_advertised = "10.0.0.5:10912"    # what replicas dial (default: advertised host, HA port)
//! controller_addrs = ["127.0.0.1:9878"] # automatic failover; every broker_id >= 1
//! master_ha_addr = "10.0.0.4:10912"   # fixed roles instead: a replica's master (broker_id 0 = master)
//! min_in_sync = 2                     # copies a SYNC send needs, the master's included
//! ack_timeout_ms = 3000               # then FLUSH_SLAVE_TIMEOUT
//! not_caught_up_ms = 15000            # a replica this far behind leaves the in-sync set
//! controller_heartbeat_ms = 1000
//! group_secret_file = "/etc/sluice/group.secret"   # or group_secret = "..." (16+ bytes):
//!                                     # replicas prove it before they get one byte of the log
//! controller_secret_file = "/etc/sluice/cluster.secret" # or controller_secret: the
//!                                     # controllers' --cluster-secret, proven to them
//!
//! # Access control (absent: off, allowed only on a loopback listen address).
//! [acl]
//! mode = "enforcing"                  # or "permissive" (check and log, refuse nothing) or "off"
//! file = "acl.toml"                   # more accounts; re-read on SIGHUP and when it changes
//! access_key = "broker-a"             # what this broker signs its name-server calls with
//! secret_key = "broker-a-secret"
//! global_allow_addresses = ["10.0.0.0/8"]   # trusted hosts, unsigned requests pass
//! [[acl.accounts]]
//! access_key = "orders-app"
//! secret_key = "orders-app-secret"    # at least 7 characters
//! admin = false                       # admin codes: topic/group create and delete, resets, ...
//! broker = false                      # may register brokers with a name server
//! allow_addresses = ["192.168.0.0/16"] # where the key may be used from (default anywhere)
//! default_topic_perm = "SUB"          # DENY (the default), PUB, SUB or PUB|SUB
//! default_group_perm = "SUB"
//! topic_perms = { Orders = "PUB|SUB" }
//! group_perms = { billing = "SUB" }   # a group's retry topic follows it
//! ```

use serde::Deserialize;
use sluice_core::{DiskPressureRetention, FlushMode};
use sluice_net::{TlsSettings, TlsTransport};

use crate::broker::BrokerConfig;
use crate::error::{Error, Result};

mod acl_table;
mod replication;
use acl_table::apply_acl;
pub use acl_table::{parse_acl_mode, require_acl_beyond_loopback, AclFile, AclSetup};
pub use replication::ReplicationFile;

/// The file's fields; absent ones keep their defaults.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BrokerFile {
    /// Cluster name.
    pub cluster_name: Option<String>,
    /// Broker group name.
    pub broker_name: Option<String>,
    /// 0 = master.
    pub broker_id: Option<i64>,
    /// Listen address.
    pub listen: Option<String>,
    /// Address advertised to clients.
    pub advertised_addr: Option<String>,
    /// TLS on the broker's ports and dials (see [`BrokerFile::transport`]).
    pub tls: Option<TlsSettings>,
    /// Name server addresses.
    pub namesrv_addrs: Option<Vec<String>>,
    /// Data directory.
    pub data_dir: Option<String>,
    /// `sync` or `async`.
    pub flush_mode: Option<String>,
    /// Auto-create topics on first send.
    pub auto_create_topic: Option<bool>,
    /// CommitLog segment size.
    pub commit_log_segment_bytes: Option<u64>,
    /// Retention by age.
    pub file_reserved_hours: Option<u64>,
    /// `consumed` (default) or `force`: what disk pressure may delete early.
    pub disk_pressure_retention: Option<String>,
    /// Hash slots per index file.
    pub index_slots: Option<u32>,
    /// Entries per index file.
    pub index_entries: Option<u32>,
    /// How often the key index is synced (0: at every checkpoint).
    pub index_sync_interval_ms: Option<u64>,
    /// Log growth after which the key index is synced sooner (0: at every
    /// checkpoint).
    pub index_sync_lag_bytes: Option<u64>,
    /// Largest message body.
    pub body_bytes_max: Option<usize>,
    /// Also listen on port − 2.
    pub listen_vip: Option<bool>,
    /// Delay levels, e.g. `"1s 5s 10s"` (units s, m, h, d).
    pub delay_levels: Option<String>,
    /// Retries before a message goes to its group's DLQ.
    pub max_reconsume_times: Option<i32>,
    /// Orderly-consumption lock lifetime.
    pub lock_expiry_ms: Option<u64>,
    /// Age of an open half before it is checked back.
    pub transaction_timeout_ms: Option<u64>,
    /// Period of the transaction check.
    pub transaction_check_interval_ms: Option<u64>,
    /// Checks before an unanswered half is parked.
    pub transaction_check_max: Option<u32>,
    /// Serve SQL92 property filters (default `true`; RocketMQ's
    /// `enablePropertyFilter` defaults to `false`).
    pub enable_property_filter: Option<bool>,
    /// Create subscription groups on first use (default `true`).
    pub auto_create_subscription_group: Option<bool>,
    /// Timer-wheel slot width.
    pub timer_precision_ms: Option<u64>,
    /// Dedupe window of retried sends, in time (0: off).
    pub dedupe_window_ms: Option<u64>,
    /// Dedupe window of retried sends, in keys (0: off).
    pub dedupe_window_keys: Option<usize>,
    /// Producer lanes whose numbered sends are remembered (0: off).
    pub dedupe_producer_lanes: Option<usize>,
    /// Log span read on open to rebuild the producer lanes.
    pub dedupe_sequences_rebuild_ms: Option<u64>,
    /// How often the dedupe window is saved under load (0: never).
    pub dedupe_save_interval_ms: Option<u64>,
    /// Deadline for a frame once begun (0: none).
    pub frame_deadline_ms: Option<u64>,
    /// Idle time before a silent connection is closed (0: never).
    pub idle_timeout_ms: Option<u64>,
    /// Farthest ahead a timer message may be due.
    pub timer_max_delay_ms: Option<u64>,
    /// Timer log file size.
    pub timer_log_segment_bytes: Option<u64>,
    /// Replication with the rest of the broker group.
    pub replication: Option<ReplicationFile>,
    /// Access control.
    pub acl: Option<AclFile>,
    /// The HTTP port (`/metrics`, dashboard); `"off"`: none.
    pub metrics_listen: Option<String>,
    /// The RocketMQ 5 gRPC endpoint; `"off"`: none (absent: the broker
    /// port + 8).
    pub grpc_listen: Option<String>,
    /// Label sets per labelled metric family.
    pub metrics_series_cap: Option<usize>,
    /// Record figures on the hot path (false: only to measure the cost).
    pub stats: Option<bool>,
}

impl BrokerFile {
    /// Parses the TOML text.
    pub fn parse(text: &str) -> Result<Self> {
        toml::from_str(text).map_err(|e| Error::Config(e.to_string()))
    }

    /// The transport the `[tls]` table describes, its files loaded (plain
    /// TCP without the table).
    pub fn transport(&self) -> Result<TlsTransport> {
        let Some(tls) = &self.tls else {
            return Ok(TlsTransport::plain());
        };
        tls.transport()
            .map_err(|e| Error::Config(format!("[tls]: {e}")))
    }

    /// The transaction check-back and metrics settings onto `c`.
    fn apply_tuning(&self, c: &mut BrokerConfig) -> Result<()> {
        c.metrics_listen = self.metrics_listen.clone().filter(|l| l != "off");
        if let Some(v) = self.metrics_series_cap {
            c.metrics_series_cap = v.max(1);
        }
        if let Some(v) = self.stats {
            c.stats = v;
        }
        if let Some(v) = self.dedupe_window_ms {
            c.dedupe_window_ms = v;
        }
        if let Some(v) = self.dedupe_window_keys {
            c.dedupe_window_keys = v;
        }
        if let Some(v) = self.dedupe_producer_lanes {
            c.dedupe_producer_lanes = v;
        }
        if let Some(v) = self.dedupe_sequences_rebuild_ms {
            c.dedupe_sequences_rebuild_ms = v;
        }
        if let Some(v) = self.dedupe_save_interval_ms {
            c.dedupe_save_interval_ms = v;
        }
        if let Some(v) = self.frame_deadline_ms {
            c.frame_deadline_ms = v;
        }
        if let Some(v) = self.idle_timeout_ms {
            c.idle_timeout_ms = v;
        }
        if let Some(v) = self.transaction_timeout_ms {
            c.transaction_timeout_ms = v;
        }
        if let Some(v) = self.transaction_check_interval_ms {
            if v == 0 {
                return Err(Error::Config(
                    "transaction_check_interval_ms must be at least 1".into(),
                ));
            }
            c.transaction_check_interval_ms = v;
        }
        if let Some(v) = self.transaction_check_max {
            c.transaction_check_max = v;
        }
        Ok(())
    }

    /// The broker's names and addresses onto `c` (taken from the file).
    fn apply_identity(&mut self, c: &mut BrokerConfig) {
        if let Some(v) = self.cluster_name.take() {
            c.cluster_name = v;
        }
        if let Some(v) = self.broker_name.take() {
            c.broker_name = v;
        }
        if let Some(v) = self.broker_id {
            c.broker_id = v;
        }
        if let Some(v) = self.listen.take() {
            c.listen = v;
        }
        c.grpc_listen_defaulted = self.grpc_listen.is_none();
        c.grpc_listen = match self.grpc_listen.as_deref() {
            Some("off") => None,
            Some(v) => Some(v.to_owned()),
            None => Some(crate::grpc::default_listen(&c.listen)),
        };
        c.advertised_addr = self.advertised_addr.take();
        if let Some(v) = self.namesrv_addrs.take() {
            c.namesrv_addrs = v;
        }
    }

    /// The key index's geometry and sync cadence.
    fn apply_index(&self, store: &mut sluice_core::StoreConfig) -> Result<()> {
        for (name, value, slot) in [
            ("index_slots", self.index_slots, &mut store.index_slots),
            (
                "index_entries",
                self.index_entries,
                &mut store.index_entries,
            ),
        ] {
            if let Some(v) = value {
                if v == 0 {
                    return Err(Error::Config(format!("{name} must be at least 1")));
                }
                *slot = v;
            }
        }
        if let Some(v) = self.index_sync_interval_ms {
            store.index_sync_interval_ms = v;
        }
        if let Some(v) = self.index_sync_lag_bytes {
            store.index_sync_lag_bytes = v;
        }
        Ok(())
    }

    /// Applies the file over the defaults; returns the config and data dir.
    pub fn into_config(mut self) -> Result<(BrokerConfig, String)> {
        let mut c = BrokerConfig::default();
        self.apply_tuning(&mut c)?;
        self.apply_index(&mut c.store)?;
        self.apply_identity(&mut c);
        store_modes(self.flush_mode, self.disk_pressure_retention, &mut c.store)?;
        if let Some(v) = self.auto_create_topic {
            c.auto_create_topic = v;
        }
        if let Some(v) = self.commit_log_segment_bytes {
            if v < 64 * 1024 {
                return Err(Error::Config(
                    "commit_log_segment_bytes must be at least 65536".into(),
                ));
            }
            c.store.commit_log_segment_bytes = v;
        }
        if let Some(v) = self.file_reserved_hours {
            c.store.file_reserved_ms = v.saturating_mul(3_600_000);
        }
        if let Some(v) = self.body_bytes_max {
            c.store.body_bytes_max = v;
        }
        if let Some(v) = self.listen_vip {
            c.listen_vip = v;
        }
        if let Some(v) = self.delay_levels {
            c.delay_levels = v;
        }
        if let Some(v) = self.max_reconsume_times {
            c.max_reconsume_times = v;
        }
        if let Some(v) = self.lock_expiry_ms {
            c.lock_expiry_ms = v;
        }
        if let Some(v) = self.enable_property_filter {
            c.enable_property_filter = v;
        }
        if let Some(v) = self.auto_create_subscription_group {
            c.auto_create_subscription_group = v;
        }
        if let Some(v) = self.timer_precision_ms {
            c.timer_precision_ms = v;
        }
        if let Some(v) = self.timer_max_delay_ms {
            c.timer_max_delay_ms = v;
        }
        if let Some(v) = self.timer_log_segment_bytes {
            c.timer_log_segment_bytes = v;
        }
        crate::broker::timer::check_config(&c).map_err(Error::Config)?;
        if let Some(r) = self.replication {
            c.replication = Some(r.into_config()?);
        }
        apply_acl(self.acl, &mut c)?;
        let data_dir = self.data_dir.unwrap_or_else(|| "./sluice-data".to_owned());
        Ok((c, data_dir))
    }
}

/// Applies `flush_mode` and `disk_pressure_retention` when set.
fn store_modes(
    flush: Option<String>,
    pressure: Option<String>,
    store: &mut sluice_core::StoreConfig,
) -> Result<()> {
    if let Some(v) = flush {
        store.flush_mode = parse_flush_mode(&v)?;
    }
    if let Some(v) = pressure {
        store.disk_pressure_retention = match v.to_ascii_lowercase().as_str() {
            "consumed" => DiskPressureRetention::Consumed,
            "force" => DiskPressureRetention::Force,
            other => {
                return Err(Error::Config(format!(
                    "disk_pressure_retention must be consumed or force, not {other:?}"
                )))
            }
        };
    }
    Ok(())
}

/// `sync` / `async` (case-insensitive; RocketMQ's `SYNC_FLUSH` /
/// `ASYNC_FLUSH` also accepted).
pub fn parse_flush_mode(v: &str) -> Result<FlushMode> {
    match v.to_ascii_lowercase().as_str() {
        "sync" | "sync_flush" => Ok(FlushMode::Sync),
        "async" | "async_flush" => Ok(FlushMode::Async),
        other => Err(Error::Config(format!(
            "flush_mode must be sync or async, not {other:?}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_table_parses_its_keys_and_rejects_unknown_ones() {
        let f = BrokerFile::parse(
            "[tls]\nmode = \"permissive\"\ncert = \"c.pem\"\nkey = \"k.pem\"\nca = \"ca.pem\"\n",
        )
        .expect("parses");
        let tls = f.tls.expect("[tls] present");
        assert_eq!(tls.mode, sluice_net::TlsMode::Permissive);
        assert_eq!(tls.cert.as_deref(), Some(std::path::Path::new("c.pem")));
        assert!(tls.dials_tls(), "ca makes dials TLS");
        assert!(BrokerFile::parse("[tls]\nmode = \"strict\"\n").is_err());
        assert!(BrokerFile::parse("[tls]\ncertificate = \"c.pem\"\n").is_err());
        let missing = BrokerFile::parse("[tls]\nmode = \"enforcing\"\n").expect("parses");
        let err = missing
            .transport()
            .expect_err("enforcing needs cert and key");
        assert!(err.to_string().contains("[tls]"), "{err}");
        let plain = BrokerFile::default().transport().expect("no table: plain");
        assert_eq!(plain.mode(), sluice_net::TlsMode::Disabled);
    }

    #[test]
    fn dedupe_window_is_on_by_default_and_set_or_disabled_by_the_file() {
        let (c, _) = BrokerFile::parse("")
            .expect("parses")
            .into_config()
            .expect("valid");
        assert_eq!(
            (c.dedupe_window_ms, c.dedupe_window_keys),
            (600_000, 100_000)
        );
        let (c, _) = BrokerFile::parse("dedupe_window_ms = 0\ndedupe_window_keys = 7")
            .expect("parses")
            .into_config()
            .expect("valid");
        assert_eq!((c.dedupe_window_ms, c.dedupe_window_keys), (0, 7));
    }

    #[test]
    fn connection_deadlines_and_producer_lanes_come_from_the_file_zero_meaning_none() {
        let parse = |t: &str| BrokerFile::parse(t).and_then(BrokerFile::into_config);
        let (c, _) = parse("").expect("valid");
        assert_eq!(
            c.rpc().frame_deadline,
            Some(sluice_net::rpc::FRAME_DEADLINE)
        );
        assert_eq!(c.rpc().idle_timeout, Some(sluice_net::rpc::IDLE_TIMEOUT));
        assert_eq!(c.dedupe_producer_lanes, 10_000);
        let text = "frame_deadline_ms = 1500\nidle_timeout_ms = 0\ndedupe_producer_lanes = 3\n\
                    dedupe_sequences_rebuild_ms = 5";
        let (c, _) = parse(text).expect("valid");
        assert_eq!(
            c.rpc().frame_deadline,
            Some(std::time::Duration::from_millis(1_500))
        );
        assert_eq!(c.rpc().idle_timeout, None);
        assert_eq!(
            (c.dedupe_producer_lanes, c.dedupe_sequences_rebuild_ms),
            (3, 5)
        );
    }

    #[test]
    fn file_overrides_defaults_and_rejects_unknown_keys() {
        let f = BrokerFile::parse(
            "broker_name = \"b\"\nflush_mode = \"SYNC_FLUSH\"\nnamesrv_addrs = [\"h:1\"]",
        )
        .expect("parses");
        let (c, dir) = f.into_config().expect("valid");
        assert_eq!(c.broker_name, "b");
        assert_eq!(c.store.flush_mode, FlushMode::Sync);
        assert_eq!(c.namesrv_addrs, vec!["h:1".to_owned()]);
        assert_eq!(dir, "./sluice-data");
        assert_eq!(c.cluster_name, "DefaultCluster", "unset keys keep defaults");
        assert!(BrokerFile::parse("brokr_name = \"typo\"").is_err());
        let (c, _) = BrokerFile::parse(
            "delay_levels = \"1s 2s\"\nmax_reconsume_times = 3\nlock_expiry_ms = 500",
        )
        .expect("parses")
        .into_config()
        .expect("valid");
        assert_eq!(
            (
                c.delay_levels.as_str(),
                c.max_reconsume_times,
                c.lock_expiry_ms
            ),
            ("1s 2s", 3, 500)
        );
        let (c, _) = BrokerFile::parse("")
            .expect("parses")
            .into_config()
            .expect("valid");
        assert!(
            c.enable_property_filter && c.auto_create_subscription_group,
            "both on by default"
        );
        let (c, _) = BrokerFile::parse(
            "enable_property_filter = false\nauto_create_subscription_group = false",
        )
        .expect("parses")
        .into_config()
        .expect("valid");
        assert!(!c.enable_property_filter && !c.auto_create_subscription_group);
        let (c, _) = BrokerFile::parse("index_slots = 64\nindex_entries = 256")
            .expect("parses")
            .into_config()
            .expect("valid");
        assert_eq!((c.store.index_slots, c.store.index_entries), (64, 256));
        let (c, _) = BrokerFile::parse("index_sync_interval_ms = 0\nindex_sync_lag_bytes = 4096")
            .expect("parses")
            .into_config()
            .expect("valid");
        assert_eq!(
            (c.store.index_sync_interval_ms, c.store.index_sync_lag_bytes),
            (0, 4096)
        );
        assert!(BrokerFile::parse("index_slots = 0")
            .expect("parses")
            .into_config()
            .is_err());
        let (c, _) = BrokerFile::parse("timer_precision_ms = 100\ntimer_max_delay_ms = 60000")
            .expect("parses")
            .into_config()
            .expect("valid");
        assert_eq!((c.timer_precision_ms, c.timer_max_delay_ms), (100, 60_000));
        let err = BrokerFile::parse("file_reserved_hours = 1\ntimer_max_delay_ms = 3600001")
            .expect("parses")
            .into_config()
            .expect_err("a timer may not outlive the retention");
        assert!(err.to_string().contains("file_reserved_ms"), "{err}");
        let (c, _) = BrokerFile::parse("disk_pressure_retention = \"force\"")
            .expect("parses")
            .into_config()
            .expect("valid");
        assert_eq!(
            c.store.disk_pressure_retention,
            DiskPressureRetention::Force
        );
        assert!(BrokerFile::parse("disk_pressure_retention = \"always\"")
            .expect("parses")
            .into_config()
            .is_err());
        assert!(BrokerFile::parse("flush_mode = \"maybe\"")
            .expect("parses")
            .into_config()
            .is_err());
    }
}
