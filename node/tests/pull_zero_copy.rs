//! A pull answers the stored records without copying them in user space:
//! while an in-process broker (on mmap files) reads, builds, encodes and
//! writes a pull response of `MESSAGES` records of `MESSAGE_BYTES` each, the
//! whole process allocates a small amount per message, independent of the
//! message size, far below the `MESSAGES * MESSAGE_BYTES` one copy of the
//! body would allocate. A counting global allocator measures it; this binary
//! holds one test so nothing else allocates meanwhile.

mod in_process;
mod support;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use in_process::{config, send, start};
use sluice_net::header::PullMessageRequestHeader;
use sluice_net::remoting::frame::{self, FrameLimits};
use sluice_net::remoting::{request_code, response_code};
use sluice_net::RemotingCommand;
use support::{split_records, Client};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Records per pull.
const MESSAGES: usize = 64;
/// Body bytes per record: the store adds its record header to each.
const MESSAGE_BYTES: usize = 32 * 1024;
/// Measured pulls, averaged.
const PULLS: usize = 8;
/// What one pull may allocate in the whole process, whatever the record
/// size: a fixed part for the request's decode, its header fields and the
/// response's head, plus per record a few pointer-sized entries (the
/// store's result list, the command's and the encoded frame's chunk lists,
/// the writer's queue and its `IoSlice`s: about 5 × 32 bytes).
const ALLOCATED_PER_PULL_BYTES_MAX: usize = 16 * 1024 + 256 * MESSAGES;
const TOPIC: &str = "ZeroCopyT";
const GROUP: &str = "zero-copy-consumer";

static ALLOCATED_BYTES: AtomicUsize = AtomicUsize::new(0);

/// The system allocator, counting every byte it hands out.
struct CountingAllocator;

#[expect(
    unsafe_code,
    reason = "a global allocator is an unsafe trait; this one only counts and forwards to System"
)]
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATED_BYTES.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded unchanged; the caller upholds `alloc`'s contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATED_BYTES.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: as `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATED_BYTES.fetch_add(new_size, Ordering::Relaxed);
        // SAFETY: `ptr` and `layout` came from this allocator, i.e. from System.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as `realloc`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

fn pull_request() -> RemotingCommand {
    let h = PullMessageRequestHeader {
        consumer_group: GROUP.into(),
        topic: TOPIC.into(),
        queue_id: 0,
        queue_offset: 0,
        max_msg_nums: i32::try_from(MESSAGES).expect("small"),
        sys_flag: 0,
        commit_offset: 0,
        suspend_timeout_millis: 0,
        subscription: None,
        sub_version: 0,
        expression_type: None,
        max_msg_bytes: None,
    };
    RemotingCommand::request_with_header(request_code::PULL_MESSAGE, &h)
}

/// Sends one pre-encoded request and reads its response frame into
/// `response` (allocated beforehand), returning the frame's length: the
/// client side allocates nothing.
async fn pull_once(
    stream: &mut tokio::net::TcpStream,
    request: &[u8],
    response: &mut [u8],
) -> usize {
    stream.write_all(request).await.expect("write request");
    stream
        .read_exact(&mut response[..4])
        .await
        .expect("read length");
    let total = u32::from_be_bytes(response[..4].try_into().expect("4 bytes"));
    let len = 4 + usize::try_from(total).expect("fits");
    stream
        .read_exact(&mut response[4..len])
        .await
        .expect("read frame");
    len
}

#[tokio::test]
async fn a_pull_response_copies_no_message_bytes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = config();
    cfg.store.commit_log_segment_bytes = 8 << 20;
    let broker = start(dir.path(), cfg).await;
    let c = Client::new(&broker.addr);
    for i in 0..MESSAGES {
        let fill = u8::try_from(i).expect("small");
        send(&c, TOPIC, 0, &vec![fill; MESSAGE_BYTES], &[]).await;
    }

    let mut stream = tokio::net::TcpStream::connect(&broker.addr)
        .await
        .expect("connect");
    let request =
        frame::encode_to_bytes(&pull_request(), &FrameLimits::default()).expect("encodable");
    let mut response = vec![0u8; 2 * MESSAGES * MESSAGE_BYTES];
    // The first pull warms the connection's buffers and the group's state,
    // and shows the response carries every record, byte for byte.
    let len = pull_once(&mut stream, &request, &mut response).await;
    let (answer, _) =
        frame::decode_slice(&response[..len], &FrameLimits::default()).expect("a whole frame");
    assert_eq!(answer.code, response_code::SUCCESS, "{:?}", answer.remark);
    let records = split_records(&answer.body);
    assert_eq!(records.len(), MESSAGES);
    for (i, r) in records.iter().enumerate() {
        let fill = u8::try_from(i).expect("small");
        assert!(r.body.len() == MESSAGE_BYTES && r.body.iter().all(|b| *b == fill));
    }

    let before = ALLOCATED_BYTES.load(Ordering::Relaxed);
    for _ in 0..PULLS {
        assert_eq!(pull_once(&mut stream, &request, &mut response).await, len);
    }
    let per_pull = (ALLOCATED_BYTES.load(Ordering::Relaxed) - before) / PULLS;
    let one_copy = MESSAGES * MESSAGE_BYTES;
    eprintln!(
        "one pull of {MESSAGES} x {MESSAGE_BYTES} B records: {per_pull} B allocated \
         (bound {ALLOCATED_PER_PULL_BYTES_MAX} B; one copy of the body is {one_copy} B)"
    );
    assert!(
        per_pull <= ALLOCATED_PER_PULL_BYTES_MAX,
        "a pull allocated {per_pull} B, over {ALLOCATED_PER_PULL_BYTES_MAX} B: \
         is the body copied again? (one copy is {one_copy} B)"
    );
    drop(stream);
    broker.shutdown().await;
}
