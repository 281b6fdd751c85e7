//! The ACL policy: accounts with their secrets, admin and broker flags,
//! address allow lists and per-topic / per-group permissions, read from
//! TOML (the broker file's `[acl]` table or a separate, reloadable file).
//! Names follow Apache's `plain_acl.yml` in snake case; a permission is
//! one of `DENY`, `PUB`, `SUB`, `PUB|SUB` (or `SUB|PUB`).

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;

use serde::Deserialize;

use crate::error::{Error, Result};

/// A permission, Apache's bits: `DENY` wins over everything, `ANY` needs
/// `PUB` or `SUB`, otherwise the needed bit must be owned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Perm(u8);

impl Perm {
    /// Nothing allowed.
    pub const DENY: Perm = Perm(1);
    /// Either publish or subscribe (a need, never owned).
    pub const ANY: Perm = Perm(1 << 1);
    /// Publish.
    pub const PUB: Perm = Perm(1 << 2);
    /// Subscribe.
    pub const SUB: Perm = Perm(1 << 3);
    /// Publish and subscribe.
    pub const PUB_SUB: Perm = Perm((1 << 2) | (1 << 3));

    /// Parses `DENY`, `PUB`, `SUB`, `PUB|SUB` or `SUB|PUB`.
    pub fn parse(text: &str) -> Result<Perm> {
        match text.trim() {
            "DENY" => Ok(Self::DENY),
            "PUB" => Ok(Self::PUB),
            "SUB" => Ok(Self::SUB),
            "PUB|SUB" | "SUB|PUB" => Ok(Self::PUB_SUB),
            other => Err(Error::Config(format!(
                "acl: permission {other:?} is not one of DENY, PUB, SUB, PUB|SUB"
            ))),
        }
    }

    /// True when owning `self` grants `needed`.
    pub fn grants(self, needed: Perm) -> bool {
        if self.0 & Self::DENY.0 != 0 {
            return false;
        }
        if needed.0 & Self::ANY.0 != 0 {
            return self.0 & Self::PUB_SUB.0 != 0;
        }
        needed.0 & self.0 != 0
    }
}

impl fmt::Display for Perm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match *self {
            Self::DENY => "DENY",
            Self::PUB => "PUB",
            Self::SUB => "SUB",
            _ => "PUB|SUB",
        })
    }
}

/// An IPv4 or IPv6 network in CIDR form (`10.0.0.0/8`, `::1/128`); a bare
/// address is a /32 (or /128).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AddressRange {
    network: IpAddr,
    prefix_bits: u8,
}

impl AddressRange {
    /// Parses `addr` or `addr/bits`.
    pub fn parse(text: &str) -> Result<Self> {
        let bad = || Error::Config(format!("acl: {text:?} is not an address or CIDR range"));
        let (addr, bits) = match text.trim().split_once('/') {
            Some((addr, bits)) => (addr, Some(bits.parse::<u8>().map_err(|_| bad())?)),
            None => (text.trim(), None),
        };
        let network: IpAddr = addr.parse().map_err(|_| bad())?;
        let max = if network.is_ipv4() { 32 } else { 128 };
        let prefix_bits = bits.unwrap_or(max);
        if prefix_bits > max {
            return Err(bad());
        }
        Ok(Self {
            network,
            prefix_bits,
        })
    }

    /// True when `addr` lies in the range (an IPv4-mapped IPv6 address
    /// matches its IPv4 range).
    pub fn contains(&self, addr: IpAddr) -> bool {
        let addr = match addr {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(addr, IpAddr::V4),
            v4 @ IpAddr::V4(_) => v4,
        };
        match (self.network, addr) {
            (IpAddr::V4(net), IpAddr::V4(a)) => {
                prefix_eq(&net.octets(), &a.octets(), self.prefix_bits)
            }
            (IpAddr::V6(net), IpAddr::V6(a)) => {
                prefix_eq(&net.octets(), &a.octets(), self.prefix_bits)
            }
            _ => false,
        }
    }
}

impl fmt::Display for AddressRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix_bits)
    }
}

