//! Where the 5.x endpoint's connections come from: a listener of the
//! broker's own transport (so `[tls]` applies as on the remoting ports:
//! plain, permissive — TLS and plain on one port, told apart by the first
//! byte — or enforcing, with `h2` offered by ALPN as gRPC clients
//! require), each accepted connection handed to tonic with its peer
//! address.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

use sluice_net::transport::{Listener, TlsListener, TlsReader, TlsWriter};
use sluice_net::{TlsTransport, Transport};
use tokio::io::{AsyncRead, AsyncWrite, Join, ReadBuf};
use tokio::sync::mpsc;
use tonic::transport::server::{Connected, TcpConnectInfo};

/// Connections accepted but not yet taken by the server.
const ACCEPTED_QUEUE: usize = 64;
/// Pause after a failed accept (out of file descriptors, say).
const ACCEPT_BACKOFF: std::time::Duration = std::time::Duration::from_millis(50);

/// One accepted connection, both halves joined.
pub(super) struct Conn {
    io: Join<TlsReader, TlsWriter>,
    info: TcpConnectInfo,
}

impl Connected for Conn {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        self.info.clone()
    }
}

impl AsyncRead for Conn {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

/// Binds `listen` on `transport` (offering `h2` to TLS clients).
pub(super) async fn bind(
    transport: &TlsTransport,
    listen: &str,
) -> io::Result<(TlsListener, SocketAddr)> {
    let listener = transport.with_alpn(&[b"h2"]).bind(listen).await?;
    let local = listener.local_addr()?;
    Ok((listener, local))
}

/// The connections `listener` accepts, until the stream is dropped.
pub(super) fn incoming(
    mut listener: TlsListener,
    local: SocketAddr,
) -> tokio_stream::wrappers::ReceiverStream<io::Result<Conn>> {
    let (tx, rx) = mpsc::channel(ACCEPTED_QUEUE);
    tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                a = listener.accept() => a,
                () = tx.closed() => return,
            };
            match accepted {
                Ok(socket) => {
                    let conn = Conn {
                        io: tokio::io::join(socket.reader, socket.writer),
                        info: TcpConnectInfo {
                            local_addr: Some(local),
                            remote_addr: Some(socket.peer_addr),
                        },
                    };
                    if tx.send(Ok(conn)).await.is_err() {
                        return;
                    }
                }
                Err(e) => {
                    tracing::debug!(error = %e, "gRPC accept failed");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                }
            }
        }
    });
    tokio_stream::wrappers::ReceiverStream::new(rx)
}
