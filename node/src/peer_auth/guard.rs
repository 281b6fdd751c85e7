//! The serving side: a [`Gate`] keeps, per connection, the challenge in
//! flight and the identity once proven; a [`Guard`] wraps a port's handler
//! so that only the exchange's two requests reach an unproven connection.
//! Entries leave with their connection (`Gate::forget` from the server's
//! close hook) and are bounded by [`CONNECTIONS_MAX`].

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use sluice_core::Clock;
use sluice_net::remoting::response_code;
use sluice_net::rpc::{ConnectionId, HandlerFuture};
use sluice_net::{Handler, RemotingCommand, RequestContext};

use super::proof::{decode, draw_nonce, encode, prove, verify, Nonce, Side};
use super::{SharedSecret, AUTH_CHALLENGE, AUTH_PROVE, FIELD_IDENTITY, FIELD_NONCE, FIELD_PROOF};

/// Connections with a challenge in flight or a proven identity kept at
/// once; past it the oldest unproven entry is dropped, so a flood of
/// challenges from peers without the secret never evicts a proven one.
pub const CONNECTIONS_MAX: usize = 4_096;
/// Longest identity accepted, in bytes.
const IDENTITY_BYTES_MAX: usize = 256;
/// At most one refusal line per this period; the rest are counted.
const REFUSAL_LOG_PERIOD: Duration = Duration::from_secs(1);

/// A challenge issued on one connection, not yet answered.
struct Pending {
    identity: String,
    client_nonce: Nonce,
    server_nonce: Nonce,
}

#[derive(Default)]
struct Entry {
    pending: Option<Pending>,
    proven: Option<String>,
}

#[derive(Default)]
struct Book {
    entries: BTreeMap<ConnectionId, Entry>,
    last_refusal_logged: Option<Duration>,
    refusals_unlogged: u64,
}

impl Book {
    /// Drops the oldest connection still unproven (the oldest of all when
    /// every one is proven, which only holders of the secret can cause).
    fn evict_one(&mut self) {
        let victim = self
            .entries
            .iter()
            .find(|(_, e)| e.proven.is_none())
            .or_else(|| self.entries.iter().next())
            .map(|(id, _)| *id);
        if let Some(id) = victim {
            self.entries.remove(&id);
        }
    }
}

/// Per-connection authentication state of one port.
pub struct Gate<C: Clock> {
    secret: SharedSecret,
    realm: String,
    clock: C,
    challenges: AtomicU64,
    book: Mutex<Book>,
}

impl<C: Clock> Gate<C> {
    /// A gate for `realm` (e.g. `ha/broker-a`, `controller`) under `secret`.
    pub fn new(secret: SharedSecret, realm: impl Into<String>, clock: C) -> Self {
        Self {
            secret,
            realm: realm.into(),
            clock,
            challenges: AtomicU64::new(0),
            book: Mutex::new(Book::default()),
        }
    }

    fn book(&self) -> std::sync::MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The identity connection `id` proved, if it did.
    pub fn identity(&self, id: ConnectionId) -> Option<String> {
        self.book().entries.get(&id).and_then(|e| e.proven.clone())
    }

    /// Drops what the gate knows about connection `id` (it closed).
    pub fn forget(&self, id: ConnectionId) {
        self.book().entries.remove(&id);
    }

    /// Answers `AUTH_CHALLENGE`: a fresh nonce and the server's proof.
    pub fn challenge(&self, ctx: &RequestContext, req: &RemotingCommand) -> RemotingCommand {
        let identity = req.ext_fields.get(FIELD_IDENTITY).unwrap_or_default();
        let Some(client_nonce) = decode(req.ext_fields.get(FIELD_NONCE)) else {
            return self.refuse(ctx, req.code, "challenge without a valid nonce");
        };
        if identity.is_empty() || identity.len() > IDENTITY_BYTES_MAX {
            return self.refuse(ctx, req.code, "challenge without a valid identity");
        }
        let count = self.challenges.fetch_add(1, Ordering::Relaxed);
        let mono_ns = u64::try_from(self.clock.monotonic().as_nanos()).unwrap_or(u64::MAX);
        let id = ctx.connection.id();
        let server_nonce = draw_nonce(
            &self.secret,
            &self.realm,
            count,
            &[id, self.clock.wall_ms(), mono_ns],
        );
        let proof = prove(
            &self.secret,
            Side::Server,
            &self.realm,
            identity,
            &client_nonce,
            &server_nonce,
        );
        {
            let mut book = self.book();
            if !book.entries.contains_key(&id) && book.entries.len() >= CONNECTIONS_MAX {
                book.evict_one();
            }
            book.entries.entry(id).or_default().pending = Some(Pending {
                identity: identity.to_owned(),
                client_nonce,
                server_nonce,
            });
        }
        let mut out = RemotingCommand::success();
        out.ext_fields.insert(FIELD_NONCE, encode(&server_nonce));
        out.ext_fields.insert(FIELD_PROOF, encode(&proof));
        out
    }

