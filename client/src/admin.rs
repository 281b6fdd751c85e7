//! The admin API (`mqadmin`-class): topics, cluster, group progress,
//! message lookup and offset reset.

use std::collections::BTreeMap;
use std::time::Duration;

use sluice_core::message::{decode_offset_msg_id, retry_topic};
use sluice_core::Clock;
use sluice_net::body::{
    self, ClusterInfo, ConsumeStats, KvTable, ResetOffsetBody, TopicList, TopicRouteData,
    PERM_READ, PERM_WRITE,
};
use sluice_net::header::{
    CreateTopicRequestHeader, DeleteTopicRequestHeader, GetConsumeStatsRequestHeader,
    QueryMessageRequestHeader, ResetOffsetRequestHeader, ViewMessageRequestHeader,
    UNIQUE_KEY_QUERY,
};
use sluice_net::remoting::{request_code, response_code};
use sluice_net::{RemotingCommand, Transport};

use crate::error::{Error, Result};
use crate::instance::{expect_success, ClientInstance};
use crate::message::{decode_messages, MessageExt, MessageQueue};

/// Progress of one queue for one group (`GET_CONSUME_STATS`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueProgress {
    /// The queue.
    pub queue: MessageQueue,
    /// Next offset to be written.
    pub broker_offset: i64,
    /// The group's committed offset (0 when it never committed).
    pub consumer_offset: i64,
    /// Store time of the last consumed message, ms (0: none).
    pub last_timestamp_ms: i64,
}

impl QueueProgress {
    /// Messages written but not consumed.
    pub fn lag(&self) -> i64 {
        (self.broker_offset - self.consumer_offset).max(0)
    }
}

/// One broker as the cluster view shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerView {
    /// Cluster name.
    pub cluster: String,
    /// Broker name.
    pub broker_name: String,
    /// Broker ID (0 = master).
    pub broker_id: i64,
    /// Address.
    pub addr: String,
    /// `GET_BROKER_RUNTIME_INFO` (empty if the broker did not answer).
    pub runtime: BTreeMap<String, String>,
}

/// Options for creating or updating a topic.
#[derive(Clone, Debug)]
pub struct TopicOptions {
    /// Read and write queue count on each broker.
    pub queues: i32,
    /// `PERM_*` bits (read + write by default).
    pub perm: i32,
    /// Ordered topic.
    pub order: bool,
    /// Only these brokers (by name); all masters when empty.
    pub brokers: Vec<String>,
}

impl Default for TopicOptions {
    fn default() -> Self {
        Self {
            queues: 8,
            perm: PERM_READ | PERM_WRITE,
            order: false,
            brokers: Vec::new(),
        }
    }
}

/// How long an admin request may take by default: creating a topic
/// persists the broker's topic table with two fsyncs, which a busy disk can
/// stretch past the 3 s of an ordinary request.
pub const ADMIN_TIMEOUT: Duration = Duration::from_secs(15);

/// One step of a long admin operation, for a progress display.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// The broker's name, or the name server's address.
    pub target: String,
    /// `target` is a name server.
    pub namesrv: bool,
    /// Steps done, this one included, of `total`.
    pub done: usize,
    pub total: usize,
    /// Offset resets: queues reset so far, of the read queues the topic's
    /// route lists.
    pub queues: Option<(usize, usize)>,
}

/// Administers a cluster through its name servers.
pub struct Admin<T: Transport, C: Clock> {
    client: ClientInstance<T, C>,
    timeout: Duration,
}

impl<T: Transport, C: Clock> Admin<T, C> {
    /// Admin over `client`.
    pub fn new(client: ClientInstance<T, C>) -> Self {
        Self {
            client,
            timeout: ADMIN_TIMEOUT,
        }
    }

    /// Sets the timeout of each admin request to a broker.
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sends an admin request to a broker or name server and requires success.
    async fn call(&self, addr: &str, request: RemotingCommand) -> Result<RemotingCommand> {
        let response = self
            .client
            .invoke_with_timeout(addr, request, self.timeout)
            .await?;
        expect_success(addr, response)
    }

    /// The client.
    pub fn client(&self) -> &ClientInstance<T, C> {
        &self.client
    }

    /// Brokers, clusters and their addresses.
    pub async fn cluster_info(&self) -> Result<ClusterInfo> {
        let response = self
            .client
            .invoke_namesrv(RemotingCommand::request(
                request_code::GET_BROKER_CLUSTER_INFO,
            ))
            .await?;
        let response = expect_success("name server", response)?;
        ClusterInfo::from_json(&response.body).map_err(|e| Error::decode("cluster info", e))
    }

