//! The `Telemetry` stream: the client sends its Settings (on connect, a
//! second later, and every 5 minutes) and gets them back merged with the
//! broker's (every reply carries status OK, or 5.x clients ignore it); a
//! producer's stream also carries the broker's transaction check-backs
//! (`RecoverOrphanedTransactionCommand`). Stack-trace and verify commands
//! are not sent; the client's answers to them are ignored.

use std::sync::Arc;
use std::time::Duration;

use sluice_core::disk::Disk;
use sluice_core::message::{keys, offset_msg_id, strip_seal, Properties, StoredRecord};
use sluice_core::{Clock, CommitLogOffset};
use sluice_net::header::CheckTransactionStateRequestHeader;
use sluice_net::{RemotingCommand, Transport};
use tokio::sync::mpsc;
use tokio_stream::StreamExt;

use super::proto::{self, settings::PubSub, telemetry_command::Command, ClientType};
use super::session::{Session, Sessions};
use super::{convert, ok, BoxStream, Messaging};
use crate::broker::Broker;

/// Commands queued to one client before the broker's sends wait.
const TELEMETRY_QUEUE: usize = 64;
/// Apache's default retry back-off of consumer groups (`CUSTOMIZED`).
const CONSUMER_BACKOFF_SECS: [i64; 18] = [
    1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1_200, 1_800, 3_600, 7_200,
];
/// Long-poll hold consumers are told to use.
const LONG_POLLING_SECS: i64 = 20;
/// Messages a push consumer asks for per receive.
const RECEIVE_BATCH: i32 = 32;

fn secs(s: i64) -> proto::Duration {
    proto::Duration {
        seconds: s,
        nanos: 0,
    }
}

/// The client's Settings merged with the broker's: what the reply says.
fn merged<D: Disk, C: Clock>(
    broker: &Broker<D, C>,
    mut settings: proto::Settings,
) -> proto::Settings {
    match &mut settings.pub_sub {
        Some(PubSub::Publishing(p)) => {
            p.max_body_size =
                i32::try_from(broker.config().store.body_bytes_max).unwrap_or(i32::MAX);
            p.validate_message_type = true;
            settings.backoff_policy = Some(proto::RetryPolicy {
                max_attempts: 3,
                strategy: Some(proto::retry_policy::Strategy::ExponentialBackoff(
                    proto::ExponentialBackoff {
                        initial: Some(proto::Duration::from_millis(10)),
                        max: Some(proto::Duration::from_millis(1_000)),
                        multiplier: 2.0,
                    },
                )),
            });
        }
        Some(PubSub::Subscription(s)) => {
            let group = s
                .group
                .as_ref()
                .and_then(|g| broker.subscription_group(&g.name));
            s.fifo = Some(group.as_ref().is_some_and(|g| g.consume_message_orderly));
            s.receive_batch_size = Some(RECEIVE_BATCH);
            s.long_polling_timeout = Some(secs(LONG_POLLING_SECS));
            let retries = group.as_ref().map_or(16, |g| g.retry_max_times);
            settings.backoff_policy = Some(proto::RetryPolicy {
                max_attempts: retries.saturating_add(1),
                strategy: Some(proto::retry_policy::Strategy::CustomizedBackoff(
                    proto::CustomizedBackoff {
                        next: CONSUMER_BACKOFF_SECS.iter().map(|s| secs(*s)).collect(),
                    },
                )),
            });
        }
        None => {}
    }
    settings.metric = Some(proto::Metric {
        on: false,
        endpoints: None,
    });
    settings
}

/// Opens a client's Telemetry: answers its Settings, and for a producer
/// becomes where its check-backs go.
pub(super) fn open<D: Disk, C: Clock, T: Transport>(
    m: &Messaging<D, C, T>,
    session: Arc<Session>,
    mut inbound: tonic::Streaming<proto::TelemetryCommand>,
) -> BoxStream<proto::TelemetryCommand> {
    let (tx, rx) = mpsc::channel(TELEMETRY_QUEUE);
    let sessions = Arc::clone(&m.sessions);
    tokio::spawn(async move {
        while let Some(Ok(command)) = inbound.next().await {
            let Some(Command::Settings(settings)) = command.command else {
                continue; // answers to commands we never send, or statuses
            };
            on_settings(&sessions, &session, settings, &tx).await;
        }
        session.set_telemetry(None);
    });
    Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx))
}

async fn on_settings<D: Disk, C: Clock>(
    sessions: &Sessions<D, C>,
    session: &Session,
    settings: proto::Settings,
    tx: &mpsc::Sender<Result<proto::TelemetryCommand, tonic::Status>>,
) {
    let client_type = settings.client_type.unwrap_or(0);
    let group = match &settings.pub_sub {
        Some(PubSub::Subscription(s)) => s.group.clone(),
        _ => None,
    };
    session.set_settings(settings.clone());
    if client_type == ClientType::Producer as i32 {
        session.set_telemetry(Some(tx.clone()));
    }
    // Register at once (a heartbeat comes only every 10 s).
    let _ = sessions
        .heartbeat(session, &proto::HeartbeatRequest { group, client_type })
        .await;
    let reply = proto::TelemetryCommand {
        status: Some(ok()),
        command: Some(Command::Settings(merged(sessions.broker(), settings))),
    };
    let _ = tx.send_timeout(Ok(reply), Duration::from_secs(3)).await;
}

/// The Telemetry command for the broker's `CHECK_TRANSACTION_STATE`: the
/// half message (under its real topic) and the transaction id the
/// producer ends it with.
pub(super) fn check_back<D: Disk, C: Clock>(
    broker: &Broker<D, C>,
    req: &RemotingCommand,
) -> Option<proto::TelemetryCommand> {
    let h: CheckTransactionStateRequestHeader = req.header().ok()?;
    let phys = u64::try_from(h.commit_log_offset).ok()?;
    let raw = broker.store().read_at(CommitLogOffset::new(phys)).ok()??;
    let rec = StoredRecord::decode(&raw).ok()?;
    let mut message = convert::to_message(&rec, None);
    let props = Properties::parse(strip_seal(&rec.properties)).ok()?;
    if let (Some(topic), Some(t)) = (props.get(keys::REAL_TOPIC), message.topic.as_mut()) {
        topic.clone_into(&mut t.name);
    }
    let transaction_id = format!(
        "{}-{}",
        offset_msg_id(broker.store_host(), h.commit_log_offset),
        h.tran_state_table_offset
    );
    Some(proto::TelemetryCommand {
        status: None,
        command: Some(Command::RecoverOrphanedTransactionCommand(
            proto::RecoverOrphanedTransactionCommand {
                message: Some(message),
                transaction_id,
            },
        )),
    })
}
