//! Consumer-group requests of `--backlog`: heartbeats (which make each
//! group's retry topic, as a real broker does), leaving, the group's
//! client list, sent-back messages, and queue locks for orderly consumers.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use sluice_net::body::{
    self, ConsumerListBody, HeartbeatData, LockBatchRequestBody, LockBatchResponseBody,
};
use sluice_net::header::{
    ConsumerSendMsgBackRequestHeader, GetConsumerListByGroupRequestHeader, HeartbeatResponseHeader,
    UnregisterClientRequestHeader,
};
use sluice_net::remoting::{request_code, response_code};
use sluice_net::{HandlerTable, RemotingCommand, RequestContext};

use crate::backlog::{bad_request, get_min_offset, refuse, Backlog, Groups};
use crate::retry::{Origin, Outcome, RetryLog, RETRY_PHYS_BASE, RETRY_PREFIX};

/// Most consumer groups (and so retry topics) this broker keeps.
const GROUPS_MAX: usize = 256;
/// Most clients it keeps per group.
const CLIENTS_MAX: usize = 1_024;
/// Retries before a dead letter when the client names no limit.
const MAX_RECONSUME_TIMES: i32 = 16;

type Serve = fn(&Backlog, &RemotingCommand) -> RemotingCommand;

/// Adds the consume side's handlers to `table` (replacing its plain
/// heartbeat and unregister answers).
pub fn register(table: &mut HandlerTable, backlog: &Arc<Backlog>) {
    let served: [(i32, Serve); 11] = [
        (request_code::HEART_BEAT, Backlog::heartbeat),
        (request_code::UNREGISTER_CLIENT, Backlog::unregister),
        (
            request_code::GET_CONSUMER_LIST_BY_GROUP,
            Backlog::consumer_list,
        ),
        (request_code::CONSUMER_SEND_MSG_BACK, Backlog::send_back),
        (request_code::LOCK_BATCH_MQ, |_, request| lock(request)),
        (request_code::UNLOCK_BATCH_MQ, |_, _| {
            RemotingCommand::success()
        }),
        (request_code::QUERY_CONSUMER_OFFSET, Backlog::query_offset),
        (request_code::UPDATE_CONSUMER_OFFSET, Backlog::update_offset),
        (request_code::GET_MAX_OFFSET, Backlog::get_max_offset),
        (request_code::GET_MIN_OFFSET, |_, request| {
            get_min_offset(request)
        }),
        (
            request_code::SEARCH_OFFSET_BY_TIMESTAMP,
            Backlog::search_offset,
        ),
    ];
    for (code, serve) in served {
        let backlog = Arc::clone(backlog);
        table.register(code, move |_: RequestContext, request: RemotingCommand| {
            let response = serve(&backlog, &request);
            async move { Some(response) }
        });
    }
    for code in [request_code::PULL_MESSAGE, request_code::LITE_PULL_MESSAGE] {
        let backlog = Arc::clone(backlog);
        table.register(code, move |_: RequestContext, request: RemotingCommand| {
            let backlog = Arc::clone(&backlog);
            async move { Some(backlog.pull(request).await) }
        });
    }
}

impl Groups {
    /// Adds `client` (if any) to `group`, making the group's retry topic
    /// if it is new; answers whether it was.
    fn join(&mut self, group: &str, client: Option<&str>) -> bool {
        // A record's topic has a one-byte length of at most 127.
        let fits = !group.is_empty() && RETRY_PREFIX.len() + group.len() <= 127;
        if !fits || (!self.clients.contains_key(group) && self.clients.len() >= GROUPS_MAX) {
            return false;
        }
        let clients = self.clients.entry(group.to_owned()).or_default();
        if let Some(client) = client.filter(|_| clients.len() < CLIENTS_MAX) {
            clients.insert(client.to_owned());
        }
        if self.retries.contains_key(group) {
            return false;
        }
        self.retries.insert(group.to_owned(), RetryLog::default());
        true
    }
}

impl Backlog {
    /// `HEART_BEAT`: registers each consumer group's client and makes its
    /// retry topic; answers as Apache 5.x (full heartbeats only).
    fn heartbeat(&self, request: &RemotingCommand) -> RemotingCommand {
        let heartbeat: HeartbeatData = match body::decode(&request.body, "HeartbeatData") {
            Ok(h) => h,
            Err(e) => return bad_request(&e),
        };
        let mut created = false;
        {
            let mut groups = self.lock_groups();
            for consumer in &heartbeat.consumer_data_set {
                created |= groups.join(&consumer.group_name, Some(&heartbeat.client_id));
            }
        }
        if created {
            self.topics_changed.notify_one();
        }
        RemotingCommand::success().with_header(&HeartbeatResponseHeader::full_heartbeats_only())
    }

