//! The dialling side: a [`Prover`] runs the exchange on each new
//! connection an `RpcClient` opens to an address before handing it out,
//! and remembers which connection it proved per address, so a reconnect
//! (a different connection id) is proven again.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use sluice_net::remoting::response_code;
use sluice_net::rpc::{ConnectionHandle, ConnectionId};
use sluice_net::{RemotingCommand, RpcClient, Transport};

use super::proof::{decode, draw_nonce, encode, prove, verify, Side};
use super::{SharedSecret, AUTH_CHALLENGE, AUTH_PROVE, FIELD_IDENTITY, FIELD_NONCE, FIELD_PROOF};

/// Why a connection could not be proven.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    /// Dialling or the exchange's requests failed.
    #[error("network: {0}")]
    Net(#[from] sluice_net::Error),
    /// The peer refused the exchange (no secret configured there, or a
    /// different one).
    #[error("{addr} refused authentication ({code}): {remark}")]
    Refused {
        /// The peer.
        addr: String,
        /// Its response code.
        code: i32,
        /// Its remark.
        remark: String,
    },
    /// The peer's own proof was missing or wrong: it does not hold the
    /// secret, so nothing is sent to it.
    #[error("{0} did not prove the shared secret; not trusted")]
    PeerUnproven(String),
}

/// Proves `identity` in `realm` on the connections of one client.
pub struct Prover {
    secret: SharedSecret,
    realm: String,
    identity: String,
    challenges: AtomicU64,
    proven: tokio::sync::Mutex<BTreeMap<String, ConnectionId>>,
}

impl Prover {
    /// A prover of `identity` in `realm` under `secret`.
    pub fn new(
        secret: SharedSecret,
        realm: impl Into<String>,
        identity: impl Into<String>,
    ) -> Self {
        Self {
            secret,
            realm: realm.into(),
            identity: identity.into(),
            challenges: AtomicU64::new(0),
            proven: tokio::sync::Mutex::new(BTreeMap::new()),
        }
    }

    /// The open, proven connection to `addr`: dialled (if needed) by `rpc`
    /// and proven (if not yet), each exchange request waiting at most
    /// `timeout`.
    pub async fn connection<T: Transport>(
        &self,
        rpc: &RpcClient<T>,
        addr: &str,
        timeout: Duration,
    ) -> Result<ConnectionHandle, AuthError> {
        // Held across the exchange: two exchanges on one connection would
        // overwrite each other's challenge.
        let mut proven = self.proven.lock().await;
        let conn = rpc.connection(addr).await?;
        if proven.get(addr) == Some(&conn.id()) {
            return Ok(conn);
        }
        proven.remove(addr);
        if let Err(e) = self.exchange(&conn, addr, timeout).await {
            conn.close();
            return Err(e);
        }
        proven.insert(addr.to_owned(), conn.id());
        Ok(conn)
    }

    async fn exchange(
        &self,
        conn: &ConnectionHandle,
        addr: &str,
        timeout: Duration,
    ) -> Result<(), AuthError> {
        let count = self.challenges.fetch_add(1, Ordering::Relaxed);
        let client_nonce = draw_nonce(&self.secret, &self.identity, count, &[conn.id()]);
        let mut challenge = RemotingCommand::request(AUTH_CHALLENGE);
        challenge
            .ext_fields
            .insert(FIELD_IDENTITY, self.identity.clone());
        challenge
            .ext_fields
            .insert(FIELD_NONCE, encode(&client_nonce));
        let answer = ok(addr, conn.invoke(challenge, timeout).await?)?;
        let server_nonce = decode(answer.ext_fields.get(FIELD_NONCE))
            .ok_or_else(|| AuthError::PeerUnproven(addr.to_owned()))?;
        let server_proof = decode(answer.ext_fields.get(FIELD_PROOF));
        let trusted = server_proof.is_some_and(|p| {
            verify(
                &self.secret,
                Side::Server,
                &self.realm,
                &self.identity,
                &client_nonce,
                &server_nonce,
                &p,
            )
        });
        if !trusted {
            return Err(AuthError::PeerUnproven(addr.to_owned()));
        }
        let proof = prove(
            &self.secret,
            Side::Client,
            &self.realm,
            &self.identity,
            &client_nonce,
            &server_nonce,
        );
        let mut prove_req = RemotingCommand::request(AUTH_PROVE);
        prove_req.ext_fields.insert(FIELD_PROOF, encode(&proof));
        ok(addr, conn.invoke(prove_req, timeout).await?)?;
        Ok(())
    }
}

fn ok(addr: &str, answer: RemotingCommand) -> Result<RemotingCommand, AuthError> {
    if answer.code == response_code::SUCCESS {
        Ok(answer)
    } else {
        Err(AuthError::Refused {
            addr: addr.to_owned(),
            code: answer.code,
            remark: answer.remark.unwrap_or_default(),
        })
    }
}
