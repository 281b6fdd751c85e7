//! Roles decided by the controller (RocketMQ 5's controller mode): the
//! broker heartbeats to the controllers, takes whatever role the group's
//! view gives it, and — while master — changes its in-sync set only with
//! the controller's approval, so the set the controller elects from is
//! always contained in the set whose acknowledgements the master waits for.
//!
//! A broker's first heartbeats after it starts say so: a master that
//! restarted may have lost an unsynced tail its replicas hold, so the
//! controller gives the group a new epoch (to the replica with the most
//! data) instead of letting it write on in the old one.

use std::sync::Arc;
use std::time::Duration;

use sluice_core::disk::Disk;
use sluice_core::Clock;
use sluice_net::Transport;

use super::master::{plan_in_sync, publish};
use super::{Replication, Role};
use crate::broker::Broker;
use crate::controller::{
    AlterInSync, BrokerHeartbeat, ControllerClient, ControllerError, GroupView,
};

/// Each controller request waits at most this long.
const CONTROLLER_TIMEOUT: Duration = Duration::from_secs(3);

/// Heartbeats, follows the group's view and keeps the in-sync set, until
/// aborted.
pub(crate) async fn run<D: Disk, C: Clock, T: Transport>(b: Arc<Broker<D, C>>, transport: T) {
    let Some(ha) = b.replication() else {
        return;
    };
    let mut client = ControllerClient::new(
        transport,
        ha.config().controller_addrs.clone(),
        CONTROLLER_TIMEOUT,
    );
    if let Some(secret) = ha.config().controller_secret.clone() {
        let identity = format!("broker/{}/{}", b.config().broker_name, ha.me());
        client = client.with_secret(secret, identity);
    }
    let period = Duration::from_millis(ha.config().controller_heartbeat_ms.max(10));
    let mut restarted = true;
    let mut failing = false;
    loop {
        let heartbeat = BrokerHeartbeat {
            group: b.config().broker_name.clone(),
            replica_id: ha.me(),
            broker_addr: b.store_host().to_string(),
            ha_addr: ha.ha_addr(),
            epoch: ha.epochs().last_epoch(),
            max_offset: b.store().commit_log().written().get(),
            restarted,
        };
        match client.heartbeat(&heartbeat).await {
            Ok(view) => {
                ha.lock().controller_leader = client.leader();
                restarted = false;
                failing = false;
                if let Err(e) = follow_view(&b, ha, &view).await {
                    tracing::error!(error = %e, "cannot take the role the controller gave");
                }
            }
            Err(e) => {
                if !failing {
                    tracing::warn!(error = %e, "controller heartbeat failed");
                }
                failing = true;
            }
        }
        if matches!(ha.role(), Role::Master { .. }) {
            review_in_sync(&b, ha, &client).await;
        }
        tokio::time::sleep(period).await;
    }
}

/// Takes the role `view` gives this broker.
async fn follow_view<D: Disk, C: Clock>(
    b: &Broker<D, C>,
    ha: &Replication,
    view: &GroupView,
) -> crate::Result<()> {
    let Some(master) = view.master_id else {
        return Ok(());
    };
    if master == ha.me() {
        if ha.role()
            != (Role::Master {
                epoch: view.master_epoch,
            })
        {
            b.become_master(view.master_epoch).await?;
            let mut st = ha.lock();
            st.in_sync = view
                .in_sync
                .iter()
                .copied()
                .filter(|id| *id != ha.me())
                .collect();
        }
        return Ok(());
    }
    let target = Role::Replica {
        master_ha: view.master_ha_addr.clone().filter(|a| !a.is_empty()),
    };
    if ha.role() != target {
        if matches!(ha.role(), Role::Master { .. }) {
            tracing::warn!(
                new_master = master,
                epoch = view.master_epoch,
                "deposed: another broker is master now"
            );
        }
        b.become_replica(view.master_ha_addr.clone().filter(|a| !a.is_empty()));
    }
    Ok(())
}

/// One review of the in-sync set: joins take effect locally first (the
/// master then waits for them too), leaves only after the controller
/// approved them.
async fn review_in_sync<D: Disk, C: Clock, T: Transport>(
    b: &Broker<D, C>,
    ha: &Replication,
    client: &ControllerClient<T>,
) {
    let plan = plan_in_sync(b, ha);
    let Role::Master { epoch } = ha.role() else {
        return;
    };
    if plan.joining.is_empty() && plan.leaving.is_empty() {
        if plan.sessions_dropped {
            publish(b, ha);
        }
        return;
    }
    let proposed = {
        let mut st = ha.lock();
        for id in &plan.joining {
            st.in_sync.insert(*id);
        }
        let mut set: Vec<u64> = st
            .in_sync
            .iter()
            .copied()
            .filter(|id| !plan.leaving.contains(id))
            .collect();
        set.push(ha.me());
        set.sort_unstable();
        set
    };
    publish(b, ha);
    let alter = AlterInSync {
        group: b.config().broker_name.clone(),
        master_id: ha.me(),
        master_epoch: epoch,
        in_sync: proposed,
    };
    match client.alter_in_sync(&alter).await {
        Ok(_) => {
            let mut st = ha.lock();
            for id in &plan.leaving {
                tracing::warn!(replica = id, "replica leaves the in-sync set");
                st.in_sync.remove(id);
            }
            for id in &plan.joining {
                tracing::info!(replica = id, "replica joins the in-sync set");
            }
        }
        Err(ControllerError::Fenced(why)) => {
            tracing::warn!(%why, "in-sync change fenced: no longer the master");
        }
        Err(e) => tracing::warn!(error = %e, "in-sync change not approved yet"),
    }
    publish(b, ha);
}
