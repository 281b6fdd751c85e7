//! One duplex connection: a reader task that completes pending calls and
//! dispatches inbound requests to a handler, and a writer task that drains an
//! outbound queue. The same type serves clients and servers, so either side
//! can call the other. Closing fails every pending call at once.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{mpsc, oneshot, watch, Semaphore};

mod outbound;

use self::outbound::{write_loop, BoxedWriter, SharedWriter};
use super::handler::{Handler, RequestContext};
use super::RpcConfig;
use crate::remoting::frame::{self, EncodedFrame, FrameLimits};
use crate::remoting::{response_code, FLAG_ONEWAY, FLAG_RESPONSE};
use crate::transport::{FrameReader, FrameWriter, Socket};

/// Answers the reader holds before writing them even when more requests
/// are buffered.
const READY_FRAMES_MAX: usize = 64;
use crate::{Error, FrameError, RemotingCommand, Result};

/// Identifies a connection for its lifetime (unique within the process).
pub type ConnectionId = u64;

static NEXT_CONNECTION_ID: AtomicU64 = AtomicU64::new(1);

const STATE_OPEN: u8 = 0;
/// No new inbound requests are read; handlers already running finish.
const STATE_DRAINING: u8 = 1;
const STATE_CLOSED: u8 = 2;

/// Called once when a connection closes, for whatever reason.
pub(crate) type CloseHook = Arc<dyn Fn(&ConnectionHandle) + Send + Sync>;

enum Outbound {
    Frame(EncodedFrame),
    /// Finish writing what the shared writer holds (a write tried on the
    /// spot that the socket did not take whole).
    Flush,
    /// Flush everything queued before this, then half-close and close.
    Close,
}

type Pending = BTreeMap<i32, oneshot::Sender<RemotingCommand>>;

struct Shared {
    id: ConnectionId,
    peer: SocketAddr,
    limits: FrameLimits,
    close_on_timeout: bool,
    idle_timeout: Option<Duration>,
    frame_deadline: Option<Duration>,
    in_flight_max: usize,
    handlers_max: u32,
    next_opaque: AtomicI32,
    /// `None` once closed: a call can never register after the close drained it.
    pending: Mutex<Option<Pending>>,
    outbound: mpsc::Sender<Outbound>,
    writer: SharedWriter,
    in_flight: Semaphore,
    handlers: Arc<Semaphore>,
    state: watch::Sender<u8>,
    on_close: Option<CloseHook>,
}

/// A cheap, clonable handle to one live connection.
#[derive(Clone)]
pub struct ConnectionHandle {
    shared: Arc<Shared>,
}

async fn wait_state(rx: &mut watch::Receiver<u8>, at_least: u8) {
    // A closed sender means the connection is gone: treat it as reached.
    let _ = rx.wait_for(|s| *s >= at_least).await;
}

