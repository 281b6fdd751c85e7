//! A replica's loop: while the role is `Replica` with a known master, it
//! handshakes, truncates the divergent tail the master names, adopts the
//! master's epoch history, then fetches — appending the bytes verbatim and
//! reporting what it holds with each next fetch — and copies the master's
//! topics, consumer offsets and subscription groups now and then. Any
//! error or role change starts it over. With a group secret, every
//! connection to the master is proven first, both ways (`crate::peer_auth`).

use std::sync::Arc;
use std::time::Duration;

use sluice_core::disk::Disk;
use sluice_core::{Clock, CommitLogOffset};
use sluice_net::remoting::response_code;
use sluice_net::{RemotingCommand, RpcClient, RpcConfig, Transport};

use super::epochs::EPOCHS_FILE;
use super::port::{identity, realm};
use super::protocol::{
    ext_u64, json_body, parse_body, Fetch, Handshake, HandshakeReply, Metadata, FIELD_AT,
    FIELD_CONFIRMED, FIELD_EPOCH, HA_FETCH, HA_HANDSHAKE, HA_METADATA,
};
use super::{Replication, Role};
use crate::broker::Broker;
use crate::peer_auth::Prover;

/// Pause after a failed attempt.
const RETRY_PAUSE: Duration = Duration::from_millis(500);

/// Runs the replica side until aborted.
pub(crate) async fn run<D: Disk, C: Clock, T: Transport>(b: Arc<Broker<D, C>>, transport: T) {
    let Some(ha) = b.replication() else {
        return;
    };
    let client =
        MasterLink {
            rpc: RpcClient::new(transport, RpcConfig::default()),
            prover: ha.config().group_secret.clone().map(|secret| {
                Prover::new(secret, realm(&b.config().broker_name), identity(ha.me()))
            }),
        };
    let mut roles = ha.roles_rx();
    let mut failures: u64 = 0;
    loop {
        roles.borrow_and_update();
        let Role::Replica {
            master_ha: Some(master),
        } = ha.role()
        else {
            let _ = roles.changed().await;
            continue;
        };
        let started = b.clock().monotonic();
        let result = tokio::select! {
            r = follow(&b, ha, &client, &master) => r,
            _ = roles.changed() => Ok(()),
        };
        if let Err(e) = result {
            // Said once per run of failures, not every half second; a
            // session that ran a while before failing starts a new run.
            let ran = b.clock().monotonic().saturating_sub(started);
            failures = if ran > Duration::from_secs(10) {
                1
            } else {
                failures + 1
            };
            if failures == 1 || failures % 120 == 0 {
                tracing::warn!(master = %master, error = %e, failures, "replication from the master stopped; retrying");
            }
            client.rpc.close_connection(&master);
            tokio::time::sleep(RETRY_PAUSE).await;
        } else {
            failures = 0;
        }
    }
}

/// Joins the master: truncates this log where it diverges from the
/// master's and adopts (and persists) the master's epoch history.
async fn handshake<D: Disk, C: Clock, T: Transport>(
    b: &Broker<D, C>,
    ha: &Replication,
    client: &MasterLink<T>,
    master: &str,
    rpc_timeout: Duration,
) -> Result<HandshakeReply, String> {
    let store = b.store();
    let hs = Handshake {
        group: b.config().broker_name.clone(),
        replica_id: ha.me(),
        epochs: ha.epochs(),
        end: store.commit_log().written().get(),
        segment_bytes: store.config().commit_log_segment_bytes,
    };
    let req = RemotingCommand::request(HA_HANDSHAKE).with_body(json_body(&hs));
    let resp = invoke_ok(client, master, req, rpc_timeout, "handshake").await?;
    let reply: HandshakeReply = parse_body(&resp)?;
    if reply.truncate_to < store.commit_log().written().get() {
        store
            .truncate_to(CommitLogOffset::new(reply.truncate_to))
            .await
            .map_err(|e| format!("cannot truncate to {}: {e}", reply.truncate_to))?;
    }
    // The master's history is this log's from now on; persisted before
    // any byte of it is copied.
    b.disk()
        .replace_atomically(EPOCHS_FILE, &reply.epochs.to_json())
        .await
        .map_err(|e| format!("cannot write {EPOCHS_FILE}: {e}"))?;
    ha.lock().epochs = reply.epochs.clone();
    Ok(reply)
}

