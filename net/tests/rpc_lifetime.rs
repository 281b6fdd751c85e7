//! Connection lifetime: idle connections are closed when
//! `RpcConfig::idle_timeout` is set (and kept while traffic flows); a peer
//! that begins a frame and stalls is closed after
//! `RpcConfig::frame_deadline` (see also `frame_deadline.rs`); a shut down client fails pending
//! calls and refuses new ones.

use std::time::Duration;

use sluice_net::remoting::response_code;
use sluice_net::{
    HandlerTable, RemotingCommand, RequestContext, RpcClient, RpcConfig, RpcServer, TokioTransport,
};

/// A loopback server answering request code 1 with SUCCESS.
async fn echo_server(config: RpcConfig) -> RpcServer {
    let table = HandlerTable::new().with(1, |_ctx: RequestContext, _req: RemotingCommand| async {
        Some(RemotingCommand::success())
    });
    RpcServer::bind(&TokioTransport, "127.0.0.1:0", config, table)
        .await
        .expect("bind")
}

#[tokio::test]
async fn server_closes_connections_idle_past_the_timeout() {
    let server = echo_server(RpcConfig {
        idle_timeout: Some(Duration::from_millis(300)),
        ..RpcConfig::default()
    })
    .await;
    let addr = server.local_addr().to_string();
    let client = RpcClient::new(TokioTransport, RpcConfig::default());
    let connection = client.connection(&addr).await.expect("connect");
    // Traffic every 100 ms keeps the connection open past the idle timeout.
    for _ in 0..6 {
        let resp = client
            .invoke(&addr, RemotingCommand::request(1), Duration::from_secs(1))
            .await
            .expect("answered");
        assert_eq!(resp.code, response_code::SUCCESS);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(!connection.is_closed());
    // Silence: the server closes it.
    tokio::time::timeout(Duration::from_secs(2), connection.closed())
        .await
        .expect("closed by the server");
    assert!(server.connections().is_empty());
}

#[tokio::test]
async fn server_closes_a_connection_that_stalls_inside_a_frame_but_keeps_a_quiet_one() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let server = echo_server(RpcConfig {
        frame_deadline: Some(Duration::from_millis(200)),
        ..RpcConfig::default()
    })
    .await;
    let addr = server.local_addr().to_string();
    let mut quiet = tokio::net::TcpStream::connect(&addr)
        .await
        .expect("connect");
    let mut stalled = Vec::new();
    for _ in 0..50 {
        let mut s = tokio::net::TcpStream::connect(&addr)
            .await
            .expect("connect");
        // Half of a frame: a length that promises 64 bytes, then silence.
        s.write_all(&[0, 0, 0, 64, 0, 0]).await.expect("write");
        stalled.push(s);
    }
    for mut s in stalled {
        let mut buf = [0u8; 16];
        let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf))
            .await
            .expect("closed by the server, not left hanging")
            .unwrap_or(0);
        assert_eq!(n, 0, "a stalled frame gets no answer");
    }
    // The connection that sent nothing is not a stalled frame (that is the
    // idle timeout's business, 120 s by default): it still works.
    let frame = sluice_net::remoting::frame::encode_to_bytes(
        &RemotingCommand::request(1),
        &sluice_net::remoting::FrameLimits::default(),
    )
    .expect("encodable");
    quiet.write_all(&frame).await.expect("write");
    let mut buf = [0u8; 4];
    tokio::time::timeout(Duration::from_secs(5), quiet.read_exact(&mut buf))
        .await
        .expect("answered")
        .expect("read");
    assert_eq!(server.connections().len(), 1);
}

#[tokio::test]
async fn a_server_call_that_times_out_keeps_the_connection_when_asked_to() {
    let server = echo_server(RpcConfig::default()).await;
    let addr = server.local_addr().to_string();
    // A client whose handler never answers code 2.
    let client = RpcClient::with_handler(
        TokioTransport,
        RpcConfig::default(),
        |_ctx: RequestContext, _req: RemotingCommand| async {
            std::future::pending::<()>().await;
            None
        },
    );
    let resp = client
        .invoke(&addr, RemotingCommand::request(1), Duration::from_secs(1))
        .await
        .expect("answered");
    assert_eq!(resp.code, response_code::SUCCESS);
    let to_client = server.connections().pop().expect("the client's connection");
    let kept = to_client
        .invoke_keeping_open(RemotingCommand::request(2), Duration::from_millis(100))
        .await;
    assert!(kept.is_err(), "the client never answers");
    assert!(!to_client.is_closed(), "a slow client keeps its connection");
    let closed = to_client
        .invoke(RemotingCommand::request(2), Duration::from_millis(100))
        .await;
    assert!(closed.is_err());
    assert!(to_client.is_closed(), "invoke closes on timeout by default");
}

#[tokio::test]
async fn shut_down_client_fails_pending_and_refuses_new_calls() {
    let table = HandlerTable::new()
        .with(1, |_ctx: RequestContext, _req: RemotingCommand| async {
            Some(RemotingCommand::success())
        })
        .with(2, |_ctx: RequestContext, _req: RemotingCommand| async {
            std::future::pending::<Option<RemotingCommand>>().await
        });
    let server = RpcServer::bind(&TokioTransport, "127.0.0.1:0", RpcConfig::default(), table)
        .await
        .expect("bind");
    let addr = server.local_addr().to_string();
    let client = RpcClient::new(TokioTransport, RpcConfig::default());
    client
        .invoke(&addr, RemotingCommand::request(1), Duration::from_secs(1))
        .await
        .expect("answered");
    let pending = {
        let client = client.clone();
        let addr = addr.clone();
        tokio::spawn(async move {
            client
                .invoke(&addr, RemotingCommand::request(2), Duration::from_secs(30))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    client.shutdown();
    let err = pending
        .await
        .expect("no panic")
        .expect_err("pending call fails");
    assert!(
        matches!(err, sluice_net::Error::ConnectionClosed { .. }),
        "{err}"
    );
    let err = client
        .invoke(&addr, RemotingCommand::request(1), Duration::from_secs(1))
        .await
        .expect_err("refused");
    assert!(matches!(err, sluice_net::Error::Shutdown), "{err}");
}
