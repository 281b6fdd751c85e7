//! The simulated hosts' `sluice-client`: one `ClientInstance` per host on
//! the turmoil transport, routed by the sim name server, and the reading of
//! its results the oracle depends on — every send acknowledged, definitely
//! failed (nothing stored) or indeterminate (maybe stored); every pull
//! records, the end of the queue, or "try again".

use std::time::Duration;

use sluice_client::consumer::api::PULL_BATCH_DEFAULT;
use sluice_client::consumer::{PullResult, PullStatus};
use sluice_client::{
    ClientConfig, ClientInstance, Error, MessageQueue, PullConsumer, SendResult, SendStatus,
    Subscription, Transport, TurmoilTransport,
};
use sluice_core::message::DEFAULT_TOPIC;
use sluice_core::Clock;
use sluice_net::remoting::response_code;

use crate::harness::{BROKER_NAME, NAMESRV_ADDR};
use crate::history::{Event, MessageId};
use sluice_node::testing::SimClock;

/// The production client on the simulated network and clock.
pub type SimClient = ClientInstance<TurmoilTransport, SimClock>;

/// Timeout of every client request (a long poll adds its hold).
pub const REQUEST_TIMEOUT_MS: u64 = 2_000;
/// Route lookups a host makes before it gives up waiting for the broker
/// to register with the name server.
const BROKER_LOOKUPS_MAX: u32 = 1_000;
/// Pause between those lookups.
const BROKER_LOOKUP_BACKOFF: Duration = Duration::from_millis(10);

/// A client for host `host`, made inside that host (its clock starts
/// there). The instance name and pid are fixed per host, so client ids,
/// queue allocation and `UNIQ_KEY`s are the same in every run — the
/// defaults would take them from the test process.
pub fn client(host: &str, pid: u32, tune: impl FnOnce(&mut ClientConfig)) -> SimClient {
    client_of(host, pid, &[NAMESRV_ADDR.to_owned()], tune)
}

/// Like [`client`], asking the name servers at `namesrvs` (in turn,
/// moving on when one cannot be reached).
pub fn client_of(
    host: &str,
    pid: u32,
    namesrvs: &[String],
    tune: impl FnOnce(&mut ClientConfig),
) -> SimClient {
    let mut config = ClientConfig::new(NAMESRV_ADDR).with_instance_name(host);
    config.namesrv_addrs = namesrvs.to_vec();
    config.pid = pid;
    config.request_timeout = Duration::from_millis(REQUEST_TIMEOUT_MS);
    // Routes follow a failover within a second (the client also refreshes
    // after a failed send).
    config.poll_name_server_interval = Duration::from_secs(1);
    tune(&mut config);
    ClientInstance::new(TurmoilTransport, SimClock::new(0), config)
}

/// Waits until the name server routes the default topic to a master (the
/// broker has registered), so the client knows the master's address
/// before the workload starts. `false` if it never did.
pub async fn await_broker(client: &SimClient) -> bool {
    for _ in 0..BROKER_LOOKUPS_MAX {
        // A master, not only a replica: reads and writes go to the master
        // (a client reads from a replica only while no master is routed).
        let routed = client.refresh_route(DEFAULT_TOPIC).await.is_ok_and(|r| {
            r.broker_datas
                .iter()
                .any(|b| b.broker_name == BROKER_NAME && b.broker_addrs.contains_key(&0))
        });
        if routed {
            return true;
        }
        tokio::time::sleep(BROKER_LOOKUP_BACKOFF).await;
    }
    false
}

/// Queue `queue` of `topic` on the sim broker.
pub fn queue(topic: &str, queue: i32) -> MessageQueue {
    MessageQueue {
        topic: topic.to_owned(),
        broker_name: BROKER_NAME.to_owned(),
        queue_id: queue,
    }
}

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

