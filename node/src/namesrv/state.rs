//! The state every name-server handler shares: the route table, the KV
//! config and the settings. Locks are never held across an `.await`.

use std::sync::{Mutex, MutexGuard, PoisonError};

use sluice_core::Clock;

use super::{KvConfig, NameServerConfig, RouteTable};

/// Shared name-server state.
pub(super) struct State<C: Clock> {
    routes: Mutex<RouteTable<C>>,
    kv: Mutex<KvConfig>,
    pub(super) config: NameServerConfig,
    /// The monotonic clock (the ACL log's pace).
    pub(super) clock: C,
}

impl<C: Clock> State<C> {
    pub(super) fn new(config: NameServerConfig, clock: C) -> Self {
        Self {
            routes: Mutex::new(RouteTable::new(clock.clone())),
            kv: Mutex::new(KvConfig::new()),
            config,
            clock,
        }
    }

    /// The route table. Poison is ignored: one panicking handler must not
    /// fail every later request, and each map stays valid on its own.
    pub(super) fn routes(&self) -> MutexGuard<'_, RouteTable<C>> {
        self.routes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The KV config.
    pub(super) fn kv(&self) -> MutexGuard<'_, KvConfig> {
        self.kv.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
