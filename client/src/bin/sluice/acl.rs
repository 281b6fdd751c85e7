//! `sluice acl`: the brokers' access-control policy (accounts, their flags
//! and permissions; never a secret) and what one key may do on a topic and
//! a group. Both ask every master and need an admin's credentials
//! (`--access-key`/`--secret-key`) where ACL is on.

use std::fmt::Write as _;

use anyhow::Context;
use serde_json::{json, Value};
use sluice_client::Admin;

use crate::endpoint::{client, Endpoint};
use crate::verbs::Output;

/// `sluice acl ...`
#[derive(clap::Subcommand, Debug)]
pub enum AclCmd {
    /// Every account of every master's policy, without secrets.
    List,
    /// What a key may do: publish and subscribe on a topic, subscribe as a group.
    Check {
        /// The access key to check.
        #[arg(long)]
        key: String,
        /// A topic.
        #[arg(long)]
        topic: Option<String>,
        /// A consumer group.
        #[arg(long)]
        group: Option<String>,
    },
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(items) => items.iter().map(text).collect::<Vec<_>>().join(","),
        other => other.to_string(),
    }
}

/// Runs `sluice acl ...`.
pub async fn acl(cmd: AclCmd, endpoint: &Endpoint, out: Output) -> anyhow::Result<()> {
    let admin = Admin::new(client(endpoint));
    let result = match &cmd {
        AclCmd::List => admin.acl_config().await,
        AclCmd::Check { key, topic, group } => {
            admin
                .acl_check(key, topic.as_deref(), group.as_deref())
                .await
        }
    };
    admin.client().shutdown().await;
    let per_broker =
        result.context("asking the brokers (an admin key is needed where ACL is on)")?;
    let mut human = String::new();
    for (broker, v) in &per_broker {
        let _ = writeln!(human, "broker {broker}: ACL {}", text(&v["sluiceMode"]));
        match cmd {
            AclCmd::List => list_rows(&mut human, v),
            AclCmd::Check { ref key, .. } => check_rows(&mut human, key, v),
        }
    }
    let doc: Vec<Value> = per_broker
        .iter()
        .map(|(b, v)| json!({"broker": b, "answer": v}))
        .collect();
    out.print(&human, &json!(doc));
    Ok(())
}

fn list_rows(human: &mut String, v: &Value) {
    let _ = writeln!(
        human,
        "  {:<20} {:<5} {:<6} {:<8} {:<8} {:<30} {:<30} ALLOW FROM",
        "ACCESS KEY", "ADMIN", "BROKER", "TOPICS", "GROUPS", "TOPIC PERMS", "GROUP PERMS"
    );
    for a in v["plainAccessConfigs"].as_array().into_iter().flatten() {
        let _ = writeln!(
            human,
            "  {:<20} {:<5} {:<6} {:<8} {:<8} {:<30} {:<30} {}",
            text(&a["accessKey"]),
            text(&a["admin"]),
            text(&a["sluiceBroker"]),
            text(&a["defaultTopicPerm"]),
            text(&a["defaultGroupPerm"]),
            text(&a["topicPerms"]),
            text(&a["groupPerms"]),
            text(&a["sluiceAllowAddresses"]),
        );
    }
}

fn check_rows(human: &mut String, key: &str, v: &Value) {
    if v["known"] != Value::Bool(true) {
        let _ = writeln!(human, "  {key}: no such access key");
        return;
    }
    let _ = writeln!(
        human,
        "  {key}: admin {}, broker {}",
        text(&v["admin"]),
        text(&v["broker"])
    );
    for c in v["checks"].as_array().into_iter().flatten() {
        let verdict = if c["allowed"] == Value::Bool(true) {
            "allowed".to_owned()
        } else {
            format!("DENIED ({})", text(&c["reason"]))
        };
        let _ = writeln!(
            human,
            "  {:<6} {:<40} {verdict}",
            text(&c["perm"]),
            text(&c["resource"])
        );
    }
}
