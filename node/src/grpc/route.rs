//! `QueryRoute` and `QueryAssignment`: the topic's queues on every master
//! of the cluster (from the name servers), each broker named by its 5.x
//! endpoint. This broker's endpoint is the address the client dialled (it
//! reached us there); another broker's is its remoting host at its port
//! plus 8, the default `grpc_listen`. A topic no name server knows yet is
//! served from this broker's own table (auto-created if the broker
//! auto-creates topics), as a 4.x send would be.

use std::time::Duration;

use sluice_core::disk::Disk;
use sluice_core::Clock;
use sluice_net::body::{self, QueueData, TopicRouteData, MASTER_ID, PERM_READ, PERM_WRITE};
use sluice_net::header::GetRouteInfoRequestHeader;
use sluice_net::remoting::{request_code as rc, response_code};
use sluice_net::{RemotingCommand, Transport};

use super::proto::{self, AddressScheme, Code, MessageType, Permission};
use super::{ok, status, Messaging, GRPC_PORT_OFFSET};

const NAMESRV_TIMEOUT: Duration = Duration::from_secs(3);

/// One master serving the topic: its name, queue counts and permission,
/// and its 5.x endpoints.
struct Serving {
    broker_name: String,
    queues: QueueData,
    endpoints: proto::Endpoints,
}

fn endpoints_of(addr: &str) -> Option<proto::Endpoints> {
    let (host, port) = addr.rsplit_once(':')?;
    let port: i32 = port.parse().ok()?;
    let host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    let scheme = match host.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(_)) => AddressScheme::Ipv4,
        Ok(std::net::IpAddr::V6(_)) => AddressScheme::Ipv6,
        Err(_) => AddressScheme::DomainName,
    };
    Some(proto::Endpoints {
        scheme: scheme as i32,
        addresses: vec![proto::Address { host, port }],
    })
}

/// The endpoints a client should use for the broker at remoting `addr`.
fn grpc_endpoints_of<D: Disk, C: Clock, T: Transport>(
    m: &Messaging<D, C, T>,
    addr: &str,
    dialled: Option<&proto::Endpoints>,
) -> Option<proto::Endpoints> {
    if addr == m.broker.config().advertised() || addr == m.broker.store_host().to_string() {
        return dialled
            .filter(|e| !e.addresses.is_empty())
            .cloned()
            .or_else(|| endpoints_of(&m.local.to_string()));
    }
    let mut e = endpoints_of(addr)?;
    for a in &mut e.addresses {
        a.port += i32::from(GRPC_PORT_OFFSET);
    }
    Some(e)
}

/// The topic's route from the first name server that has it.
async fn namesrv_route<D: Disk, C: Clock, T: Transport>(
    m: &Messaging<D, C, T>,
    topic: &str,
) -> Option<TopicRouteData> {
    let header = GetRouteInfoRequestHeader {
        topic: topic.to_owned(),
        accept_standard_json_only: Some(true),
    };
    for addr in &m.broker.config().namesrv_addrs {
        let mut cmd = RemotingCommand::request_with_header(rc::GET_ROUTEINFO_BY_TOPIC, &header);
        if let Some(creds) = &m.broker.config().credentials {
            creds.sign(&mut cmd);
        }
        match m.namesrv.invoke(addr, cmd, NAMESRV_TIMEOUT).await {
            Ok(r) if r.code == response_code::SUCCESS => {
                return body::decode(&r.body, "TopicRouteData").ok();
            }
            Ok(_) => {}
            Err(e) => tracing::debug!(%addr, error = %e, "route query to a name server failed"),
        }
    }
    None
}

/// Every master serving `topic`.
async fn serving<D: Disk, C: Clock, T: Transport>(
    m: &Messaging<D, C, T>,
    topic: &str,
    dialled: Option<&proto::Endpoints>,
) -> Vec<Serving> {
    if let Some(route) = namesrv_route(m, topic).await {
        let found: Vec<Serving> = route
            .queue_datas
            .iter()
            .filter_map(|qd| {
                let bd = route
                    .broker_datas
                    .iter()
                    .find(|b| b.broker_name == qd.broker_name)?;
                let master = bd.broker_addrs.get(&MASTER_ID)?;
                Some(Serving {
                    broker_name: qd.broker_name.clone(),
                    queues: qd.clone(),
                    endpoints: grpc_endpoints_of(m, master, dialled)?,
                })
            })
            .collect();
        if !found.is_empty() {
            return found;
        }
    }
    let b = &m.broker;
    let config = match b.topics().get(topic) {
        Some(c) => Some(c),
        None if b.config().auto_create_topic
            && sluice_core::message::validate_topic(topic).is_ok() =>
        {
            let (c, created) = b.topics().ensure(
                topic,
                b.config().default_topic_queues,
                crate::broker::PERM_READ | crate::broker::PERM_WRITE,
                b.now_ms(),
            );
            if created {
                b.topics_updated().await;
            }
            Some(c)
        }
        None => None,
    };
    let Some(c) = config.filter(|_| b.is_writer()) else {
        return Vec::new();
    };
    let own = b.config().advertised().to_owned();
    grpc_endpoints_of(m, &own, dialled)
        .map(|endpoints| Serving {
            broker_name: b.config().broker_name.clone(),
            queues: QueueData {
                broker_name: b.config().broker_name.clone(),
                read_queue_nums: c.read_queue_nums,
                write_queue_nums: c.write_queue_nums,
                perm: c.perm,
                topic_sys_flag: c.topic_sys_flag,
            },
            endpoints,
        })
        .into_iter()
        .collect()
}

