//! A broker that stores nothing: the driver-bound ceiling of a benchmark.
//!
//! It registers its topics with a real name server (`sluice-node namesrv`)
//! and answers every send at once with `SUCCESS` — no store, no flush, no
//! dedupe, no stats — through the same RPC layer the broker uses, so any
//! client driven against it measures what the client and the RPC layer
//! alone can do on this machine. docs/benchmarks.md quotes it as the floor
//! of the ratio targets a client-bound workload cannot beat (issue 20).
//!
//! With `--append FILE` it also appends every send's body to FILE with one
//! `pwrite` per request at a growing offset (no index, no queue, no sync):
//! the ceiling of any broker that keeps messages in the page cache, which
//! on a VM that returns freed pages to its host pays for every new page.
//!
//! `cargo run --release -p sluice-net --example null_broker -- [--namesrv ADDR] [--listen ADDR]
//! [--append FILE]` (defaults `127.0.0.1:9876`, `127.0.0.1:10911`); topics
//! `BenchTopic` and `DrainTopic`, 4 queues each.

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sluice_net::body::{self, RegisterBrokerBody, TopicConfig};
use sluice_net::header::{
    RegisterBrokerRequestHeader, SendMessageRequestHeader, SendMessageRequestHeaderV2,
    SendMessageResponseHeader,
};
use sluice_net::remoting::{request_code, response_code};
use sluice_net::{
    HandlerTable, RemotingCommand, RequestContext, RpcClient, RpcConfig, RpcServer, TokioTransport,
};

const TOPICS: [&str; 2] = ["BenchTopic", "DrainTopic"];
const QUEUES: i32 = 4;
/// `PERM_READ | PERM_WRITE`.
const PERM_READ_WRITE: i32 = 6;
const REGISTER_EVERY: Duration = Duration::from_secs(10);

/// Where `--append` puts the bodies: the file and its next free offset.
struct Sink {
    file: File,
    end: AtomicU64,
}

impl Sink {
    fn append(&self, body: &[u8]) {
        let at = self.end.fetch_add(body.len() as u64, Ordering::Relaxed);
        if let Err(e) = self.file.write_all_at(body, at) {
            eprintln!("null_broker: append failed: {e}");
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

/// A stored-message id in the offset format (address + offset, 32 hex
/// digits), as a broker answers.
fn offset_msg_id(offset: i64) -> String {
    format!("7F00000100002A9F{offset:016X}")
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
            let offset = next_offset.fetch_add(1, Ordering::Relaxed);
            let header =
                SendMessageResponseHeader::new(offset_msg_id(offset), queue_of(&request), offset);
            async move { Some(RemotingCommand::success().with_header(&header)) }
        });
    }
    table
}

fn registration(listen: &str) -> RemotingCommand {
    let topic_config_table: BTreeMap<String, TopicConfig> = TOPICS
        .iter()
        .map(|t| {
            let config = TopicConfig {
                topic_name: (*t).to_owned(),
                read_queue_nums: QUEUES,
                write_queue_nums: QUEUES,
                perm: PERM_READ_WRITE,
                topic_filter_type: "SINGLE_TAG".to_owned(),
                ..TopicConfig::default()
            };
            ((*t).to_owned(), config)
        })
        .collect();
    let mut body = RegisterBrokerBody::default();
    body.topic_config_serialize_wrapper.topic_config_table = topic_config_table;
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

#[tokio::main]
async fn main() {
    let namesrv = arg("--namesrv", "127.0.0.1:9876");
    let listen = arg("--listen", "127.0.0.1:10911");
    let next_offset = Arc::new(AtomicI64::new(0));
    let append = arg("--append", "");
    let sink = (!append.is_empty()).then(|| {
        let file = File::create(&append).expect("create the --append file");
        Arc::new(Sink {
            file,
            end: AtomicU64::new(0),
        })
    });
    let server = RpcServer::bind(
        &TokioTransport,
        &listen,
        RpcConfig::default(),
        table(&next_offset, sink.as_ref()),
    )
    .await
    .expect("bind the broker port");
    let client = RpcClient::new(TokioTransport, RpcConfig::default());
    loop {
        match client
            .invoke(&namesrv, registration(&listen), Duration::from_secs(3))
            .await
        {
            Ok(r) if r.code == response_code::SUCCESS => {}
            Ok(r) => eprintln!(
                "null_broker: registration refused: {} {:?}",
                r.code, r.remark
            ),
            Err(e) => eprintln!("null_broker: registration failed: {e}"),
        }
        println!(
            "null_broker on {}: {} sends answered",
            server.local_addr(),
            next_offset.load(Ordering::Relaxed)
        );
        tokio::time::sleep(REGISTER_EVERY).await;
    }
}
