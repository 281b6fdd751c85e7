//! TLS on an RPC port, per `TlsMode`: enforcing serves TLS and closes a
//! plain frame unanswered; permissive serves both on one port; a
//! `client_ca` demands client certificates; clients verify servers against
//! their CA. Certificates are minted per test into a temp dir.

#[path = "support/pki.rs"]
mod pki;

use std::time::Duration;

use pki::Pki;
use sluice_net::remoting::{frame, response_code, FrameLimits};
use sluice_net::{
    HandlerTable, RemotingCommand, RequestContext, RpcClient, RpcConfig, RpcServer, TlsMode,
    TlsSettings, TlsTransport,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const CALL: Duration = Duration::from_secs(3);

/// A server on `transport` answering request code 1 with SUCCESS.
async fn echo_server(transport: &TlsTransport) -> (RpcServer, String) {
    let table = HandlerTable::new().with(1, |_ctx: RequestContext, _req: RemotingCommand| async {
        Some(RemotingCommand::success())
    });
    let server = RpcServer::bind(transport, "127.0.0.1:0", RpcConfig::default(), table)
        .await
        .expect("bind");
    let addr = server.local_addr().to_string();
    (server, addr)
}

fn server_settings(pki: &Pki, mode: TlsMode) -> TlsSettings {
    TlsSettings {
        mode,
        cert: Some(pki.server_cert.clone()),
        key: Some(pki.server_key.clone()),
        ..TlsSettings::default()
    }
}

fn trusting(ca: &std::path::Path) -> TlsTransport {
    TlsSettings {
        ca: Some(ca.to_owned()),
        ..TlsSettings::default()
    }
    .transport()
    .expect("client settings")
}

/// Whether one request from a fresh client on `transport` succeeds.
async fn round_trips(transport: TlsTransport, addr: &str) -> bool {
    let client = RpcClient::new(transport, RpcConfig::default());
    let answer = client.invoke(addr, RemotingCommand::request(1), CALL).await;
    client.shutdown();
    answer.is_ok_and(|r| r.code == response_code::SUCCESS)
}

#[tokio::test]
async fn enforcing_port_round_trips_a_request_over_tls() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = Pki::mint(dir.path());
    let transport = server_settings(&pki, TlsMode::Enforcing)
        .transport()
        .expect("server settings");
    let (_server, addr) = echo_server(&transport).await;
    assert!(round_trips(trusting(&pki.ca), &addr).await);
    // By its DNS name too: the certificate carries both.
    let port = addr.rsplit_once(':').expect("port").1;
    assert!(round_trips(trusting(&pki.ca), &format!("localhost:{port}")).await);
}

#[tokio::test]
async fn enforcing_port_closes_a_plain_frame_without_an_answer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = Pki::mint(dir.path());
    let transport = server_settings(&pki, TlsMode::Enforcing)
        .transport()
        .expect("server settings");
    let (_server, addr) = echo_server(&transport).await;
    let mut plain = tokio::net::TcpStream::connect(&addr)
        .await
        .expect("connect");
    let request = frame::encode_to_bytes(&RemotingCommand::request(1), &FrameLimits::default())
        .expect("encodable");
    plain.write_all(&request).await.expect("write");
    let mut buf = [0_u8; 64];
    let read = tokio::time::timeout(CALL, plain.read(&mut buf))
        .await
        .expect("closed, not left hanging");
    assert!(
        matches!(read, Ok(0) | Err(_)),
        "a plain frame must get no answer, got {read:?}"
    );
    assert!(!round_trips(TlsTransport::plain(), &addr).await);
    // The refusal hurt nobody else.
    assert!(round_trips(trusting(&pki.ca), &addr).await);
}

#[tokio::test]
async fn permissive_port_serves_tls_and_plain_on_one_port() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = Pki::mint(dir.path());
    let transport = server_settings(&pki, TlsMode::Permissive)
        .transport()
        .expect("server settings");
    let (server, addr) = echo_server(&transport).await;
    let tls = RpcClient::new(trusting(&pki.ca), RpcConfig::default());
    let plain = RpcClient::new(TlsTransport::plain(), RpcConfig::default());
    for client in [&tls, &plain] {
        let answer = client
            .invoke(&addr, RemotingCommand::request(1), CALL)
            .await
            .expect("answered");
        assert_eq!(answer.code, response_code::SUCCESS);
    }
    assert_eq!(server.connections().len(), 2, "one TLS, one plain");
}

#[tokio::test]
async fn disabled_port_refuses_a_tls_client() {
    let (_server, addr) = echo_server(&TlsTransport::plain()).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = Pki::mint(dir.path());
    assert!(!round_trips(trusting(&pki.ca), &addr).await);
    assert!(round_trips(TlsTransport::plain(), &addr).await);
}

#[tokio::test]
async fn client_ca_demands_a_client_certificate() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = Pki::mint(dir.path());
    let transport = TlsSettings {
        client_ca: Some(pki.ca.clone()),
        ..server_settings(&pki, TlsMode::Enforcing)
    }
    .transport()
    .expect("server settings");
    let (_server, addr) = echo_server(&transport).await;
    assert!(
        !round_trips(trusting(&pki.ca), &addr).await,
        "no client certificate: refused"
    );
    let with_certificate = TlsSettings {
        ca: Some(pki.ca.clone()),
        client_cert: Some(pki.client_cert.clone()),
        client_key: Some(pki.client_key.clone()),
        ..TlsSettings::default()
    }
    .transport()
    .expect("client settings");
    assert!(round_trips(with_certificate, &addr).await);
}

#[tokio::test]
async fn client_refuses_a_server_its_ca_did_not_sign_unless_insecure() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = Pki::mint(dir.path());
    let transport = server_settings(&pki, TlsMode::Enforcing)
        .transport()
        .expect("server settings");
    let (_server, addr) = echo_server(&transport).await;
    assert!(!round_trips(trusting(&pki.other_ca), &addr).await);
    let wrong_name = TlsSettings {
        ca: Some(pki.ca.clone()),
        server_name: Some("broker.elsewhere".to_owned()),
        ..TlsSettings::default()
    }
    .transport()
    .expect("client settings");
    assert!(!round_trips(wrong_name, &addr).await);
    let insecure = TlsSettings {
        insecure: true,
        ..TlsSettings::default()
    }
    .transport()
    .expect("client settings");
    assert!(round_trips(insecure, &addr).await);
}

#[tokio::test]
async fn a_silent_connection_does_not_hold_up_the_next_handshake() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = Pki::mint(dir.path());
    let transport = server_settings(&pki, TlsMode::Permissive)
        .transport()
        .expect("server settings");
    let (_server, addr) = echo_server(&transport).await;
    // Connected, never speaks: its first byte is what the listener waits for.
    let _silent = tokio::net::TcpStream::connect(&addr)
        .await
        .expect("connect");
    assert!(round_trips(trusting(&pki.ca), &addr).await);
    assert!(round_trips(TlsTransport::plain(), &addr).await);
}

#[test]
fn unreadable_certificate_files_are_reported_with_their_path() {
    let settings = TlsSettings {
        mode: TlsMode::Enforcing,
        cert: Some("/nonexistent/server.pem".into()),
        key: Some("/nonexistent/server-key.pem".into()),
        ..TlsSettings::default()
    };
    let err = settings.transport().expect_err("missing files");
    assert!(err.to_string().contains("/nonexistent/server.pem"), "{err}");
}
