//! The client instance (RocketMQ's `MQClientInstance`): one RPC client, the
//! route cache, the broker address table, the heartbeat and route-refresh
//! loop, and the server-initiated requests brokers send to clients.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use sluice_core::message::{java_string_hash, UniqKeyGenerator};
use sluice_core::Clock;
use sluice_net::body::{
    self, BrokerData, ConsumerData, HeartbeatData, ProducerData, ResetOffsetBody, TopicRouteData,
    MASTER_ID, PERM_READ, PERM_WRITE,
};
use sluice_net::header::{
    CommandHeader, GetRouteInfoRequestHeader, NotifyConsumerIdsChangedRequestHeader,
    ResetOffsetRequestHeader, UnregisterClientRequestHeader,
};
use sluice_net::remoting::{request_code, response_code};
use sluice_net::{RemotingCommand, RequestContext, RpcClient, Transport};
use tokio::sync::{mpsc, Notify};
use tokio::task::JoinHandle;

use crate::config::ClientConfig;
use crate::error::{Error, Result};
use crate::message::MessageQueue;
use crate::producer::transaction::TransactionListener;

/// Shared state behind a [`ClientInstance`].
struct Inner<T: Transport, C: Clock> {
    config: ClientConfig,
    client_id: String,
    clock: C,
    rpc: RpcClient<T>,
    state: Mutex<State>,
    notices: Arc<Notices>,
    namesrv_next: AtomicUsize,
    uniq: Mutex<UniqKeyGenerator>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    started: AtomicBool,
    running: AtomicBool,
}

#[derive(Default)]
struct State {
    routes: BTreeMap<String, TopicRouteData>,
    brokers: BTreeMap<String, BrokerData>,
    producer_groups: BTreeSet<String>,
    consumers: BTreeMap<String, ConsumerData>,
}

/// New offsets an operator set for a group's queues.
pub(crate) type OffsetReset = BTreeMap<MessageQueue, i64>;

/// What brokers tell consumers, per group: `NOTIFY_CONSUMER_IDS_CHANGED`
/// (rebalance now) and `RESET_CONSUMER_CLIENT_OFFSET` (restart queues at
/// new offsets).
#[derive(Default)]
struct Notices {
    rebalance: Mutex<BTreeMap<String, Arc<Notify>>>,
    resets: Mutex<BTreeMap<String, mpsc::UnboundedSender<OffsetReset>>>,
    /// Per producer group, the listener answering `CHECK_TRANSACTION_STATE`.
    transactions: Mutex<BTreeMap<String, Arc<dyn TransactionListener>>>,
    /// What answers sent on a broker's own connection are signed with.
    credentials: Option<sluice_net::Credentials>,
}

impl Notices {
    fn for_group(&self, group: &str) -> Arc<Notify> {
        let mut map = lock(&self.rebalance);
        Arc::clone(map.entry(group.to_owned()).or_default())
    }

    fn reset(&self, group: &str, table: OffsetReset) {
        if let Some(tx) = lock(&self.resets).get(group) {
            let _ = tx.send(table);
        }
    }
}

/// One client: what producers, consumers and the admin API share. Cheap to
/// clone. Generic over the transport (tokio or turmoil) and the clock.
pub struct ClientInstance<T: Transport, C: Clock> {
    inner: Arc<Inner<T, C>>,
}

impl<T: Transport, C: Clock> Clone for ClientInstance<T, C> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

