//! The broker file's `[acl]` table: access control for the broker's ports
//! and the broker's own credentials for its calls to name servers.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use serde::Deserialize;
use sluice_net::Credentials;

use crate::acl::{self, Acl, AclMode, Policy, PolicyFile};
use crate::broker::BrokerConfig;
use crate::error::{Error, Result};

/// The `[acl]` table.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AclFile {
    /// `off`, `permissive` or `enforcing` (default `enforcing` when the
    /// table is present).
    pub mode: Option<String>,
    /// A policy file (the same keys as this table's accounts), reloadable.
    pub file: Option<String>,
    /// The broker's own access key, for its calls to name servers.
    pub access_key: Option<String>,
    /// Its secret.
    pub secret_key: Option<String>,
    /// Trusted hosts.
    #[serde(default)]
    pub global_allow_addresses: Vec<String>,
    /// Accounts.
    #[serde(default)]
    pub accounts: Vec<acl::AccountFile>,
}

/// Access control as configured: `None` when off.
pub struct AclSetup {
    /// The server-side check.
    pub acl: Option<Arc<Acl>>,
    /// The broker's own credentials.
    pub credentials: Option<Credentials>,
}

/// Parses an ACL mode: `off` is `None`.
pub fn parse_acl_mode(v: &str) -> Result<Option<AclMode>> {
    match v.to_ascii_lowercase().as_str() {
        "off" | "disabled" => Ok(None),
        "permissive" => Ok(Some(AclMode::Permissive)),
        "enforcing" | "on" => Ok(Some(AclMode::Enforcing)),
        other => Err(Error::Config(format!(
            "acl.mode must be off, permissive or enforcing, not {other:?}"
        ))),
    }
}

impl AclFile {
    /// Builds the check (loading the policy file now) and the credentials.
    pub fn into_setup(self) -> Result<AclSetup> {
        let mode = parse_acl_mode(self.mode.as_deref().unwrap_or("enforcing"))?;
        let credentials = match (self.access_key, self.secret_key) {
            (Some(ak), Some(sk)) => Some(Credentials::new(ak, sk)),
            (None, None) => None,
            _ => {
                return Err(Error::Config(
                    "acl.access_key and acl.secret_key go together".into(),
                ))
            }
        };
        let Some(mode) = mode else {
            return Ok(AclSetup {
                acl: None,
                credentials,
            });
        };
        let mut inline = Policy::default();
        PolicyFile {
            global_allow_addresses: self.global_allow_addresses,
            accounts: self.accounts,
        }
        .add_to(&mut inline)?;
        let source = acl::Source {
            inline,
            file: self.file.map(PathBuf::from),
        };
        let acl = Acl::load(mode, source)?;
        if acl.policy().accounts.is_empty() && acl.policy().global_allow_addresses.is_empty() {
            tracing::warn!("ACL is on with no accounts: every request will be refused");
        }
        Ok(AclSetup {
            acl: Some(Arc::new(acl)),
            credentials,
        })
    }
}

/// Fails when `listen` is reachable beyond this host and access control
/// was not configured at all: Sluice is open only on loopback by default.
pub fn require_acl_beyond_loopback(listen: &str, configured: bool, what: &str) -> Result<()> {
    if configured {
        return Ok(());
    }
    let loopback = match listen.parse::<SocketAddr>() {
        Ok(addr) => addr.ip().is_loopback(),
        Err(_) => listen.starts_with("localhost:"),
    };
    if loopback {
        return Ok(());
    }
    Err(Error::Config(format!(
        "{what} listens on {listen}, beyond loopback, with no access control: configure \
         ACL (an [acl] table, or --acl-file), or say mode = \"off\" (--acl-mode off) to run it open"
    )))
}

/// The `[acl]` table onto `c`; without one, `c` must listen on loopback.
pub(super) fn apply_acl(acl: Option<AclFile>, c: &mut BrokerConfig) -> Result<()> {
    require_acl_beyond_loopback(&c.listen, acl.is_some(), "the broker")?;
    if let Some(a) = acl {
        let setup = a.into_setup()?;
        c.acl = setup.acl;
        c.credentials = setup.credentials;
    }
    Ok(())
}
