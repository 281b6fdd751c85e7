//! Access control, read-only: `GET_BROKER_CLUSTER_ACL_CONFIG` (54) lists
//! the policy in Apache's `AclConfig` shape with every secret left out,
//! and `SLUICE_ACL_CHECK` (3500) says what one key may do on a topic and a
//! group. Both are admin codes (see `crate::acl`).

use serde_json::{json, Value};
use sluice_core::disk::Disk;
use sluice_core::Clock;
use sluice_net::header::AclCheckRequestHeader;
use sluice_net::{RemotingCommand, RequestContext};

use super::super::Broker;
use crate::acl::{Account, AclMode};
use crate::dispatch::Reply;

fn mode_name(mode: Option<AclMode>) -> &'static str {
    match mode {
        None => "off",
        Some(AclMode::Permissive) => "permissive",
        Some(AclMode::Enforcing) => "enforcing",
    }
}

/// One account as Apache's `PlainAccessConfig`, without `secretKey`; the
/// Sluice-only fields are prefixed.
fn account_json(a: &Account) -> Value {
    let perms = |m: &std::collections::BTreeMap<String, crate::acl::Perm>| -> Vec<String> {
        m.iter().map(|(k, p)| format!("{k}={p}")).collect()
    };
    json!({
        "accessKey": a.access_key,
        "admin": a.admin,
        "defaultTopicPerm": a.default_topic_perm.to_string(),
        "defaultGroupPerm": a.default_group_perm.to_string(),
        "topicPerms": perms(&a.topic_perms),
        "groupPerms": perms(&a.group_perms),
        "sluiceBroker": a.broker,
        "sluiceAllowAddresses": a.allow_addresses.iter().map(ToString::to_string).collect::<Vec<_>>(),
    })
}

fn json_response(value: &Value) -> RemotingCommand {
    RemotingCommand::success().with_body(value.to_string().into_bytes())
}

/// `GET_BROKER_CLUSTER_ACL_CONFIG`: the policy in force, no secrets.
pub(super) async fn config<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    _: &RequestContext,
    _: &RemotingCommand,
) -> Reply {
    let acl = b.config().acl.as_ref();
    let policy = acl.map(|a| a.policy()).unwrap_or_default();
    Ok(json_response(&json!({
        "sluiceMode": mode_name(acl.map(|a| a.mode())),
        "globalWhiteAddrs": policy.global_allow_addresses.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "plainAccessConfigs": policy.accounts.values().map(account_json).collect::<Vec<_>>(),
    })))
}

/// `SLUICE_ACL_CHECK`: what a key may do on the topic and group named.
pub(super) async fn check<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    _: &RequestContext,
    request: &RemotingCommand,
) -> Reply {
    let h: AclCheckRequestHeader = request.header()?;
    let Some(acl) = b.config().acl.as_ref() else {
        return Ok(json_response(
            &json!({ "sluiceMode": "off", "known": false, "checks": [] }),
        ));
    };
    let report = acl.report(
        &h.access_key_to_check,
        h.topic.as_deref(),
        h.group.as_deref(),
    );
    let checks: Vec<Value> = report
        .checks
        .iter()
        .map(|(resource, perm, verdict)| {
            json!({
                "resource": resource.to_string(),
                "perm": perm.to_string(),
                "allowed": verdict.is_ok(),
                "reason": verdict.as_ref().err(),
            })
        })
        .collect();
    Ok(json_response(&json!({
        "sluiceMode": mode_name(Some(acl.mode())),
        "known": report.account.is_some(),
        "admin": report.account.as_ref().is_some_and(|a| a.admin),
        "broker": report.account.as_ref().is_some_and(|a| a.broker),
        "checks": checks,
    })))
}
