//! Loopback driver: ping-pong round trips and pipelined requests/s through
//! the RPC layer versus raw framed TCP on the same machine, printed as
//! ratios. Run: `cargo run --release -p sluice-net --example rpc_loopback -- [runs]`.
#![expect(
    clippy::cast_precision_loss,
    reason = "request counts are far below 2^52"
)]

use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use sluice_net::header::{SendMessageRequestHeaderV2, SendMessageResponseHeader};
use sluice_net::remoting::frame::{self, FrameLimits};
use sluice_net::remoting::{request_code, response_code, SerializeType};
use sluice_net::{
    HandlerTable, RemotingCommand, RequestContext, RpcClient, RpcConfig, RpcServer, TokioTransport,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::time::Instant;

const PING_PONGS: usize = 20_000;
const PIPELINED: usize = 200_000;
const WINDOW: usize = 256;
const CALL: Duration = Duration::from_secs(10);

fn request(serialize_type: SerializeType) -> RemotingCommand {
    let header = SendMessageRequestHeaderV2 {
        a: "bench_producer_group".into(),
        b: "BenchTopic".into(),
        c: "TBW102".into(),
        d: 4,
        e: 0,
        f: 0,
        g: 1_700_000_000_000,
        h: 0,
        i: Some("UNIQ_KEY\u{1}7F00000100002A9F0000000000000001\u{2}WAIT\u{1}true\u{2}".into()),
        j: Some(0),
        k: Some(false),
        l: None,
        m: Some(false),
        n: None,
    };
    let mut cmd = RemotingCommand::request_with_header(request_code::SEND_MESSAGE_V2, &header)
        .with_body(vec![b'x'; 1024]);
    cmd.serialize_type = serialize_type;
    cmd
}

fn response(opaque: i32, serialize_type: SerializeType) -> RemotingCommand {
    let mut cmd = RemotingCommand::response(response_code::SUCCESS, "").with_header(
        &SendMessageResponseHeader::new("7F00000100002A9F0000000000000001", 0, 42),
    );
    cmd.remark = None;
    cmd.opaque = opaque;
    cmd.serialize_type = serialize_type;
    cmd
}

fn encoded(cmd: &RemotingCommand) -> Bytes {
    frame::encode_to_bytes(cmd, &FrameLimits::default()).expect("encodable")
}

/// Raw server: splits frames by their length prefix and answers each with a
/// pre-encoded response, coalescing the answers to one read into one write.
/// With `full_codec` it instead decodes every request (typed header too) and
/// encodes every response, as the RPC layer does, but with no tasks,
/// channels or correlation.
async fn raw_server(listener: TcpListener, reply: Bytes, full_codec: bool) {
    while let Ok((stream, _)) = listener.accept().await {
        stream.set_nodelay(true).expect("nodelay");
        let reply = reply.clone();
        tokio::spawn(async move {
            let (mut rd, mut wr) = stream.into_split();
            let mut buf = BytesMut::with_capacity(64 * 1024);
            let mut out = BytesMut::with_capacity(64 * 1024);
            loop {
                if rd.read_buf(&mut buf).await.unwrap_or(0) == 0 {
                    return;
                }
                if full_codec {
                    while let Ok(Some(req)) = frame::decode(&mut buf, &FrameLimits::default()) {
                        let header: SendMessageRequestHeaderV2 =
                            req.header().expect("typed header");
                        assert_eq!(header.b, "BenchTopic");
                        let resp = response(req.opaque, req.serialize_type);
                        frame::encode(&resp, &FrameLimits::default(), &mut out).expect("encodable");
                    }
                } else {
                    while let Ok(len) = frame::frame_len(&buf, &FrameLimits::default()) {
                        if buf.len() < len {
                            break;
                        }
                        buf.advance(len);
                        out.extend_from_slice(&reply);
                    }
                }
                if wr.write_all(&out).await.is_err() {
                    return;
                }
                out.clear();
                if buf.capacity() - buf.len() < 16 * 1024 {
                    buf.reserve(64 * 1024);
                }
            }
        });
    }
}

/// Reads `n` whole frames from `rd` into `buf`, decoding them if `full_codec`.
async fn read_frames(
    rd: &mut tokio::net::tcp::OwnedReadHalf,
    buf: &mut BytesMut,
    mut n: usize,
    full_codec: bool,
) {
    while n > 0 {
        while let Ok(len) = frame::frame_len(buf, &FrameLimits::default()) {
            if buf.len() < len || n == 0 {
                break;
            }
            if full_codec {
                let resp = frame::decode(buf, &FrameLimits::default())
                    .expect("valid")
                    .expect("whole");
                assert_eq!(resp.code, response_code::SUCCESS);
            } else {
                buf.advance(len);
            }
            n -= 1;
        }
        if n > 0 {
            buf.reserve(64 * 1024);
            assert!(rd.read_buf(buf).await.expect("read") > 0, "server closed");
        }
    }
}

async fn raw_ping_pong(addr: &str, req: &Bytes) -> f64 {
    let stream = TcpStream::connect(addr).await.expect("connect");
    stream.set_nodelay(true).expect("nodelay");
    let (mut rd, mut wr) = stream.into_split();
    let mut buf = BytesMut::new();
    let start = Instant::now();
    for _ in 0..PING_PONGS {
        wr.write_all(req).await.expect("write");
        read_frames(&mut rd, &mut buf, 1, false).await;
    }
    start.elapsed().as_secs_f64() * 1e6 / PING_PONGS as f64
}

/// Pipelined through raw TCP; with `full_codec` every request is encoded
/// from a fresh command and every response decoded.
async fn raw_pipelined(addr: &str, req: &RemotingCommand, full_codec: bool) -> f64 {
    let stream = TcpStream::connect(addr).await.expect("connect");
    stream.set_nodelay(true).expect("nodelay");
    let (mut rd, mut wr) = stream.into_split();
    let window = Arc::new(Semaphore::new(WINDOW));
    let start = Instant::now();
    let writer_window = Arc::clone(&window);
    let req = req.clone();
    let pre_encoded = encoded(&req);
    let writer = tokio::spawn(async move {
        let mut sent = 0;
        let mut out = BytesMut::with_capacity(64 * 1024);
        while sent < PIPELINED {
            // Take whatever window is free (at least one), write that many frames at once.
            let permit = writer_window.acquire().await.expect("open");
            permit.forget();
            let mut batch = 1;
            while batch < 64 && sent + batch < PIPELINED {
                match writer_window.try_acquire() {
                    Ok(p) => {
                        p.forget();
                        batch += 1;
                    }
                    Err(_) => break,
                }
            }
            for _ in 0..batch {
                if full_codec {
                    frame::encode(&req.clone(), &FrameLimits::default(), &mut out)
                        .expect("encodable");
                } else {
                    out.extend_from_slice(&pre_encoded);
                }
            }
            wr.write_all(&out).await.expect("write");
            out.clear();
            sent += batch;
        }
        wr
    });
    let mut buf = BytesMut::new();
    let mut received = 0;
    while received < PIPELINED {
        let chunk = (PIPELINED - received).min(16);
        read_frames(&mut rd, &mut buf, chunk, full_codec).await;
        received += chunk;
        window.add_permits(chunk);
    }
    let _wr = writer.await.expect("writer");
    PIPELINED as f64 / start.elapsed().as_secs_f64()
}

async fn rpc_ping_pong(
    client: &RpcClient<TokioTransport>,
    addr: &str,
    req: &RemotingCommand,
) -> f64 {
    let start = Instant::now();
    for _ in 0..PING_PONGS {
        client
            .invoke(addr, req.clone(), CALL)
            .await
            .expect("answered");
    }
    start.elapsed().as_secs_f64() * 1e6 / PING_PONGS as f64
}

async fn rpc_pipelined(
    client: &RpcClient<TokioTransport>,
    addr: &str,
    req: &RemotingCommand,
) -> f64 {
    let start = Instant::now();
    let per_task = PIPELINED / WINDOW;
    let tasks: Vec<_> = (0..WINDOW)
        .map(|_| {
            let client = client.clone();
            let addr = addr.to_owned();
            let req = req.clone();
            tokio::spawn(async move {
                for _ in 0..per_task {
                    client
                        .invoke(&addr, req.clone(), CALL)
                        .await
                        .expect("answered");
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("task");
    }
    (per_task * WINDOW) as f64 / start.elapsed().as_secs_f64()
}

fn median(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

/// Starts the three servers; returns their addresses (raw, raw + codec, RPC).
async fn start_servers() -> (String, String, String, RpcServer) {
    let raw_listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let raw_addr = raw_listener.local_addr().expect("addr").to_string();
    tokio::spawn(raw_server(
        raw_listener,
        encoded(&response(0, SerializeType::Json)),
        false,
    ));
    let codec_listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let codec_addr = codec_listener.local_addr().expect("addr").to_string();
    tokio::spawn(raw_server(codec_listener, Bytes::new(), true));
    let table = HandlerTable::new().with(
        request_code::SEND_MESSAGE_V2,
        |_ctx: RequestContext, req: RemotingCommand| async move {
            let header: SendMessageRequestHeaderV2 = req.header().ok()?;
            debug_assert_eq!(header.b, "BenchTopic");
            Some(response(req.opaque, req.serialize_type))
        },
    );
    let server = RpcServer::bind(&TokioTransport, "127.0.0.1:0", RpcConfig::default(), table)
        .await
        .expect("bind");
    let rpc_addr = server.local_addr().to_string();
    (raw_addr, codec_addr, rpc_addr, server)
}

fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// `split` (default): servers on one single-threaded runtime in their own
/// thread, the client on another, like a client process and a broker.
/// `multi`: everything on one two-worker runtime.
fn main() {
    let runs: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(5);
    let split = std::env::args().nth(2).as_deref() != Some("multi");
    if split {
        let (tx, rx) = std::sync::mpsc::channel();
        #[expect(
            clippy::disallowed_methods,
            reason = "benchmark driver: the server side gets its own OS thread, as a broker process would"
        )]
        std::thread::spawn(move || {
            current_thread().block_on(async move {
                let (raw, codec, rpc, server) = start_servers().await;
                tx.send((raw, codec, rpc)).expect("main thread waits");
                std::future::pending::<()>().await;
                drop(server);
            });
        });
        let addrs = rx.recv().expect("servers started");
        current_thread().block_on(drive(runs, addrs));
    } else {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async move {
            let (raw, codec, rpc, server) = start_servers().await;
            drive(runs, (raw, codec, rpc)).await;
            server.shutdown(Duration::from_secs(1)).await;
        });
    }
}

/// Process CPU time (user + system, both threads), from `/proc/self/stat`
/// in clock ticks of 10 ms (`CLK_TCK` = 100 on Linux). Robust to other
/// load on the machine, unlike wall time.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after_name = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // Fields 14 and 15 of the line (utime, stime) are 11 and 12 after the name.
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u32>().ok())
            .unwrap_or(0)
    };
    (f64::from(ticks(11)) + f64::from(ticks(12))) / 100.0
}