    /// Every broker with its runtime figures.
    pub async fn cluster(&self) -> Result<Vec<BrokerView>> {
        let info = self.cluster_info().await?;
        let mut out = Vec::new();
        for (name, data) in &info.broker_addr_table {
            for (id, addr) in &data.broker_addrs {
                let runtime = self.runtime_info(addr).await.unwrap_or_default();
                out.push(BrokerView {
                    cluster: data.cluster.clone(),
                    broker_name: name.clone(),
                    broker_id: *id,
                    addr: addr.clone(),
                    runtime,
                });
            }
        }
        Ok(out)
    }

    /// A broker's `GET_BROKER_RUNTIME_INFO` table.
    pub async fn runtime_info(&self, addr: &str) -> Result<BTreeMap<String, String>> {
        let response = self
            .client
            .invoke_ok(
                addr,
                RemotingCommand::request(request_code::GET_BROKER_RUNTIME_INFO),
            )
            .await?;
        let table: KvTable = body::decode(&response.body, "KvTable")
            .map_err(|e| Error::decode("runtime info", e))?;
        Ok(table.table)
    }

    /// Each master's ACL policy (`GET_BROKER_CLUSTER_ACL_CONFIG`, admin
    /// only; secrets are never sent), by broker name.
    pub async fn acl_config(&self) -> Result<Vec<(String, serde_json::Value)>> {
        let mut out = Vec::new();
        for (name, addr) in self.masters(&[]).await? {
            let request = RemotingCommand::request(request_code::GET_BROKER_CLUSTER_ACL_CONFIG);
            let response = self.client.invoke_ok(&addr, request).await?;
            let value = serde_json::from_slice(&response.body)
                .map_err(|e| Error::decode("acl config", e))?;
            out.push((name, value));
        }
        Ok(out)
    }

    /// What `access_key` may do on `topic` and `group`, as each master's
    /// policy says (`SLUICE_ACL_CHECK`, admin only), by broker name.
    pub async fn acl_check(
        &self,
        access_key: &str,
        topic: Option<&str>,
        group: Option<&str>,
    ) -> Result<Vec<(String, serde_json::Value)>> {
        let header = sluice_net::header::AclCheckRequestHeader {
            access_key_to_check: access_key.to_owned(),
            topic: topic.map(str::to_owned),
            group: group.map(str::to_owned),
        };
        let mut out = Vec::new();
        for (name, addr) in self.masters(&[]).await? {
            let request =
                RemotingCommand::request_with_header(request_code::SLUICE_ACL_CHECK, &header);
            let response = self.client.invoke_ok(&addr, request).await?;
            let value = serde_json::from_slice(&response.body)
                .map_err(|e| Error::decode("acl check", e))?;
            out.push((name, value));
        }
        Ok(out)
    }

    async fn masters(&self, only: &[String]) -> Result<Vec<(String, String)>> {
        let info = self.cluster_info().await?;
        let masters: Vec<(String, String)> = info
            .broker_addr_table
            .iter()
            .filter(|(name, _)| only.is_empty() || only.contains(name))
            .filter_map(|(name, b)| b.broker_addrs.get(&0).map(|a| (name.clone(), a.clone())))
            .collect();
        if masters.is_empty() {
            return Err(Error::InvalidArgument(
                "no master broker is registered with the name servers".to_owned(),
            ));
        }
        Ok(masters)
    }

    /// Creates (or updates) `topic` on the chosen masters. The brokers
    /// register the change with the name servers at once.
    pub async fn create_topic(&self, topic: &str, options: &TopicOptions) -> Result<()> {
        sluice_core::message::validate_topic(topic)
            .map_err(|e| Error::InvalidArgument(e.to_string()))?;
        if options.queues <= 0 || options.queues > 1024 {
            return Err(Error::InvalidArgument(format!(
                "queue count {} is outside 1..=1024",
                options.queues
            )));
        }
        for (_, addr) in self.masters(&options.brokers).await? {
            let header = CreateTopicRequestHeader {
                topic: topic.to_owned(),
                default_topic: sluice_core::message::DEFAULT_TOPIC.to_owned(),
                read_queue_nums: options.queues,
                write_queue_nums: options.queues,
                perm: options.perm,
                topic_filter_type: "SINGLE_TAG".to_owned(),
                topic_sys_flag: Some(0),
                order: options.order,
            };
            let request = RemotingCommand::request_with_header(
                request_code::UPDATE_AND_CREATE_TOPIC,
                &header,
            );
            self.call(&addr, request).await?;
        }
        self.client.forget_route(topic);
        Ok(())
    }