    /// Answers `AUTH_PROVE`: the connection is proven if the proof answers
    /// the challenge issued on it (which is used up either way).
    pub fn prove(&self, ctx: &RequestContext, req: &RemotingCommand) -> RemotingCommand {
        let id = ctx.connection.id();
        let pending = self
            .book()
            .entries
            .get_mut(&id)
            .and_then(|e| e.pending.take());
        let Some(p) = pending else {
            return self.refuse(
                ctx,
                req.code,
                "proof without a challenge on this connection",
            );
        };
        let proof = req.ext_fields.get(FIELD_PROOF).unwrap_or_default();
        let proof = super::proof::decode(Some(proof));
        let valid = proof.is_some_and(|proof| {
            verify(
                &self.secret,
                Side::Client,
                &self.realm,
                &p.identity,
                &p.client_nonce,
                &p.server_nonce,
                &proof,
            )
        });
        if !valid {
            tracing::warn!(
                peer = %ctx.peer_addr(),
                realm = %self.realm,
                identity = %p.identity,
                "peer failed to prove the shared secret; refused"
            );
            return refusal(&self.realm, "wrong proof: the shared secrets differ");
        }
        tracing::info!(peer = %ctx.peer_addr(), realm = %self.realm, identity = %p.identity, "peer proved the shared secret");
        if let Some(e) = self.book().entries.get_mut(&id) {
            e.proven = Some(p.identity);
        }
        RemotingCommand::success()
    }

    /// Refuses request `code` on an unproven connection, logging it (at
    /// most a line per second, naming how many were not logged).
    pub fn refuse(&self, ctx: &RequestContext, code: i32, why: &str) -> RemotingCommand {
        let now = self.clock.monotonic();
        let unlogged = {
            let mut book = self.book();
            let due = book
                .last_refusal_logged
                .is_none_or(|t| now.saturating_sub(t) >= REFUSAL_LOG_PERIOD);
            if due {
                book.last_refusal_logged = Some(now);
                Some(std::mem::take(&mut book.refusals_unlogged))
            } else {
                book.refusals_unlogged += 1;
                None
            }
        };
        if let Some(unlogged) = unlogged {
            log_refusal(ctx.peer_addr(), &self.realm, code, why, unlogged);
        }
        refusal(&self.realm, why)
    }
}

fn log_refusal(peer: SocketAddr, realm: &str, code: i32, why: &str, unlogged: u64) {
    tracing::warn!(
        %peer,
        realm,
        request = code,
        why,
        refusals_not_logged = unlogged,
        "refused a peer that has not proven the shared secret"
    );
}

fn refusal(realm: &str, why: &str) -> RemotingCommand {
    RemotingCommand::response(
        response_code::NO_PERMISSION,
        format!("[sluice] {realm}: not authenticated ({why}); prove the shared secret first"),
    )
}

/// A port's handler behind a [`Gate`]: the exchange's requests go to the
/// gate, everything else to `inner` once the connection is proven.
pub struct Guard<H, C: Clock> {
    gate: Arc<Gate<C>>,
    inner: H,
}

impl<H: Handler, C: Clock> Guard<H, C> {
    /// `inner` behind `gate`.
    pub fn new(gate: Arc<Gate<C>>, inner: H) -> Self {
        Self { gate, inner }
    }
}

impl<H: Handler, C: Clock> Handler for Guard<H, C> {
    fn handle(&self, ctx: RequestContext, request: RemotingCommand) -> HandlerFuture {
        let answer = match request.code {
            AUTH_CHALLENGE => self.gate.challenge(&ctx, &request),
            AUTH_PROVE => self.gate.prove(&ctx, &request),
            _ if self.gate.identity(ctx.connection.id()).is_some() => {
                return self.inner.handle(ctx, request)
            }
            code => self.gate.refuse(&ctx, code, "unproven connection"),
        };
        Box::pin(async move { Some(answer) })
    }

    fn before_answers(&self) -> bool {
        self.inner.before_answers()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(proven: bool) -> Entry {
        Entry {
            pending: None,
            proven: proven.then(|| "replica".to_owned()),
        }
    }

    #[test]
    fn eviction_spares_proven_connections_while_unproven_ones_remain() {
        let mut book = Book::default();
        book.entries.insert(1, entry(true));
        book.entries.insert(2, entry(false));
        book.entries.insert(3, entry(true));
        book.entries.insert(4, entry(false));
        book.evict_one();
        assert_eq!(
            book.entries.keys().copied().collect::<Vec<_>>(),
            vec![1, 3, 4]
        );
        book.evict_one();
        assert_eq!(book.entries.keys().copied().collect::<Vec<_>>(), vec![1, 3]);
        book.evict_one();
        assert_eq!(
            book.entries.keys().copied().collect::<Vec<_>>(),
            vec![3],
            "all proven: the oldest"
        );
    }
}