/// One session with the master: returns only on an error.
async fn follow<D: Disk, C: Clock, T: Transport>(
    b: &Broker<D, C>,
    ha: &Replication,
    client: &MasterLink<T>,
    master: &str,
) -> Result<(), String> {
    let store = b.store();
    let rpc_timeout = Duration::from_millis(ha.config().fetch_wait_ms + 3_000);
    let reply = handshake(b, ha, client, master, rpc_timeout).await?;
    tracing::info!(
        master,
        epoch = reply.epoch,
        from = store.commit_log().written().get(),
        "following the master"
    );
    let metadata_every = Duration::from_millis(ha.config().metadata_sync_ms.max(100));
    let mut next_metadata = Duration::ZERO;
    loop {
        let now = b.clock().monotonic();
        if now >= next_metadata {
            copy_metadata(b, client, master, rpc_timeout).await?;
            next_metadata = now + metadata_every;
        }
        let from = store.commit_log().written();
        let held = store.held_offset();
        let f = Fetch {
            session: reply.session,
            replica_id: ha.me(),
            epoch: reply.epoch,
            from: from.get(),
            held: held.get(),
        };
        ha.lock().replica_held = held;
        let req = RemotingCommand::request(HA_FETCH).with_body(json_body(&f));
        let resp = invoke_ok(client, master, req, rpc_timeout, "fetch").await?;
        let epoch = ext_u64(&resp, FIELD_EPOCH)?;
        let at = CommitLogOffset::new(ext_u64(&resp, FIELD_AT)?);
        let confirmed = CommitLogOffset::new(ext_u64(&resp, FIELD_CONFIRMED)?);
        if epoch != u64::from(reply.epoch) || at != from {
            return Err(format!(
                "fetch answer for epoch {epoch} at {}, asked {} at {}",
                at.get(),
                reply.epoch,
                from.get()
            ));
        }
        if !resp.body.is_empty() {
            store
                .append_replicated(at, &resp.body)
                .await
                .map_err(|e| format!("cannot append replicated bytes at {}: {e}", at.get()))?;
        }
        // A SYNC master's consumers see only what its in-sync set holds;
        // so do this replica's.
        store.set_confirmed(confirmed);
    }
}

/// The replica's connection to its master: proven first when the group
/// has a secret.
struct MasterLink<T: Transport> {
    rpc: RpcClient<T>,
    prover: Option<Prover>,
}

impl<T: Transport> MasterLink<T> {
    async fn invoke(
        &self,
        master: &str,
        req: RemotingCommand,
        timeout: Duration,
    ) -> Result<RemotingCommand, String> {
        let Some(prover) = &self.prover else {
            return self
                .rpc
                .invoke(master, req, timeout)
                .await
                .map_err(|e| e.to_string());
        };
        let conn = prover
            .connection(&self.rpc, master, timeout)
            .await
            .map_err(|e| e.to_string())?;
        conn.invoke(req, timeout).await.map_err(|e| e.to_string())
    }
}

/// Sends `req` to the master; an error unless it answers `SUCCESS`.
async fn invoke_ok<T: Transport>(
    client: &MasterLink<T>,
    master: &str,
    req: RemotingCommand,
    timeout: Duration,
    what: &str,
) -> Result<RemotingCommand, String> {
    let resp = client.invoke(master, req, timeout).await?;
    if resp.code == response_code::SUCCESS {
        Ok(resp)
    } else {
        Err(format!(
            "{what} refused ({}): {}",
            resp.code,
            resp.remark.unwrap_or_default()
        ))
    }
}

async fn copy_metadata<D: Disk, C: Clock, T: Transport>(
    b: &Broker<D, C>,
    client: &MasterLink<T>,
    master: &str,
    timeout: Duration,
) -> Result<(), String> {
    let req = RemotingCommand::request(HA_METADATA);
    let resp = invoke_ok(client, master, req, timeout, "metadata").await?;
    let m: Metadata = parse_body(&resp)?;
    if b.topics().adopt(m.topics.as_bytes())? {
        b.topics_updated().await;
    }
    b.offsets().adopt(m.offsets.as_bytes())?;
    b.subscription_groups().adopt(m.groups.as_bytes())?;
    if !m.delay.is_empty() {
        b.delay_progress().adopt(m.delay.as_bytes())?;
    }
    if !m.timer.is_empty() {
        let written = b.store().commit_log().written().get();
        b.timers().adopt(m.timer.as_bytes(), written)?;
    }
    b.persist_offsets().await;
    b.persist_subscription_groups().await;
    b.persist_delay_offsets().await;
    Ok(())
}
