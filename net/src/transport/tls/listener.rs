//! [`TlsListener`]: a plain listener when TLS is disabled; otherwise a
//! background loop that accepts TCP and gives each connection its own task
//! to peek the first byte and run the handshake, so a silent or slow peer
//! never holds up the next accept. Handshakes are bounded in number and time.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Semaphore};
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

use super::stream::{self, TlsReader, TlsWriter};
use super::TlsMode;
use crate::transport::{Listener, Socket};

/// The first byte of a TLS handshake record (RocketMQ's `HANDSHAKE_MAGIC_CODE`).
const TLS_HANDSHAKE_RECORD: u8 = 0x16;
/// Longest a new connection may take to send its first byte and finish
/// the handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Most handshakes in progress at once; connections beyond it are closed.
const HANDSHAKES_PENDING_MAX: usize = 1024;
/// Handshaken connections waiting for the server to take them.
const ACCEPTED_QUEUE_MAX: usize = 64;

type Accepted = Socket<TlsReader, TlsWriter>;

/// A bound listener of a [`super::TlsTransport`].
pub struct TlsListener {
    local_addr: SocketAddr,
    kind: Kind,
}

enum Kind {
    Plain(TcpListener),
    Tls {
        accepted: mpsc::Receiver<Accepted>,
        accept_task: JoinHandle<()>,
    },
}

impl TlsListener {
    pub(super) async fn bind(
        addr: &str,
        server: Option<(TlsMode, TlsAcceptor)>,
    ) -> io::Result<Self> {
        let listener = TcpListener::bind(addr).await?;
        let local_addr = listener.local_addr()?;
        let kind = match server {
            None => Kind::Plain(listener),
            Some((mode, acceptor)) => {
                let (tx, accepted) = mpsc::channel(ACCEPTED_QUEUE_MAX);
                let accept_task = tokio::spawn(accept_loop(listener, mode, acceptor, tx));
                Kind::Tls {
                    accepted,
                    accept_task,
                }
            }
        };
        Ok(Self { local_addr, kind })
    }
}

impl Drop for TlsListener {
    fn drop(&mut self) {
        if let Kind::Tls { accept_task, .. } = &self.kind {
            // Dropping the loop closes the port; handshakes in flight end
            // within their timeout and find nobody to hand their socket to.
            accept_task.abort();
        }
    }
}

impl Listener for TlsListener {
    type Reader = TlsReader;
    type Writer = TlsWriter;

    async fn accept(&mut self) -> io::Result<Accepted> {
        match &mut self.kind {
            Kind::Plain(listener) => {
                let (stream, peer_addr) = listener.accept().await?;
                stream.set_nodelay(true)?;
                Ok(stream::plain(stream, peer_addr))
            }
            Kind::Tls { accepted, .. } => accepted.recv().await.ok_or_else(|| {
                io::Error::new(io::ErrorKind::BrokenPipe, "the TLS accept loop ended")
            }),
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.local_addr)
    }
}

async fn accept_loop(
    listener: TcpListener,
    mode: TlsMode,
    acceptor: TlsAcceptor,
    accepted: mpsc::Sender<Accepted>,
) {
    let handshakes = Arc::new(Semaphore::new(HANDSHAKES_PENDING_MAX));
    loop {
        let (stream, peer_addr) = match listener.accept().await {
            Ok(connection) => connection,
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                // Avoid a hot loop while out of file descriptors.
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let Ok(permit) = Arc::clone(&handshakes).try_acquire_owned() else {
            tracing::warn!(%peer_addr, "too many TLS handshakes in progress; connection closed");
            continue;
        };
        let acceptor = acceptor.clone();
        let accepted = accepted.clone();
        tokio::spawn(async move {
            let opened =
                tokio::time::timeout(HANDSHAKE_TIMEOUT, open(stream, peer_addr, mode, &acceptor))
                    .await;
            drop(permit);
            match opened {
                Ok(Ok(socket)) => {
                    // Fails only when the listener is gone: the socket closes.
                    let _ = accepted.send(socket).await;
                }
                Ok(Err(e)) => tracing::warn!(%peer_addr, error = %e, "connection refused"),
                Err(_) => tracing::warn!(%peer_addr, "TLS handshake timed out"),
            }
        });
    }
}

/// Peeks the first byte: a TLS handshake record is handshaken, anything
/// else is served plain in permissive mode and refused in enforcing mode.
async fn open(
    stream: TcpStream,
    peer_addr: SocketAddr,
    mode: TlsMode,
    acceptor: &TlsAcceptor,
) -> io::Result<Accepted> {
    stream.set_nodelay(true)?;
    let mut first = [0_u8; 1];
    if stream.peek(&mut first).await? == 0 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "closed before sending anything",
        ));
    }
    if first[0] == TLS_HANDSHAKE_RECORD {
        let tls = acceptor.accept(stream).await?;
        return Ok(stream::tls(tls.into(), peer_addr));
    }
    if mode == TlsMode::Permissive {
        return Ok(stream::plain(stream, peer_addr));
    }
    Err(io::Error::new(
        io::ErrorKind::InvalidData,
        "a plain (non-TLS) connection on a TLS-only port (tls mode enforcing)",
    ))
}