    /// `UNREGISTER_CLIENT`: the client leaves the consumer group it names
    /// (a producer-only unregister leaves every consumer group as it is).
    fn unregister(&self, request: &RemotingCommand) -> RemotingCommand {
        let h: UnregisterClientRequestHeader = match request.header() {
            Ok(h) => h,
            Err(e) => return bad_request(&e),
        };
        if let Some(group) = &h.consumer_group {
            if let Some(clients) = self.lock_groups().clients.get_mut(group) {
                clients.remove(&h.client_id);
            }
        }
        RemotingCommand::success()
    }

    /// `GET_CONSUMER_LIST_BY_GROUP`: the group's clients, or Apache's
    /// `SYSTEM_ERROR` when it has none.
    fn consumer_list(&self, request: &RemotingCommand) -> RemotingCommand {
        let h: GetConsumerListByGroupRequestHeader = match request.header() {
            Ok(h) => h,
            Err(e) => return bad_request(&e),
        };
        let ids: Vec<String> = self
            .lock_groups()
            .clients
            .get(&h.consumer_group)
            .map(|c| c.iter().cloned().collect())
            .unwrap_or_default();
        if ids.is_empty() {
            return refuse(response_code::SYSTEM_ERROR, "no consumer for this group");
        }
        let list = ConsumerListBody {
            consumer_id_list: ids,
        };
        match body::encode(&list, "ConsumerListBody") {
            Ok(json) => RemotingCommand::success().with_body(json),
            Err(e) => bad_request(&e),
        }
    }

    /// `CONSUMER_SEND_MSG_BACK`: the message at `offset` comes back in the
    /// group's retry topic after its delay, or is dropped as a dead letter.
    fn send_back(&self, request: &RemotingCommand) -> RemotingCommand {
        let h: ConsumerSendMsgBackRequestHeader = match request.header() {
            Ok(h) => h,
            Err(e) => return bad_request(&e),
        };
        let mut groups = self.lock_groups();
        let origin = if h.offset >= RETRY_PHYS_BASE {
            groups
                .retries
                .get(&h.group)
                .and_then(|log| log.at_phys(h.offset))
        } else {
            self.at_phys(h.offset).map(|index| Origin {
                index,
                reconsume_times: 0,
            })
        };
        let Some(origin) = origin else {
            let remark = format!("look message by offset failed, {}", h.offset);
            return refuse(response_code::SYSTEM_ERROR, remark);
        };
        // Apache makes the retry topic here too if no heartbeat did.
        let created = groups.join(&h.group, None);
        let Some(log) = groups.retries.get_mut(&h.group) else {
            return refuse(response_code::SYSTEM_ERROR, "too many consumer groups");
        };
        let max = h
            .max_reconsume_times
            .filter(|m| *m >= 0)
            .unwrap_or(MAX_RECONSUME_TIMES);
        let outcome = log.send_back(origin, h.delay_level, max, crate::now_ms());
        drop(groups);
        if created {
            self.topics_changed.notify_one();
        }
        self.sent_back.fetch_add(1, Ordering::Relaxed);
        match outcome {
            Outcome::Retry => RemotingCommand::success(),
            Outcome::DeadLetter => {
                self.dead_letters.fetch_add(1, Ordering::Relaxed);
                RemotingCommand::success()
            }
            Outcome::Full => refuse(response_code::SYSTEM_ERROR, "the retry topic is full"),
        }
    }
}

/// `LOCK_BATCH_MQ`: every queue asked for is granted (one consumer at a
/// time is all this broker serves).
fn lock(request: &RemotingCommand) -> RemotingCommand {
    let asked: LockBatchRequestBody = match body::decode(&request.body, "LockBatchRequestBody") {
        Ok(b) => b,
        Err(e) => return bad_request(&e),
    };
    let answer = LockBatchResponseBody {
        lock_ok_mq_set: asked.mq_set,
    };
    match body::encode(&answer, "LockBatchResponseBody") {
        Ok(json) => RemotingCommand::success().with_body(json),
        Err(e) => bad_request(&e),
    }
}
