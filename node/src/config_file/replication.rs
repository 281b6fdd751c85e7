//! The broker file's `[replication]` table: the group's mode, ports,
//! controllers and timings, and the group and cluster secrets (inline or
//! from a file, never both).

use std::path::Path;

use serde::Deserialize;

use crate::broker::{ReplicationConfig, ReplicationMode};
use crate::error::{Error, Result};
use crate::peer_auth::{process_salt, SharedSecret};

/// The `[replication]` table; absent fields keep their defaults.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplicationFile {
    /// `sync` or `async`.
    pub mode: Option<String>,
    /// HA listen address.
    pub ha_listen: Option<String>,
    /// HA address replicas dial.
    pub ha_advertised: Option<String>,
    /// Fixed roles: a replica's master HA address.
    pub master_ha_addr: Option<String>,
    /// Controllers (automatic failover).
    pub controller_addrs: Option<Vec<String>>,
    /// Copies a SYNC send needs, the master's included.
    pub min_in_sync: Option<usize>,
    /// Longest a SYNC send waits for the in-sync set.
    pub ack_timeout_ms: Option<u64>,
    /// A replica not caught up this long leaves the in-sync set.
    pub not_caught_up_ms: Option<u64>,
    /// Heartbeat period to the controllers.
    pub controller_heartbeat_ms: Option<u64>,
    /// The group's shared secret, inline.
    pub group_secret: Option<String>,
    /// A file holding the group's shared secret.
    pub group_secret_file: Option<String>,
    /// The controllers' cluster secret, inline.
    pub controller_secret: Option<String>,
    /// A file holding the controllers' cluster secret.
    pub controller_secret_file: Option<String>,
}

/// A secret from an inline value or a file (not both), salted for this
/// process.
fn secret(what: &str, value: Option<&str>, file: Option<&str>) -> Result<Option<SharedSecret>> {
    Ok(
        SharedSecret::from_value_or_file(what, value, file.map(Path::new))?
            .map(|s| s.salted(process_salt())),
    )
}

impl ReplicationFile {
    pub(super) fn into_config(self) -> Result<ReplicationConfig> {
        let mut r = ReplicationConfig::default();
        if let Some(v) = self.mode {
            r.mode = match v.to_ascii_lowercase().as_str() {
                "sync" | "sync_master" => ReplicationMode::Sync,
                "async" | "async_master" => ReplicationMode::Async,
                other => {
                    return Err(Error::Config(format!(
                        "replication.mode must be sync or async, not {other:?}"
                    )))
                }
            };
        }
        r.group_secret = secret(
            "replication.group_secret",
            self.group_secret.as_deref(),
            self.group_secret_file.as_deref(),
        )?;
        r.controller_secret = secret(
            "replication.controller_secret",
            self.controller_secret.as_deref(),
            self.controller_secret_file.as_deref(),
        )?;
        r.ha_listen = self.ha_listen;
        r.ha_advertised = self.ha_advertised;
        r.master_ha_addr = self.master_ha_addr;
        if let Some(v) = self.controller_addrs {
            r.controller_addrs = v;
        }
        if let Some(v) = self.min_in_sync {
            if v == 0 {
                return Err(Error::Config(
                    "replication.min_in_sync must be at least 1".into(),
                ));
            }
            r.min_in_sync = v;
        }
        if let Some(v) = self.ack_timeout_ms {
            r.ack_timeout_ms = v;
        }
        if let Some(v) = self.not_caught_up_ms {
            r.not_caught_up_ms = v;
        }
        if let Some(v) = self.controller_heartbeat_ms {
            r.controller_heartbeat_ms = v.max(10);
        }
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::super::BrokerFile;
    use super::*;

    #[test]
    fn replication_table_configures_the_group_and_rejects_nonsense() {
        let f = BrokerFile::parse(
            "broker_id = 2\n[replication]\nmode = \"SYNC_MASTER\"\ncontroller_addrs = [\"c:9878\"]\nmin_in_sync = 3\n",
        )
        .expect("parses");
        let (c, _) = f.into_config().expect("valid");
        let r = c.replication.expect("replication on");
        assert_eq!(r.mode, ReplicationMode::Sync);
        assert_eq!(r.controller_addrs, vec!["c:9878".to_owned()]);
        assert_eq!(r.min_in_sync, 3);
        assert!(BrokerFile::default()
            .into_config()
            .expect("ok")
            .0
            .replication
            .is_none());
        let bad = BrokerFile::parse("[replication]\nmode = \"sometimes\"\n").expect("parses");
        assert!(bad.into_config().is_err());
        assert!(BrokerFile::parse("[replication]\nmood = \"sync\"\n").is_err());
    }

    #[test]
    fn replication_secrets_come_inline_or_from_a_file_never_both() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("cluster.secret");
        std::fs::write(&path, "cluster-secret-0123456789\n").expect("write");
        let toml = format!(
            "[replication]\ngroup_secret = \"group-secret-0123456789\"\n\
             controller_secret_file = {:?}\n",
            path.display().to_string()
        );
        let (c, _) = BrokerFile::parse(&toml)
            .expect("parses")
            .into_config()
            .expect("valid");
        let r = c.replication.expect("replication on");
        let group = SharedSecret::new("group-secret-0123456789").expect("secret");
        let cluster = SharedSecret::new("cluster-secret-0123456789").expect("secret");
        let salt = |s: &SharedSecret| s.clone().salted(0);
        assert_eq!(r.group_secret.as_ref().map(salt), Some(group));
        assert_eq!(r.controller_secret.as_ref().map(salt), Some(cluster));
        let both = format!("{toml}controller_secret = \"cluster-secret-0123456789\"\n");
        let both = BrokerFile::parse(&both).expect("parses");
        assert!(both.into_config().is_err(), "a secret and a file");
        let short = BrokerFile::parse("[replication]\ngroup_secret = \"short\"\n").expect("parses");
        assert!(short.into_config().is_err(), "a short secret");
    }
}