/// Runs a pipelined measurement and also returns CPU µs per request.
async fn with_cpu(run: impl std::future::Future<Output = f64>) -> (f64, f64) {
    let cpu_before = cpu_seconds();
    let wall_before = Instant::now();
    let rate = run.await;
    let requests = rate * wall_before.elapsed().as_secs_f64();
    (rate, (cpu_seconds() - cpu_before) * 1e6 / requests)
}

async fn drive(runs: usize, (raw_addr, codec_addr, rpc_addr): (String, String, String)) {
    let client = RpcClient::new(TokioTransport, RpcConfig::default());
    let raw_req = encoded(&request(SerializeType::Json));
    let json_req = request(SerializeType::Json);
    let bin_req = request(SerializeType::RocketMq);
    // Warm up connections and allocators.
    rpc_ping_pong(&client, &rpc_addr, &json_req).await;
    // `RPC_LOOPBACK_ONLY=rpc|codec` runs just that pipelined case (for profiling).
    match std::env::var("RPC_LOOPBACK_ONLY").as_deref() {
        Ok("rpc") => {
            let (rate, cpu) = with_cpu(rpc_pipelined(&client, &rpc_addr, &json_req)).await;
            println!("rpc json: {rate:.0} req/s, {cpu:.2} us CPU per request");
            return;
        }
        Ok("codec") => {
            let (rate, cpu) = with_cpu(raw_pipelined(&codec_addr, &json_req, true)).await;
            println!("raw + codec: {rate:.0} req/s, {cpu:.2} us CPU per request");
            return;
        }
        _ => {}
    }
    let mut rows: [Vec<f64>; 14] = Default::default();
    for run in 0..runs {
        rows[0].push(raw_ping_pong(&raw_addr, &raw_req).await);
        rows[1].push(rpc_ping_pong(&client, &rpc_addr, &json_req).await);
        let (raw, raw_cpu) = with_cpu(raw_pipelined(&raw_addr, &json_req, false)).await;
        let (codec, codec_cpu) = with_cpu(raw_pipelined(&codec_addr, &json_req, true)).await;
        let (rpc, rpc_cpu) = with_cpu(rpc_pipelined(&client, &rpc_addr, &json_req)).await;
        let (bin, bin_cpu) = with_cpu(rpc_pipelined(&client, &rpc_addr, &bin_req)).await;
        rows[2].push(raw);
        rows[3].push(codec);
        rows[4].push(rpc);
        rows[5].push(bin);
        rows[6].push(rows[4][run] / rows[2][run]);
        rows[7].push(rows[4][run] / rows[3][run]);
        rows[8].push(rows[1][run] / rows[0][run]);
        rows[9].push(raw_cpu);
        rows[10].push(codec_cpu);
        rows[11].push(rpc_cpu);
        rows[12].push(bin_cpu);
        rows[13].push(raw_cpu / rpc_cpu);
        eprintln!(
            "run {run}: raw rtt {:.1} us, rpc rtt {:.1} us, raw {:.0}/s, raw+codec {:.0}/s, rpc json {:.0}/s, rpc rocketmq {:.0}/s",
            rows[0][run], rows[1][run], rows[2][run], rows[3][run], rows[4][run], rows[5][run]
        );
    }
    let names = [
        "ping-pong RTT raw TCP (us)",
        "ping-pong RTT RPC, JSON header (us)",
        "pipelined raw TCP, length-split only (req/s)",
        "pipelined raw TCP + full codec, JSON (req/s)",
        "pipelined RPC, JSON header (req/s)",
        "pipelined RPC, ROCKETMQ header (req/s)",
        "pipelined RPC JSON / raw TCP (ratio)",
        "pipelined RPC JSON / raw TCP + codec (ratio)",
        "ping-pong RTT RPC / raw (ratio)",
        "CPU per request, raw TCP length-split (us)",
        "CPU per request, raw TCP + full codec (us)",
        "CPU per request, RPC JSON (us)",
        "CPU per request, RPC ROCKETMQ (us)",
        "CPU-bound throughput ratio RPC JSON / raw (raw CPU / RPC CPU)",
    ];
    println!("| measure | median | [min–max] |\n|---|---|---|");
    for (name, row) in names.iter().zip(rows) {
        let (m, lo, hi) = median(row);
        println!("| {name} | {m:.2} | [{lo:.2}–{hi:.2}] |");
    }
}
