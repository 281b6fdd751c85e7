//! What a request needs before a handler may run: a role (any account, a
//! broker credential or an admin) and permissions on the topics and groups
//! it names. Apache's mapping for the client codes, extended to the reads
//! and admin calls Apache leaves open (consume stats, offset queries and
//! resets, runtime info, name-server writes).

use sluice_net::body::{self, HeartbeatData};
use sluice_net::remoting::request_code as rc;
use sluice_net::RemotingCommand;

use super::policy::Perm;

/// Which server asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Server {
    /// A broker.
    Broker,
    /// A name server.
    NameServer,
}

/// The account kind a request code needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Anyone, signed or not: the name server's route and topic reads,
    /// which every client makes before it can send (open in Apache's name
    /// server too, so a client with a wrong secret learns it from the
    /// broker's answer to its send, not from a missing route).
    Open,
    /// Any account with a valid signature.
    Any,
    /// A broker credential (or an admin): broker registration.
    Broker,
    /// An admin.
    Admin,
}

/// A topic or a group; a retry topic `%RETRY%g` is the group `g`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Resource {
    /// A topic.
    Topic(String),
    /// A consumer or producer group.
    Group(String),
}

impl Resource {
    /// The resource behind a topic name.
    pub fn topic(name: &str) -> Self {
        match name.strip_prefix(RETRY_PREFIX) {
            Some(group) => Self::Group(group.to_owned()),
            None => Self::Topic(name.to_owned()),
        }
    }
}

impl std::fmt::Display for Resource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Topic(t) => write!(f, "topic {t}"),
            Self::Group(g) => write!(f, "group {g}"),
        }
    }
}

const RETRY_PREFIX: &str = "%RETRY%";

/// What one request needs.
#[derive(Debug)]
pub struct Needs {
    /// The role.
    pub role: Role,
    /// Permissions on named topics and groups.
    pub resources: Vec<(Resource, Perm)>,
}

/// What `request` needs on `server`; `Err` names a body that cannot be
/// read (refused, as Apache refuses).
pub fn needs(server: Server, request: &RemotingCommand) -> Result<Needs, String> {
    let role = role(server, request.code);
    let mut resources = Vec::new();
    if server == Server::Broker {
        broker_resources(request, &mut resources)?;
    }
    Ok(Needs { role, resources })
}

/// The role request `code` needs on `server`.
pub fn role(server: Server, code: i32) -> Role {
    match server {
        Server::NameServer => match code {
            rc::REGISTER_BROKER | rc::UNREGISTER_BROKER | rc::QUERY_DATA_VERSION => Role::Broker,
            // Topic deletion, KV writes, and the name-server admin codes
            // Sluice does not serve (config update 318, write-permission
            // wipe/add 205/327) all change what every client sees.
            rc::DELETE_TOPIC_IN_NAMESRV
            | rc::PUT_KV_CONFIG
            | rc::DELETE_KV_CONFIG
            | 205
            | 318
            | 327 => Role::Admin,
            rc::GET_ROUTEINFO_BY_TOPIC
            | rc::GET_BROKER_CLUSTER_INFO
            | rc::GET_ALL_TOPIC_LIST_FROM_NAMESERVER
            | rc::GET_TOPICS_BY_CLUSTER
            | rc::GET_KV_CONFIG => Role::Open,
            _ => Role::Any,
        },
        Server::Broker => match code {
            rc::UPDATE_AND_CREATE_TOPIC
            | rc::DELETE_TOPIC_IN_BROKER
            | rc::GET_ALL_TOPIC_CONFIG
            | rc::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP
            | rc::DELETE_SUBSCRIPTIONGROUP
            | rc::GET_ALL_SUBSCRIPTIONGROUP_CONFIG
            | rc::INVOKE_BROKER_TO_RESET_OFFSET
            | rc::GET_BROKER_RUNTIME_INFO
            | rc::GET_CONSUMER_RUNNING_INFO
            | rc::CONSUME_MESSAGE_DIRECTLY
            | rc::GET_BROKER_CLUSTER_ACL_CONFIG
            | rc::SLUICE_ACL_CHECK
            // UPDATE_BROKER_CONFIG, not served by Sluice but admin in Apache.
            | 25 => Role::Admin,
            _ => Role::Any,
        },
    }
}

fn field<'a>(request: &'a RemotingCommand, key: &str) -> Option<&'a str> {
    request.ext_fields.get(key).filter(|v| !v.is_empty())
}

fn push_topic(out: &mut Vec<(Resource, Perm)>, topic: Option<&str>, perm: Perm) {
    if let Some(t) = topic {
        out.push((Resource::topic(t), perm));
    }
}

fn push_group(out: &mut Vec<(Resource, Perm)>, group: Option<&str>, perm: Perm) {
    if let Some(g) = group {
        out.push((Resource::Group(g.to_owned()), perm));
    }
}