/// Classifies one send attempt (the producer must not retry: with
/// retries the error would describe only the last attempt). An answer
/// other than `SEND_OK` means stored, but not as durably as promised.
pub fn send_outcome(result: Result<SendResult, Error>) -> SendOutcome {
    match result {
        Ok(r) if r.status == SendStatus::Ok => match u64::try_from(r.queue_offset) {
            Ok(queue_offset) => SendOutcome::Ok {
                queue: r.queue.queue_id,
                queue_offset,
            },
            Err(_) => SendOutcome::Info(format!("negative queue offset {}", r.queue_offset)),
        },
        Ok(r) => SendOutcome::Info(
            match r.status {
                SendStatus::Ok => "SEND_OK",
                SendStatus::FlushDiskTimeout => "FLUSH_DISK_TIMEOUT",
                SendStatus::FlushSlaveTimeout => "FLUSH_SLAVE_TIMEOUT",
                SendStatus::SlaveNotAvailable => "SLAVE_NOT_AVAILABLE",
            }
            .to_owned(),
        ),
        Err(e) if e.is_definitely_not_stored() => SendOutcome::Fail(describe(&e)),
        Err(e) => SendOutcome::Info(describe(&e)),
    }
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
    /// The offset lies below the queue's retention floor (retention
    /// deleted it): continue at the floor, as RocketMQ consumers do.
    BelowFloor {
        /// The queue's first readable offset.
        floor: u64,
    },
    /// Try again later.
    Retry(String),
}

/// Reads a pull at `offset`: found records must move the offset forward; a
/// topic the broker does not know has nothing stored.
pub fn pull_outcome(offset: u64, result: Result<PullResult, Error>) -> PullOutcome {
    let r = match result {
        Ok(r) => r,
        Err(Error::Broker {
            code: response_code::TOPIC_NOT_EXIST,
            ..
        }) => return PullOutcome::End,
        Err(e) => return PullOutcome::Retry(describe(&e)),
    };
    match r.status {
        PullStatus::Found => {
            let next = u64::try_from(r.next_begin_offset).unwrap_or(0);
            if next <= offset {
                return PullOutcome::Retry(format!("pull at {offset} did not advance"));
            }
            let records = r
                .messages
                .iter()
                .map(|m| {
                    (
                        u64::try_from(m.queue_offset).unwrap_or(u64::MAX),
                        String::from_utf8_lossy(&m.body).into_owned(),
                    )
                })
                .collect();
            PullOutcome::Found { records, next }
        }
        PullStatus::NoNewMessage => PullOutcome::End,
        PullStatus::OffsetIllegal
            if u64::try_from(r.next_begin_offset).is_ok_and(|f| f > offset) =>
        {
            PullOutcome::BelowFloor {
                floor: u64::try_from(r.next_begin_offset).unwrap_or(offset),
            }
        }
        status @ (PullStatus::NoMatchedMessage | PullStatus::OffsetIllegal) => PullOutcome::Retry(
            format!("{status:?} at {offset}, next {}", r.next_begin_offset),
        ),
    }
}