/// Locks a mutex, carrying on with the data if a panicking holder poisoned it.
pub(crate) fn lock<X>(m: &Mutex<X>) -> MutexGuard<'_, X> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl<T: Transport, C: Clock> ClientInstance<T, C> {
    /// A client over `transport`; nothing runs until [`ClientInstance::start`].
    pub fn new(transport: T, clock: C, config: ClientConfig) -> Self {
        let notices = Arc::new(Notices {
            credentials: config.rpc.credentials.clone(),
            ..Notices::default()
        });
        let handler_notices = Arc::clone(&notices);
        let handler = move |ctx: RequestContext, request: RemotingCommand| {
            let notices = Arc::clone(&handler_notices);
            async move { serve_broker_request(&ctx, &notices, &request) }
        };
        let rpc = RpcClient::with_handler(transport, config.rpc.clone(), handler);
        let tag = java_string_hash(&config.instance_name);
        Self {
            inner: Arc::new(Inner {
                client_id: config.client_id(),
                uniq: Mutex::new(UniqKeyGenerator::new(config.client_ip, config.pid, tag)),
                clock,
                rpc,
                state: Mutex::new(State::default()),
                notices,
                namesrv_next: AtomicUsize::new(0),
                tasks: Mutex::new(Vec::new()),
                started: AtomicBool::new(false),
                running: AtomicBool::new(true),
                config,
            }),
        }
    }

    /// Starts the heartbeat and route-refresh loop (idempotent).
    pub fn start(&self) {
        if self.inner.started.swap(true, Ordering::SeqCst) {
            return;
        }
        let me = self.clone();
        let task = tokio::spawn(async move {
            let mut beat = tokio::time::interval(me.inner.config.heartbeat_interval);
            let mut routes = tokio::time::interval(me.inner.config.poll_name_server_interval);
            beat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            routes.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = beat.tick() => me.send_heartbeat_to_all_brokers().await,
                    _ = routes.tick() => me.refresh_all_routes().await,
                }
            }
        });
        lock(&self.inner.tasks).push(task);
    }

    /// Stops background work, tells every broker this client is gone and
    /// closes the connections.
    pub async fn shutdown(&self) {
        if !self.inner.running.swap(false, Ordering::SeqCst) {
            return;
        }
        for task in lock(&self.inner.tasks).drain(..) {
            task.abort();
        }
        let (producers, consumers, masters) = {
            let state = lock(&self.inner.state);
            (
                state.producer_groups.iter().cloned().collect::<Vec<_>>(),
                state.consumers.keys().cloned().collect::<Vec<_>>(),
                all_broker_addrs(&state.brokers),
            )
        };
        for addr in &masters {
            for (producer_group, consumer_group) in producers
                .iter()
                .map(|g| (Some(g.clone()), None))
                .chain(consumers.iter().map(|g| (None, Some(g.clone()))))
            {
                let header = UnregisterClientRequestHeader {
                    client_id: self.inner.client_id.clone(),
                    producer_group,
                    consumer_group,
                };
                let request =
                    RemotingCommand::request_with_header(request_code::UNREGISTER_CLIENT, &header);
                // Best effort: the broker also expires silent channels.
                let _ = self
                    .inner
                    .rpc
                    .invoke(addr, request, self.inner.config.request_timeout)
                    .await;
            }
        }
        self.inner.rpc.shutdown();
    }

    /// Whether [`ClientInstance::shutdown`] has not been called.
    pub fn is_running(&self) -> bool {
        self.inner.running.load(Ordering::SeqCst)
    }

    /// The client ID (`ip@instance`).
    pub fn client_id(&self) -> &str {
        &self.inner.client_id
    }

    /// The configuration.
    pub fn config(&self) -> &ClientConfig {
        &self.inner.config
    }

    /// The clock.
    pub fn clock(&self) -> &C {
        &self.inner.clock
    }

    /// The next `UNIQ_KEY`.
    pub fn next_uniq_key(&self) -> String {
        let now = self.inner.clock.wall_ms();
        lock(&self.inner.uniq).next(now)
    }

    /// Sends `request` to `addr` and returns whatever it answers.
    pub async fn invoke(&self, addr: &str, request: RemotingCommand) -> Result<RemotingCommand> {
        self.invoke_with_timeout(addr, request, self.inner.config.request_timeout)
            .await
    }

    /// Like [`ClientInstance::invoke`] with an explicit timeout.
    pub async fn invoke_with_timeout(
        &self,
        addr: &str,
        request: RemotingCommand,
        timeout: Duration,
    ) -> Result<RemotingCommand> {
        if !self.is_running() {
            return Err(Error::NotRunning);
        }
        Ok(self.inner.rpc.invoke(addr, request, timeout).await?)
    }

    /// Sends `request` to `addr` without waiting for an answer.
    pub async fn invoke_oneway(&self, addr: &str, request: RemotingCommand) -> Result<()> {
        if !self.is_running() {
            return Err(Error::NotRunning);
        }
        Ok(self
            .inner
            .rpc
            .invoke_oneway(addr, request, self.inner.config.request_timeout)
            .await?)
    }

    /// Sends `request` to `addr` and fails unless it answers `SUCCESS`.
    pub async fn invoke_ok(&self, addr: &str, request: RemotingCommand) -> Result<RemotingCommand> {
        let response = self.invoke(addr, request).await?;
        expect_success(addr, response)
    }

    /// Sends `request` to the name servers, starting with the last one that
    /// answered and moving on when one cannot be reached.
    pub async fn invoke_namesrv(&self, request: RemotingCommand) -> Result<RemotingCommand> {
        let addrs = &self.inner.config.namesrv_addrs;
        if addrs.is_empty() {
            return Err(Error::NoNameServer);
        }
        let first = self.inner.namesrv_next.load(Ordering::Relaxed);
        let mut last_error = None;
        for i in 0..addrs.len() {
            let index = (first + i) % addrs.len();
            match self.invoke(&addrs[index], request.clone()).await {
                Ok(response) => {
                    self.inner.namesrv_next.store(index, Ordering::Relaxed);
                    return Ok(response);
                }
                Err(e) => last_error = Some(e),
            }
        }
        Err(last_error.unwrap_or(Error::NoNameServer))
    }

    /// The route of `topic`, from the cache or the name servers.
    pub async fn route(&self, topic: &str) -> Result<TopicRouteData> {
        if let Some(route) = lock(&self.inner.state).routes.get(topic) {
            return Ok(route.clone());
        }
        self.refresh_route(topic).await
    }

    /// Asks the name servers for the route of `topic` and caches it.
    pub async fn refresh_route(&self, topic: &str) -> Result<TopicRouteData> {
        let header = GetRouteInfoRequestHeader {
            topic: topic.to_owned(),
            ..Default::default()
        };
        let request =
            RemotingCommand::request_with_header(request_code::GET_ROUTEINFO_BY_TOPIC, &header);
        let response = self.invoke_namesrv(request).await?;
        if response.code == response_code::TOPIC_NOT_EXIST {
            lock(&self.inner.state).routes.remove(topic);
            return Err(Error::NoRoute(topic.to_owned()));
        }
        let response = expect_success("name server", response)?;
        let route = TopicRouteData::from_json(&response.body)
            .map_err(|e| Error::decode("topic route", e))?;
        let mut state = lock(&self.inner.state);
        for broker in &route.broker_datas {
            state
                .brokers
                .insert(broker.broker_name.clone(), broker.clone());
        }
        state.routes.insert(topic.to_owned(), route.clone());
        Ok(route)
    }

    /// Forgets the cached route of `topic` (after a send failure).
    pub fn forget_route(&self, topic: &str) {
        lock(&self.inner.state).routes.remove(topic);
    }

    async fn refresh_all_routes(&self) {
        let topics: Vec<String> = lock(&self.inner.state).routes.keys().cloned().collect();
        for topic in topics {
            if let Err(e) = self.refresh_route(&topic).await {
                tracing::debug!(%topic, error = %e, "route refresh failed");
            }
        }
    }

    /// The address of `broker_name`'s master.
    pub fn master_addr(&self, broker_name: &str) -> Option<String> {
        lock(&self.inner.state)
            .brokers
            .get(broker_name)
            .and_then(|b| b.broker_addrs.get(&MASTER_ID).cloned())
    }

    /// The address of `broker_name`'s broker `id` if known, else its master,
    /// else any of its brokers.
    pub fn broker_addr(&self, broker_name: &str, id: i64) -> Option<String> {
        let state = lock(&self.inner.state);
        let broker = state.brokers.get(broker_name)?;
        broker
            .broker_addrs
            .get(&id)
            .or_else(|| broker.broker_addrs.get(&MASTER_ID))
            .or_else(|| broker.broker_addrs.values().next())
            .cloned()
    }

    /// The address of `broker_name`'s master, refreshing `topic`'s route
    /// once if it is not known yet.
    pub async fn master_addr_for(&self, broker_name: &str, topic: &str) -> Result<String> {
        if let Some(addr) = self.master_addr(broker_name) {
            return Ok(addr);
        }
        self.refresh_route(topic).await?;
        self.master_addr(broker_name)
            .ok_or_else(|| Error::InvalidArgument(format!("broker `{broker_name}` has no master")))
    }

    /// Makes `listener` answer the brokers' transaction checks for `group`.
    pub(crate) fn register_transaction_listener(
        &self,
        group: &str,
        listener: Arc<dyn TransactionListener>,
    ) {
        lock(&self.inner.notices.transactions).insert(group.to_owned(), listener);
    }

    /// Registers a producer group for heartbeats.
    pub(crate) fn register_producer(&self, group: &str) {
        lock(&self.inner.state)
            .producer_groups
            .insert(group.to_owned());
    }

    /// Registers (or updates) a consumer group for heartbeats and returns
    /// the notification a rebalance waits on.
    pub(crate) fn register_consumer(&self, data: ConsumerData) -> Arc<Notify> {
        let notify = self.inner.notices.for_group(&data.group_name);
        lock(&self.inner.state)
            .consumers
            .insert(data.group_name.clone(), data);
        notify
    }

    /// The offset resets brokers announce for `group` (one receiver per
    /// group; a later call replaces the earlier one).
    pub(crate) fn offset_resets(&self, group: &str) -> mpsc::UnboundedReceiver<OffsetReset> {
        let (tx, rx) = mpsc::unbounded_channel();
        lock(&self.inner.notices.resets).insert(group.to_owned(), tx);
        rx
    }

    /// Removes a consumer group from the heartbeat.
    pub(crate) async fn unregister_consumer(&self, group: &str) {
        let brokers = {
            let mut state = lock(&self.inner.state);
            state.consumers.remove(group);
            all_broker_addrs(&state.brokers)
        };
        for addr in brokers {
            let header = UnregisterClientRequestHeader {
                client_id: self.inner.client_id.clone(),
                producer_group: None,
                consumer_group: Some(group.to_owned()),
            };
            let request =
                RemotingCommand::request_with_header(request_code::UNREGISTER_CLIENT, &header);
            let _ = self.invoke(&addr, request).await;
        }
    }

    fn heartbeat(&self) -> HeartbeatData {
        let state = lock(&self.inner.state);
        HeartbeatData {
            client_id: self.inner.client_id.clone(),
            producer_data_set: state
                .producer_groups
                .iter()
                .map(|g| ProducerData {
                    group_name: g.clone(),
                })
                .collect(),
            consumer_data_set: state.consumers.values().cloned().collect(),
        }
    }

    /// Sends one heartbeat to every known broker (masters and slaves).
    pub async fn send_heartbeat_to_all_brokers(&self) {
        let data = self.heartbeat();
        if data.producer_data_set.is_empty() && data.consumer_data_set.is_empty() {
            return;
        }
        let body = match body::encode(&data, "HeartbeatData") {
            Ok(b) => Bytes::from(b),
            Err(e) => {
                tracing::warn!(error = %e, "cannot encode heartbeat");
                return;
            }
        };
        let addrs = all_broker_addrs(&lock(&self.inner.state).brokers);
        for addr in addrs {
            let request =
                RemotingCommand::request(request_code::HEART_BEAT).with_body(body.clone());
            if let Err(e) = self.invoke_ok(&addr, request).await {
                tracing::debug!(%addr, error = %e, "heartbeat failed");
            }
        }
    }

    /// Sends one heartbeat to the brokers serving `topic` (so a new
    /// consumer is known before its first rebalance).
    pub async fn send_heartbeat_for_topic(&self, topic: &str) -> Result<()> {
        let route = self.route(topic).await?;
        let body = Bytes::from(
            body::encode(&self.heartbeat(), "HeartbeatData")
                .map_err(|e| Error::decode("heartbeat", e))?,
        );
        for broker in &route.broker_datas {
            for addr in broker.broker_addrs.values() {
                let request =
                    RemotingCommand::request(request_code::HEART_BEAT).with_body(body.clone());
                self.invoke_ok(addr, request).await?;
            }
        }
        Ok(())
    }

    /// The queues producers may write to: writable queues on brokers with
    /// a master, in route order.
    pub async fn publish_queues(&self, topic: &str) -> Result<Vec<MessageQueue>> {
        let route = self.route(topic).await?;
        Ok(publish_queues(topic, &route))
    }

    /// The queues consumers read: readable queues of every broker.
    pub async fn subscribe_queues(&self, topic: &str) -> Result<Vec<MessageQueue>> {
        let route = self.refresh_route(topic).await?;
        Ok(subscribe_queues(topic, &route))
    }
}

