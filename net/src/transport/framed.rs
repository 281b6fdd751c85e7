//! Framed I/O over a byte stream: [`FrameReader`] yields whole commands
//! (bodies are zero-copy slices of the read buffer); [`FrameWriter`] writes
//! pre-encoded frames, coalescing small ones into one write and sending
//! large or chunked bodies by reference with vectored writes (no copy).

use std::collections::VecDeque;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::remoting::frame::{self, EncodedFrame, FrameLimits};
use crate::{Error, RemotingCommand};

/// Bytes requested from the socket per read.
const READ_CHUNK_BYTES: usize = 64 * 1024;
/// Frames at most this large are copied into the coalescing buffer.
const COALESCE_FRAME_BYTES_MAX: usize = 16 * 1024;
/// Queued bytes (copied and shared) ask for a write once they reach this much.
const COALESCE_BUFFER_BYTES: usize = 64 * 1024;
/// Most buffers given to one vectored write, and the count that asks for a
/// write: below the kernel's iovec limit (`IOV_MAX`, 1024 on Linux).
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

    /// The next command if a whole one is already buffered; reads nothing.
    /// A connection answers every request its last read brought before it
    /// writes, so the answers go out together.
    pub fn next_buffered(&mut self) -> Result<Option<RemotingCommand>, Error> {
        let cmd = frame::decode(&mut self.buf, &self.limits)?;
        if cmd.is_some() {
            self.frame_timer = None;
        }
        Ok(cmd)
    }

    /// Whether bytes of a further frame are already buffered (after the
    /// last command taken): another request is on its way or complete.
    pub fn has_buffered_bytes(&self) -> bool {
        !self.buf.is_empty()
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
///
/// [`FrameWriter::flush`] is cancel-safe: the queue drops every byte the
/// stream accepted as each write returns, so a flush cancelled (or polled
/// once and abandoned) part-way resumes at the next byte on the next call.
/// That lets a connection try a write on the spot and leave the rest to its
/// writer task.
pub struct FrameWriter<W> {
    inner: W,
    /// Heads and small bodies copied in since the last sealed buffer.
    copy: BytesMut,
    /// Buffers waiting for the wire, in order; the first may be partly
    /// written (already advanced past what went out).
    queued: VecDeque<Bytes>,
    queued_bytes: usize,
}

impl<W: AsyncWrite + Unpin> FrameWriter<W> {
    /// Wraps a byte stream.
    pub fn new(inner: W) -> Self {
        Self {
            inner,
            copy: BytesMut::with_capacity(COALESCE_BUFFER_BYTES),
            queued: VecDeque::new(),
            queued_bytes: 0,
        }
    }

    /// Queues one frame (see [`crate::remoting::frame::encode_split`]);
    /// nothing is written until [`FrameWriter::flush`]. Flush when no more
    /// frames are ready or [`FrameWriter::wants_flush`] says enough is queued.
    pub fn push(&mut self, frame: EncodedFrame) {
        self.copy.extend_from_slice(&frame.head);
        if frame.body_chunks.is_empty() && frame.body.len() <= COALESCE_FRAME_BYTES_MAX {
            self.copy.extend_from_slice(&frame.body);
            return;
        }
        self.seal();
        for chunk in std::iter::once(frame.body).chain(frame.body_chunks) {
            if !chunk.is_empty() {
                self.queued_bytes += chunk.len();
                self.queued.push_back(chunk);
            }
        }
    }

    /// Bytes pushed and not yet accepted by the stream.
    pub fn backlog_bytes(&self) -> usize {
        self.queued_bytes + self.copy.len()
    }

    /// True once enough is queued that one write should go out now.
    pub fn wants_flush(&self) -> bool {
        self.backlog_bytes() >= COALESCE_BUFFER_BYTES || self.queued.len() >= SHARED_BUFFERS_MAX
    }

    /// Moves the copied bytes to the queue (no copy: the buffer is split).
    fn seal(&mut self) {
        if !self.copy.is_empty() {
            let sealed = self.copy.split().freeze();
            self.queued_bytes += sealed.len();
            self.queued.push_back(sealed);
        }
    }

    /// Writes everything queued: one buffer with a plain write, several in
    /// vectored writes of at most [`SHARED_BUFFERS_MAX`] slices. Cancel-safe.
    pub async fn flush(&mut self) -> io::Result<()> {
        self.seal();
        while !self.queued.is_empty() {
            let written = if self.queued.len() == 1 {
                self.inner.write(&self.queued[0]).await?
            } else {
                let slices: Vec<IoSlice<'_>> = self
                    .queued
                    .iter()
                    .take(SHARED_BUFFERS_MAX)
                    .map(|b| IoSlice::new(b))
                    .collect();
                self.inner.write_vectored(&slices).await?
            };
            if written == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            self.consume(written);
        }
        self.inner.flush().await
    }

    /// Drops `written` bytes from the front of the queue.
    fn consume(&mut self, mut written: usize) {
        self.queued_bytes -= written;
        while written > 0 {
            let Some(front) = self.queued.front_mut() else {
                return;
            };
            if front.len() > written {
                front.advance(written);
                return;
            }
            written -= front.len();
            self.queued.pop_front();
        }
    }

    /// Flushes and half-closes the stream.
    pub async fn shutdown(&mut self) -> io::Result<()> {
        self.flush().await?;
        self.inner.shutdown().await
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
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

    /// A stream that takes `step` bytes, then says "not now", alternately.
    struct Stutter {
        out: Vec<u8>,
        step: usize,
        ready: bool,
    }

    impl AsyncWrite for Stutter {
        fn poll_write(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            self.ready = !self.ready;
            if !self.ready {
                return Poll::Pending;
            }
            let n = buf.len().min(self.step);
            self.out.extend_from_slice(&buf[..n]);
            Poll::Ready(Ok(n))
        }

        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }

        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    /// A flush polled once and dropped, again and again (as a connection
    /// does when it tries a write on the spot), still puts every byte on
    /// the wire once, in order.
    #[test]
    fn a_flush_abandoned_part_way_resumes_at_the_next_byte() {
        let limits = FrameLimits::default();
        let expected: Vec<u8> = commands()
            .iter()
            .flat_map(|c| encode_to_bytes(c, &limits).expect("encodable").to_vec())
            .collect();
        let mut writer = FrameWriter::new(Stutter {
            out: Vec::new(),
            step: 100,
            ready: false,
        });
        for cmd in commands() {
            writer.push(frame::encode_split(&cmd, &limits).expect("encodable"));
        }
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let mut polls = 0;
        loop {
            polls += 1;
            assert!(polls < 100_000, "the flush never finished");
            let flush = std::pin::pin!(writer.flush());
            if let Poll::Ready(result) = flush.poll(&mut cx) {
                result.expect("flush");
                break;
            }
        }
        assert_eq!(writer.backlog_bytes(), 0);
        assert!(writer.inner.out == expected, "bytes lost or repeated");
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
                writer.push(frame);
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
