//! Tests of the connection: who writes answers, and when.

use std::sync::atomic::AtomicUsize;

use tokio::io::AsyncWriteExt;

use super::*;
use crate::rpc::handler::HandlerFuture;
use crate::rpc::HandlerTable;
use crate::transport::{FrameReader, Socket};

/// A connection whose handler answers request code 1 at once, and the
/// peer's end of its stream.
fn answering_connection() -> (ConnectionHandle, tokio::io::DuplexStream) {
    let table = HandlerTable::new().with(1, |_ctx: RequestContext, _req: RemotingCommand| async {
        Some(RemotingCommand::success())
    });
    connection_with(Arc::new(table))
}

/// A connection served by `handler`, and the peer's end of its stream.
fn connection_with(handler: Arc<dyn Handler>) -> (ConnectionHandle, tokio::io::DuplexStream) {
    let (ours, theirs) = tokio::io::duplex(64 * 1024);
    let (reader, writer) = tokio::io::split(ours);
    let socket = Socket {
        reader,
        writer,
        peer_addr: "127.0.0.1:1".parse().expect("addr"),
    };
    let handle = ConnectionHandle::spawn(socket, handler, &RpcConfig::default(), None);
    (handle, theirs)
}

/// A request answered without waiting is written by the connection's
/// own reader task: no other task runs for it. (Before, each answer
/// woke the writer task, whose coalescing yield polled it again: three
/// task polls per answer.)
#[test]
fn an_answer_that_needs_no_wait_wakes_no_other_task() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let (_handle, theirs) = answering_connection();
        let (their_reader, mut their_writer) = tokio::io::split(theirs);
        let mut answers = FrameReader::new(their_reader, FrameLimits::default());
        let request = frame::encode_to_bytes(&RemotingCommand::request(1), &FrameLimits::default())
            .expect("encodable");
        let metrics = tokio::runtime::Handle::current().metrics();
        let mut polls = 0;
        for round in 0..101 {
            let before = metrics.worker_poll_count(0);
            their_writer.write_all(&request).await.expect("write");
            let answer = answers.next().await.expect("read").expect("an answer");
            assert!(answer.is_response());
            if round > 0 {
                polls += metrics.worker_poll_count(0) - before;
            }
        }
        assert!(polls <= 120, "{polls} task polls for 100 answers");
    });
}

/// Requests followed by the end of the peer's stream, or by a frame
/// that cannot be read, in the same read: their answers are written
/// before the connection closes.
#[tokio::test]
async fn requests_read_before_the_end_or_a_bad_frame_are_answered_before_close() {
    let bad_frame: &[u8] = &[0, 0, 0, 8, 0, 0, 0, 100, 1, 2, 3, 4];
    for then_bad_frame in [false, true] {
        let (handle, theirs) = answering_connection();
        let (their_reader, mut their_writer) = tokio::io::split(theirs);
        let mut bytes = Vec::new();
        for opaque in 1..=3 {
            let mut request = RemotingCommand::request(1);
            request.opaque = opaque;
            bytes.extend_from_slice(
                &frame::encode_to_bytes(&request, &FrameLimits::default()).expect("encodable"),
            );
        }
        if then_bad_frame {
            bytes.extend_from_slice(bad_frame);
        }
        their_writer.write_all(&bytes).await.expect("write");
        if !then_bad_frame {
            their_writer.shutdown().await.expect("shutdown");
        }
        let mut answers = FrameReader::new(their_reader, FrameLimits::default());
        let mut got = Vec::new();
        while let Ok(Some(answer)) = answers.next().await {
            got.push(answer.opaque);
        }
        assert_eq!(got, [1, 2, 3], "bad frame after them: {then_bad_frame}");
        handle.closed().await;
    }
}

/// A peer that pipelines requests and never reads an answer: the
/// connection stops reading once its outbound queue and the stream are
/// full, so the answers held in memory stay bounded (before, every
/// answer that found the queue full was parked in a task of its own).
#[tokio::test]
async fn a_peer_that_never_reads_answers_is_slowed_not_buffered() {
    let handled = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&handled);
    let table = HandlerTable::new().with(1, move |_ctx: RequestContext, _req: RemotingCommand| {
        counter.fetch_add(1, Ordering::Relaxed);
        async { Some(RemotingCommand::success()) }
    });
    let (ours, mut theirs) = tokio::io::duplex(4096);
    let (reader, writer) = tokio::io::split(ours);
    let socket = Socket {
        reader,
        writer,
        peer_addr: "127.0.0.1:1".parse().expect("addr"),
    };
    let config = RpcConfig {
        outbound_queue_frames: 8,
        ..RpcConfig::default()
    };
    let _handle = ConnectionHandle::spawn(socket, Arc::new(table), &config, None);
    let request = frame::encode_to_bytes(&RemotingCommand::request(1), &FrameLimits::default())
        .expect("encodable");
    let sent = 20_000;
    let pipelined = tokio::time::timeout(Duration::from_secs(2), async {
        for _ in 0..sent {
            theirs.write_all(&request).await.expect("write");
        }
    })
    .await;
    assert!(
        pipelined.is_err(),
        "the connection read every request of a peer that reads nothing"
    );
    let handled = handled.load(Ordering::Relaxed);
    assert!(
        handled < 2_000,
        "{handled} requests handled, their answers held in memory"
    );
}

