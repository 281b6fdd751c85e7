//! Transactional sends (RocketMQ's `TransactionMQProducer`): a *half*
//! message the broker keeps from consumers until the producer commits or
//! rolls it back with `END_TRANSACTION`. When a producer goes quiet, the
//! broker asks a live member of the producer group (`CHECK_TRANSACTION_STATE`);
//! the group's [`TransactionListener::check`] answers.

use std::sync::Arc;
use std::time::Duration;

use sluice_core::message::{decode_offset_msg_id, keys, StoredRecord};
use sluice_core::Clock;
use sluice_net::header::{
    CheckTransactionStateRequestHeader, EndTransactionRequestHeader, TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE, TRANSACTION_ROLLBACK_TYPE,
};
use sluice_net::remoting::request_code;
use sluice_net::{Credentials, RemotingCommand, RequestContext, Transport};

use super::{Producer, ProducerConfig};
use crate::error::{Error, Result};
use crate::instance::ClientInstance;
use crate::message::{Message, MessageExt, MessageQueue};

/// What the producer's local transaction decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LocalTransactionState {
    /// Deliver the message.
    Commit,
    /// Drop the message.
    Rollback,
    /// Not decided yet: the broker checks back later.
    Unknown,
}

impl LocalTransactionState {
    /// The `commitOrRollback` wire value.
    pub fn wire(self) -> i32 {
        match self {
            Self::Commit => TRANSACTION_COMMIT_TYPE,
            Self::Rollback => TRANSACTION_ROLLBACK_TYPE,
            Self::Unknown => TRANSACTION_NOT_TYPE,
        }
    }
}

/// The application side of a transaction. `check` runs on the client's
/// request-serving task when a broker asks about a half this group sent
/// (possibly from another member of the group): keep it short.
pub trait TransactionListener: Send + Sync + 'static {
    /// Runs the local transaction for a half the broker just stored.
    fn execute(&self, msg: &Message, half: &HalfMessage) -> LocalTransactionState;
    /// Answers a broker's check of a half whose outcome it does not know.
    fn check(&self, msg: &MessageExt) -> LocalTransactionState;
}

/// A stored half message: what [`TransactionProducer::end_transaction`]
/// needs to commit or roll it back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HalfMessage {
    /// The client-side id (`UNIQ_KEY`).
    pub msg_id: String,
    /// The broker's offset id of the half.
    pub offset_msg_id: String,
    /// Transaction id (`__transactionId__`, else the `UNIQ_KEY`).
    pub transaction_id: String,
    /// The queue the message commits to (topic, broker, queue id).
    pub queue: MessageQueue,
    /// Offset of the half in the broker's half queue.
    pub queue_offset: i64,
    /// CommitLog offset of the half.
    pub commit_log_offset: i64,
    /// The broker (master) that stores the half.
    pub broker_addr: String,
}

/// A producer of transactional messages.
pub struct TransactionProducer<T: Transport, C: Clock> {
    producer: Producer<T, C>,
    listener: Arc<dyn TransactionListener>,
}

impl<T: Transport, C: Clock> TransactionProducer<T, C> {
    /// A transactional producer on `client`; `listener` also answers the
    /// brokers' checks for `config.group` through this client.
    pub fn new(
        client: ClientInstance<T, C>,
        config: ProducerConfig,
        listener: Arc<dyn TransactionListener>,
    ) -> Self {
        client.register_transaction_listener(&config.group, Arc::clone(&listener));
        Self {
            producer: Producer::new(client, config),
            listener,
        }
    }

    /// The underlying producer (for non-transactional sends).
    pub fn producer(&self) -> &Producer<T, C> {
        &self.producer
    }

    /// Stores `msg` as a half: consumers see nothing until it is committed.
    pub async fn send_half(&self, msg: &Message) -> Result<HalfMessage> {
        if msg.property(keys::DELAY).is_some() {
            return Err(Error::InvalidMessage(
                "a transactional message cannot be delayed".to_owned(),
            ));
        }
        let group = &self.producer.config().group;
        let half = msg
            .clone()
            .with_property(keys::TRAN_MSG, "true")
            .with_property(keys::PGROUP, group.as_str());
        let sent = self.producer.send_prepared(&half).await?;
        let (_, commit_log_offset) = decode_offset_msg_id(&sent.offset_msg_id)
            .map_err(|e| Error::decode("half offset message id", e))?;
        let broker_addr = self
            .producer
            .client()
            .master_addr_for(&sent.queue.broker_name, &sent.queue.topic)
            .await?;
        let transaction_id = msg
            .property(keys::TRANSACTION_ID)
            .map_or_else(|| sent.msg_id.clone(), str::to_owned);
        Ok(HalfMessage {
            msg_id: sent.msg_id,
            offset_msg_id: sent.offset_msg_id,
            transaction_id,
            queue: sent.queue,
            queue_offset: sent.queue_offset,
            commit_log_offset,
            broker_addr,
        })
    }