fn broker_of(s: &Serving) -> proto::Broker {
    proto::Broker {
        name: s.broker_name.clone(),
        id: 0,
        endpoints: Some(s.endpoints.clone()),
    }
}

/// Apache's queue list of one broker: read-only, then write-only, then
/// read-write queues, numbered on from 0 (one NONE queue if neither).
fn queues_of(topic: &proto::Resource, s: &Serving) -> Vec<proto::MessageQueue> {
    let q = &s.queues;
    let (mut r, mut w) = (0, 0);
    if q.perm & PERM_READ != 0 {
        r = q.read_queue_nums.max(0);
    }
    if q.perm & PERM_WRITE != 0 {
        w = q.write_queue_nums.max(0);
    }
    let rw = r.min(w);
    let groups = [
        (Permission::Read, r - rw),
        (Permission::Write, w - rw),
        (Permission::ReadWrite, rw),
        (Permission::None, i32::from(r == 0 && w == 0)),
    ];
    let accept = vec![
        MessageType::Normal as i32,
        MessageType::Fifo as i32,
        MessageType::Delay as i32,
        MessageType::Transaction as i32,
    ];
    let mut id = 0;
    let mut out = Vec::new();
    for (perm, n) in groups {
        for _ in 0..n {
            out.push(proto::MessageQueue {
                topic: Some(topic.clone()),
                id,
                permission: perm as i32,
                broker: Some(broker_of(s)),
                accept_message_types: accept.clone(),
            });
            id += 1;
        }
    }
    out
}

/// `QueryRoute`.
pub(super) async fn query_route<D: Disk, C: Clock, T: Transport>(
    m: &Messaging<D, C, T>,
    request: &proto::QueryRouteRequest,
) -> proto::QueryRouteResponse {
    let Some(topic) = request.topic.clone().filter(|t| !t.name.is_empty()) else {
        return proto::QueryRouteResponse {
            status: Some(status(Code::IllegalTopic, "topic name cannot be empty")),
            message_queues: Vec::new(),
        };
    };
    let serving = serving(m, &topic.name, request.endpoints.as_ref()).await;
    if serving.is_empty() {
        return proto::QueryRouteResponse {
            status: Some(status(
                Code::TopicNotFound,
                format!("topic {} does not exist", topic.name),
            )),
            message_queues: Vec::new(),
        };
    }
    proto::QueryRouteResponse {
        status: Some(ok()),
        message_queues: serving.iter().flat_map(|s| queues_of(&topic, s)).collect(),
    }
}

/// `QueryAssignment`: each readable master once (queue id -1: a receive
/// there takes any of its queues), or for a FIFO group each read queue.
pub(super) async fn query_assignment<D: Disk, C: Clock, T: Transport>(
    m: &Messaging<D, C, T>,
    request: &proto::QueryAssignmentRequest,
) -> proto::QueryAssignmentResponse {
    let (Some(topic), Some(group)) = (request.topic.clone(), request.group.as_ref()) else {
        return proto::QueryAssignmentResponse {
            status: Some(status(Code::BadRequest, "topic and group are required")),
            assignments: Vec::new(),
        };
    };
    let fifo = m
        .broker
        .subscription_group(&group.name)
        .is_some_and(|g| g.consume_message_orderly);
    let mut assignments = Vec::new();
    for s in serving(m, &topic.name, request.endpoints.as_ref()).await {
        if s.queues.perm & PERM_READ == 0 || s.queues.read_queue_nums <= 0 {
            continue;
        }
        let ids: Vec<i32> = if fifo {
            (0..s.queues.read_queue_nums).collect()
        } else {
            vec![-1]
        };
        for id in ids {
            assignments.push(proto::Assignment {
                message_queue: Some(proto::MessageQueue {
                    topic: Some(topic.clone()),
                    id,
                    permission: Permission::ReadWrite as i32,
                    broker: Some(broker_of(&s)),
                    accept_message_types: Vec::new(),
                }),
            });
        }
    }
    let status = if assignments.is_empty() {
        status(Code::Forbidden, "no readable queue")
    } else {
        ok()
    };
    proto::QueryAssignmentResponse {
        status: Some(status),
        assignments,
    }
}
