//! A broker that stores nothing: the driver-bound ceiling of a benchmark.
//!
//! It registers its topics with a real name server (`sluice-node namesrv`)
//! and answers every send at once with `SUCCESS` (a batch with each of its
//! messages' ids, as Apache answers) — no store, no flush, no dedupe, no
//! stats — through the same RPC layer the broker uses, so any
//! client driven against it measures what the client and the RPC layer
//! alone can do on this machine. docs/benchmarks.md quotes it as the floor
//! of the ratio targets a client-bound workload cannot beat (issue 20).
//!
//! With `--append FILE` it also appends every send's body to FILE with one
//! `pwrite` per request at a growing offset (no index, no queue, no sync):
//! the ceiling of any broker that keeps messages in the page cache, which
//! on a VM that returns freed pages to its host pays for every new page.
//! `--flush-ms N` (with `--append`) also calls `fdatasync` on FILE every N
//! ms from a thread of its own, as an async-flush broker writes back what
//! it appended (Apache's `flushIntervalCommitLog` is 500 ms): the ceiling
//! of a broker that stores and writes back, nothing more.
//!
//! With `--sync FILE` it instead overwrites a laid-out 64 MiB FILE in a
//! ring, 1 body per `pwrite`, and calls `fdatasync` before answering, on
//! the connection's own task: the ceiling of SYNC flush for one waiting
//! sender (a loopback round trip plus one data sync, nothing shared
//! between senders); `fsync_probe` times the same loop without the
//! network (4 KiB per write there, the body here).
//!
//! With `--backlog N` (default 0: no consume side at all) `DrainTopic` also
//! holds N synthetic 1 KiB messages spread evenly over its queues (offsets
//! `0..N/4` each), served from memory: each pull copies one pre-encoded
//! stored-message record per message and patches its queue, offsets and
//! `UNIQ_KEY`. Consumers get what a real broker answers (heartbeats,
//! offsets, pulls with Apache's codes and header, sent-back messages that
//! return through `%RETRY%group` after their delay level), so `peerdrv
//! drain` and `peerdrv push` against it measure the driver-bound ceiling of
//! the drain and push rows. Sends are still answered and never stored.
//!
//! `cargo run --release -p sluice-net --example null_broker -- [--namesrv ADDR] [--listen ADDR]
//! [--append FILE [--flush-ms N] | --sync FILE] [--backlog N]` (defaults `127.0.0.1:9876`, `127.0.0.1:10911`);
//! topics `BenchTopic` and `DrainTopic`, 4 queues each. The first request
//! of each code is logged to stderr.

#[path = "null_broker/backlog.rs"]
mod backlog;
#[path = "null_broker/clients.rs"]
mod clients;
#[path = "null_broker/record.rs"]
mod record;
#[path = "null_broker/retry.rs"]
mod retry;

use std::collections::BTreeMap;
use std::fs::File;
use std::net::SocketAddr;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sluice_net::body::{self, DataVersion, RegisterBrokerBody, TopicConfig};
use sluice_net::header::{
    RegisterBrokerRequestHeader, SendMessageRequestHeader, SendMessageRequestHeaderV2,
    SendMessageResponseHeader,
};
use sluice_net::remoting::{request_code, response_code};
use sluice_net::rpc::{Handler, HandlerFuture};
use sluice_net::{
    HandlerTable, RemotingCommand, RequestContext, RpcClient, RpcConfig, RpcServer, TokioTransport,
};

use backlog::Backlog;

const TOPICS: [&str; 2] = ["BenchTopic", "DrainTopic"];
const QUEUES: i32 = 4;
/// `PERM_READ | PERM_WRITE`.
const PERM_READ_WRITE: i32 = 6;
const REGISTER_EVERY: Duration = Duration::from_secs(10);
/// Queues of a retry topic (Apache's `retryQueueNums`).
const RETRY_QUEUES: i32 = 1;
/// Largest `--backlog`: physical offsets stay far below the retry ones.
const BACKLOG_MAX: u64 = 1_000_000_000;

/// Size `--sync` lays its file out to before the first send (as
/// `fsync_probe` does), so a sync carries data only, never an allocation.
const SYNC_FILE_BYTES: u64 = 64 << 20;

/// Where `--append` or `--sync` puts the bodies: the file, its next free
/// offset, and for `--sync` the laid-out size it wraps at.
struct Sink {
    file: File,
    end: AtomicU64,
    wrap_at: Option<u64>,
}

impl Sink {
    fn append(&self, body: &[u8]) {
        let len = body.len() as u64;
        let mut at = self.end.fetch_add(len, Ordering::Relaxed);
        if let Some(wrap) = self.wrap_at {
            at %= wrap.saturating_sub(len).max(1);
        }
        let written = self.file.write_all_at(body, at);
        let synced = written.and_then(|()| match self.wrap_at {
            Some(_) => self.file.sync_data(),
            None => Ok(()),
        });
        if let Err(e) = synced {
            eprintln!("null_broker: append failed: {e}");
        }
    }

    fn append_only(path: &str) -> Self {
        let file = File::create(path).expect("create the --append file");
        Self {
            file,
            end: AtomicU64::new(0),
            wrap_at: None,
        }
    }