    /// Commits or rolls back `half`; `Ok` once the broker stored the
    /// outcome (durable and replicated as a send would be). `Unknown`
    /// sends nothing: the broker checks back later.
    pub async fn end_transaction(
        &self,
        half: &HalfMessage,
        state: LocalTransactionState,
    ) -> Result<()> {
        if state == LocalTransactionState::Unknown {
            return Ok(());
        }
        let header = EndTransactionRequestHeader {
            producer_group: self.producer.config().group.clone(),
            tran_state_table_offset: half.queue_offset,
            commit_log_offset: half.commit_log_offset,
            commit_or_rollback: state.wire(),
            from_transaction_check: Some(false),
            msg_id: half.msg_id.clone(),
            transaction_id: Some(half.transaction_id.clone()),
        };
        let request = RemotingCommand::request_with_header(request_code::END_TRANSACTION, &header);
        self.producer
            .client()
            .invoke_ok(&half.broker_addr, request)
            .await
            .map(|_| ())
    }

    /// Sends the half, runs the listener's `execute`, and ends the
    /// transaction with its answer.
    pub async fn send_in_transaction(
        &self,
        msg: &Message,
    ) -> Result<(HalfMessage, LocalTransactionState)> {
        let half = self.send_half(msg).await?;
        let state = self.listener.execute(msg, &half);
        self.end_transaction(&half, state).await?;
        Ok((half, state))
    }
}
/// Asks the group's listener about a half the broker cannot resolve and
/// answers with `END_TRANSACTION` (oneway, `fromTransactionCheck`) on the
/// connection the check came on. A check for a group this client has no
/// listener for, or one that cannot be read, is ignored (the broker asks
/// again later).
pub(crate) fn answer_check(
    ctx: &RequestContext,
    request: &RemotingCommand,
    listener_of: impl Fn(&str) -> Option<Arc<dyn TransactionListener>>,
    credentials: Option<Credentials>,
) {
    let Ok(header) = request.header::<CheckTransactionStateRequestHeader>() else {
        tracing::warn!("unreadable CHECK_TRANSACTION_STATE header ignored");
        return;
    };
    let msg = match StoredRecord::decode(&request.body)
        .map_err(|e| e.to_string())
        .and_then(|rec| MessageExt::from_record(rec, "").map_err(|e| e.to_string()))
    {
        Ok(msg) => msg,
        Err(e) => {
            tracing::warn!(error = %e, "unreadable CHECK_TRANSACTION_STATE body ignored");
            return;
        }
    };
    let Some(group) = msg.property(keys::PGROUP).map(str::to_owned) else {
        return;
    };
    let Some(listener) = listener_of(&group) else {
        tracing::debug!(
            group,
            "transaction check for a group without a listener ignored"
        );
        return;
    };
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let connection = ctx.connection.clone();
    runtime.spawn(async move {
        let state = listener.check(&msg);
        if state == LocalTransactionState::Unknown {
            return;
        }
        let end = EndTransactionRequestHeader {
            producer_group: group,
            tran_state_table_offset: header.tran_state_table_offset,
            commit_log_offset: header.commit_log_offset,
            commit_or_rollback: state.wire(),
            from_transaction_check: Some(true),
            msg_id: header.msg_id.unwrap_or_else(|| msg.msg_id().to_owned()),
            transaction_id: header.transaction_id,
        };
        let mut cmd = RemotingCommand::request_with_header(request_code::END_TRANSACTION, &end);
        cmd.mark_oneway();
        if let Some(credentials) = &credentials {
            credentials.sign(&mut cmd);
        }
        if let Err(e) = connection.invoke_oneway(cmd, Duration::from_secs(3)).await {
            tracing::debug!(error = %e, "answer to a transaction check not delivered");
        }
    });
}
