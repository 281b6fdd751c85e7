//! The transport seam: a [`Transport`] dials and listens, yielding split
//! byte streams that [`FrameReader`] and [`FrameWriter`] frame. tokio in
//! production (plain, or with TLS through [`TlsTransport`]); turmoil
//! (feature `testing`) in simulation.

mod framed;
mod tls;
mod tokio_tcp;
#[cfg(feature = "testing")]
mod turmoil_tcp;

use std::future::Future;
use std::io;
use std::net::SocketAddr;

use tokio::io::{AsyncRead, AsyncWrite};

pub use framed::{FrameReader, FrameWriter};
pub use tls::{TlsListener, TlsMode, TlsReader, TlsSettings, TlsTransport, TlsWriter};
pub use tokio_tcp::{TokioListener, TokioTransport};
#[cfg(feature = "testing")]
pub use turmoil_tcp::{TurmoilListener, TurmoilTransport};

/// One established connection, already split into its two directions.
pub struct Socket<R, W> {
    /// The receiving half.
    pub reader: R,
    /// The sending half.
    pub writer: W,
    /// The remote address.
    pub peer_addr: SocketAddr,
}

/// A network: dial an address or listen on one. Addresses are RocketMQ's
/// `host:port` strings (an IP in production, a host name under turmoil).
pub trait Transport: Clone + Send + Sync + 'static {
    /// Receiving half of a connection.
    type Reader: AsyncRead + Unpin + Send + 'static;
    /// Sending half of a connection.
    type Writer: AsyncWrite + Unpin + Send + 'static;
    /// A bound listener.
    type Listener: Listener<Reader = Self::Reader, Writer = Self::Writer>;

    /// Opens a connection to `addr`.
    fn connect(
        &self,
        addr: &str,
    ) -> impl Future<Output = io::Result<Socket<Self::Reader, Self::Writer>>> + Send;

    /// Binds a listener on `addr` (port 0 picks an ephemeral port).
    fn bind(&self, addr: &str) -> impl Future<Output = io::Result<Self::Listener>> + Send;
}

/// A bound listener that accepts connections.
pub trait Listener: Send + 'static {
    /// Receiving half of an accepted connection.
    type Reader: AsyncRead + Unpin + Send + 'static;
    /// Sending half of an accepted connection.
    type Writer: AsyncWrite + Unpin + Send + 'static;

    /// Waits for the next connection.
    fn accept(
        &mut self,
    ) -> impl Future<Output = io::Result<Socket<Self::Reader, Self::Writer>>> + Send;

    /// The address actually bound.
    fn local_addr(&self) -> io::Result<SocketAddr>;
}
