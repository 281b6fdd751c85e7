//! Framed I/O over a byte stream: [`FrameReader`] yields whole commands
//! (bodies are zero-copy slices of the read buffer); [`FrameWriter`] writes
//! pre-encoded frames, coalescing small ones into one write and sending
//! large or chunked bodies by reference with vectored writes (no copy).

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::remoting::frame::{self, EncodedFrame, FrameLimits};
use crate::{Error, RemotingCommand};

/// Bytes requested from the socket per read.
const READ_CHUNK_BYTES: usize = 64 * 1024;
/// Frames at most this large are copied into the coalescing buffer.
const COALESCE_FRAME_BYTES_MAX: usize = 16 * 1024;
/// Queued bytes (copied and shared) are written once they reach this much.
const COALESCE_BUFFER_BYTES: usize = 64 * 1024;
/// Queued shared buffers are written once there are this many, so the
/// queue stays near the kernel's iovec limit (`IOV_MAX`, 1024 on Linux);
/// a write of more slices than that takes several calls.
const SHARED_BUFFERS_MAX: usize = 512;

/// Reads remoting frames from `R`.
pub struct FrameReader<R> {
    inner: R,
    buf: BytesMut,
    limits: FrameLimits,
    frame_deadline: Option<Duration>,
    /// Fires `frame_deadline` after the buffered frame's first byte arrived;
    /// `None` while no frame is begun. Kept across calls to
    /// [`FrameReader::next`], so a cancelled read does not restart it.
    frame_timer: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    /// Wraps a byte stream.
    pub fn new(inner: R, limits: FrameLimits) -> Self {
        Self {
            inner,
            buf: BytesMut::with_capacity(READ_CHUNK_BYTES),
            limits,
            frame_deadline: None,
            frame_timer: None,
        }
    }

    /// Fails a read once a frame is not complete `deadline` after its first
    /// byte arrived: a peer that sends half a frame and idles (a half-open
    /// connection) or dribbles it a byte at a time (a slow-loris client)
    /// holds no buffer or task past the deadline, however it paces bytes.
    #[must_use]
    pub fn with_frame_deadline(mut self, deadline: Option<Duration>) -> Self {
        self.frame_deadline = deadline;
        self
    }