fn broker_resources(
    request: &RemotingCommand,
    out: &mut Vec<(Resource, Perm)>,
) -> Result<(), String> {
    let f = |key| field(request, key);
    match request.code {
        rc::SEND_MESSAGE | rc::SEND_BATCH_MESSAGE | rc::SEND_REPLY_MESSAGE => {
            send_resources(f("topic"), f("producerGroup"), out);
        }
        rc::SEND_MESSAGE_V2 | rc::SEND_REPLY_MESSAGE_V2 => send_resources(f("b"), f("a"), out),
        rc::CONSUMER_SEND_MSG_BACK => push_group(out, f("group"), Perm::SUB),
        rc::PULL_MESSAGE
        | rc::LITE_PULL_MESSAGE
        | rc::SLUICE_POP_RECEIVE
        | rc::SLUICE_POP_ACK
        | rc::SLUICE_POP_RENEW => {
            push_topic(out, f("topic"), Perm::SUB);
            push_group(out, f("consumerGroup"), Perm::SUB);
        }
        rc::QUERY_MESSAGE => push_topic(out, f("topic"), Perm::SUB),
        rc::UNREGISTER_CLIENT | rc::GET_CONSUMER_LIST_BY_GROUP => {
            push_group(out, f("consumerGroup"), Perm::SUB);
        }
        rc::UPDATE_CONSUMER_OFFSET | rc::QUERY_CONSUMER_OFFSET | rc::GET_CONSUME_STATS => {
            push_group(out, f("consumerGroup"), Perm::SUB);
            push_topic(out, f("topic"), Perm::SUB);
        }
        rc::HEART_BEAT => {
            let hb: HeartbeatData = body::decode(&request.body, "HeartbeatData")
                .map_err(|e| format!("unreadable heartbeat: {e}"))?;
            for consumer in &hb.consumer_data_set {
                push_group(out, Some(&consumer.group_name), Perm::SUB);
                for sub in &consumer.subscription_data_set {
                    push_topic(out, Some(&sub.topic), Perm::SUB);
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// A send to a retry topic is a consumer's re-delivery: its group's `SUB`;
/// any other send needs `PUB` on its topic.
fn send_resources(topic: Option<&str>, _group: Option<&str>, out: &mut Vec<(Resource, Perm)>) {
    match topic.map(Resource::topic) {
        Some(group @ Resource::Group(_)) => out.push((group, Perm::SUB)),
        Some(topic) => out.push((topic, Perm::PUB)),
        None => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(code: i32, fields: &[(&str, &str)]) -> RemotingCommand {
        let mut r = RemotingCommand::request(code);
        for (k, v) in fields {
            r.ext_fields.insert(k, v);
        }
        r
    }

    #[test]
    fn sends_need_pub_and_retry_topics_follow_their_group() {
        let n = needs(
            Server::Broker,
            &request(rc::SEND_MESSAGE_V2, &[("a", "P"), ("b", "T")]),
        )
        .expect("readable");
        assert_eq!(n.resources, vec![(Resource::Topic("T".into()), Perm::PUB)]);
        assert_eq!(n.role, Role::Any);
        let n = needs(
            Server::Broker,
            &request(rc::SEND_MESSAGE, &[("topic", "%RETRY%g")]),
        )
        .expect("readable");
        assert_eq!(n.resources, vec![(Resource::Group("g".into()), Perm::SUB)]);
    }

    #[test]
    fn pulls_heartbeats_and_admin_codes_name_what_they_need() {
        let n = needs(
            Server::Broker,
            &request(rc::PULL_MESSAGE, &[("topic", "T"), ("consumerGroup", "g")]),
        )
        .expect("readable");
        assert_eq!(n.resources.len(), 2);
        let mut hb = RemotingCommand::request(rc::HEART_BEAT);
        hb.body = bytes::Bytes::from_static(
            br#"{"clientID":"c","consumerDataSet":[{"groupName":"g","subscriptionDataSet":[{"topic":"T","subString":"*"},{"topic":"%RETRY%g","subString":"*"}]}],"producerDataSet":[]}"#,
        );
        let n = needs(Server::Broker, &hb).expect("readable");
        assert_eq!(
            n.resources,
            vec![
                (Resource::Group("g".into()), Perm::SUB),
                (Resource::Topic("T".into()), Perm::SUB),
                (Resource::Group("g".into()), Perm::SUB),
            ]
        );
        hb.body = bytes::Bytes::from_static(b"{not json");
        assert!(needs(Server::Broker, &hb).is_err());
        for code in [
            rc::DELETE_TOPIC_IN_BROKER,
            rc::INVOKE_BROKER_TO_RESET_OFFSET,
        ] {
            assert_eq!(
                needs(Server::Broker, &request(code, &[])).expect("ok").role,
                Role::Admin
            );
        }
        assert_eq!(
            needs(Server::NameServer, &request(rc::REGISTER_BROKER, &[]))
                .expect("ok")
                .role,
            Role::Broker
        );
        assert_eq!(
            needs(Server::NameServer, &request(rc::PUT_KV_CONFIG, &[]))
                .expect("ok")
                .role,
            Role::Admin
        );
        assert_eq!(
            needs(
                Server::NameServer,
                &request(rc::GET_ROUTEINFO_BY_TOPIC, &[])
            )
            .expect("ok")
            .role,
            Role::Open
        );
        assert_eq!(
            needs(Server::NameServer, &request(9_999, &[]))
                .expect("ok")
                .role,
            Role::Any,
            "unknown codes need an account"
        );
    }
}
