//! The secured scenarios: a TLS and an ACL round trip against a node that
//! enforces them. Each also checks the refusal side (a client trusting a CA
//! that signed nothing, a signature made with a wrong secret), so neither
//! can pass against a node that secures nothing or a client that checks
//! nothing.
use std::sync::Arc;

use rocketmq_client_rust::{AclClientRPCHook, ClientConfig, SendStatus, SessionCredentials};
use rocketmq_transport::api::RPCHook;

use crate::{ce, check_intact, consume_all, fail, msg, ok_status, Env, Outcome};

/// Messages each round trip sends and consumes.
const ROUND_TRIP_MESSAGES: usize = 10;

/// The broker's answer to a request its ACL refuses.
const NO_PERMISSION: i32 = 16;

/// `--ca`: the CA that signed the node's certificate; `--other-ca`: one that
/// signed nothing the node presents.
pub(crate) struct TlsTrust {
    pub(crate) ca: String,
    pub(crate) other_ca: Option<String>,
}

/// `--access-key` / `--secret-key`: the account every client signs with.
pub(crate) struct AclKeys {
    pub(crate) access_key: String,
    pub(crate) secret_key: String,
}

impl AclKeys {
    /// The client's ACL 1.0 hook: signs every request with these keys.
    pub(crate) fn signer(&self) -> Arc<dyn RPCHook> {
        signer(&self.access_key, &self.secret_key)
    }
}

fn signer(access_key: &str, secret_key: &str) -> Arc<dyn RPCHook> {
    Arc::new(AclClientRPCHook::new(SessionCredentials::with_keys(
        access_key.to_owned(),
        secret_key.to_owned(),
    )))
}

/// Makes `config` speak TLS and verify the server against `ca` alone: not
/// the system roots (the client's default without a trust path) and not
/// the client's trust-everything test mode (off by default, kept off).
pub(crate) fn trust(config: &mut ClientConfig, ca: &str) {
    config.set_use_tls(true);
    config.set_tls_test_mode_enable(false);
    config.set_tls_client_auth_server(true);
    config.set_tls_client_trust_cert_path(ca);
}

/// Sends [`ROUND_TRIP_MESSAGES`] with every client as `env` configures it
/// and consumes them intact.
async fn round_trip(env: &Env, topic: &str, prefix: &str) -> Result<(), String> {
    let mut p = env.producer(&env.name("pg")).await?;
    for i in 0..ROUND_TRIP_MESSAGES {
        let r = p.send(msg(topic, i, prefix)?).await.map_err(ce("send"))?;
        ok_status(&r)?;
    }
    let got = consume_all(env, topic, ROUND_TRIP_MESSAGES).await?;
    check_intact(&got, prefix, ROUND_TRIP_MESSAGES)?;
    p.shutdown().await;
    Ok(())
}

/// Against a node with `[tls] mode = "enforcing"`: producer and push
/// consumer round-trip over TLS verified against `--ca`, and a producer
/// trusting only `--other-ca` sends nothing.
pub(crate) async fn tls_roundtrip(env: &Env) -> Outcome {
    let Some(tls) = &env.tls else {
        return fail("needs --ca (the CA that signed the node's certificate)");
    };
    let Some(other_ca) = &tls.other_ca else {
        return fail("needs --other-ca (a CA that signed nothing the node presents)");
    };
    let topic = env.name("RpTls");
    round_trip(env, &topic, "tls").await?;
    let mut config = env.config();
    trust(&mut config, other_ca);
    let mut stranger = env
        .producer_with(&env.name("pg-stranger"), config, env.signer())
        .await?;
    let refused = stranger
        .send(msg(&topic, ROUND_TRIP_MESSAGES, "tls")?)
        .await;
    stranger.shutdown().await;
    match refused {
        Ok(Some(r)) if r.send_status == SendStatus::SendOk => fail(format!(
            "a producer trusting only --other-ca sent a message: {r}"
        )),
        Ok(r) => fail(format!(
            "a producer trusting only --other-ca got an answer: {r:?}"
        )),
        Err(e) => {
            // rustls' verdict on a chain it cannot root; any other failure
            // (say a refused connection) would prove nothing about trust.
            let why = ce("send")(e);
            if !why.contains("UnknownIssuer") {
                return fail(format!(
                    "trusting only --other-ca the send failed, but not on the certificate: {why}"
                ));
            }
            Ok(format!(
                "{ROUND_TRIP_MESSAGES} sends over TLS (server verified against --ca) acked \
                 SEND_OK and consumed intact; trusting only --other-ca the send failed: {why}"
            ))
        }
    }
}

/// Against a node with `[acl] mode = "enforcing"`: producer and push
/// consumer signing with `--access-key`/`--secret-key` round-trip, and a
/// send signed with the same key and a wrong secret is refused with
/// `NO_PERMISSION`.
pub(crate) async fn acl_roundtrip(env: &Env) -> Outcome {
    let Some(keys) = &env.acl else {
        return fail("needs --access-key and --secret-key (an account with PUB|SUB)");
    };
    let topic = env.name("RpAcl");
    round_trip(env, &topic, "acl").await?;
    let wrong = signer(&keys.access_key, &format!("{}-wrong", keys.secret_key));
    let mut forger = env
        .producer_with(&env.name("pg-forger"), env.config(), Some(wrong))
        .await?;
    let refused = forger.send(msg(&topic, ROUND_TRIP_MESSAGES, "acl")?).await;
    forger.shutdown().await;
    match refused {
        Ok(r) => fail(format!(
            "a send signed with a wrong secret was answered: {r:?}"
        )),
        Err(e) if e.broker_response_code() == Some(NO_PERMISSION) => Ok(format!(
            "{ROUND_TRIP_MESSAGES} signed sends acked SEND_OK and consumed intact; \
             a send signed with a wrong secret was refused NO_PERMISSION ({NO_PERMISSION}): {}",
            ce("send")(e)
        )),
        Err(e) => fail(format!(
            "a send signed with a wrong secret failed, but not with NO_PERMISSION ({:?}): {}",
            e.broker_response_code(),
            ce("send")(e)
        )),
    }
}
