//! The producer: sync, async, oneway and batch sends; round-robin queue
//! selection with latency-based fault avoidance; retries that never report
//! success for a send the broker did not acknowledge; ordered sends by
//! queue selector and by sharding key; `UNIQ_KEY` ids; body compression;
//! a producer id and per-lane sequence numbers on every retried send
//! (`sequence`), so a Sluice broker stores each send once.

mod fault;
mod sequence;
pub mod transaction;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use sluice_core::message::{
    encode_batch, java_string_hash, keys, sys_flag, BatchItem, Properties, DEFAULT_TOPIC,
};
use sluice_core::Clock;
use sluice_net::header::{SendMessageRequestHeaderV2, SendMessageResponseHeader};
use sluice_net::remoting::{request_code, response_code};
use sluice_net::{RemotingCommand, Transport};

use self::fault::FaultTable;
pub use self::sequence::PRODUCER_ID_PREFIX_BYTES_MAX;
use self::sequence::{producer_id, Lanes, Stampable};
use crate::error::{Error, Result};
use crate::instance::{lock, publish_queues, response_header, ClientInstance};
use crate::message::{deflate, Message, MessageQueue};

/// Producer settings (RocketMQ's defaults).
#[derive(Clone, Debug)]
pub struct ProducerConfig {
    /// Producer group (brokers ask a live member to check transactions).
    pub group: String,
    /// Budget for one send including its retries.
    pub send_timeout: Duration,
    /// Extra attempts after a retryable failure (RocketMQ: 2).
    pub retries: u32,
    /// Bodies larger than this are zlib-compressed (RocketMQ: 4 KiB).
    pub compress_over: usize,
    /// zlib level (RocketMQ: 5).
    pub compress_level: u32,
    /// Queues of a topic the broker creates on first send (RocketMQ: 4).
    pub default_topic_queues: i32,
    /// Skip brokers that failed or answered slowly.
    pub fault_avoidance: bool,
    /// A prefix for the producer id stamped on sends (`__SLUICE_PID`), to
    /// recognise the producer in stored records; the id always ends with a
    /// part unique to this producer instance (a `UNIQ_KEY`-style id), since
    /// numbers restart with every producer.
    pub producer_id_prefix: Option<String>,
    /// Stamp the producer id and per-lane sequence numbers on sends, so a
    /// Sluice broker recognises retries exactly (Apache brokers ignore
    /// them).
    pub sequence_stamps: bool,
}

impl ProducerConfig {
    /// Defaults for `group`.
    pub fn new(group: impl Into<String>) -> Self {
        Self {
            group: group.into(),
            send_timeout: Duration::from_secs(3),
            retries: 2,
            compress_over: 4 * 1024,
            compress_level: 5,
            default_topic_queues: 4,
            fault_avoidance: true,
            producer_id_prefix: None,
            sequence_stamps: true,
        }
    }
}

/// How an acknowledged send was stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendStatus {
    /// Stored and (per the broker's flush and replication mode) durable.
    Ok,
    /// Stored, but the flush did not finish in time.
    FlushDiskTimeout,
    /// Stored, but the slave did not confirm in time.
    FlushSlaveTimeout,
    /// Stored, but no slave was available to replicate it.
    SlaveNotAvailable,
}

/// An answered send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SendResult {
    /// How it was stored.
    pub status: SendStatus,
    /// The client-side id (`UNIQ_KEY`; comma-joined for a batch).
    pub msg_id: String,
    /// The broker's offset id (comma-joined for a batch). Empty when a
    /// Sluice broker recognised the send's number as stored long ago but no
    /// longer keeps its position (then `queue_offset` is -1).
    pub offset_msg_id: String,
    /// Queue it went to.
    pub queue: MessageQueue,
    /// Offset in the queue (of the first message of a batch).
    pub queue_offset: i64,
}

/// Sends messages. Cheap to clone; clones share state.
pub struct Producer<T: Transport, C: Clock> {
    client: ClientInstance<T, C>,
    config: Arc<ProducerConfig>,
    next_queue: Arc<AtomicUsize>,
    faults: Arc<Mutex<FaultTable>>,
    lanes: Arc<Lanes>,
}

