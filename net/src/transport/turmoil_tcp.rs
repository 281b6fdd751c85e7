//! The simulation transport: turmoil's TCP. Note turmoil 0.7.2 never
//! retransmits, so a segment lost to a partition stalls the stream; the RPC
//! layer's timeouts and reconnects handle that.

use std::io;
use std::net::SocketAddr;

use turmoil::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use turmoil::net::{TcpListener, TcpStream};

use super::{Listener, Socket, Transport};

/// turmoil TCP (feature `turmoil`).
#[derive(Debug, Clone, Copy, Default)]
pub struct TurmoilTransport;

/// A bound turmoil TCP listener.
pub struct TurmoilListener {
    inner: TcpListener,
}

fn split(stream: TcpStream, peer_addr: SocketAddr) -> Socket<OwnedReadHalf, OwnedWriteHalf> {
    let (reader, writer) = stream.into_split();
    Socket {
        reader,
        writer,
        peer_addr,
    }
}

impl Transport for TurmoilTransport {
    type Reader = OwnedReadHalf;
    type Writer = OwnedWriteHalf;
    type Listener = TurmoilListener;

    async fn connect(&self, addr: &str) -> io::Result<Socket<OwnedReadHalf, OwnedWriteHalf>> {
        let stream = TcpStream::connect(addr).await?;
        let peer = stream.peer_addr()?;
        Ok(split(stream, peer))
    }

    async fn bind(&self, addr: &str) -> io::Result<TurmoilListener> {
        Ok(TurmoilListener {
            inner: TcpListener::bind(addr).await?,
        })
    }
}

impl Listener for TurmoilListener {
    type Reader = OwnedReadHalf;
    type Writer = OwnedWriteHalf;

    async fn accept(&mut self) -> io::Result<Socket<OwnedReadHalf, OwnedWriteHalf>> {
        let (stream, peer) = self.inner.accept().await?;
        Ok(split(stream, peer))
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }
}
