//! The workload's protocol client: `SEND_MESSAGE_V2` and `PULL_MESSAGE`
//! straight over `RpcClient` (the `client` crate has no producer yet). It
//! classifies every send outcome as acknowledged, definitely failed or
//! indeterminate — the distinction the oracle depends on.

use std::time::Duration;

use bytes::Bytes;
use sluice_core::message::{keys, Properties, StoredRecord};
use sluice_net::header::{
    PullMessageRequestHeader, PullMessageResponseHeader, SendMessageRequestHeaderV2,
    SendMessageResponseHeader, PULL_FLAG_SUSPEND,
};
use sluice_net::remoting::{request_code, response_code};
use sluice_net::{Error as NetError, RemotingCommand, RpcClient, RpcConfig, TurmoilTransport};

use crate::history::MessageId;

/// Template topic for auto-creation.
const DEFAULT_TOPIC: &str = "TBW102";
/// Records one pull asks for.
const PULL_BATCH_MAX: i32 = 32;

/// How a send ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SendOutcome {
    /// Acknowledged at this queue offset.
    Ok {
        /// Queue.
        queue: i32,
        /// Queue offset.
        queue_offset: u64,
    },
    /// Definitely not stored.
    Fail(String),
    /// Maybe stored.
    Info(String),
}

/// How a pull ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PullOutcome {
    /// Records `(queue_offset, id)` and the next offset to read.
    Found {
        /// What was read.
        records: Vec<(u64, MessageId)>,
        /// Where to continue.
        next: u64,
    },
    /// Nothing at or after the offset.
    End,
    /// Try again later.
    Retry(String),
}

/// One broker, one topic.
pub struct Protocol {
    rpc: RpcClient<TurmoilTransport>,
    broker: String,
    topic: String,
    timeout: Duration,
}

impl Protocol {
    /// A client of `topic` on the broker at `broker`.
    pub fn new(broker: &str, topic: &str, timeout: Duration) -> Self {
        Self {
            rpc: RpcClient::new(TurmoilTransport, RpcConfig::default()),
            broker: broker.to_owned(),
            topic: topic.to_owned(),
            timeout,
        }
    }

    /// Sends `id` as the body to `queue`; `queues` sizes an auto-created
    /// topic; `wait = false` asks the broker not to wait for the flush.
    pub async fn send(&self, id: &str, queue: i32, queues: i32, wait: bool) -> SendOutcome {
        let mut props = Properties::new();
        if !wait {
            props
                .insert(keys::WAIT, "false")
                .expect("invariant: WAIT=false is a valid property");
        }
        let header = SendMessageRequestHeaderV2 {
            a: "sim-producers".to_owned(),
            b: self.topic.clone(),
            c: DEFAULT_TOPIC.to_owned(),
            d: queues,
            e: queue,
            f: 0,
            g: 0,
            h: 0,
            i: Some(String::from_utf8_lossy(&props.encode()).into_owned()),
            j: None,
            k: None,
            l: None,
            m: None,
            n: None,
        };
        let request = RemotingCommand::request_with_header(request_code::SEND_MESSAGE_V2, &header)
            .with_body(Bytes::from(id.as_bytes().to_vec()));
        match self.rpc.invoke(&self.broker, request, self.timeout).await {
            Ok(r) if r.code == response_code::SUCCESS => {
                match r.header::<SendMessageResponseHeader>() {
                    Ok(h) => SendOutcome::Ok {
                        queue: h.queue_id,
                        queue_offset: u64::try_from(h.queue_offset).unwrap_or(u64::MAX),
                    },
                    Err(e) => SendOutcome::Info(format!("bad send response header: {e}")),
                }
            }
            Ok(r) => classify_refusal(&r),
            // The request was never written: nothing can have been stored.
            Err(e @ NetError::Connect { .. }) => SendOutcome::Fail(e.to_string()),
            Err(e) => SendOutcome::Info(e.to_string()),
        }
    }

    /// Reads `queue` from `offset`; with `hold`, the broker may park the
    /// pull that long waiting for a message (long polling).
    pub async fn pull(&self, queue: i32, offset: u64, hold: Option<Duration>) -> PullOutcome {
        let hold_ms = hold.map_or(0, |h| i64::try_from(h.as_millis()).unwrap_or(i64::MAX));
        let header = PullMessageRequestHeader {
            consumer_group: "sim-drain".to_owned(),
            topic: self.topic.clone(),
            queue_id: queue,
            queue_offset: i64::try_from(offset).unwrap_or(i64::MAX),
            max_msg_nums: PULL_BATCH_MAX,
            sys_flag: if hold_ms > 0 { PULL_FLAG_SUSPEND } else { 0 },
            commit_offset: 0,
            suspend_timeout_millis: hold_ms,
            subscription: Some("*".to_owned()),
            sub_version: 0,
            expression_type: Some("TAG".to_owned()),
            max_msg_bytes: None,
        };
        let request = RemotingCommand::request_with_header(request_code::PULL_MESSAGE, &header);
        let timeout = self.timeout + hold.unwrap_or_default();
        let response = match self.rpc.invoke(&self.broker, request, timeout).await {
            Ok(r) => r,
            Err(e) => return PullOutcome::Retry(e.to_string()),
        };
        match response.code {
            response_code::SUCCESS => {
                let next = match response.header::<PullMessageResponseHeader>() {
                    Ok(h) => u64::try_from(h.next_begin_offset).unwrap_or(0),
                    Err(e) => return PullOutcome::Retry(format!("bad pull header: {e}")),
                };
                match decode_records(&response.body) {
                    Ok(records) if next > offset => PullOutcome::Found { records, next },
                    Ok(_) => PullOutcome::Retry(format!("pull at {offset} did not advance")),
                    Err(reason) => PullOutcome::Retry(reason),
                }
            }
            // No such topic yet: nothing was ever stored in it.
            response_code::PULL_NOT_FOUND | response_code::TOPIC_NOT_EXIST => PullOutcome::End,
            code => PullOutcome::Retry(describe(code, &response)),
        }
    }
}

/// A refusal the broker answers before storing is definite; anything else
/// (a failed sync, a system error) may come after the append.
fn classify_refusal(r: &RemotingCommand) -> SendOutcome {
    let reason = describe(r.code, r);
    match r.code {
        response_code::SYSTEM_BUSY
        | response_code::TOPIC_NOT_EXIST
        | response_code::NO_PERMISSION
        | response_code::MESSAGE_ILLEGAL => SendOutcome::Fail(reason),
        _ => SendOutcome::Info(reason),
    }
}

fn describe(code: i32, r: &RemotingCommand) -> String {
    format!(
        "{} {}",
        response_code::name(code).unwrap_or("UNKNOWN"),
        r.remark.as_deref().unwrap_or("")
    )
}

/// Splits a pull body (stored records back to back) into `(offset, id)`.
fn decode_records(body: &Bytes) -> Result<Vec<(u64, MessageId)>, String> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < body.len() {
        let rest = body.slice(pos..);
        let record = StoredRecord::decode(&rest).map_err(|e| format!("corrupt record: {e}"))?;
        let offset =
            u64::try_from(record.queue_offset).map_err(|_| "negative offset".to_owned())?;
        out.push((offset, String::from_utf8_lossy(&record.body).into_owned()));
        let size = usize::try_from(record.total_size).map_err(|_| "huge record".to_owned())?;
        if size == 0 {
            return Err("zero-sized record".to_owned());
        }
        pos += size;
    }
    Ok(out)
}