/// A failure as the history records it: a broker's answer by its code's
/// name and remark (`SERVICE_NOT_AVAILABLE store fenced`), else the error.
pub fn describe(e: &Error) -> String {
    match e {
        Error::Broker { code, remark, .. } => format!(
            "{} {remark}",
            response_code::name(*code).unwrap_or("UNKNOWN")
        ),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use sluice_client::MessageExt;
    use sluice_core::message::Properties;

    use super::*;

    fn sent(status: SendStatus, queue_offset: i64) -> SendResult {
        SendResult {
            status,
            msg_id: "u".into(),
            offset_msg_id: "o".into(),
            queue: queue("T", 2),
            queue_offset,
        }
    }

    fn broker(code: i32) -> Error {
        Error::Broker {
            server: "b".into(),
            code,
            remark: "why".into(),
        }
    }

    #[test]
    fn sends_are_acked_only_on_send_ok() {
        assert_eq!(
            send_outcome(Ok(sent(SendStatus::Ok, 7))),
            SendOutcome::Ok {
                queue: 2,
                queue_offset: 7
            }
        );
        assert_eq!(
            send_outcome(Ok(sent(SendStatus::FlushDiskTimeout, 7))),
            SendOutcome::Info("FLUSH_DISK_TIMEOUT".into())
        );
    }

    #[test]
    fn refusals_before_the_append_fail_and_the_rest_is_indeterminate() {
        assert_eq!(
            send_outcome(Err(broker(response_code::SYSTEM_BUSY))),
            SendOutcome::Fail("SYSTEM_BUSY why".into())
        );
        assert_eq!(
            send_outcome(Err(broker(response_code::SERVICE_NOT_AVAILABLE))),
            SendOutcome::Info("SERVICE_NOT_AVAILABLE why".into())
        );
        let refused = Error::Net(sluice_net::Error::Connect {
            addr: "b".into(),
            source: std::io::Error::from(std::io::ErrorKind::ConnectionRefused),
        });
        assert!(matches!(send_outcome(Err(refused)), SendOutcome::Fail(_)));
        let timeout = Error::Net(sluice_net::Error::Timeout {
            addr: "b".into(),
            code: 310,
            timeout_ms: 2_000,
        });
        assert!(matches!(send_outcome(Err(timeout)), SendOutcome::Info(_)));
    }

    fn pulled(status: PullStatus, next: i64, offsets: &[i64]) -> PullResult {
        let messages = offsets
            .iter()
            .map(|&o| MessageExt {
                topic: "T".into(),
                body: format!("id{o}").into(),
                flag: 0,
                properties: Properties::new(),
                broker_name: BROKER_NAME.into(),
                queue_id: 0,
                queue_offset: o,
                commit_log_offset: 0,
                sys_flag: 0,
                born_timestamp_ms: 0,
                born_host: ([127, 0, 0, 1], 0).into(),
                store_timestamp_ms: 0,
                store_host: ([127, 0, 0, 1], 0).into(),
                reconsume_times: 0,
                offset_msg_id: String::new(),
            })
            .collect();
        PullResult {
            status,
            next_begin_offset: next,
            min_offset: 0,
            max_offset: next,
            suggest_broker_id: 0,
            messages,
        }
    }

    #[test]
    fn pulls_read_records_or_the_end_or_retry() {
        assert_eq!(
            pull_outcome(3, Ok(pulled(PullStatus::Found, 5, &[3, 4]))),
            PullOutcome::Found {
                records: vec![(3, "id3".into()), (4, "id4".into())],
                next: 5
            }
        );
        assert_eq!(
            pull_outcome(3, Ok(pulled(PullStatus::NoNewMessage, 3, &[]))),
            PullOutcome::End
        );
        assert_eq!(
            pull_outcome(0, Err(broker(response_code::TOPIC_NOT_EXIST))),
            PullOutcome::End
        );
        assert!(matches!(
            pull_outcome(3, Ok(pulled(PullStatus::Found, 3, &[]))),
            PullOutcome::Retry(_)
        ));
        assert_eq!(
            pull_outcome(3, Ok(pulled(PullStatus::OffsetIllegal, 9, &[]))),
            PullOutcome::BelowFloor { floor: 9 },
            "retention moved the queue's floor past the offset"
        );
        assert!(matches!(
            pull_outcome(9, Ok(pulled(PullStatus::OffsetIllegal, 3, &[]))),
            PullOutcome::Retry(_)
        ));
        assert!(matches!(
            pull_outcome(0, Err(broker(response_code::SYSTEM_ERROR))),
            PullOutcome::Retry(_)
        ));
    }
}

/// How a drain reads a queue: it gives up after `attempts_max` failed
/// pulls, `backoff` apart.
#[derive(Clone, Copy, Debug)]
pub struct DrainPolicy {
    /// Failed pulls before the queue is reported `DrainIncomplete`.
    pub attempts_max: u32,
    /// Wait after a failed pull.
    pub backoff: Duration,
}

/// Reads queue `queue_id` (`mq`) from offset 0 to its end, continuing at
/// the retention floor when a pull says the offset is below it, as
/// RocketMQ consumers do: an acknowledged message below the floor that no
/// consumer read is then missing from every read, a lost ack. `record`
/// gets a `Poll` per read, or a `DrainIncomplete` when the queue cannot be
/// read to its end. Returns the last floor met, if any. The simulation's
/// drain and the real-process one (`real::workload`) both read this way.
pub async fn drain_queue<T: Transport, C: Clock>(
    consumer: &PullConsumer<T, C>,
    (mq, queue_id): (&MessageQueue, i32),
    all: &Subscription,
    policy: DrainPolicy,
    record: impl Fn(Event),
) -> Option<u64> {
    let mut offset = 0u64;
    let mut failures = 0;
    let mut floor_met = None;
    loop {
        let at = i64::try_from(offset).unwrap_or(i64::MAX);
        let result = consumer.pull(mq, all, at, PULL_BATCH_DEFAULT).await;
        match pull_outcome(offset, result) {
            PullOutcome::Found { records, next } => {
                record(Event::Poll {
                    queue: queue_id,
                    records,
                });
                offset = next;
            }
            PullOutcome::End => return floor_met,
            PullOutcome::BelowFloor { floor } => {
                floor_met = Some(floor);
                offset = floor;
            }
            PullOutcome::Retry(reason) => {
                failures += 1;
                if failures >= policy.attempts_max {
                    record(Event::DrainIncomplete {
                        queue: queue_id,
                        reason,
                    });
                    return floor_met;
                }
                tokio::time::sleep(policy.backoff).await;
            }
        }
    }
}