impl<T: Transport, C: Clock> Clone for Producer<T, C> {
    fn clone(&self) -> Self {
        Self {
            client: self.client.clone(),
            config: Arc::clone(&self.config),
            next_queue: Arc::clone(&self.next_queue),
            faults: Arc::clone(&self.faults),
            lanes: Arc::clone(&self.lanes),
        }
    }
}

/// A message encoded once for every attempt.
#[derive(Clone)]
struct Prepared {
    topic: String,
    body: Bytes,
    flag: i32,
    sys_flag: i32,
    properties: String,
    uniq_key: String,
    batch: bool,
    /// Not stamped yet (`None`: stamped, or never stamped).
    stampable: Option<Stampable>,
}

impl<T: Transport, C: Clock> Producer<T, C> {
    /// A producer on `client`; starts the client's background loop.
    pub fn new(client: ClientInstance<T, C>, config: ProducerConfig) -> Self {
        // Without stamps no id is drawn, so such a producer's keys and
        // records are exactly what they were before stamps existed.
        let id = if config.sequence_stamps {
            producer_id(
                config.producer_id_prefix.as_deref(),
                &client.next_uniq_key(),
            )
        } else {
            String::new()
        };
        client.register_producer(&config.group);
        client.start();
        let seed = java_string_hash(client.client_id()).unsigned_abs() as usize;
        Self {
            client,
            config: Arc::new(config),
            next_queue: Arc::new(AtomicUsize::new(seed)),
            faults: Arc::new(Mutex::new(FaultTable::default())),
            lanes: Arc::new(Lanes::new(id)),
        }
    }

    /// The producer id stamped on its sends.
    pub fn producer_id(&self) -> &str {
        self.lanes.id()
    }

    /// The client this producer sends through.
    pub fn client(&self) -> &ClientInstance<T, C> {
        &self.client
    }

    /// The configuration.
    pub fn config(&self) -> &ProducerConfig {
        &self.config
    }

    /// The message's `UNIQ_KEY`, assigning a fresh one if it has none.
    fn ensure_uniq_key(&self, props: &mut Properties) -> Result<String> {
        if let Some(k) = props.uniq_key() {
            return Ok(k.to_owned());
        }
        let k = self.client.next_uniq_key();
        props
            .insert(keys::UNIQ_KEY, &k)
            .map_err(|e| Error::InvalidMessage(e.to_string()))?;
        Ok(k)
    }

    fn prepare(&self, msg: &Message) -> Result<Prepared> {
        msg.validate()?;
        let mut props = msg.encoded_properties()?;
        let uniq_key = self.ensure_uniq_key(&mut props)?;
        let (body, flags) = if msg.body.len() > self.config.compress_over {
            let packed = deflate(&msg.body, self.config.compress_level);
            if packed.len() < msg.body.len() {
                (Bytes::from(packed), sys_flag::COMPRESSED)
            } else {
                (msg.body.clone(), 0)
            }
        } else {
            (msg.body.clone(), 0)
        };
        let properties = String::from_utf8(props.encode())
            .map_err(|e| Error::InvalidMessage(format!("properties are not utf-8: {e}")))?;
        Ok(Prepared {
            topic: msg.topic.clone(),
            body,
            flag: msg.flag,
            sys_flag: flags,
            properties,
            uniq_key,
            batch: false,
            stampable: self.config.sequence_stamps.then_some(Stampable::One(props)),
        })
    }