    /// Deletes `topic` from every master and every name server.
    pub async fn delete_topic(&self, topic: &str) -> Result<()> {
        self.delete_topic_with_progress(topic, |_| {}).await
    }

    /// [`Admin::delete_topic`], calling `on_step` after each broker and
    /// name server has deleted it.
    pub async fn delete_topic_with_progress(
        &self,
        topic: &str,
        mut on_step: impl FnMut(&Step),
    ) -> Result<()> {
        let header = DeleteTopicRequestHeader {
            topic: topic.to_owned(),
        };
        let masters = self.masters(&[]).await?;
        let namesrvs = &self.client.config().namesrv_addrs;
        let total = masters.len() + namesrvs.len();
        for (done, (name, addr)) in masters.iter().enumerate() {
            let request =
                RemotingCommand::request_with_header(request_code::DELETE_TOPIC_IN_BROKER, &header);
            self.call(addr, request).await?;
            on_step(&Step {
                target: name.clone(),
                namesrv: false,
                done: done + 1,
                total,
                queues: None,
            });
        }
        for (done, addr) in namesrvs.iter().enumerate() {
            let request = RemotingCommand::request_with_header(
                request_code::DELETE_TOPIC_IN_NAMESRV,
                &header,
            );
            self.call(addr, request).await?;
            on_step(&Step {
                target: addr.clone(),
                namesrv: true,
                done: masters.len() + done + 1,
                total,
                queues: None,
            });
        }
        self.client.forget_route(topic);
        Ok(())
    }

    /// Every topic the name servers know, sorted.
    pub async fn list_topics(&self) -> Result<Vec<String>> {
        let response = self
            .client
            .invoke_namesrv(RemotingCommand::request(
                request_code::GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
            ))
            .await?;
        let response = expect_success("name server", response)?;
        let list: TopicList = body::decode(&response.body, "TopicList")
            .map_err(|e| Error::decode("topic list", e))?;
        let mut topics = list.topic_list;
        topics.sort();
        Ok(topics)
    }

    /// The route of `topic`.
    pub async fn route(&self, topic: &str) -> Result<TopicRouteData> {
        self.client.refresh_route(topic).await
    }

    /// Per-queue progress of `group` from every master: on `topic` and
    /// the group's retry topic, or with `None` on every topic the group
    /// subscribes to or has offsets for.
    pub async fn group_progress(
        &self,
        group: &str,
        topic: Option<&str>,
    ) -> Result<Vec<QueueProgress>> {
        let mut out = self.stats(group, topic).await?;
        if let Some(topic) = topic {
            let retry = retry_topic(group);
            if topic != retry {
                out.extend(self.stats(group, Some(&retry)).await?);
            }
        }
        out.sort_by(|a, b| a.queue.cmp(&b.queue));
        Ok(out)
    }

    /// Moves `group`'s offsets on `topic` to the first message stored at or
    /// after `timestamp_ms` (`-1`: the end of each queue), on every broker
    /// serving the topic; live consumers of the group are told and restart
    /// their queues there. Returns the new offsets.
    pub async fn reset_offset_by_time(
        &self,
        group: &str,
        topic: &str,
        timestamp_ms: i64,
    ) -> Result<Vec<(MessageQueue, i64)>> {
        self.reset_offset_by_time_with_progress(group, topic, timestamp_ms, |_| {})
            .await
    }

    /// [`Admin::reset_offset_by_time`], calling `on_step` after each broker
    /// has reset its queues.
    pub async fn reset_offset_by_time_with_progress(
        &self,
        group: &str,
        topic: &str,
        timestamp_ms: i64,
        mut on_step: impl FnMut(&Step),
    ) -> Result<Vec<(MessageQueue, i64)>> {
        let route = self.client.refresh_route(topic).await?;
        let header = ResetOffsetRequestHeader {
            topic: topic.to_owned(),
            group: group.to_owned(),
            timestamp: timestamp_ms,
            is_force: Some(true),
            queue_id: None,
            offset: None,
        };
        let masters: Vec<_> = route
            .broker_datas
            .iter()
            .filter_map(|b| b.broker_addrs.get(&0).map(|a| (&b.broker_name, a)))
            .collect();
        let queues_total = route
            .queue_datas
            .iter()
            .map(|q| usize::try_from(q.read_queue_nums).unwrap_or(0))
            .sum();
        let mut out = Vec::new();
        for (done, (name, addr)) in masters.iter().enumerate() {
            let request = RemotingCommand::request_with_header(
                request_code::INVOKE_BROKER_TO_RESET_OFFSET,
                &header,
            );
            let response = self.call(addr, request).await?;
            let body = ResetOffsetBody::parse(&response.body)
                .map_err(|e| Error::decode("reset offset answer", e))?;
            out.extend(body.offset_table);
            on_step(&Step {
                target: (*name).clone(),
                namesrv: false,
                done: done + 1,
                total: masters.len(),
                queues: Some((out.len(), queues_total)),
            });
        }
        out.sort();
        Ok(out)
    }

