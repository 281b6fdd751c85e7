//! 5.x clients' request signatures: every call carries
//! `authorization: MQv2-HMAC-SHA1 Credential=<access key>,
//! SignedHeaders=x-mq-date-time, Signature=<hex HMAC-SHA1 of the
//! x-mq-date-time value, keyed with the secret>`. With ACL on, a call
//! without a valid signature from a known account is refused
//! (UNAUTHENTICATED), as the remoting ports refuse unsigned requests; the
//! operations then check the account's permissions like the remoting
//! guard does (see [`permit`]).

use hmac::{Hmac, Mac};
use sha1::Sha1;
use sluice_core::disk::Disk;
use sluice_core::Clock;
use sluice_net::RemotingCommand;
use tonic::metadata::MetadataMap;
use tonic::Status;

use super::Caller;
use crate::acl::Server;
use crate::broker::Broker;

/// The parts of an `authorization` value.
#[derive(Debug, PartialEq, Eq)]
struct Authorization<'a> {
    access_key: &'a str,
    signature: &'a str,
}

/// Parses `MQv2-HMAC-SHA1 Credential=AK[/...], SignedHeaders=..., Signature=HEX`.
fn parse(value: &str) -> Option<Authorization<'_>> {
    let (algorithm, rest) = value.trim().split_once(' ')?;
    if algorithm != "MQv2-HMAC-SHA1" {
        return None;
    }
    let mut access_key = None;
    let mut signature = None;
    for item in rest.split(',') {
        let (name, val) = item.trim().split_once('=')?;
        match name.trim() {
            "Credential" => access_key = val.split('/').next(),
            "Signature" => signature = Some(val.trim()),
            _ => {}
        }
    }
    Some(Authorization {
        access_key: access_key?,
        signature: signature?,
    })
}

fn hex_decode(text: &str) -> Option<Vec<u8>> {
    if text.len() % 2 != 0 {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// The account that signed the call, or `None` with ACL off. With ACL on,
/// an unsigned call, an unknown account or a wrong signature is refused.
pub(super) fn authenticate<D: Disk, C: Clock>(
    broker: &Broker<D, C>,
    metadata: &MetadataMap,
) -> Result<Option<String>, Status> {
    let Some(acl) = &broker.config().acl else {
        return Ok(None);
    };
    let header = |name: &str| metadata.get(name).and_then(|v| v.to_str().ok());
    let refuse = |why: &str| {
        let refusal = Status::unauthenticated(format!("[ACL] {why}"));
        match acl.mode() {
            crate::acl::AclMode::Enforcing => Err(refusal),
            crate::acl::AclMode::Permissive => Ok(None),
        }
    };
    let Some(auth) = header("authorization").and_then(parse) else {
        return refuse("no authorization: this server accepts only signed requests");
    };
    let Some(date) = header("x-mq-date-time") else {
        return refuse("no x-mq-date-time to check the signature against");
    };
    let policy = acl.policy();
    let Some(account) = policy.accounts.get(auth.access_key) else {
        return refuse(&format!("No acl config for accessKey={}", auth.access_key));
    };
    let Some(sent) = hex_decode(auth.signature) else {
        return refuse("the signature is not hex");
    };
    let mut mac = Hmac::<Sha1>::new_from_slice(account.secret_key.as_bytes())
        .expect("invariant: HMAC takes any key length");
    mac.update(date.as_bytes());
    if mac.verify_slice(&sent).is_err() {
        return refuse(&format!(
            "Check signature failed for accessKey={}",
            auth.access_key
        ));
    }
    Ok(Some(auth.access_key.to_owned()))
}

/// Whether `caller` may do what the remoting request `equivalent` does
/// (the same topic and group permissions a 4.x client needs); a refusal
/// is a status message.
pub(super) fn permit<D: Disk, C: Clock>(
    broker: &Broker<D, C>,
    caller: &Caller,
    equivalent: &RemotingCommand,
) -> Result<(), String> {
    let Some(acl) = &broker.config().acl else {
        return Ok(());
    };
    let Some(key) = &caller.access_key else {
        return Ok(()); // permissive mode let an unsigned call through
    };
    match acl.decide_authenticated(Server::Broker, caller.addr.ip(), key, equivalent) {
        Err(denial) if acl.mode() == crate::acl::AclMode::Enforcing => Err(denial.remark),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_5x_authorization_value_parses_into_key_and_signature() {
        let v = "MQv2-HMAC-SHA1 Credential=ak/2023/x, SignedHeaders=x-mq-date-time, Signature=0a1B";
        assert_eq!(
            parse(v),
            Some(Authorization {
                access_key: "ak",
                signature: "0a1B"
            })
        );
        assert_eq!(parse("Basic abc"), None);
        assert_eq!(parse("MQv2-HMAC-SHA1 Credential=ak"), None);
        assert_eq!(hex_decode("0a1B"), Some(vec![0x0a, 0x1b]));
        assert_eq!(hex_decode("0a1"), None);
        assert_eq!(hex_decode("zz"), None);
    }
}