    fn prepare_batch(&self, msgs: &[Message]) -> Result<Prepared> {
        let first = msgs
            .first()
            .ok_or_else(|| Error::InvalidMessage("the batch is empty".to_owned()))?;
        let mut items = Vec::with_capacity(msgs.len());
        let mut unstamped = Vec::with_capacity(msgs.len());
        let mut ids = Vec::with_capacity(msgs.len());
        for msg in msgs {
            msg.validate()?;
            if msg.topic != first.topic {
                return Err(Error::InvalidMessage(
                    "every message of a batch must have the same topic".to_owned(),
                ));
            }
            if msg.property(keys::DELAY).is_some() {
                return Err(Error::InvalidMessage(
                    "a batch cannot hold delayed messages".to_owned(),
                ));
            }
            let mut props = msg.encoded_properties()?;
            ids.push(self.ensure_uniq_key(&mut props)?);
            items.push(BatchItem {
                flag: msg.flag,
                body: msg.body.clone(),
                properties: Bytes::from(props.encode()),
            });
            unstamped.push((msg.flag, msg.body.clone(), props));
        }
        let body = encode_batch(&items).map_err(|e| Error::InvalidMessage(e.to_string()))?;
        if body.len() > sluice_core::message::BODY_BYTES_MAX {
            return Err(Error::InvalidMessage(format!(
                "the batch is {} bytes; at most {} are allowed",
                body.len(),
                sluice_core::message::BODY_BYTES_MAX
            )));
        }
        Ok(Prepared {
            topic: first.topic.clone(),
            body: Bytes::from(body),
            flag: 0,
            sys_flag: 0,
            properties: String::new(),
            uniq_key: ids.join(","),
            batch: true,
            stampable: self
                .config
                .sequence_stamps
                .then_some(Stampable::Batch(unstamped)),
        })
    }

    /// Sends `msg` to a queue chosen round-robin, retrying retryable
    /// failures on another broker. Success means the broker acknowledged it.
    pub async fn send(&self, msg: &Message) -> Result<SendResult> {
        let prepared = self.prepare(msg)?;
        self.send_with_retries(&prepared).await
    }

    /// Sends `msg` as a transaction half (sysFlag PREPARED), with the usual
    /// retries; the caller set `TRAN_MSG` and `PGROUP`.
    pub(crate) async fn send_prepared(&self, msg: &Message) -> Result<SendResult> {
        let mut prepared = self.prepare(msg)?;
        prepared.sys_flag |= sys_flag::TRANSACTION_PREPARED;
        // A half is stored every time (a broker never deduplicates it).
        prepared.stampable = None;
        self.send_with_retries(&prepared).await
    }

    /// Sends `msgs` (same topic, no delays) as one batch, stored together in
    /// one queue.
    pub async fn send_batch(&self, msgs: &[Message]) -> Result<SendResult> {
        let prepared = self.prepare_batch(msgs)?;
        self.send_with_retries(&prepared).await
    }

    /// Sends in the background; the handle yields the result.
    pub fn send_async(&self, msg: Message) -> tokio::task::JoinHandle<Result<SendResult>> {
        let me = self.clone();
        tokio::spawn(async move { me.send(&msg).await })
    }

    /// Sends without waiting for, or learning, the outcome. One attempt.
    pub async fn send_oneway(&self, msg: &Message) -> Result<()> {
        let prepared = self.prepare(msg)?;
        let queues = self.queues_for(&prepared.topic).await?;
        let queue = self.select(&queues, None).clone();
        let addr = self
            .client
            .master_addr_for(&queue.broker_name, &prepared.topic)
            .await?;
        let request = self.request(&prepared, &queue);
        self.client.invoke_oneway(&addr, request).await
    }

