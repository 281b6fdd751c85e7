//! Access control for the broker and the name server, compatible with the
//! credentials RocketMQ 4.x clients send (ACL 1.0, see `sluice_net::auth`).
//! [`Acl::check`] runs before any handler (a guard in the request table):
//! it verifies the signature in constant time, the key's address allow
//! list, the role a request code needs and the permissions on the topics
//! and groups it names. A refused request reaches no handler, so nothing
//! is written for it; it is answered `NO_PERMISSION` with a remark naming
//! the key, the resource and the permission missing (never a secret), is
//! counted, and is logged at most once per key per minute. `permissive`
//! mode checks, counts and logs the same but lets the request through.
//!
//! The policy is swapped whole on reload ([`Acl::replace_policy`]), so a
//! request sees one consistent policy.

mod policy;
mod resource;

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use sluice_net::auth;
use sluice_net::remoting::response_code;
use sluice_net::RemotingCommand;

pub use policy::{
    Account, AccountFile, AddressRange, Perm, Policy, PolicyFile, SECRET_KEY_LEN_MIN,
};
pub use resource::{needs, Needs, Resource, Role, Server};

use crate::dispatch::Refusal;
use crate::error::{Error, Result};

/// How refusals are enforced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AclMode {
    /// Check and log, never refuse: for turning ACL on across a cluster
    /// before enforcing it.
    Permissive,
    /// Refuse what the policy does not allow.
    Enforcing,
}

/// Distinct keys remembered for log rate limiting; past it the memory is
/// cleared (a flood of random keys then logs at most this many lines a
/// minute).
const LOGGED_KEYS_MAX: usize = 1_024;
/// One log line per key per this long.
const LOG_INTERVAL: Duration = Duration::from_secs(60);

/// A server's access control: its mode, its current policy and its
/// refusal counters. Shared by the request table and the reloader.
pub struct Acl {
    mode: AclMode,
    policy: RwLock<Arc<Policy>>,
    source: Source,
    refused: AtomicU64,
    would_refuse: AtomicU64,
    logged: Mutex<BTreeMap<String, Duration>>,
}

/// Where a policy comes from: accounts given inline (not reloadable) and
/// an optional file re-read by [`Acl::reload`].
#[derive(Clone, Debug, Default)]
pub struct Source {
    /// Accounts and addresses from the server's own configuration.
    pub inline: Policy,
    /// The reloadable policy file.
    pub file: Option<PathBuf>,
}

impl Source {
    /// The inline policy with the file's accounts added.
    pub fn load(&self) -> Result<Policy> {
        let mut policy = self.inline.clone();
        if let Some(path) = &self.file {
            let text = std::fs::read_to_string(path)
                .map_err(|e| Error::Config(format!("acl file {}: {e}", path.display())))?;
            PolicyFile::parse(&text)?.add_to(&mut policy)?;
        }
        Ok(policy)
    }
}

/// Why a request was not allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// The access key it claimed (`None`: unsigned).
    pub access_key: Option<String>,
    /// The remark the client is answered with.
    pub remark: String,
}

impl std::fmt::Debug for Acl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Acl")
            .field("mode", &self.mode)
            .field("accounts", &self.policy().accounts.len())
            .field("refused", &self.refused())
            .finish_non_exhaustive()
    }
}

impl Acl {
    /// Access control in `mode` over `policy`, with nothing to reload.
    pub fn new(mode: AclMode, policy: Policy) -> Self {
        let source = Source {
            inline: policy,
            file: None,
        };
        Self::build(mode, source.inline.clone(), source)
    }

    /// Access control in `mode` over the policy `source` loads now; fails
    /// on an unreadable or invalid file.
    pub fn load(mode: AclMode, source: Source) -> Result<Self> {
        let policy = source.load()?;
        Ok(Self::build(mode, policy, source))
    }

    /// Re-reads the policy file and puts the result in force; on an error
    /// the old policy stays. Returns the number of accounts now in force.
    pub fn reload(&self) -> Result<usize> {
        let policy = self.source.load()?;
        let accounts = policy.accounts.len();
        self.replace_policy(policy);
        Ok(accounts)
    }

    /// The reloadable policy file, if any.
    pub fn file(&self) -> Option<&Path> {
        self.source.file.as_deref()
    }

    fn build(mode: AclMode, policy: Policy, source: Source) -> Self {
        Self {
            mode,
            policy: RwLock::new(Arc::new(policy)),
            source,
            refused: AtomicU64::new(0),
            would_refuse: AtomicU64::new(0),
            logged: Mutex::new(BTreeMap::new()),
        }
    }

    /// The mode.
    pub fn mode(&self) -> AclMode {
        self.mode
    }