impl ConnectionHandle {
    /// Starts the reader and writer tasks for `socket`; inbound requests go
    /// to `handler`.
    pub(crate) fn spawn<R, W>(
        socket: Socket<R, W>,
        handler: Arc<dyn Handler>,
        config: &RpcConfig,
        on_close: Option<CloseHook>,
    ) -> Self
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let (tx, rx) = mpsc::channel(config.outbound_queue_frames.max(1));
        let handlers_max = u32::try_from(config.handlers_in_flight_max.clamp(1, 1 << 20))
            .expect("invariant: clamped to 2^20");
        let handle = Self {
            shared: Arc::new(Shared {
                id: NEXT_CONNECTION_ID.fetch_add(1, Ordering::Relaxed),
                peer: socket.peer_addr,
                limits: config.limits,
                close_on_timeout: config.close_on_timeout,
                idle_timeout: config.idle_timeout,
                frame_deadline: config.frame_deadline,
                in_flight_max: config.in_flight_max,
                handlers_max,
                next_opaque: AtomicI32::new(1),
                pending: Mutex::new(Some(BTreeMap::new())),
                outbound: tx,
                writer: tokio::sync::Mutex::new(Some(FrameWriter::new(
                    Box::pin(socket.writer) as BoxedWriter
                ))),
                in_flight: Semaphore::new(config.in_flight_max.min(Semaphore::MAX_PERMITS)),
                handlers: Arc::new(Semaphore::new(handlers_max as usize)),
                state: watch::Sender::new(STATE_OPEN),
                on_close,
            }),
        };
        tokio::spawn(write_loop(rx, handle.clone()));
        tokio::spawn(read_loop(socket.reader, handle.clone(), handler));
        handle
    }

    /// This connection's ID.
    pub fn id(&self) -> ConnectionId {
        self.shared.id
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> SocketAddr {
        self.shared.peer
    }

    /// True once closed.
    pub fn is_closed(&self) -> bool {
        *self.shared.state.borrow() == STATE_CLOSED
    }

    /// Resolves when the connection has closed.
    pub async fn closed(&self) {
        wait_state(&mut self.shared.state.subscribe(), STATE_CLOSED).await;
    }

    fn closed_error(&self) -> Error {
        Error::ConnectionClosed {
            addr: self.shared.peer.to_string(),
        }
    }

    /// Sends `request` and waits up to `timeout` for its response.
    ///
    /// On timeout the connection is closed (see `RpcConfig::close_on_timeout`).
    pub async fn invoke(
        &self,
        request: RemotingCommand,
        timeout: Duration,
    ) -> Result<RemotingCommand> {
        self.exchange(request, timeout, self.shared.close_on_timeout)
            .await
    }

    /// [`ConnectionHandle::invoke`] that keeps the connection open on
    /// timeout: for calls a server makes to a client (a forwarded admin
    /// call, a pushed reply), where a slow answer says nothing about the
    /// stream and closing it would drop a live consumer or producer.
    pub async fn invoke_keeping_open(
        &self,
        request: RemotingCommand,
        timeout: Duration,
    ) -> Result<RemotingCommand> {
        self.exchange(request, timeout, false).await
    }

    async fn exchange(
        &self,
        mut request: RemotingCommand,
        timeout: Duration,
        close_on_timeout: bool,
    ) -> Result<RemotingCommand> {
        let Ok(_permit) = self.shared.in_flight.try_acquire() else {
            return Err(Error::TooManyInFlight {
                addr: self.shared.peer.to_string(),
                max: self.shared.in_flight_max,
            });
        };
        let opaque = self.shared.next_opaque.fetch_add(1, Ordering::Relaxed);
        request.opaque = opaque;
        request.flag &= !(FLAG_RESPONSE | FLAG_ONEWAY);
        let frame = frame::encode_split(&request, &self.shared.limits)?;
        let (tx, rx) = oneshot::channel();
        {
            let mut pending = self
                .shared
                .pending
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let Some(pending) = pending.as_mut() else {
                return Err(self.closed_error());
            };
            pending.insert(opaque, tx);
        }
        let _unregister = Unregister {
            handle: self,
            opaque,
        };
        let exchange = async {
            if !self.deliver(frame).await {
                return Err(self.closed_error());
            }
            rx.await.map_err(|_| self.closed_error())
        };
        if let Ok(result) = tokio::time::timeout(timeout, exchange).await {
            result
        } else {
            if close_on_timeout {
                tracing::debug!(peer = %self.shared.peer, code = request.code, "closing connection after a request timed out");
                self.close();
            }
            Err(Error::Timeout {
                addr: self.shared.peer.to_string(),
                code: request.code,
                timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
            })
        }
    }

    /// Sends `request` with the oneway flag; no response is awaited. Waits up
    /// to `timeout` for room in the outbound queue.
    pub async fn invoke_oneway(
        &self,
        mut request: RemotingCommand,
        timeout: Duration,
    ) -> Result<()> {
        if self.is_closed() {
            return Err(self.closed_error());
        }
        request.opaque = self.shared.next_opaque.fetch_add(1, Ordering::Relaxed);
        request.flag = (request.flag & !FLAG_RESPONSE) | FLAG_ONEWAY;
        let frame = frame::encode_split(&request, &self.shared.limits)?;
        match tokio::time::timeout(timeout, self.deliver(frame)).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(self.closed_error()),
            Err(_) => Err(Error::Timeout {
                addr: self.shared.peer.to_string(),
                code: request.code,
                timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
            }),
        }
    }

    /// Closes at once: pending calls fail with `ConnectionClosed`, queued
    /// frames are dropped, the close hook runs. Idempotent.
    pub fn close(&self) {
        let drained = self
            .shared
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let Some(pending) = drained else {
            return;
        };
        self.shared.state.send_replace(STATE_CLOSED);
        drop(pending);
        if let Some(hook) = &self.shared.on_close {
            hook(self);
        }
    }

    /// Stops reading new inbound requests; running handlers continue.
    pub(crate) fn drain(&self) {
        self.shared.state.send_if_modified(|s| {
            let open = *s == STATE_OPEN;
            if open {
                *s = STATE_DRAINING;
            }
            open
        });
    }

    /// Resolves when no inbound request is being handled.
    pub(crate) async fn handlers_idle(&self) {
        let _ = self
            .shared
            .handlers
            .acquire_many(self.shared.handlers_max)
            .await;
    }

    /// Flushes queued frames, then closes; closes hard after `timeout`.
    pub(crate) async fn close_gracefully(&self, timeout: Duration) {
        let flushed = async {
            if self.shared.outbound.send(Outbound::Close).await.is_ok() {
                self.closed().await;
            }
        };
        let _ = tokio::time::timeout(timeout, flushed).await;
        self.close();
    }

    /// Hands `cmd` to a waiting call or to `handler`. A response that is
    /// ready at once is returned: the reader writes it (with the others its
    /// last read brought) before reading on, so a peer that sends requests
    /// faster than it reads their answers is slowed by TCP instead of
    /// piling answers up in memory.
    fn dispatch(
        &self,
        cmd: RemotingCommand,
        handler: &Arc<dyn Handler>,
        more_buffered: bool,
    ) -> Option<EncodedFrame> {
        if cmd.is_response() {
            let waiter = self
                .shared
                .pending
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .as_mut()
                .and_then(|p| p.remove(&cmd.opaque));
            match waiter {
                Some(tx) => {
                    let _ = tx.send(cmd);
                }
                None => {
                    tracing::debug!(peer = %self.shared.peer, opaque = cmd.opaque, "dropping response nobody awaits (late or unknown)");
                }
            }
            return None;
        }
        let Ok(permit) = Arc::clone(&self.shared.handlers).try_acquire_owned() else {
            if !cmd.is_oneway() {
                let busy = RemotingCommand::response_to(&cmd, response_code::SYSTEM_BUSY)
                    .with_remark("[OVERLOAD]system busy, too many requests on this connection");
                return frame::encode_split(&busy, &self.shared.limits).ok();
            }
            return None;
        };
        let (opaque, oneway, serialize_type) = (cmd.opaque, cmd.is_oneway(), cmd.serialize_type);
        // This request holds one permit; any other taken is a request of
        // this connection still being served.
        let others_served =
            self.shared.handlers.available_permits() + 1 < self.shared.handlers_max as usize;
        let ctx = RequestContext {
            connection: self.clone(),
            queued_behind: more_buffered || others_served,
        };
        let mut future = handler.handle(ctx, cmd);
        // Most handlers finish without waiting: poll once here and spawn a
        // task only for those that must wait. The spawned task polls again at
        // once, so wakers registered in this first poll are replaced.
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        if let std::task::Poll::Ready(response) = future.as_mut().poll(&mut cx) {
            drop(permit);
            return self.response_frame(response, oneway, opaque, serialize_type);
        }
        let handle = self.clone();
        let handler = Arc::clone(handler);
        tokio::spawn(async move {
            let response = future.await;
            if let Some(frame) = handle.response_frame(response, oneway, opaque, serialize_type) {
                if handler.before_answers() {
                    handle.deliver(frame).await;
                } else {
                    tracing::warn!(peer = %handle.shared.peer, "closing connection: the handler withheld an answer (what it acknowledges was lost)");
                    handle.close();
                }
            }
            drop(permit);
        });
        None
    }

    /// Encodes a handler's response (none for oneway requests); a response
    /// that cannot be encoded becomes `SYSTEM_ERROR`.
    fn response_frame(
        &self,
        response: Option<RemotingCommand>,
        oneway: bool,
        opaque: i32,
        serialize_type: crate::remoting::SerializeType,
    ) -> Option<EncodedFrame> {
        let mut response = response.filter(|_| !oneway)?;
        response.opaque = opaque;
        response.flag = (response.flag | FLAG_RESPONSE) & !FLAG_ONEWAY;
        response.serialize_type = serialize_type;
        let frame = frame::encode_split(&response, &self.shared.limits).or_else(|e| {
            tracing::warn!(peer = %self.shared.peer, error = %e, "response cannot be encoded; answering SYSTEM_ERROR");
            let mut fallback = RemotingCommand::response(
                response_code::SYSTEM_ERROR,
                format!("response cannot be encoded: {e}"),
            );
            fallback.opaque = opaque;
            fallback.serialize_type = serialize_type;
            frame::encode_split(&fallback, &self.shared.limits)
        });
        frame.ok()
    }
}

