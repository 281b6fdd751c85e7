//! The sending side of a connection. A frame goes out on the spot, from the
//! task that has it (the reader answering a request that needed no wait, a
//! handler that finished, a caller), whenever the socket takes it at once;
//! what the socket will not take now, and frames that find another task
//! writing, go through the writer task. So a request answered without
//! waiting costs no task wake-up, and the answers to every request one read
//! brought leave in one write.

use std::future::Future;
use std::pin::{pin, Pin};
use std::task::{Context, Poll, Waker};

use tokio::io::AsyncWrite;
use tokio::sync::mpsc;

use super::{wait_state, ConnectionHandle, Outbound, STATE_CLOSED};
use crate::remoting::frame::EncodedFrame;
use crate::transport::FrameWriter;

/// A connection's sending half, whatever the transport.
pub(super) type BoxedWriter = Pin<Box<dyn AsyncWrite + Send>>;
/// The sending half, shared by the tasks that write; `None` once closed.
pub(super) type SharedWriter = tokio::sync::Mutex<Option<FrameWriter<BoxedWriter>>>;

/// Bytes a connection may hold that its peer has not taken before the
/// reader stops reading requests until the peer catches up: a peer that
/// sends requests and reads none of the answers is slowed by TCP, not
/// buffered for.
const BACKLOG_BYTES_MAX: usize = 4 << 20;

/// What an attempt to write on the spot did with the frames.
pub(super) enum Attempt {
    /// Queued for the wire; written, or left to the writer task.
    Written,
    /// Queued, but the peer is far behind: a reader should wait.
    Backlogged,
    /// The connection is closed; the frames are dropped.
    Closed,
}

impl ConnectionHandle {
    /// Queues `frames` and writes what the socket takes now, without
    /// waiting. Gives the frames back when another task is writing: they
    /// must then go through the writer task's queue.
    pub(super) fn try_write<I>(&self, frames: I) -> Result<Attempt, I>
    where
        I: IntoIterator<Item = EncodedFrame>,
    {
        let Ok(mut guard) = self.shared.writer.try_lock() else {
            return Err(frames);
        };
        let Some(out) = guard.as_mut() else {
            return Ok(Attempt::Closed);
        };
        for frame in frames {
            out.push(frame);
        }
        let polled = {
            let mut cx = Context::from_waker(Waker::noop());
            pin!(out.flush()).poll(&mut cx)
        };
        let backlog = out.backlog_bytes();
        drop(guard);
        match polled {
            Poll::Ready(Ok(())) => Ok(Attempt::Written),
            Poll::Ready(Err(e)) => {
                tracing::debug!(peer = %self.shared.peer, error = %e, "write failed; closing connection");
                self.close();
                Ok(Attempt::Closed)
            }
            Poll::Pending => {
                // The flush kept its progress; the writer task finishes it.
                // A full queue means the writer task has work and will flush.
                let _ = self.shared.outbound.try_send(Outbound::Flush);
                Ok(if backlog > BACKLOG_BYTES_MAX {
                    Attempt::Backlogged
                } else {
                    Attempt::Written
                })
            }
        }
    }

    /// Sends one frame on the spot or through the writer task; false once
    /// the connection is closed.
    pub(super) async fn deliver(&self, frame: EncodedFrame) -> bool {
        match self.try_write(std::iter::once(frame)) {
            Ok(Attempt::Closed) => false,
            Ok(Attempt::Written | Attempt::Backlogged) => true,
            Err(mut busy) => match busy.next() {
                Some(frame) => self
                    .shared
                    .outbound
                    .send(Outbound::Frame(frame))
                    .await
                    .is_ok(),
                None => true,
            },
        }
    }

    /// The reader's write of the answers it has ready; false when the
    /// connection should close (it closed, or the peer read none of its
    /// answers for the idle timeout).
    pub(super) async fn answer(&self, ready: &mut Vec<EncodedFrame>) -> bool {
        match self.try_write(ready.drain(..)) {
            Ok(Attempt::Written) => true,
            Ok(Attempt::Backlogged) => self.wait_for_peer().await,
            Ok(Attempt::Closed) => false,
            Err(busy) => {
                for frame in busy {
                    if !self.queue_when_room(Outbound::Frame(frame)).await {
                        return false;
                    }
                }
                true
            }
        }
    }

    /// Waits until the peer has taken everything queued.
    pub(super) async fn wait_for_peer(&self) -> bool {
        let mut closed = self.shared.state.subscribe();
        let flushed = async {
            let mut guard = self.shared.writer.lock().await;
            match guard.as_mut() {
                Some(out) => out.flush().await.is_ok(),
                None => false,
            }
        };
        let waited = async {
            tokio::select! {
                biased;
                () = wait_state(&mut closed, STATE_CLOSED) => false,
                ok = flushed => ok,
            }
        };
        self.within_idle_timeout(waited).await
    }

    /// Queues a frame for the writer task, waiting for room.
    async fn queue_when_room(&self, frame: Outbound) -> bool {
        self.within_idle_timeout(async { self.shared.outbound.send(frame).await.is_ok() })
            .await
    }

    async fn within_idle_timeout(&self, wait: impl Future<Output = bool>) -> bool {
        let Some(idle) = self.shared.idle_timeout else {
            return wait.await;
        };
        if let Ok(ok) = tokio::time::timeout(idle, wait).await {
            return ok;
        }
        tracing::info!(peer = %self.shared.peer, "closing connection: the peer reads none of its answers");
        false
    }
}

/// The writer task: writes what other tasks queued (coalesced into as few
/// writes as it can), finishes writes the socket could not take at once,
/// and closes the sending half when the connection closes.
pub(super) async fn write_loop(mut rx: mpsc::Receiver<Outbound>, handle: ConnectionHandle) {
    let mut state = handle.shared.state.subscribe();
    let pump = async {
        loop {
            let first = tokio::select! {
                biased;
                msg = rx.recv() => msg,
                () = wait_state(&mut state, STATE_CLOSED) => return Ok(()),
            };
            let Some(first) = first else {
                return Ok(());
            };
            let mut guard = handle.shared.writer.lock().await;
            let Some(out) = guard.as_mut() else {
                return Ok(());
            };
            let mut next = Some(first);
            let mut yielded = false;
            loop {
                while let Some(msg) = next {
                    match msg {
                        Outbound::Frame(frame) => {
                            out.push(frame);
                            if out.wants_flush() {
                                out.flush().await?;
                            }
                        }
                        Outbound::Flush => {}
                        Outbound::Close => return out.shutdown().await,
                    }
                    next = rx.try_recv().ok();
                }
                // Let other tasks queue frames so one write carries many.
                if yielded {
                    break;
                }
                tokio::task::yield_now().await;
                yielded = true;
                next = rx.try_recv().ok();
            }
            out.flush().await?;
        }
    };
    // A hard close must interrupt a write stalled on an unresponsive peer.
    let mut hard_close = handle.shared.state.subscribe();
    tokio::select! {
        result = pump => {
            if let Err(e) = result {
                tracing::debug!(peer = %handle.shared.peer, error = %e, "write failed; closing connection");
            }
        }
        () = wait_state(&mut hard_close, STATE_CLOSED) => {}
    }
    handle.close();
    // Drops the sending half, so the socket closes even while handles to
    // the connection live on (every other writer lets go on close).
    handle.shared.writer.lock().await.take();
}