    fn synced(path: &str) -> Self {
        let file = File::create(path).expect("create the --sync file");
        let block = vec![0u8; 1 << 20];
        for at in (0..SYNC_FILE_BYTES).step_by(block.len()) {
            file.write_all_at(&block, at)
                .expect("lay out the --sync file");
        }
        file.sync_all().expect("sync the laid-out --sync file");
        Self {
            file,
            end: AtomicU64::new(0),
            wrap_at: Some(SYNC_FILE_BYTES),
        }
    }
}

fn arg(name: &str, default: &str) -> String {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
        .unwrap_or_else(|| default.to_owned())
}

/// The target queue of a send, from whichever header version it carries.
fn queue_of(request: &RemotingCommand) -> i32 {
    if request.code == request_code::SEND_MESSAGE {
        request
            .header::<SendMessageRequestHeader>()
            .map_or(0, |h| h.queue_id)
    } else {
        request
            .header::<SendMessageRequestHeaderV2>()
            .map_or(0, |h| h.e)
    }
}

/// Messages in a send: one, or for a batch (`SEND_BATCH_MESSAGE`) as many
/// as its body holds, each led by its big-endian total size. A broker
/// answers a batch with every message's id (Apache's `msgId` is the
/// comma-joined list), and the client reads them all, so the ceiling must
/// answer the same.
fn messages_in(request: &RemotingCommand) -> i64 {
    if request.code != request_code::SEND_BATCH_MESSAGE {
        return 1;
    }
    let body = &request.body[..];
    let (mut at, mut count) = (0_usize, 0_i64);
    while let Some(size) = body
        .get(at..at + 4)
        .and_then(|b| <[u8; 4]>::try_from(b).ok())
        .map(i32::from_be_bytes)
        .and_then(|n| usize::try_from(n).ok())
        .filter(|&n| n > 0)
    {
        at = at.saturating_add(size);
        count += 1;
    }
    count.max(1)
}

/// A stored-message id in the offset format (address + offset, 32 hex
/// digits), as a broker answers.
fn offset_msg_id(offset: i64) -> String {
    format!("7F00000100002A9F{offset:016X}")
}

/// Calls `fdatasync` on the sink's file every `period` from a thread of
/// its own (as a broker's flush service writes back off the connections).
#[expect(
    clippy::disallowed_methods,
    reason = "a benchmark example, outside the simulation's seams"
)]
fn flush_every(sink: Arc<Sink>, period: Duration) {
    std::thread::spawn(move || loop {
        std::thread::sleep(period);
        if let Err(e) = sink.file.sync_data() {
            eprintln!("null_broker: interval flush failed: {e}");
        }
    });
}

/// Wall-clock ms: store times, and when a sent-back message comes due.
#[expect(
    clippy::disallowed_methods,
    reason = "a benchmark example, outside the simulation's seams"
)]
fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .ok()
        .and_then(|d| i64::try_from(d.as_millis()).ok())
        .unwrap_or(0)
}

/// The handler table, logging the first request of each code (which
/// requests a client sends, at the cost of one load per request).
struct FirstSeen {
    table: HandlerTable,
    seen: Vec<AtomicBool>,
}

impl Handler for FirstSeen {
    fn handle(&self, ctx: RequestContext, request: RemotingCommand) -> HandlerFuture {
        let seen = usize::try_from(request.code)
            .ok()
            .and_then(|c| self.seen.get(c));
        if let Some(seen) = seen {
            if !seen.load(Ordering::Relaxed) && !seen.swap(true, Ordering::Relaxed) {
                let name = request_code::name(request.code).unwrap_or("unknown");
                eprintln!("null_broker: first {name} ({})", request.code);
            }
        }
        self.table.handle(ctx, request)
    }
}

fn table(next_offset: &Arc<AtomicI64>, sink: Option<&Arc<Sink>>) -> HandlerTable {
    let mut table = HandlerTable::new();
    for code in [request_code::HEART_BEAT, request_code::UNREGISTER_CLIENT] {
        table.register(code, |_: RequestContext, _: RemotingCommand| async {
            Some(RemotingCommand::success())
        });
    }
    for code in [
        request_code::SEND_MESSAGE,
        request_code::SEND_MESSAGE_V2,
        request_code::SEND_BATCH_MESSAGE,
    ] {
        let next_offset = Arc::clone(next_offset);
        let sink = sink.cloned();
        table.register(code, move |_: RequestContext, request: RemotingCommand| {
            if let Some(sink) = &sink {
                sink.append(&request.body);
            }
            let count = messages_in(&request);
            let offset = next_offset.fetch_add(count, Ordering::Relaxed);
            let ids = (offset..offset + count)
                .map(offset_msg_id)
                .collect::<Vec<_>>()
                .join(",");
            let header = SendMessageResponseHeader::new(ids, queue_of(&request), offset);
            async move { Some(RemotingCommand::success().with_header(&header)) }
        });
    }
    table
}