/// Removes a call's pending entry however the call ends (response, timeout,
/// or the caller's future being dropped).
struct Unregister<'a> {
    handle: &'a ConnectionHandle,
    opaque: i32,
}

impl Drop for Unregister<'_> {
    fn drop(&mut self) {
        if let Some(p) = self
            .handle
            .shared
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_mut()
        {
            p.remove(&self.opaque);
        }
    }
}

async fn read_loop<R: AsyncRead + Unpin>(
    reader: R,
    handle: ConnectionHandle,
    handler: Arc<dyn Handler>,
) {
    let mut state = handle.shared.state.subscribe();
    let mut frames = FrameReader::new(reader, handle.shared.limits)
        .with_frame_deadline(handle.shared.frame_deadline);
    // Answers to the requests already read, written once no whole request
    // is left in the read buffer.
    let mut ready = Vec::new();
    loop {
        let next = match frames.next_buffered() {
            Ok(None) => {
                if !ready.is_empty() && !answer_ready(&handle, &handler, &mut ready).await {
                    break;
                }
                let next_frame = async {
                    match handle.shared.idle_timeout {
                        Some(idle) => tokio::time::timeout(idle, frames.next()).await.ok(),
                        None => Some(frames.next().await),
                    }
                };
                tokio::select! {
                    biased;
                    () = wait_state(&mut state, STATE_DRAINING) => return,
                    next = next_frame => next,
                }
            }
            buffered => Some(buffered),
        };
        let Some(next) = next else {
            tracing::info!(peer = %handle.shared.peer, "closing idle connection");
            break;
        };
        match next {
            Ok(Some(cmd)) => {
                let more_buffered = frames.has_buffered_bytes();
                if let Some(frame) = handle.dispatch(cmd, &handler, more_buffered) {
                    ready.push(frame);
                    if ready.len() >= READY_FRAMES_MAX
                        && !answer_ready(&handle, &handler, &mut ready).await
                    {
                        break;
                    }
                }
            }
            Ok(None) => {
                tracing::debug!(peer = %handle.shared.peer, "peer closed the connection");
                break;
            }
            Err(Error::Frame(e @ FrameError::ForeignProtocol(_))) => {
                tracing::warn!(peer = %handle.shared.peer, "closing connection: the peer sent {e}");
                break;
            }
            Err(Error::Frame(e)) => {
                tracing::warn!(peer = %handle.shared.peer, reason = %e, "closing connection: malformed frame");
                break;
            }
            Err(e) => {
                tracing::debug!(peer = %handle.shared.peer, error = %e, "read failed; closing connection");
                break;
            }
        }
    }
    close_after_answering(&handle, &handler, ready).await;
}

