//! The two halves of a [`super::TlsTransport`] connection: plain TCP keeps
//! tokio's owned halves (no lock between directions); a TLS stream is one
//! session, so its halves share it through `tokio::io::split`.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf, ReadHalf, WriteHalf};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio_rustls::TlsStream;

use crate::transport::Socket;

/// The receiving half of a plain or TLS connection.
#[derive(Debug)]
pub enum TlsReader {
    /// Plain TCP.
    Plain(OwnedReadHalf),
    /// TLS over TCP.
    Tls(ReadHalf<TlsStream<TcpStream>>),
}

/// The sending half of a plain or TLS connection.
#[derive(Debug)]
pub enum TlsWriter {
    /// Plain TCP.
    Plain(OwnedWriteHalf),
    /// TLS over TCP.
    Tls(WriteHalf<TlsStream<TcpStream>>),
}

/// A plain connection's socket.
pub(super) fn plain(stream: TcpStream, peer_addr: SocketAddr) -> Socket<TlsReader, TlsWriter> {
    let (reader, writer) = stream.into_split();
    Socket {
        reader: TlsReader::Plain(reader),
        writer: TlsWriter::Plain(writer),
        peer_addr,
    }
}

/// A TLS connection's socket (handshake done).
pub(super) fn tls(
    stream: TlsStream<TcpStream>,
    peer_addr: SocketAddr,
) -> Socket<TlsReader, TlsWriter> {
    let (reader, writer) = tokio::io::split(stream);
    Socket {
        reader: TlsReader::Tls(reader),
        writer: TlsWriter::Tls(writer),
        peer_addr,
    }
}

impl AsyncRead for TlsReader {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(r) => Pin::new(r).poll_read(cx, buf),
            Self::Tls(r) => Pin::new(r).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for TlsWriter {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Plain(w) => Pin::new(w).poll_write(cx, buf),
            Self::Tls(w) => Pin::new(w).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Plain(w) => Pin::new(w).poll_write_vectored(cx, bufs),
            Self::Tls(w) => Pin::new(w).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Self::Plain(w) => w.is_write_vectored(),
            Self::Tls(w) => w.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(w) => Pin::new(w).poll_flush(cx),
            Self::Tls(w) => Pin::new(w).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(w) => Pin::new(w).poll_shutdown(cx),
            Self::Tls(w) => Pin::new(w).poll_shutdown(cx),
        }
    }
}
