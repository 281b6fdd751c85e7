//! The shared-secret gate on loopback TCP, through the public API: an
//! unproven connection gets a refusal and never reaches the guarded
//! handler; a prover with the secret gets through (again after a
//! reconnect); a wrong secret, a wrong proof and a proof replayed on
//! another connection are all refused.

use std::sync::Arc;
use std::time::Duration;

use sluice_core::SystemClock;
use sluice_net::remoting::response_code;
use sluice_net::{
    RemotingCommand, RequestContext, RpcClient, RpcConfig, RpcServer, TokioTransport,
};
use sluice_node::peer_auth::{
    prove, AuthError, Gate, Guard, Nonce, Prover, SharedSecret, Side, AUTH_CHALLENGE, AUTH_PROVE,
    NONCE_BYTES,
};

const REALM: &str = "test";
const PAYLOAD: &[u8] = b"the log";
const T: Duration = Duration::from_secs(5);

fn secret(s: &str) -> SharedSecret {
    SharedSecret::new(s).expect("long enough")
}

/// A guarded server whose one handler answers `PAYLOAD` to anything.
async fn guarded_server(key: &SharedSecret) -> RpcServer {
    let gate = Arc::new(Gate::new(key.clone(), REALM, SystemClock::new()));
    let inner = |_: RequestContext, _: RemotingCommand| async {
        Some(RemotingCommand::success().with_body(PAYLOAD.to_vec()))
    };
    let closed = Arc::clone(&gate);
    RpcServer::builder(RpcConfig::default(), Guard::new(gate, inner))
        .on_connection_closed(move |c| closed.forget(c.id()))
        .bind(&TokioTransport, "127.0.0.1:0")
        .await
        .expect("bind")
}

fn rpc() -> RpcClient<TokioTransport> {
    RpcClient::new(TokioTransport, RpcConfig::default())
}

fn b64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn unb64(text: &str) -> Nonce {
    use base64::Engine as _;
    let v = base64::engine::general_purpose::STANDARD
        .decode(text)
        .expect("base64");
    Nonce::try_from(v.as_slice()).expect("nonce bytes")
}

/// Runs `AUTH_CHALLENGE` by hand; returns the server's nonce.
async fn challenge(rpc: &RpcClient<TokioTransport>, addr: &str, nc: &Nonce) -> Nonce {
    let mut req = RemotingCommand::request(AUTH_CHALLENGE);
    req.ext_fields.insert("identity", "replica-1");
    req.ext_fields.insert("nonce", b64(nc));
    let answer = rpc.invoke(addr, req, T).await.expect("challenge answered");
    assert_eq!(answer.code, response_code::SUCCESS);
    unb64(answer.ext_fields.get("nonce").expect("server nonce"))
}

async fn send_proof(rpc: &RpcClient<TokioTransport>, addr: &str, proof: &Nonce) -> i32 {
    let mut req = RemotingCommand::request(AUTH_PROVE);
    req.ext_fields.insert("proof", b64(proof));
    rpc.invoke(addr, req, T).await.expect("proof answered").code
}

async fn ask(rpc: &RpcClient<TokioTransport>, addr: &str) -> RemotingCommand {
    rpc.invoke(addr, RemotingCommand::request(42), T)
        .await
        .expect("answered")
}

#[tokio::test]
async fn an_unproven_connection_is_refused_and_never_reaches_the_handler() {
    let key = secret("shared-secret-0123456789");
    let server = guarded_server(&key).await;
    let addr = server.local_addr().to_string();
    let answer = ask(&rpc(), &addr).await;
    assert_eq!(answer.code, response_code::NO_PERMISSION);
    assert!(answer.body.is_empty(), "no payload before the proof");
    assert!(answer
        .remark
        .unwrap_or_default()
        .contains("not authenticated"));
}

#[tokio::test]
async fn a_prover_with_the_secret_gets_through_and_again_after_a_reconnect() {
    let key = secret("shared-secret-0123456789");
    let server = guarded_server(&key).await;
    let addr = server.local_addr().to_string();
    let rpc = rpc();
    let prover = Prover::new(key, REALM, "replica-1");
    for _ in 0..2 {
        let conn = prover.connection(&rpc, &addr, T).await.expect("proven");
        let answer = conn
            .invoke(RemotingCommand::request(42), T)
            .await
            .expect("answered");
        assert_eq!(answer.code, response_code::SUCCESS);
        assert_eq!(&answer.body[..], PAYLOAD);
        rpc.close_connection(&addr);
    }
}

#[tokio::test]
async fn a_wrong_secret_is_refused_both_ways() {
    let server = guarded_server(&secret("shared-secret-0123456789")).await;
    let addr = server.local_addr().to_string();
    let rpc = rpc();
    let prover = Prover::new(secret("another-secret-987654321"), REALM, "replica-1");
    let refused = prover.connection(&rpc, &addr, T).await.err();
    assert!(
        matches!(refused, Some(AuthError::PeerUnproven(_))),
        "the server's proof does not verify under another secret: {refused:?}"
    );
    // A wrong proof sent anyway is refused, and the connection stays unproven.
    let nc: Nonce = [7; NONCE_BYTES];
    let ns = challenge(&rpc, &addr, &nc).await;
    let forged = prove(
        &secret("another-secret-987654321"),
        Side::Client,
        REALM,
        "replica-1",
        &nc,
        &ns,
    );
    assert_eq!(
        send_proof(&rpc, &addr, &forged).await,
        response_code::NO_PERMISSION
    );
    assert_eq!(ask(&rpc, &addr).await.code, response_code::NO_PERMISSION);
}

#[tokio::test]
async fn a_proof_replayed_on_another_connection_is_refused() {
    let key = secret("shared-secret-0123456789");
    let server = guarded_server(&key).await;
    let addr = server.local_addr().to_string();
    let rpc = rpc();
    let nc: Nonce = [7; NONCE_BYTES];
    let ns = challenge(&rpc, &addr, &nc).await;
    let proof = prove(&key, Side::Client, REALM, "replica-1", &nc, &ns);
    assert_eq!(
        send_proof(&rpc, &addr, &proof).await,
        response_code::SUCCESS
    );
    assert_eq!(ask(&rpc, &addr).await.code, response_code::SUCCESS);
    // The same proof again, on the same connection: the challenge is used up.
    assert_eq!(
        send_proof(&rpc, &addr, &proof).await,
        response_code::NO_PERMISSION
    );
    // And on a new connection, after a new challenge with the same client nonce.
    rpc.close_connection(&addr);
    let ns2 = challenge(&rpc, &addr, &nc).await;
    assert_ne!(ns, ns2, "every challenge draws a fresh nonce");
    assert_eq!(
        send_proof(&rpc, &addr, &proof).await,
        response_code::NO_PERMISSION
    );
    assert_eq!(ask(&rpc, &addr).await.code, response_code::NO_PERMISSION);
}