/// Writes `ready` once the handler lets answers leave
/// ([`Handler::before_answers`]); false when they may not or the
/// connection failed (the caller closes it).
async fn answer_ready(
    handle: &ConnectionHandle,
    handler: &Arc<dyn Handler>,
    ready: &mut Vec<EncodedFrame>,
) -> bool {
    if !handler.before_answers() {
        tracing::warn!(peer = %handle.shared.peer, dropped = ready.len(), "closing connection: the handler withheld its answers (what they acknowledge was lost)");
        ready.clear();
        return false;
    }
    handle.answer(ready).await
}

/// Requests read before the end are answered before the socket closes: a
/// peer that followed them with a bad frame (or ended its stream) still
/// gets their answers, as it did when each answer was queued to the writer
/// at once.
async fn close_after_answering(
    handle: &ConnectionHandle,
    handler: &Arc<dyn Handler>,
    mut ready: Vec<EncodedFrame>,
) {
    if !ready.is_empty() && answer_ready(handle, handler, &mut ready).await {
        let _ = tokio::time::timeout(LAST_ANSWERS_WAIT, handle.wait_for_peer()).await;
    }
    handle.close();
}

/// How long a closing connection waits for its peer to take the last
/// answers.
const LAST_ANSWERS_WAIT: Duration = Duration::from_secs(5);

#[cfg(test)]
mod tests;
