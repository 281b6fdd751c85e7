//! The bench's clients (one `ClientInstance` per producer or consumer, so
//! each has its own connection), topic creation, and the topic's stored
//! message count (sum of queue max offsets) and group-commit sync count.

use std::time::Duration;

use crate::endpoint::Endpoint;
use crate::signing::signed;
use anyhow::{bail, Context};
use sluice_client::admin::TopicOptions;
use sluice_client::consumer::api;
use sluice_client::{Admin, ClientConfig, ClientInstance, MessageQueue, TlsTransport};
use sluice_core::SystemClock;

/// A client over TCP (plain or TLS) with the production clock.
pub type Client = ClientInstance<TlsTransport, SystemClock>;

/// How long to wait for the broker to register and for a new topic's route.
const SETUP_WAIT: Duration = Duration::from_secs(15);
const SETUP_POLL: Duration = Duration::from_millis(100);

/// A client named `name` (unique per process) for `endpoint`.
pub fn client(endpoint: &Endpoint, name: &str, clock: &SystemClock) -> Client {
    let config = ClientConfig::new(&endpoint.namesrv)
        .with_instance_name(format!("{name}-{}", std::process::id()));
    ClientInstance::new(endpoint.transport.clone(), clock.clone(), signed(config))
}

/// Creates `topic` with `queues` queues on every master unless it exists;
/// returns its readable queues.
pub async fn ensure_topic(
    endpoint: &Endpoint,
    clock: &SystemClock,
    topic: &str,
    queues: i32,
) -> anyhow::Result<Vec<MessageQueue>> {
    let admin = Admin::new(client(endpoint, "bench-admin", clock));
    let result = ensure_topic_with(&admin, topic, queues).await;
    admin.client().shutdown().await;
    result
}

async fn ensure_topic_with(
    admin: &Admin<TlsTransport, SystemClock>,
    topic: &str,
    queues: i32,
) -> anyhow::Result<Vec<MessageQueue>> {
    if let Ok(found) = admin.client().subscribe_queues(topic).await {
        if !found.is_empty() {
            return Ok(found);
        }
    }
    // A broker that has just started registers with the name server a
    // moment after it listens.
    let deadline = tokio::time::Instant::now() + SETUP_WAIT;
    loop {
        match admin.cluster_info().await {
            Ok(info) if !info.broker_addr_table.is_empty() => break,
            Ok(_) if tokio::time::Instant::now() >= deadline => {
                bail!("no broker registered with the name server within {SETUP_WAIT:?}")
            }
            Err(e) if tokio::time::Instant::now() >= deadline => {
                return Err(e).context("cannot reach the name server")
            }
            _ => tokio::time::sleep(SETUP_POLL).await,
        }
    }
    let options = TopicOptions {
        queues,
        ..TopicOptions::default()
    };
    admin
        .create_topic(topic, &options)
        .await
        .with_context(|| format!("cannot create topic `{topic}`"))?;
    // The broker re-registers its topics with the name server on change.
    loop {
        match admin.client().subscribe_queues(topic).await {
            Ok(found) if !found.is_empty() => return Ok(found),
            _ if tokio::time::Instant::now() >= deadline => {
                bail!("topic `{topic}` has no route {SETUP_WAIT:?} after creating it")
            }
            _ => tokio::time::sleep(SETUP_POLL).await,
        }
    }
}

/// Group-commit syncs so far, summed over the masters (each broker's
/// `groupCommitSyncs` runtime figure); `None` when no broker reports it.
pub async fn broker_syncs(client: &Client) -> Option<u64> {
    let brokers = Admin::new(client.clone()).cluster().await.ok()?;
    let counts: Vec<u64> = brokers
        .iter()
        .filter(|b| b.broker_id == 0)
        .filter_map(|b| b.runtime.get("groupCommitSyncs")?.parse().ok())
        .collect();
    (!counts.is_empty()).then(|| counts.iter().sum())
}

/// Messages stored in `queues` (sum of their max offsets).
pub async fn stored_msgs(client: &Client, queues: &[MessageQueue]) -> anyhow::Result<i64> {
    let mut sum = 0_i64;
    for q in queues {
        sum += api::max_offset(client, q)
            .await
            .with_context(|| format!("max offset of queue {}", q.queue_id))?;
    }
    Ok(sum)
}

/// Messages stored in `queues` once the count stops moving (oneway sends
/// may still be in the broker's queues when the senders stop); waits at
/// most `limit`.
pub async fn stored_msgs_settled(
    client: &Client,
    queues: &[MessageQueue],
    limit: Duration,
) -> anyhow::Result<i64> {
    let deadline = tokio::time::Instant::now() + limit;
    let mut last = stored_msgs(client, queues).await?;
    while tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = stored_msgs(client, queues).await?;
        if now == last {
            break;
        }
        last = now;
    }
    Ok(last)
}
