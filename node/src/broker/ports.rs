//! The broker's extra ports: the VIP port (the broker port − 2, for old
//! clients) and the replication port.

use std::net::SocketAddr;
use std::sync::Arc;

use sluice_core::disk::Disk;
use sluice_core::Clock;
use sluice_net::{RpcServer, Transport};

use super::handlers::BrokerRoutes;
use super::{ha, Broker};
use crate::error::Result;

impl<D: Disk, C: Clock> Broker<D, C> {
    /// Binds the VIP port (the broker port − 2) when configured; a port
    /// that cannot be bound is logged and skipped.
    pub(super) async fn bind_vip<T: Transport>(
        &self,
        transport: &T,
        addr: SocketAddr,
        handler: BrokerRoutes<D, C>,
    ) -> Option<RpcServer> {
        if self.config.listen_vip && addr.port() > 2 {
            let vip_addr = SocketAddr::new(addr.ip(), addr.port() - 2);
            match RpcServer::bind(transport, &vip_addr.to_string(), self.config.rpc(), handler)
                .await
            {
                Ok(s) => Some(s),
                Err(e) => {
                    tracing::warn!(error = %e, %vip_addr, "VIP port unavailable; serving the main port only");
                    None
                }
            }
        } else {
            None
        }
    }

    /// Binds the HA port (the broker port + 1 unless configured) and takes
    /// the configured role: broker id 0 is the master, any other id a
    /// replica of `master_ha_addr`.
    pub(super) async fn start_replication<T: Transport>(
        self: &Arc<Self>,
        transport: &T,
        addr: SocketAddr,
    ) -> Result<Option<RpcServer>> {
        let Some(ha) = &self.ha else {
            return Ok(None);
        };
        let listen =
            ha.config().ha_listen.clone().unwrap_or_else(|| {
                SocketAddr::new(addr.ip(), addr.port().wrapping_add(1)).to_string()
            });
        let server = ha::bind_port(self, transport, &listen).await?;
        let advertised = ha.config().ha_advertised.clone().unwrap_or_else(|| {
            let host = self.store_host().ip();
            SocketAddr::new(host, server.local_addr().port()).to_string()
        });
        ha.set_ha_addr(advertised.clone());
        tracing::info!(ha = %advertised, "replication port serving");
        if !ha.config().controller_addrs.is_empty() {
            // The controllers decide; until they answer, no role.
        } else if self.config.broker_id == 0 {
            let epoch = ha.epochs().last_epoch() + 1;
            self.become_master(epoch).await?;
        } else {
            self.become_replica(ha.config().master_ha_addr.clone());
        }
        Ok(Some(server))
    }
}
