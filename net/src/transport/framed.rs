//! Framed I/O over a byte stream: [`FrameReader`] yields whole commands
//! (bodies are zero-copy slices of the read buffer); [`FrameWriter`] writes
//! pre-encoded frames, coalescing small ones into one write.

use std::io;
use std::time::Duration;

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::remoting::frame::{self, FrameLimits};
use crate::{Error, RemotingCommand};

/// Bytes requested from the socket per read.
const READ_CHUNK_BYTES: usize = 64 * 1024;
/// Frames at most this large are copied into the coalescing buffer.
const COALESCE_FRAME_BYTES_MAX: usize = 16 * 1024;
/// The coalescing buffer is flushed once it holds this much.
const COALESCE_BUFFER_BYTES: usize = 64 * 1024;

/// Reads remoting frames from `R`.
pub struct FrameReader<R> {
    inner: R,
    buf: BytesMut,
    limits: FrameLimits,
    partial_frame_timeout: Option<Duration>,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    /// Wraps a byte stream.
    pub fn new(inner: R, limits: FrameLimits) -> Self {
        Self {
            inner,
            buf: BytesMut::with_capacity(READ_CHUNK_BYTES),
            limits,
            partial_frame_timeout: None,
        }
    }

    /// Fails a read once a frame has been begun and no byte of it arrived
    /// for `timeout`: a peer that sends half a frame and idles (a slow-loris
    /// client, a half-open connection) holds no buffer forever.
    #[must_use]
    pub fn with_partial_frame_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.partial_frame_timeout = timeout;
        self
    }

    /// The next command; `Ok(None)` on a clean end of stream.
    ///
    /// Cancel-safe: partial frames stay buffered.
    pub async fn next(&mut self) -> Result<Option<RemotingCommand>, Error> {
        loop {
            if let Some(cmd) = frame::decode(&mut self.buf, &self.limits)? {
                return Ok(Some(cmd));
            }
            if self.buf.capacity() - self.buf.len() < READ_CHUNK_BYTES / 4 {
                self.buf.reserve(READ_CHUNK_BYTES);
            }
            let read = match (self.partial_frame_timeout, self.buf.is_empty()) {
                (Some(limit), false) => {
                    tokio::time::timeout(limit, self.inner.read_buf(&mut self.buf))
                        .await
                        .map_err(|_| {
                            io::Error::new(
                                io::ErrorKind::TimedOut,
                                format!(
                                    "a frame stalled after {} bytes for {} ms",
                                    self.buf.len(),
                                    limit.as_millis()
                                ),
                            )
                        })??
                }
                _ => self.inner.read_buf(&mut self.buf).await?,
            };
            if read == 0 {
                if self.buf.is_empty() {
                    return Ok(None);
                }
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "stream ended inside a frame ({} bytes buffered)",
                        self.buf.len()
                    ),
                )
                .into());
            }
        }
    }
}

/// Writes pre-encoded frames to `W`, coalescing small ones.
pub struct FrameWriter<W> {
    inner: W,
    buf: BytesMut,
}

impl<W: AsyncWrite + Unpin> FrameWriter<W> {
    /// Wraps a byte stream.
    pub fn new(inner: W) -> Self {
        Self {
            inner,
            buf: BytesMut::with_capacity(COALESCE_BUFFER_BYTES),
        }
    }

    /// Queues one frame given as its head and body (see
    /// [`crate::remoting::frame::encode_split`]). Small frames are copied into
    /// the coalescing buffer; a large body is written straight from `body`.
    /// Call [`FrameWriter::flush`] when no more frames are ready.
    pub async fn push(&mut self, head: &[u8], body: &[u8]) -> io::Result<()> {
        self.buf.extend_from_slice(head);
        if body.len() > COALESCE_FRAME_BYTES_MAX {
            self.write_buffered().await?;
            return self.inner.write_all(body).await;
        }
        self.buf.extend_from_slice(body);
        if self.buf.len() >= COALESCE_BUFFER_BYTES {
            self.write_buffered().await?;
        }
        Ok(())
    }

    async fn write_buffered(&mut self) -> io::Result<()> {
        if !self.buf.is_empty() {
            self.inner.write_all(&self.buf).await?;
            self.buf.clear();
        }
        Ok(())
    }

    /// Writes everything buffered.
    pub async fn flush(&mut self) -> io::Result<()> {
        self.write_buffered().await?;
        self.inner.flush().await
    }

    /// Flushes and half-closes the stream.
    pub async fn shutdown(&mut self) -> io::Result<()> {
        self.flush().await?;
        self.inner.shutdown().await
    }
}