fn prefix_eq(a: &[u8], b: &[u8], bits: u8) -> bool {
    let bits = usize::from(bits);
    let whole = bits / 8;
    if a[..whole] != b[..whole] {
        return false;
    }
    let rest = bits % 8;
    if rest == 0 {
        return true;
    }
    let mask = 0xffu8 << (8 - rest);
    a[whole] & mask == b[whole] & mask
}

/// One account.
#[derive(Clone, Debug)]
pub struct Account {
    /// The access key clients send.
    pub access_key: String,
    /// The secret it signs with.
    pub secret_key: String,
    /// May use admin request codes (topic and group create/delete, offset
    /// reset, broker config, other groups' stats, name-server KV writes).
    pub admin: bool,
    /// May register and unregister brokers with a name server.
    pub broker: bool,
    /// Addresses the key may be used from (empty: anywhere).
    pub allow_addresses: Vec<AddressRange>,
    /// Permission on topics not listed in `topic_perms`.
    pub default_topic_perm: Perm,
    /// Permission on groups not listed in `group_perms`.
    pub default_group_perm: Perm,
    /// Per-topic permissions.
    pub topic_perms: BTreeMap<String, Perm>,
    /// Per-group permissions (a group's retry topic follows them).
    pub group_perms: BTreeMap<String, Perm>,
}

/// Every account, and the addresses trusted without a signature.
#[derive(Clone, Debug, Default)]
pub struct Policy {
    /// Accounts by access key.
    pub accounts: BTreeMap<String, Account>,
    /// Hosts whose requests pass unsigned (Apache's
    /// `globalWhiteRemoteAddresses`).
    pub global_allow_addresses: Vec<AddressRange>,
}

/// The TOML form of one account.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccountFile {
    access_key: String,
    secret_key: String,
    #[serde(default)]
    admin: bool,
    #[serde(default)]
    broker: bool,
    #[serde(default)]
    allow_addresses: Vec<String>,
    default_topic_perm: Option<String>,
    default_group_perm: Option<String>,
    #[serde(default)]
    topic_perms: BTreeMap<String, String>,
    #[serde(default)]
    group_perms: BTreeMap<String, String>,
}

/// The TOML form of a policy: the reloadable file, and the account keys
/// of the broker file's `[acl]` table.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyFile {
    /// Trusted hosts.
    #[serde(default)]
    pub global_allow_addresses: Vec<String>,
    /// Accounts.
    #[serde(default)]
    pub accounts: Vec<AccountFile>,
}

/// Shortest secret accepted (Apache: longer than 6 characters).
pub const SECRET_KEY_LEN_MIN: usize = 7;

impl PolicyFile {
    /// Parses a policy file's TOML text.
    pub fn parse(text: &str) -> Result<Self> {
        toml::from_str(text).map_err(|e| Error::Config(format!("acl file: {e}")))
    }

    /// Adds this file's addresses and accounts to `policy`; a repeated
    /// access key is an error.
    pub fn add_to(self, policy: &mut Policy) -> Result<()> {
        for a in &self.global_allow_addresses {
            policy.global_allow_addresses.push(AddressRange::parse(a)?);
        }
        for a in self.accounts {
            let account = a.into_account()?;
            let key = account.access_key.clone();
            if policy.accounts.insert(key.clone(), account).is_some() {
                return Err(Error::Config(format!(
                    "acl: access key {key:?} is defined twice"
                )));
            }
        }
        Ok(())
    }
}

