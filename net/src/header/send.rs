//! Producer send headers: V1 (named fields), V2 (letter-named fields `a`..`n`,
//! used by `SEND_MESSAGE_V2` and `SEND_BATCH_MESSAGE`) and the send response.

use super::command_header;
use crate::remoting::{request_code, RemotingCommand};
use crate::Result;

command_header! {
    /// `SEND_MESSAGE` (10) / `SEND_REPLY_MESSAGE` (324) request header.
    SendMessageRequestHeader {
        /// Producer group.
        producer_group: String = "producerGroup",
        /// Target topic.
        topic: String = "topic",
        /// Template topic for auto-creation (`TBW102`).
        default_topic: String = "defaultTopic",
        /// Queue count for an auto-created topic.
        default_topic_queue_nums: i32 = "defaultTopicQueueNums",
        /// Target queue.
        queue_id: i32 = "queueId",
        /// Message sys flag (compression, transaction type).
        sys_flag: i32 = "sysFlag",
        /// Producer-side timestamp, ms.
        born_timestamp: i64 = "bornTimestamp",
        /// User flag.
        flag: i32 = "flag",
        /// Encoded properties (spec §3).
        properties: Option<String> = "properties",
        /// Times already reconsumed (retry topics).
        reconsume_times: Option<i32> = "reconsumeTimes",
        /// Unit mode.
        unit_mode: Option<bool> = "unitMode",
        /// Batch message.
        batch: Option<bool> = "batch",
        /// Reconsume limit before the DLQ.
        max_reconsume_times: Option<i32> = "maxReconsumeTimes",
        /// Target broker name (late 4.9.x / 5.x).
        broker_name: Option<String> = "bname",
    }
}

command_header! {
    /// `SEND_MESSAGE_V2` (310) / `SEND_BATCH_MESSAGE` (320) request header: the V1
    /// fields under one-letter keys to save bytes.
    SendMessageRequestHeaderV2 {
        /// producerGroup.
        a: String = "a",
        /// topic.
        b: String = "b",
        /// defaultTopic.
        c: String = "c",
        /// defaultTopicQueueNums.
        d: i32 = "d",
        /// queueId.
        e: i32 = "e",
        /// sysFlag.
        f: i32 = "f",
        /// bornTimestamp.
        g: i64 = "g",
        /// flag.
        h: i32 = "h",
        /// properties.
        i: Option<String> = "i",
        /// reconsumeTimes.
        j: Option<i32> = "j",
        /// unitMode.
        k: Option<bool> = "k",
        /// maxReconsumeTimes.
        l: Option<i32> = "l",
        /// batch.
        m: Option<bool> = "m",
        /// brokerName.
        n: Option<String> = "n",
    }
}

impl From<SendMessageRequestHeaderV2> for SendMessageRequestHeader {
    fn from(v2: SendMessageRequestHeaderV2) -> Self {
        Self {
            producer_group: v2.a,
            topic: v2.b,
            default_topic: v2.c,
            default_topic_queue_nums: v2.d,
            queue_id: v2.e,
            sys_flag: v2.f,
            born_timestamp: v2.g,
            flag: v2.h,
            properties: v2.i,
            reconsume_times: v2.j,
            unit_mode: v2.k,
            max_reconsume_times: v2.l,
            batch: v2.m,
            broker_name: v2.n,
        }
    }
}

impl From<SendMessageRequestHeader> for SendMessageRequestHeaderV2 {
    fn from(v1: SendMessageRequestHeader) -> Self {
        Self {
            a: v1.producer_group,
            b: v1.topic,
            c: v1.default_topic,
            d: v1.default_topic_queue_nums,
            e: v1.queue_id,
            f: v1.sys_flag,
            g: v1.born_timestamp,
            h: v1.flag,
            i: v1.properties,
            j: v1.reconsume_times,
            k: v1.unit_mode,
            l: v1.max_reconsume_times,
            m: v1.batch,
            n: v1.broker_name,
        }
    }
}

impl SendMessageRequestHeader {
    /// Decodes the send header of any send request, choosing V1 or V2 by
    /// request code the way the broker does.
    pub fn from_request(cmd: &RemotingCommand) -> Result<Self> {
        match cmd.code {
            request_code::SEND_MESSAGE_V2
            | request_code::SEND_BATCH_MESSAGE
            | request_code::SEND_REPLY_MESSAGE_V2 => {
                Ok(cmd.header::<SendMessageRequestHeaderV2>()?.into())
            }
            _ => cmd.header(),
        }
    }
}

/// The `MSG_REGION` value Sluice reports.
pub const DEFAULT_REGION: &str = "DefaultRegion";

command_header! {
    /// Send response header. The Java client reads `MSG_REGION` and
    /// `TRACE_ON` without a null check, so [`SendMessageResponseHeader::new`]
    /// always fills them.
    SendMessageResponseHeader {
        /// Offset message ID (comma-joined for a batch).
        msg_id: String = "msgId",
        /// Queue the message was stored in.
        queue_id: i32 = "queueId",
        /// Logical queue offset.
        queue_offset: i64 = "queueOffset",
        /// The message's `UNIQ_KEY` (Apache's 5.x broker fills it for every
        /// single-message send; 4.9.x for none).
        transaction_id: Option<String> = "transactionId",
        /// 5.x: the batch's own `UNIQ_KEY`, for batch sends.
        batch_uniq_id: Option<String> = "batchUniqId",
        /// 5.x: handle to recall a timer message before it is delivered.
        recall_handle: Option<String> = "recallHandle",
        /// Region of the broker.
        msg_region: Option<String> = "MSG_REGION",
        /// Whether message tracing is on.
        trace_on: Option<bool> = "TRACE_ON",
    }
}

impl SendMessageResponseHeader {
    /// A response header with the region and trace switch filled in.
    pub fn new(msg_id: impl Into<String>, queue_id: i32, queue_offset: i64) -> Self {
        Self {
            msg_id: msg_id.into(),
            queue_id,
            queue_offset,
            transaction_id: None,
            batch_uniq_id: None,
            recall_handle: None,
            msg_region: Some(DEFAULT_REGION.to_owned()),
            trace_on: Some(true),
        }
    }
}