/// The registration of `TOPICS` and of the consumers' retry topics.
fn registration(listen: &str, retry_topics: &[String], started_ms: i64) -> RemotingCommand {
    let topics = TOPICS.iter().map(|t| ((*t).to_owned(), QUEUES));
    let retries = retry_topics.iter().map(|t| (t.clone(), RETRY_QUEUES));
    let topic_config_table: BTreeMap<String, TopicConfig> = topics
        .chain(retries)
        .map(|(name, queues)| {
            let config = TopicConfig {
                topic_name: name.clone(),
                read_queue_nums: queues,
                write_queue_nums: queues,
                perm: PERM_READ_WRITE,
                topic_filter_type: "SINGLE_TAG".to_owned(),
                ..TopicConfig::default()
            };
            (name, config)
        })
        .collect();
    let mut body = RegisterBrokerBody::default();
    let wrapper = &mut body.topic_config_serialize_wrapper;
    wrapper.topic_config_table = topic_config_table;
    // Name servers take a broker's topics again only when this changes.
    wrapper.data_version = DataVersion {
        timestamp: started_ms,
        counter: i64::try_from(retry_topics.len()).unwrap_or(i64::MAX),
        state_version: 0,
    };
    let json = body::encode(&body, "RegisterBrokerBody").expect("serializable");
    let header = RegisterBrokerRequestHeader {
        broker_name: "null-broker".to_owned(),
        broker_addr: listen.to_owned(),
        cluster_name: "DefaultCluster".to_owned(),
        ha_server_addr: String::new(),
        broker_id: 0,
        compressed: Some(false),
        body_crc32: None,
        master_epoch: None,
    };
    RemotingCommand::request_with_header(request_code::REGISTER_BROKER, &header).with_body(json)
}

/// `--backlog`, at most `BACKLOG_MAX`.
fn backlog_arg() -> u64 {
    let text = arg("--backlog", "0");
    match text.parse::<u64>() {
        Ok(n) if n <= BACKLOG_MAX => n,
        _ => {
            eprintln!("null_broker: --backlog takes a count up to {BACKLOG_MAX}, not {text:?}");
            std::process::exit(2);
        }
    }
}

/// The store host records name: the listen address when it is IPv4.
fn store_host(listen: &str) -> ([u8; 4], u16) {
    match listen.parse::<SocketAddr>() {
        Ok(SocketAddr::V4(a)) => (a.ip().octets(), a.port()),
        _ => ([127, 0, 0, 1], 10911),
    }
}

#[tokio::main]
async fn main() {
    let namesrv = arg("--namesrv", "127.0.0.1:9876");
    let listen = arg("--listen", "127.0.0.1:10911");
    let next_offset = Arc::new(AtomicI64::new(0));
    let append = arg("--append", "");
    let sync = arg("--sync", "");
    let sink = match (append.is_empty(), sync.is_empty()) {
        (true, true) => None,
        (false, true) => Some(Arc::new(Sink::append_only(&append))),
        (true, false) => Some(Arc::new(Sink::synced(&sync))),
        (false, false) => panic!("null_broker: --append and --sync exclude each other"),
    };
    let flush_ms: u64 = arg("--flush-ms", "0")
        .parse()
        .expect("null_broker: --flush-ms takes a number of milliseconds");
    if let (Some(sink), true) = (&sink, flush_ms > 0) {
        flush_every(Arc::clone(sink), Duration::from_millis(flush_ms));
    }
    let started_ms = now_ms();
    let total = backlog_arg();
    let backlog = (total > 0).then(|| Arc::new(Backlog::new(total, store_host(&listen))));
    let mut table = table(&next_offset, sink.as_ref());
    if let Some(backlog) = &backlog {
        clients::register(&mut table, backlog);
    }
    let handler = FirstSeen {
        table,
        seen: (0..1_024).map(|_| AtomicBool::new(false)).collect(),
    };
    let server = RpcServer::bind(&TokioTransport, &listen, RpcConfig::default(), handler)
        .await
        .expect("bind the broker port");
    let client = RpcClient::new(TokioTransport, RpcConfig::default());
    loop {
        let retry_topics = backlog
            .as_ref()
            .map(|b| b.retry_topics())
            .unwrap_or_default();
        match client
            .invoke(
                &namesrv,
                registration(&listen, &retry_topics, started_ms),
                Duration::from_secs(3),
            )
            .await
        {
            Ok(r) if r.code == response_code::SUCCESS => {}
            Ok(r) => eprintln!(
                "null_broker: registration refused: {} {:?}",
                r.code, r.remark
            ),
            Err(e) => eprintln!("null_broker: registration failed: {e}"),
        }
        let consumed = backlog
            .as_ref()
            .map(|b| format!(", {}", b.summary()))
            .unwrap_or_default();
        println!(
            "null_broker on {}: {} messages answered{consumed}",
            server.local_addr(),
            next_offset.load(Ordering::Relaxed)
        );
        match &backlog {
            Some(b) => tokio::select! {
                () = tokio::time::sleep(REGISTER_EVERY) => {}
                () = b.topics_changed() => {}
            },
            None => tokio::time::sleep(REGISTER_EVERY).await,
        }
    }
}