    /// The policy in force.
    pub fn policy(&self) -> Arc<Policy> {
        Arc::clone(&self.policy.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// Puts `policy` in force for every later request.
    pub fn replace_policy(&self, policy: Policy) {
        *self.policy.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(policy);
    }

    /// Requests refused so far (enforcing mode).
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// Requests that would have been refused (permissive mode).
    pub fn would_refuse(&self) -> u64 {
        self.would_refuse.load(Ordering::Relaxed)
    }

    /// The guard: `Ok` lets `request` from `peer` reach its handler on
    /// `server`; `now` (the server's monotonic clock) paces the log.
    pub fn check(
        &self,
        server: Server,
        peer: IpAddr,
        request: &RemotingCommand,
        now: Duration,
    ) -> std::result::Result<(), Refusal> {
        let Err(denial) = self.decide(server, peer, request) else {
            return Ok(());
        };
        let counter = match self.mode {
            AclMode::Enforcing => &self.refused,
            AclMode::Permissive => &self.would_refuse,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        let _ = self.log(&denial, peer, request.code, now);
        match self.mode {
            AclMode::Enforcing => Err(Refusal::new(response_code::NO_PERMISSION, denial.remark)),
            AclMode::Permissive => Ok(()),
        }
    }

    /// The policy's verdict on `request` from `peer`, without counting or
    /// logging (the `sluice acl` check uses it too).
    pub fn decide(
        &self,
        server: Server,
        peer: IpAddr,
        request: &RemotingCommand,
    ) -> std::result::Result<(), Denial> {
        if resource::role(server, request.code) == Role::Open {
            return Ok(());
        }
        let policy = self.policy();
        if allowed_everywhere(&policy, peer) {
            return Ok(());
        }
        let deny = |key: Option<&str>, remark: String| Denial {
            access_key: key.map(str::to_owned),
            remark,
        };
        let Some(key) = request
            .ext_fields
            .get(auth::ACCESS_KEY)
            .filter(|k| !k.is_empty())
        else {
            return Err(deny(
                None,
                "[ACL] no AccessKey: this server accepts only signed requests".to_owned(),
            ));
        };
        let Some(account) = policy.accounts.get(key) else {
            return Err(deny(
                Some(key),
                format!("[ACL] No acl config for accessKey={key}"),
            ));
        };
        if !auth::verify(account.secret_key.as_bytes(), request) {
            return Err(deny(
                Some(key),
                format!("[ACL] Check signature failed for accessKey={key}"),
            ));
        }
        permitted_for(account, peer, request, server).map_err(|remark| deny(Some(key), remark))
    }

    /// The policy's verdict on `request` from `peer` made by account `key`
    /// that another protocol already authenticated (the 5.x endpoint
    /// checks its own signatures, then asks what the equivalent remoting
    /// request may do).
    pub fn decide_authenticated(
        &self,
        server: Server,
        peer: IpAddr,
        key: &str,
        request: &RemotingCommand,
    ) -> std::result::Result<(), Denial> {
        if resource::role(server, request.code) == Role::Open {
            return Ok(());
        }
        let deny = |remark: String| Denial {
            access_key: Some(key.to_owned()),
            remark,
        };
        let policy = self.policy();
        if allowed_everywhere(&policy, peer) {
            return Ok(());
        }
        let account = policy
            .accounts
            .get(key)
            .ok_or_else(|| deny(format!("[ACL] No acl config for accessKey={key}")))?;
        permitted_for(account, peer, request, server).map_err(deny)
    }

    /// Logs a refusal unless the same key was logged within the last
    /// minute; true when it logged.
    fn log(&self, denial: &Denial, peer: IpAddr, code: i32, now: Duration) -> bool {
        let who = denial
            .access_key
            .clone()
            .unwrap_or_else(|| format!("unsigned@{peer}"));
        let mut logged = self.logged.lock().unwrap_or_else(PoisonError::into_inner);
        if logged
            .get(&who)
            .is_some_and(|at| now.saturating_sub(*at) < LOG_INTERVAL)
        {
            return false;
        }
        if logged.len() >= LOGGED_KEYS_MAX {
            logged.clear();
        }
        logged.insert(who.clone(), now);
        drop(logged);
        let verdict = match self.mode {
            AclMode::Enforcing => "refused",
            AclMode::Permissive => "would be refused (permissive mode)",
        };
        tracing::warn!(
            key = %who,
            %peer,
            code,
            reason = %denial.remark,
            "request {verdict} by ACL (logged once a minute per key)"
        );
        true
    }
}

/// Whether `peer` is trusted without a signature (Apache's
/// `globalWhiteRemoteAddresses`).
fn allowed_everywhere(policy: &Policy, peer: IpAddr) -> bool {
    policy
        .global_allow_addresses
        .iter()
        .any(|r| r.contains(peer))
}

/// Whether `account` may send `request` from `peer` to `server`: its
/// address list, then the permissions the request needs.
fn permitted_for(
    account: &Account,
    peer: IpAddr,
    request: &RemotingCommand,
    server: Server,
) -> std::result::Result<(), String> {
    let key = &account.access_key;
    if !account.allow_addresses.is_empty()
        && !account.allow_addresses.iter().any(|r| r.contains(peer))
    {
        return Err(format!("[ACL] accessKey={key} may not be used from {peer}"));
    }
    let needs = needs(server, request).map_err(|e| format!("[ACL] {e}"))?;
    permitted(account, request.code, &needs)
}

/// What one access key may do on a topic and a group (`sluice acl check`).
#[derive(Debug)]
pub struct KeyReport {
    /// The account, if the key is known.
    pub account: Option<Account>,
    /// Each permission asked about, allowed or the refusal's remark.
    pub checks: Vec<(Resource, Perm, std::result::Result<(), String>)>,
}

impl Acl {
    /// What `access_key` may do: publish and subscribe on `topic`,
    /// subscribe on `group`, under the policy in force.
    pub fn report(&self, access_key: &str, topic: Option<&str>, group: Option<&str>) -> KeyReport {
        let policy = self.policy();
        let Some(account) = policy.accounts.get(access_key) else {
            return KeyReport {
                account: None,
                checks: Vec::new(),
            };
        };
        let mut asked = Vec::new();
        if let Some(t) = topic {
            asked.push((Resource::topic(t), Perm::PUB));
            asked.push((Resource::topic(t), Perm::SUB));
        }
        if let Some(g) = group {
            asked.push((Resource::Group(g.to_owned()), Perm::SUB));
        }
        let checks = asked
            .into_iter()
            .map(|(resource, perm)| {
                let needs = Needs {
                    role: Role::Any,
                    resources: vec![(resource.clone(), perm)],
                };
                let verdict = permitted(account, 0, &needs);
                (resource, perm, verdict)
            })
            .collect();
        KeyReport {
            account: Some(account.clone()),
            checks,
        }
    }
}

/// Whether `account` may make a request with `code` that `needs` this.
fn permitted(account: &Account, code: i32, needs: &Needs) -> std::result::Result<(), String> {
    let key = &account.access_key;
    match needs.role {
        Role::Admin if !account.admin => {
            return Err(format!(
                "[ACL] Need admin permission for request code={code}, but accessKey={key} is not"
            ));
        }
        Role::Broker if !(account.broker || account.admin) => {
            return Err(format!(
                "[ACL] Need a broker credential for request code={code}, but accessKey={key} is not one"
            ));
        }
        _ => {}
    }
    for (resource, needed) in &needs.resources {
        let owned = match resource {
            Resource::Topic(t) => account
                .topic_perms
                .get(t)
                .copied()
                .unwrap_or(account.default_topic_perm),
            Resource::Group(g) => account
                .group_perms
                .get(g)
                .copied()
                .unwrap_or(account.default_group_perm),
        };
        if !owned.grants(*needed) {
            return Err(format!(
                "[ACL] No permission for {resource}: accessKey={key} needs {needed}, has {owned}"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use sluice_net::remoting::request_code as rc;
    use sluice_net::Credentials;

    use super::*;

    fn acl(mode: AclMode) -> Acl {
        let mut policy = Policy::default();
        PolicyFile::parse(
            r#"
global_allow_addresses = ["10.9.0.0/16"]
[[accounts]]
access_key = "alice"
secret_key = "alice-secret"
default_topic_perm = "SUB"
default_group_perm = "SUB"
topic_perms = { Orders = "PUB|SUB" }
[[accounts]]
access_key = "office"
secret_key = "office-secret"
allow_addresses = ["192.168.0.0/24"]
default_topic_perm = "PUB|SUB"
"#,
        )
        .expect("parses")
        .add_to(&mut policy)
        .expect("valid");
        Acl::new(mode, policy)
    }

    fn send(topic: &str) -> RemotingCommand {
        let mut r = RemotingCommand::request(rc::SEND_MESSAGE_V2).with_body(&b"x"[..]);
        r.ext_fields.insert("a", "P");
        r.ext_fields.insert("b", topic);
        r
    }

    fn signed(mut r: RemotingCommand, key: &str, secret: &str) -> RemotingCommand {
        Credentials::new(key, secret).sign(&mut r);
        r
    }

    const HOME: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

    #[test]
    fn enforcing_refuses_and_counts_what_the_policy_does_not_allow() {
        let acl = acl(AclMode::Enforcing);
        let ok = signed(send("Orders"), "alice", "alice-secret");
        assert!(acl.check(Server::Broker, HOME, &ok, Duration::ZERO).is_ok());
        let cases = [
            (send("Orders"), "no AccessKey"),
            (
                signed(send("Orders"), "alice", "wrong-secret"),
                "Check signature failed for accessKey=alice",
            ),
            (
                signed(send("Orders"), "mallory", "whatever1"),
                "No acl config for accessKey=mallory",
            ),
            (
                signed(send("Other"), "alice", "alice-secret"),
                "No permission for topic Other: accessKey=alice needs PUB, has SUB",
            ),
            (
                signed(
                    RemotingCommand::request(rc::DELETE_TOPIC_IN_BROKER),
                    "alice",
                    "alice-secret",
                ),
                "Need admin permission for request code=215",
            ),
            (
                signed(send("Orders"), "office", "office-secret"),
                "may not be used from 127.0.0.1",
            ),
        ];
        for (i, (request, expected)) in cases.iter().enumerate() {
            let refusal = acl
                .check(Server::Broker, HOME, request, Duration::ZERO)
                .expect_err(expected);
            let response = refusal.into_response();
            assert_eq!(response.code, response_code::NO_PERMISSION);
            let remark = response.remark.unwrap_or_default();
            assert!(remark.contains(expected), "{remark}");
            assert!(!remark.contains("secret"), "no secret in {remark}");
            assert_eq!(acl.refused(), i as u64 + 1);
        }
        let mut altered = ok.clone();
        altered.ext_fields.insert("b", "Other");
        assert!(acl
            .check(Server::Broker, HOME, &altered, Duration::ZERO)
            .is_err());
        let trusted: IpAddr = "10.9.3.4".parse().expect("ip");
        assert!(acl
            .check(Server::Broker, trusted, &send("Other"), Duration::ZERO)
            .is_ok());
    }

    #[test]
    fn refusals_are_logged_once_a_minute_per_key() {
        let acl = acl(AclMode::Enforcing);
        let denial = |key: Option<&str>| Denial {
            access_key: key.map(str::to_owned),
            remark: "no".into(),
        };
        let t = Duration::from_secs(1_000);
        assert!(acl.log(&denial(Some("alice")), HOME, 10, t));
        assert!(!acl.log(
            &denial(Some("alice")),
            HOME,
            10,
            t + Duration::from_secs(59)
        ));
        assert!(acl.log(&denial(Some("bob")), HOME, 10, t), "another key");
        assert!(acl.log(&denial(None), HOME, 10, t), "unsigned, by address");
        assert!(acl.log(
            &denial(Some("alice")),
            HOME,
            10,
            t + Duration::from_secs(60)
        ));
    }

    #[test]
    fn reload_rereads_the_file_and_keeps_the_old_policy_on_a_bad_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("acl.toml");
        let account = |key: &str| {
            format!("[[accounts]]\naccess_key = \"{key}\"\nsecret_key = \"{key}-secret\"\ndefault_topic_perm = \"PUB\"\n")
        };
        std::fs::write(&path, account("first")).expect("write");
        let source = Source {
            inline: Policy::default(),
            file: Some(path.clone()),
        };
        let acl = Acl::load(AclMode::Enforcing, source).expect("loads");
        let first = signed(send("T"), "first", "first-secret");
        let second = signed(send("T"), "second", "second-secret");
        assert!(acl
            .check(Server::Broker, HOME, &first, Duration::ZERO)
            .is_ok());
        assert!(acl
            .check(Server::Broker, HOME, &second, Duration::ZERO)
            .is_err());
        std::fs::write(&path, account("second")).expect("write");
        assert_eq!(acl.reload().expect("reloads"), 1);
        assert!(acl
            .check(Server::Broker, HOME, &first, Duration::ZERO)
            .is_err());
        assert!(acl
            .check(Server::Broker, HOME, &second, Duration::ZERO)
            .is_ok());
        std::fs::write(&path, "[[accounts]]\nnonsense = 1\n").expect("write");
        assert!(acl.reload().is_err());
        assert!(
            acl.check(Server::Broker, HOME, &second, Duration::ZERO)
                .is_ok(),
            "a bad file leaves the policy in force"
        );
    }

    #[test]
    fn permissive_lets_everything_through_but_counts_it() {
        let acl = acl(AclMode::Permissive);
        assert!(acl
            .check(Server::Broker, HOME, &send("Orders"), Duration::ZERO)
            .is_ok());
        assert_eq!((acl.refused(), acl.would_refuse()), (0, 1));
    }

    #[test]
    fn a_replaced_policy_applies_to_the_next_request() {
        let acl = acl(AclMode::Enforcing);
        let ok = signed(send("Orders"), "alice", "alice-secret");
        assert!(acl.check(Server::Broker, HOME, &ok, Duration::ZERO).is_ok());
        acl.replace_policy(Policy::default());
        assert!(acl
            .check(Server::Broker, HOME, &ok, Duration::ZERO)
            .is_err());
    }
}
