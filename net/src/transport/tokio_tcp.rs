//! The production transport: tokio TCP with `TCP_NODELAY`, since the
//! protocol is request/response and Nagle would add a delay to every reply.

use std::io;
use std::net::SocketAddr;

use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};

use super::{Listener, Socket, Transport};

/// tokio TCP.
#[derive(Debug, Clone, Copy, Default)]
pub struct TokioTransport;

/// A bound tokio TCP listener.
#[derive(Debug)]
pub struct TokioListener {
    inner: TcpListener,
}

fn split(
    stream: TcpStream,
    peer_addr: SocketAddr,
) -> io::Result<Socket<OwnedReadHalf, OwnedWriteHalf>> {
    stream.set_nodelay(true)?;
    let (reader, writer) = stream.into_split();
    Ok(Socket {
        reader,
        writer,
        peer_addr,
    })
}

impl Transport for TokioTransport {
    type Reader = OwnedReadHalf;
    type Writer = OwnedWriteHalf;
    type Listener = TokioListener;

    async fn connect(&self, addr: &str) -> io::Result<Socket<OwnedReadHalf, OwnedWriteHalf>> {
        let stream = TcpStream::connect(addr).await?;
        let peer = stream.peer_addr()?;
        split(stream, peer)
    }

    async fn bind(&self, addr: &str) -> io::Result<TokioListener> {
        Ok(TokioListener {
            inner: TcpListener::bind(addr).await?,
        })
    }
}

impl Listener for TokioListener {
    type Reader = OwnedReadHalf;
    type Writer = OwnedWriteHalf;

    async fn accept(&mut self) -> io::Result<Socket<OwnedReadHalf, OwnedWriteHalf>> {
        let (stream, peer) = self.inner.accept().await?;
        split(stream, peer)
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }
}