    /// The next command; `Ok(None)` on a clean end of stream.
    ///
    /// Cancel-safe: partial frames stay buffered.
    pub async fn next(&mut self) -> Result<Option<RemotingCommand>, Error> {
        loop {
            if let Some(cmd) = frame::decode(&mut self.buf, &self.limits)? {
                // Bytes left over begin the next frame: its timer starts on
                // the next call.
                self.frame_timer = None;
                return Ok(Some(cmd));
            }
            if self.buf.capacity() - self.buf.len() < READ_CHUNK_BYTES / 4 {
                self.buf.reserve(READ_CHUNK_BYTES);
            }
            if let (Some(limit), None, false) =
                (self.frame_deadline, &self.frame_timer, self.buf.is_empty())
            {
                self.frame_timer = Some(Box::pin(tokio::time::sleep(limit)));
            }
            let read = match self.frame_timer.as_mut() {
                Some(timer) => tokio::select! {
                    biased;
                    read = self.inner.read_buf(&mut self.buf) => Some(read?),
                    () = timer.as_mut() => None,
                },
                None => Some(self.inner.read_buf(&mut self.buf).await?),
            };
            let Some(read) = read else {
                return Err(self.deadline_passed());
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

    fn deadline_passed(&self) -> Error {
        io::Error::new(
            io::ErrorKind::TimedOut,
            format!(
                "a frame was not complete {} ms after its first byte ({} bytes buffered)",
                self.frame_deadline.map_or(0, |d| d.as_millis()),
                self.buf.len()
            ),
        )
        .into()
    }
}

/// Writes pre-encoded frames to `W`, coalescing small ones.
///
/// Small single-buffer frames are copied into one buffer; a chunked body (a
/// pull response's stored records) or a large one is queued by reference
/// and goes out in the same vectored write, so its bytes are never copied
/// in user space. Queued buffers keep the order frames were pushed in.
pub struct FrameWriter<W> {
    inner: W,
    /// Heads and small bodies, copied in since the last write.
    buf: BytesMut,
    /// Buffers written as they are, each with the length `buf` had when it
    /// was queued: it goes on the wire after `buf[..that length]`.
    shared: Vec<(usize, Bytes)>,
    shared_bytes: usize,
}

impl<W: AsyncWrite + Unpin> FrameWriter<W> {
    /// Wraps a byte stream.
    pub fn new(inner: W) -> Self {
        Self {
            inner,
            buf: BytesMut::with_capacity(COALESCE_BUFFER_BYTES),
            shared: Vec::new(),
            shared_bytes: 0,
        }
    }

    /// Queues one frame (see [`crate::remoting::frame::encode_split`]),
    /// writing once enough is queued. Call [`FrameWriter::flush`] when no
    /// more frames are ready.
    pub async fn push(&mut self, frame: EncodedFrame) -> io::Result<()> {
        self.buf.extend_from_slice(&frame.head);
        if frame.body_chunks.is_empty() && frame.body.len() <= COALESCE_FRAME_BYTES_MAX {
            self.buf.extend_from_slice(&frame.body);
        } else {
            let at = self.buf.len();
            for chunk in std::iter::once(frame.body).chain(frame.body_chunks) {
                if !chunk.is_empty() {
                    self.shared_bytes += chunk.len();
                    self.shared.push((at, chunk));
                }
            }
        }
        if self.buf.len() + self.shared_bytes >= COALESCE_BUFFER_BYTES
            || self.shared.len() >= SHARED_BUFFERS_MAX
        {
            self.write_queued().await?;
        }
        Ok(())
    }

    /// Writes everything queued: `buf` alone with a plain write, or `buf`'s
    /// pieces interleaved with the shared buffers in vectored writes.
    async fn write_queued(&mut self) -> io::Result<()> {
        if self.shared.is_empty() {
            if !self.buf.is_empty() {
                self.inner.write_all(&self.buf).await?;
                self.buf.clear();
            }
            return Ok(());
        }
        let mut slices = Vec::with_capacity(2 * self.shared.len() + 1);
        let mut from = 0;
        for (at, chunk) in &self.shared {
            if *at > from {
                slices.push(IoSlice::new(&self.buf[from..*at]));
                from = *at;
            }
            slices.push(IoSlice::new(chunk));
        }
        if self.buf.len() > from {
            slices.push(IoSlice::new(&self.buf[from..]));
        }
        write_all_vectored(&mut self.inner, &mut slices).await?;
        self.buf.clear();
        self.shared.clear();
        self.shared_bytes = 0;
        Ok(())
    }

    /// Writes everything queued.
    pub async fn flush(&mut self) -> io::Result<()> {
        self.write_queued().await?;
        self.inner.flush().await
    }

    /// Flushes and half-closes the stream.
    pub async fn shutdown(&mut self) -> io::Result<()> {
        self.flush().await?;
        self.inner.shutdown().await
    }
}

/// Writes every byte of `slices` in order, with as few vectored writes as
/// the stream takes (one slice per write on a stream without vectored IO).
async fn write_all_vectored<W: AsyncWrite + Unpin>(
    inner: &mut W,
    mut slices: &mut [IoSlice<'_>],
) -> io::Result<()> {
    IoSlice::advance_slices(&mut slices, 0);
    while !slices.is_empty() {
        let written = inner.write_vectored(slices).await?;
        if written == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        IoSlice::advance_slices(&mut slices, written);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use super::*;
    use crate::remoting::frame::encode_to_bytes;

    /// A stream that takes at most `step` bytes per write, vectored or not.
    struct Trickle {
        out: Vec<u8>,
        step: usize,
        vectored: bool,
        writes: usize,
    }

    impl AsyncWrite for Trickle {
        fn poll_write(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            let n = buf.len().min(self.step);
            self.out.extend_from_slice(&buf[..n]);
            self.writes += 1;
            Poll::Ready(Ok(n))
        }

        fn poll_write_vectored(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            bufs: &[IoSlice<'_>],
        ) -> Poll<io::Result<usize>> {
            let mut n = 0;
            for buf in bufs {
                let take = buf.len().min(self.step - n);
                self.out.extend_from_slice(&buf[..take]);
                n += take;
            }
            self.writes += 1;
            Poll::Ready(Ok(n))
        }

        fn is_write_vectored(&self) -> bool {
            self.vectored
        }

        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }

        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    fn commands() -> Vec<RemotingCommand> {
        let record = |fill: u8, len: usize| Bytes::from(vec![fill; len]);
        vec![
            RemotingCommand::request(10).with_body(&b"small"[..]),
            RemotingCommand::success().with_body_chunks(vec![
                record(1, 300),
                Bytes::new(),
                record(2, 5),
            ]),
            RemotingCommand::request(11).with_body(record(3, COALESCE_FRAME_BYTES_MAX + 1)),
            RemotingCommand::success(),
            RemotingCommand::success().with_body_chunks(
                (0..SHARED_BUFFERS_MAX + 3)
                    .map(|i| record(u8::try_from(i % 200).expect("small"), 200))
                    .collect(),
            ),
            RemotingCommand::request(12).with_body(&b"last"[..]),
        ]
    }

    #[tokio::test]
    async fn frames_go_out_byte_for_byte_in_order_however_the_stream_takes_them() {
        let limits = FrameLimits::default();
        let expected: Vec<u8> = commands()
            .iter()
            .flat_map(|c| encode_to_bytes(c, &limits).expect("encodable").to_vec())
            .collect();
        for (step, vectored) in [(7, true), (7, false), (1 << 20, true), (1 << 20, false)] {
            let stream = Trickle {
                out: Vec::new(),
                step,
                vectored,
                writes: 0,
            };
            let mut writer = FrameWriter::new(stream);
            for cmd in commands() {
                let frame = frame::encode_split(&cmd, &limits).expect("encodable");
                writer.push(frame).await.expect("push");
            }
            writer.flush().await.expect("flush");
            assert!(
                writer.inner.out == expected,
                "step {step}, vectored {vectored}: the bytes differ"
            );
            if step > expected.len() && vectored {
                assert!(writer.inner.writes <= 4, "{} writes", writer.inner.writes);
            }
        }
    }
}
