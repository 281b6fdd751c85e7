//! Half-open connections: a server closes a connection whose frame is not
//! complete `RpcConfig::frame_deadline` after its first byte, however the
//! peer paces the bytes; a slow frame that completes within the deadline is
//! served; and by default a connection on which nothing arrives is closed
//! after `RpcConfig::idle_timeout` (120 s) and half a frame after 30 s.

use std::time::Duration;

use sluice_net::remoting::frame::encode_to_bytes;
use sluice_net::remoting::FrameLimits;
use sluice_net::{
    HandlerTable, RemotingCommand, RequestContext, RpcConfig, RpcServer, TokioTransport,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

/// A loopback server answering request code 1 with SUCCESS.
async fn echo_server(config: RpcConfig) -> RpcServer {
    let table = HandlerTable::new().with(1, |_ctx: RequestContext, _req: RemotingCommand| async {
        Some(RemotingCommand::success())
    });
    RpcServer::bind(&TokioTransport, "127.0.0.1:0", config, table)
        .await
        .expect("bind")
}

fn request_frame() -> Vec<u8> {
    encode_to_bytes(&RemotingCommand::request(1), &FrameLimits::default())
        .expect("encodable")
        .to_vec()
}

/// Reads until the server closes the stream (EOF or reset); panics if it
/// answers with bytes or is still open after `within`.
async fn closed_by_server(stream: &mut TcpStream, within: Duration) {
    let mut buf = [0u8; 64];
    let n = tokio::time::timeout(within, stream.read(&mut buf))
        .await
        .expect("closed by the server, not left hanging")
        .unwrap_or(0);
    assert_eq!(n, 0, "an incomplete frame gets no answer");
}

#[tokio::test]
async fn a_frame_dribbled_past_the_deadline_is_closed_although_bytes_keep_coming() {
    let server = echo_server(RpcConfig {
        frame_deadline: Some(Duration::from_millis(400)),
        ..RpcConfig::default()
    })
    .await;
    let addr = server.local_addr().to_string();
    let mut stream = TcpStream::connect(&addr).await.expect("connect");
    // A length promising 1000 bytes, then one byte every 50 ms: the stream
    // never stalls for long, but the frame could only finish after 50 s.
    stream.write_all(&[0, 0, 3, 232]).await.expect("write");
    let (mut read_half, mut write_half) = stream.into_split();
    let dribble = tokio::spawn(async move {
        for _ in 0..1000 {
            tokio::time::sleep(Duration::from_millis(50)).await;
            if write_half.write_all(&[7]).await.is_err() {
                return;
            }
        }
    });
    let started = Instant::now();
    let mut buf = [0u8; 64];
    let n = tokio::time::timeout(Duration::from_secs(5), read_half.read(&mut buf))
        .await
        .expect("closed by the server while the peer kept sending")
        .unwrap_or(0);
    assert_eq!(n, 0);
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "closed before the deadline"
    );
    dribble.abort();
    tokio::time::timeout(Duration::from_secs(2), async {
        while !server.connections().is_empty() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the server forgot the connection");
}

#[tokio::test]
async fn a_slow_frame_completed_within_the_deadline_is_served() {
    let server = echo_server(RpcConfig {
        frame_deadline: Some(Duration::from_millis(1500)),
        ..RpcConfig::default()
    })
    .await;
    let addr = server.local_addr().to_string();
    let mut stream = TcpStream::connect(&addr).await.expect("connect");
    // Two frames, each sent in pieces 150 ms apart (600 ms per frame, well
    // inside the deadline; together longer than it, so the deadline must
    // restart for the second frame).
    for _ in 0..2 {
        let frame = request_frame();
        for piece in frame.chunks(frame.len().div_ceil(4)) {
            stream.write_all(piece).await.expect("write");
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
        let mut len = [0u8; 4];
        tokio::time::timeout(Duration::from_secs(5), stream.read_exact(&mut len))
            .await
            .expect("answered")
            .expect("read the response's length");
        let mut rest = vec![0u8; u32::from_be_bytes(len) as usize];
        stream
            .read_exact(&mut rest)
            .await
            .expect("read the response");
    }
    assert_eq!(server.connections().len(), 1);
}

#[tokio::test]
async fn half_a_frame_is_not_closed_before_the_deadline() {
    let server = echo_server(RpcConfig {
        frame_deadline: Some(Duration::from_millis(800)),
        ..RpcConfig::default()
    })
    .await;
    let addr = server.local_addr().to_string();
    let mut stream = TcpStream::connect(&addr).await.expect("connect");
    let frame = request_frame();
    stream
        .write_all(&frame[..frame.len() / 2])
        .await
        .expect("write");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(server.connections().len(), 1, "closed before the deadline");
    closed_by_server(&mut stream, Duration::from_secs(5)).await;
}

#[tokio::test(start_paused = true)]
async fn by_default_half_a_frame_is_closed_after_30_s() {
    let server = echo_server(RpcConfig::default()).await;
    let mut stream = TcpStream::connect(server.local_addr())
        .await
        .expect("connect");
    let started = Instant::now();
    stream
        .write_all(&[0, 0, 3, 232, 0, 0, 0])
        .await
        .expect("write");
    closed_by_server(&mut stream, Duration::from_secs(600)).await;
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(30) && waited < Duration::from_secs(31),
        "closed after {waited:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn by_default_a_silent_connection_is_closed_after_120_s() {
    let server = echo_server(RpcConfig::default()).await;
    let mut stream = TcpStream::connect(server.local_addr())
        .await
        .expect("connect");
    let started = Instant::now();
    closed_by_server(&mut stream, Duration::from_secs(600)).await;
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(120) && waited < Duration::from_secs(121),
        "closed after {waited:?}"
    );
}