/// Writable queues on brokers with a master.
pub(crate) fn publish_queues(topic: &str, route: &TopicRouteData) -> Vec<MessageQueue> {
    let mut out = Vec::new();
    let mut queue_datas = route.queue_datas.clone();
    queue_datas.sort_by(|a, b| a.broker_name.cmp(&b.broker_name));
    for q in &queue_datas {
        if q.perm & PERM_WRITE == 0 {
            continue;
        }
        let has_master = route
            .broker_datas
            .iter()
            .any(|b| b.broker_name == q.broker_name && b.broker_addrs.contains_key(&MASTER_ID));
        if !has_master {
            continue;
        }
        for queue_id in 0..q.write_queue_nums {
            out.push(MessageQueue {
                topic: topic.to_owned(),
                broker_name: q.broker_name.clone(),
                queue_id,
            });
        }
    }
    out
}

/// Readable queues of every broker, sorted.
pub(crate) fn subscribe_queues(topic: &str, route: &TopicRouteData) -> Vec<MessageQueue> {
    let mut out: Vec<MessageQueue> = route
        .queue_datas
        .iter()
        .filter(|q| q.perm & PERM_READ != 0)
        .flat_map(|q| {
            (0..q.read_queue_nums).map(|queue_id| MessageQueue {
                topic: topic.to_owned(),
                broker_name: q.broker_name.clone(),
                queue_id,
            })
        })
        .collect();
    out.sort();
    out
}