    /// Sends `msg` to exactly `queue`, retrying there only (ordered sends
    /// must not move to another queue).
    pub async fn send_to_queue(&self, msg: &Message, queue: &MessageQueue) -> Result<SendResult> {
        let prepared = self.lanes.stamp(&self.prepare(msg)?, queue)?;
        let deadline = self.client.clock().monotonic() + self.config.send_timeout;
        let mut last = None;
        for _ in 0..=self.config.retries {
            match self.send_once(&prepared, queue, deadline).await {
                Ok(r) => return Ok(r),
                Err(e) if e.is_retryable_send() && self.client.clock().monotonic() < deadline => {
                    last = Some(e);
                }
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or(Error::NoRoute(prepared.topic)))
    }

    /// Sends `msg` to the queue `selector` picks from the topic's queues
    /// (RocketMQ's `MessageQueueSelector`).
    pub async fn send_with_selector<F>(&self, msg: &Message, selector: F) -> Result<SendResult>
    where
        F: FnOnce(&[MessageQueue]) -> Option<MessageQueue>,
    {
        let queues = self.queues_for(&msg.topic).await?;
        let queue = selector(&queues).ok_or_else(|| {
            Error::InvalidArgument("the queue selector chose no queue".to_owned())
        })?;
        self.send_to_queue(msg, &queue).await
    }

    /// Ordered send: every message with the same `sharding_key` goes to the
    /// same queue (hash of the key modulo the queue count), so a single
    /// consumer sees them in send order.
    pub async fn send_ordered(&self, msg: &Message, sharding_key: &str) -> Result<SendResult> {
        let msg = msg.clone().with_property(keys::SHARDING_KEY, sharding_key);
        let hash = java_string_hash(sharding_key).unsigned_abs() as usize;
        self.send_with_selector(&msg, |queues| {
            (!queues.is_empty()).then(|| queues[hash % queues.len()].clone())
        })
        .await
    }

    async fn queues_for(&self, topic: &str) -> Result<Vec<MessageQueue>> {
        match self.client.publish_queues(topic).await {
            Ok(q) if !q.is_empty() => Ok(q),
            Ok(_) | Err(Error::NoRoute(_)) => {
                // Not created yet: send to the brokers that accept
                // auto-creation (the TBW102 route); the broker creates the
                // topic on first write, with the producer's queue count.
                let template = self
                    .client
                    .route(DEFAULT_TOPIC)
                    .await
                    .map_err(|e| match e {
                        Error::NoRoute(_) => Error::NoRoute(topic.to_owned()),
                        other => other,
                    })?;
                let mut queues = publish_queues(topic, &template);
                queues.retain(|q| q.queue_id < self.config.default_topic_queues);
                if queues.is_empty() {
                    return Err(Error::NoRoute(topic.to_owned()));
                }
                Ok(queues)
            }
            Err(e) => Err(e),
        }
    }

    /// Round-robin over `queues`, skipping brokers under fault avoidance and
    /// `avoid` (the broker that just failed) while another choice exists.
    fn select<'q>(&self, queues: &'q [MessageQueue], avoid: Option<&str>) -> &'q MessageQueue {
        let now = self.client.clock().monotonic();
        let faults = lock(&self.faults);
        for _ in 0..queues.len() {
            let i = self.next_queue.fetch_add(1, Ordering::Relaxed) % queues.len();
            let q = &queues[i];
            let ok = (!self.config.fault_avoidance || faults.is_available(&q.broker_name, now))
                && avoid != Some(q.broker_name.as_str());
            if ok {
                return q;
            }
        }
        for _ in 0..queues.len() {
            let i = self.next_queue.fetch_add(1, Ordering::Relaxed) % queues.len();
            if avoid != Some(queues[i].broker_name.as_str()) {
                return &queues[i];
            }
        }
        &queues[self.next_queue.fetch_add(1, Ordering::Relaxed) % queues.len()]
    }

    async fn send_with_retries(&self, unstamped: &Prepared) -> Result<SendResult> {
        let deadline = self.client.clock().monotonic() + self.config.send_timeout;
        let mut last_broker: Option<String> = None;
        let mut last_error = None;
        // Stamped for the first attempt's queue; every retry keeps it.
        let mut stamped = None;
        for attempt in 0..=self.config.retries {
            if attempt > 0 && self.client.clock().monotonic() >= deadline {
                break;
            }
            let queues = match self.queues_for(&unstamped.topic).await {
                Ok(q) => q,
                Err(e) if e.is_retryable_send() => {
                    last_error = Some(e);
                    continue;
                }
                Err(e) => return Err(e),
            };
            let queue = self.select(&queues, last_broker.as_deref()).clone();
            let prepared: &Prepared = match &mut stamped {
                Some(p) => p,
                slot @ None => slot.insert(self.lanes.stamp(unstamped, &queue)?),
            };
            match self.send_once(prepared, &queue, deadline).await {
                Ok(result) => return Ok(result),
                Err(e) if e.is_retryable_send() => {
                    tracing::debug!(topic = %prepared.topic, broker = %queue.broker_name, attempt, error = %e, "send failed; retrying");
                    if matches!(
                        e,
                        Error::Broker {
                            code: response_code::TOPIC_NOT_EXIST,
                            ..
                        }
                    ) {
                        self.client.forget_route(&prepared.topic);
                    }
                    last_broker = Some(queue.broker_name.clone());
                    last_error = Some(e);
                }
                Err(e) => return Err(e),
            }
        }
        Err(last_error.unwrap_or_else(|| Error::NoRoute(unstamped.topic.clone())))
    }

    fn request(&self, prepared: &Prepared, queue: &MessageQueue) -> RemotingCommand {
        let header = SendMessageRequestHeaderV2 {
            a: self.config.group.clone(),
            b: prepared.topic.clone(),
            c: DEFAULT_TOPIC.to_owned(),
            d: self.config.default_topic_queues,
            e: queue.queue_id,
            f: prepared.sys_flag,
            g: i64::try_from(self.client.clock().wall_ms()).unwrap_or(i64::MAX),
            h: prepared.flag,
            i: (!prepared.properties.is_empty()).then(|| prepared.properties.clone()),
            j: Some(0),
            k: Some(false),
            l: None,
            m: Some(prepared.batch),
            n: Some(queue.broker_name.clone()),
        };
        let code = if prepared.batch {
            request_code::SEND_BATCH_MESSAGE
        } else {
            request_code::SEND_MESSAGE_V2
        };
        RemotingCommand::request_with_header(code, &header).with_body(prepared.body.clone())
    }

    async fn send_once(
        &self,
        prepared: &Prepared,
        queue: &MessageQueue,
        deadline: Duration,
    ) -> Result<SendResult> {
        let addr = self
            .client
            .master_addr_for(&queue.broker_name, &prepared.topic)
            .await?;
        let started = self.client.clock().monotonic();
        let timeout = deadline
            .saturating_sub(started)
            .max(Duration::from_millis(1));
        let request = self.request(prepared, queue);
        let outcome = self
            .client
            .invoke_with_timeout(&addr, request, timeout)
            .await;
        let now = self.client.clock().monotonic();
        let failed = !matches!(&outcome, Ok(r) if r.code == response_code::SUCCESS);
        lock(&self.faults).record(&queue.broker_name, now.saturating_sub(started), failed, now);
        // The broker is gone or no longer takes writes (a replica, or a
        // deposed master): ask the name servers now rather than at the next
        // 30 s poll, so the next attempt goes to the group's new master.
        let stale = outcome
            .as_ref()
            .map_or(true, |r| r.code == response_code::SERVICE_NOT_AVAILABLE);
        if stale {
            if let Err(e) = self.client.refresh_route(&prepared.topic).await {
                tracing::debug!(topic = %prepared.topic, error = %e, "route refresh after a failed send failed");
            }
        }
        let response = outcome?;
        let status = match response.code {
            response_code::SUCCESS => SendStatus::Ok,
            response_code::FLUSH_DISK_TIMEOUT => SendStatus::FlushDiskTimeout,
            response_code::FLUSH_SLAVE_TIMEOUT => SendStatus::FlushSlaveTimeout,
            response_code::SLAVE_NOT_AVAILABLE => SendStatus::SlaveNotAvailable,
            code => {
                return Err(Error::Broker {
                    server: addr,
                    code,
                    remark: response.remark.clone().unwrap_or_default(),
                })
            }
        };
        let header: SendMessageResponseHeader = response_header(&response, "send response")?;
        Ok(SendResult {
            status,
            msg_id: prepared.uniq_key.clone(),
            offset_msg_id: header.msg_id,
            queue: MessageQueue {
                topic: prepared.topic.clone(),
                broker_name: queue.broker_name.clone(),
                queue_id: header.queue_id,
            },
            queue_offset: header.queue_offset,
        })
    }
}