/// A handler learns whether more requests of its connection are already
/// read behind it (so a group commit can wait for them instead of syncing
/// one record alone): requests that arrive in one write see `true` but
/// the last; a request that arrives alone sees `false`.
#[tokio::test]
async fn a_handler_is_told_when_requests_are_queued_behind_it() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&seen);
    let table = HandlerTable::new().with(1, move |ctx: RequestContext, req: RemotingCommand| {
        record
            .lock()
            .expect("not poisoned")
            .push((req.opaque, ctx.queued_behind));
        async { Some(RemotingCommand::success()) }
    });
    let (_handle, theirs) = connection_with(Arc::new(table));
    let (their_reader, mut their_writer) = tokio::io::split(theirs);
    let mut answers = FrameReader::new(their_reader, FrameLimits::default());
    let encoded = |opaque| {
        let mut request = RemotingCommand::request(1);
        request.opaque = opaque;
        frame::encode_to_bytes(&request, &FrameLimits::default()).expect("encodable")
    };
    let together: Vec<u8> = (1..=3).flat_map(|o| encoded(o).to_vec()).collect();
    their_writer.write_all(&together).await.expect("write");
    for _ in 0..3 {
        answers.next().await.expect("read").expect("an answer");
    }
    their_writer.write_all(&encoded(4)).await.expect("write");
    answers.next().await.expect("read").expect("an answer");
    assert_eq!(
        *seen.lock().expect("not poisoned"),
        [(1, true), (2, true), (3, false), (4, false)]
    );
}

/// Answers every request at once and records, at each
/// [`Handler::before_answers`], how many requests it had handled.
struct Barriered {
    handled: AtomicUsize,
    barriers: Mutex<Vec<usize>>,
    let_answers_leave: bool,
}

impl Handler for Barriered {
    fn handle(&self, _ctx: RequestContext, _request: RemotingCommand) -> HandlerFuture {
        self.handled.fetch_add(1, Ordering::SeqCst);
        Box::pin(async { Some(RemotingCommand::success()) })
    }

    fn before_answers(&self) -> bool {
        let handled = self.handled.load(Ordering::SeqCst);
        self.barriers.lock().expect("not poisoned").push(handled);
        self.let_answers_leave
    }
}

/// The handler's barrier runs once per read's answers, after all of them
/// were handled and before any is written; a barrier that says no closes
/// the connection without a single answer (a store whose deferred write
/// failed must not acknowledge it).
#[tokio::test]
async fn answers_leave_only_after_the_handlers_barrier_lets_them() {
    for let_answers_leave in [true, false] {
        let handler = Arc::new(Barriered {
            handled: AtomicUsize::new(0),
            barriers: Mutex::new(Vec::new()),
            let_answers_leave,
        });
        let (handle, theirs) = connection_with(Arc::clone(&handler) as Arc<dyn Handler>);
        let (their_reader, mut their_writer) = tokio::io::split(theirs);
        let mut answers = FrameReader::new(their_reader, FrameLimits::default());
        let together: Vec<u8> = (1..=3)
            .flat_map(|opaque| {
                let mut request = RemotingCommand::request(1);
                request.opaque = opaque;
                frame::encode_to_bytes(&request, &FrameLimits::default())
                    .expect("encodable")
                    .to_vec()
            })
            .collect();
        their_writer.write_all(&together).await.expect("write");
        if let_answers_leave {
            for opaque in 1..=3 {
                let answer = answers.next().await.expect("read").expect("an answer");
                assert_eq!(answer.opaque, opaque);
            }
            assert_eq!(*handler.barriers.lock().expect("not poisoned"), [3]);
        } else {
            let end = answers.next().await;
            assert!(
                matches!(end, Ok(None) | Err(_)),
                "no answer, the connection closed: {end:?}"
            );
            handle.closed().await;
        }
    }
}