fn all_broker_addrs(brokers: &BTreeMap<String, BrokerData>) -> Vec<String> {
    let set: BTreeSet<String> = brokers
        .values()
        .flat_map(|b| b.broker_addrs.values().cloned())
        .collect();
    set.into_iter().collect()
}

/// `response` if it is `SUCCESS`, else the broker's code and remark as an error.
pub fn expect_success(server: &str, response: RemotingCommand) -> Result<RemotingCommand> {
    if response.code == response_code::SUCCESS {
        Ok(response)
    } else {
        Err(Error::Broker {
            server: server.to_owned(),
            code: response.code,
            remark: response.remark.clone().unwrap_or_default(),
        })
    }
}

/// Decodes a typed header from a response, naming what it was.
pub(crate) fn response_header<H: CommandHeader>(
    response: &RemotingCommand,
    what: &'static str,
) -> Result<H> {
    response.header::<H>().map_err(|e| Error::decode(what, e))
}

/// Serves what brokers ask of clients. A consumer-set change wakes the
/// group's rebalance; everything else is not supported (yet).
fn serve_broker_request(
    ctx: &RequestContext,
    notices: &Notices,
    request: &RemotingCommand,
) -> Option<RemotingCommand> {
    match request.code {
        request_code::CHECK_TRANSACTION_STATE => {
            crate::producer::transaction::answer_check(
                ctx,
                request,
                |group| lock(&notices.transactions).get(group).cloned(),
                notices.credentials.clone(),
            );
            None
        }
        request_code::NOTIFY_CONSUMER_IDS_CHANGED => {
            if let Ok(h) = request.header::<NotifyConsumerIdsChangedRequestHeader>() {
                notices.for_group(&h.consumer_group).notify_one();
            }
            None
        }
        request_code::RESET_CONSUMER_CLIENT_OFFSET => {
            let parsed = request
                .header::<ResetOffsetRequestHeader>()
                .map_err(|e| e.to_string())
                .and_then(|h| {
                    ResetOffsetBody::parse(&request.body)
                        .map(|b| (h.group, b.offset_table))
                        .map_err(|e| e.to_string())
                });
            match parsed {
                Ok((group, table)) => {
                    notices.reset(&group, table);
                    Some(RemotingCommand::success())
                }
                Err(e) => Some(RemotingCommand::response(
                    response_code::SYSTEM_ERROR,
                    format!("[sluice-client] bad offset reset: {e}"),
                )),
            }
        }
        code => Some(RemotingCommand::response(
            response_code::REQUEST_CODE_NOT_SUPPORTED,
            format!("[sluice-client] request code {code} is not supported"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use sluice_net::body::QueueData;

    use super::*;

    fn route() -> TopicRouteData {
        TopicRouteData {
            broker_datas: vec![
                BrokerData {
                    broker_addrs: BTreeMap::from([(0, "a:1".to_owned())]),
                    broker_name: "b1".to_owned(),
                    cluster: "c".to_owned(),
                    enable_acting_master: false,
                },
                BrokerData {
                    broker_addrs: BTreeMap::from([(1, "s:1".to_owned())]),
                    broker_name: "b2".to_owned(),
                    cluster: "c".to_owned(),
                    enable_acting_master: false,
                },
            ],
            queue_datas: vec![
                QueueData {
                    broker_name: "b2".to_owned(),
                    read_queue_nums: 2,
                    write_queue_nums: 2,
                    perm: PERM_READ | PERM_WRITE,
                    topic_sys_flag: 0,
                },
                QueueData {
                    broker_name: "b1".to_owned(),
                    read_queue_nums: 3,
                    write_queue_nums: 2,
                    perm: PERM_READ | PERM_WRITE,
                    topic_sys_flag: 0,
                },
            ],
            ..Default::default()
        }
    }

    #[test]
    fn publish_skips_brokers_without_a_master() {
        let queues = publish_queues("T", &route());
        let ids: Vec<_> = queues
            .iter()
            .map(|q| (q.broker_name.as_str(), q.queue_id))
            .collect();
        assert_eq!(ids, [("b1", 0), ("b1", 1)]);
    }

    #[test]
    fn subscribe_reads_every_readable_queue() {
        let queues = subscribe_queues("T", &route());
        assert_eq!(queues.len(), 5);
        assert!(queues.windows(2).all(|w| w[0] < w[1]));
    }
}