    /// Messages of `topic` carrying business key `key`, from every broker.
    pub async fn query_by_key(&self, topic: &str, key: &str, max: i32) -> Result<Vec<MessageExt>> {
        self.query(topic, key, max, false).await
    }

    async fn query(
        &self,
        topic: &str,
        key: &str,
        max: i32,
        unique: bool,
    ) -> Result<Vec<MessageExt>> {
        let route = self.client.refresh_route(topic).await?;
        let mut out = Vec::new();
        for broker in &route.broker_datas {
            let Some(addr) = broker
                .broker_addrs
                .get(&0)
                .or_else(|| broker.broker_addrs.values().next())
            else {
                continue;
            };
            let header = QueryMessageRequestHeader {
                topic: topic.to_owned(),
                key: key.to_owned(),
                max_num: max,
                begin_timestamp: 0,
                end_timestamp: i64::MAX,
            };
            let mut request =
                RemotingCommand::request_with_header(request_code::QUERY_MESSAGE, &header);
            if unique {
                request.ext_fields.insert(UNIQUE_KEY_QUERY, "true");
            }
            let response = self.client.invoke(addr, request).await?;
            if response.code == response_code::QUERY_NOT_FOUND {
                continue;
            }
            let response = expect_success(addr, response)?;
            let mut found = decode_messages(&response.body, &broker.broker_name)?;
            found.retain(|m| {
                m.topic == topic
                    && if unique {
                        m.properties.uniq_key() == Some(key)
                    } else {
                        m.keys().any(|k| k == key)
                    }
            });
            out.extend(found);
        }
        out.sort_by_key(|m| (m.store_timestamp_ms, m.commit_log_offset));
        Ok(out)
    }

    /// The message with id `id`: an offset id (store host + CommitLog
    /// offset) is read directly; a client id (`UNIQ_KEY`) needs `topic`.
    pub async fn view_message(&self, id: &str, topic: Option<&str>) -> Result<Option<MessageExt>> {
        if let Ok((host, offset)) = decode_offset_msg_id(id) {
            let addr = host.to_string();
            let header = ViewMessageRequestHeader {
                offset,
                topic: topic.map(str::to_owned),
            };
            let request =
                RemotingCommand::request_with_header(request_code::VIEW_MESSAGE_BY_ID, &header);
            let response = self.client.invoke(&addr, request).await?;
            if response.code == response_code::SUCCESS {
                let broker = self.broker_name_of(&addr).await.unwrap_or_default();
                return Ok(decode_messages(&response.body, &broker)?.into_iter().next());
            }
            if topic.is_none() {
                return Ok(None);
            }
        }
        let Some(topic) = topic else {
            return Err(Error::InvalidArgument(format!(
                "`{id}` is not an offset message id; give the topic to look up a client id"
            )));
        };
        Ok(self.query(topic, id, 32, true).await?.into_iter().next())
    }

    async fn stats(&self, group: &str, topic: Option<&str>) -> Result<Vec<QueueProgress>> {
        let header = GetConsumeStatsRequestHeader {
            consumer_group: group.to_owned(),
            topic: topic.map(str::to_owned),
        };
        let mut out = Vec::new();
        for (_, addr) in self.masters(&[]).await? {
            let request =
                RemotingCommand::request_with_header(request_code::GET_CONSUME_STATS, &header);
            let response = self.call(&addr, request).await?;
            let stats = ConsumeStats::parse(&response.body)
                .map_err(|e| Error::decode("consume stats", e))?;
            out.extend(
                stats
                    .offset_table
                    .into_iter()
                    .map(|(queue, o)| QueueProgress {
                        queue,
                        broker_offset: o.broker_offset,
                        consumer_offset: o.consumer_offset,
                        last_timestamp_ms: o.last_timestamp,
                    }),
            );
        }
        Ok(out)
    }

    async fn broker_name_of(&self, addr: &str) -> Option<String> {
        let info = self.cluster_info().await.ok()?;
        info.broker_addr_table
            .iter()
            .find(|(_, b)| b.broker_addrs.values().any(|a| a == addr))
            .map(|(name, _)| name.clone())
    }
}