impl AccountFile {
    fn into_account(self) -> Result<Account> {
        if self.access_key.is_empty() {
            return Err(Error::Config(
                "acl: an account has an empty access_key".into(),
            ));
        }
        if self.secret_key.chars().count() < SECRET_KEY_LEN_MIN {
            return Err(Error::Config(format!(
                "acl: the secret of {:?} must be at least {SECRET_KEY_LEN_MIN} characters",
                self.access_key
            )));
        }
        let perms = |m: BTreeMap<String, String>| -> Result<BTreeMap<String, Perm>> {
            m.into_iter()
                .map(|(k, v)| Ok((k, Perm::parse(&v)?)))
                .collect()
        };
        let default = |p: Option<String>| p.as_deref().map_or(Ok(Perm::DENY), Perm::parse);
        Ok(Account {
            allow_addresses: self
                .allow_addresses
                .iter()
                .map(|a| AddressRange::parse(a))
                .collect::<Result<_>>()?,
            default_topic_perm: default(self.default_topic_perm)?,
            default_group_perm: default(self.default_group_perm)?,
            topic_perms: perms(self.topic_perms)?,
            group_perms: perms(self.group_perms)?,
            access_key: self.access_key,
            secret_key: self.secret_key,
            admin: self.admin,
            broker: self.broker,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permissions_follow_apache_bits() {
        assert!(Perm::PUB_SUB.grants(Perm::PUB) && Perm::PUB_SUB.grants(Perm::SUB));
        assert!(Perm::SUB.grants(Perm::SUB) && !Perm::SUB.grants(Perm::PUB));
        assert!(!Perm::DENY.grants(Perm::SUB) && !Perm::DENY.grants(Perm::ANY));
        assert!(Perm::PUB.grants(Perm::ANY));
        assert_eq!(Perm::parse("SUB|PUB").expect("valid"), Perm::PUB_SUB);
        assert!(Perm::parse("READ").is_err());
    }

    #[test]
    fn address_ranges_match_by_prefix() {
        let r = AddressRange::parse("10.1.0.0/16").expect("valid");
        assert!(r.contains("10.1.200.3".parse().expect("ip")));
        assert!(!r.contains("10.2.0.1".parse().expect("ip")));
        assert!(
            r.contains("::ffff:10.1.0.9".parse().expect("ip")),
            "v4-mapped"
        );
        let one = AddressRange::parse("192.168.1.7").expect("valid");
        assert!(one.contains("192.168.1.7".parse().expect("ip")));
        assert!(!one.contains("192.168.1.8".parse().expect("ip")));
        let odd = AddressRange::parse("172.16.0.0/12").expect("valid");
        assert!(odd.contains("172.31.255.255".parse().expect("ip")));
        assert!(!odd.contains("172.32.0.0".parse().expect("ip")));
        assert!(AddressRange::parse("::1/128")
            .expect("valid")
            .contains("::1".parse().expect("ip")));
        assert!(AddressRange::parse("10.0.0.0/33").is_err());
        assert!(AddressRange::parse("ten.0.0.0/8").is_err());
    }

    #[test]
    fn policy_file_parses_accounts_and_rejects_nonsense() {
        let f = PolicyFile::parse(
            r#"
global_allow_addresses = ["10.0.0.0/8"]
[[accounts]]
access_key = "alice"
secret_key = "alice-secret"
default_topic_perm = "SUB"
topic_perms = { Orders = "PUB|SUB", Secret = "DENY" }
group_perms = { billing = "SUB" }
[[accounts]]
access_key = "root"
secret_key = "root-secret"
admin = true
"#,
        )
        .expect("parses");
        let mut p = Policy::default();
        f.add_to(&mut p).expect("valid");
        let alice = &p.accounts["alice"];
        assert_eq!(alice.default_topic_perm, Perm::SUB);
        assert_eq!(alice.default_group_perm, Perm::DENY, "Apache's default");
        assert_eq!(alice.topic_perms["Secret"], Perm::DENY);
        assert!(p.accounts["root"].admin && !alice.admin);
        assert_eq!(p.global_allow_addresses.len(), 1);
        let short = PolicyFile::parse("[[accounts]]\naccess_key = \"a\"\nsecret_key = \"short\"\n")
            .expect("parses");
        assert!(short.add_to(&mut Policy::default()).is_err());
        assert!(
            PolicyFile::parse("[[accounts]]\naccess_key = \"a\"\nsecrte_key = \"x\"\n").is_err()
        );
        let twice = PolicyFile::parse(
            "[[accounts]]\naccess_key = \"a\"\nsecret_key = \"1234567\"\n[[accounts]]\naccess_key = \"a\"\nsecret_key = \"1234567\"\n",
        )
        .expect("parses");
        assert!(twice.add_to(&mut Policy::default()).is_err());
    }
}
