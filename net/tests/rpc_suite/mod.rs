//! The transport-agnostic scenarios of the RPC conformance suite, and the
//! server and client handlers they run against.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use sluice_net::header::{
    CheckTransactionStateRequestHeader, NotifyConsumerIdsChangedRequestHeader,
};
use sluice_net::remoting::frame::{self, FrameLimits};
use sluice_net::remoting::{request_code, response_code};
use sluice_net::transport::{FrameReader, Socket};
use sluice_net::{
    Error, HandlerTable, RemotingCommand, RequestContext, RpcClient, RpcConfig, RpcServer,
    Transport,
};
use tokio::io::AsyncWriteExt;
use tokio::sync::Notify;
use tokio::time::Instant;

pub const ECHO: i32 = 1001;
pub const RECORD_ONEWAY: i32 = 1002;
pub const COUNT_ONEWAYS: i32 = 1003;
pub const NEVER_ANSWER: i32 = 1004;
pub const SLOW: i32 = 1005;
pub const CALL_CLIENT_BACK: i32 = 1006;
pub const CLOSE_MY_CONNECTION: i32 = 1007;

const SLOW_MS: u64 = 300;
const CALL: Duration = Duration::from_secs(2);

/// Lets a scenario ask the server to shut down with a grace period.
#[derive(Default)]
pub struct Control {
    pub grace: std::sync::Mutex<Duration>,
    pub shutdown: Notify,
    pub done: Notify,
}

#[derive(Default)]
pub struct ServerState {
    pub oneways: AtomicUsize,
}

pub async fn serve_until_shutdown(server: RpcServer, control: Arc<Control>) {
    control.shutdown.notified().await;
    let grace = *control.grace.lock().expect("not poisoned");
    server.shutdown(grace).await;
    control.done.notify_one();
}

fn ok(remark: impl Into<String>) -> RemotingCommand {
    RemotingCommand::response(response_code::SUCCESS, remark)
}

pub fn server_table(state: &Arc<ServerState>) -> HandlerTable {
    let record = Arc::clone(state);
    let count = Arc::clone(state);
    HandlerTable::new()
        .with(
            ECHO,
            |_ctx: RequestContext, req: RemotingCommand| async move {
                Some(
                    ok(req
                        .ext_fields
                        .get("x")
                        .map(str::to_owned)
                        .unwrap_or_default())
                    .with_body(req.body),
                )
            },
        )
        .with(
            RECORD_ONEWAY,
            move |_ctx: RequestContext, _req: RemotingCommand| {
                record.oneways.fetch_add(1, Ordering::SeqCst);
                // A response to a oneway request must never reach the wire.
                async { Some(ok("must not be sent")) }
            },
        )
        .with(
            COUNT_ONEWAYS,
            move |_ctx: RequestContext, _req: RemotingCommand| {
                let n = count.oneways.load(Ordering::SeqCst);
                async move { Some(ok(n.to_string())) }
            },
        )
        .with(
            NEVER_ANSWER,
            |_ctx: RequestContext, _req: RemotingCommand| async {
                std::future::pending::<Option<RemotingCommand>>().await
            },
        )
        .with(SLOW, |_ctx: RequestContext, _req: RemotingCommand| async {
            tokio::time::sleep(Duration::from_millis(SLOW_MS)).await;
            Some(ok("slow done"))
        })
        .with(
            CALL_CLIENT_BACK,
            |ctx: RequestContext, _req: RemotingCommand| async move {
                let notify = RemotingCommand::request_with_header(
                    request_code::NOTIFY_CONSUMER_IDS_CHANGED,
                    &NotifyConsumerIdsChangedRequestHeader {
                        consumer_group: "g1".into(),
                    },
                );
                let answer = ctx.connection.invoke(notify, CALL).await;
                let check = RemotingCommand::request_with_header(
                    request_code::CHECK_TRANSACTION_STATE,
                    &CheckTransactionStateRequestHeader {
                        tran_state_table_offset: 5,
                        commit_log_offset: 77,
                        ..Default::default()
                    },
                );
                ctx.connection.invoke_oneway(check, CALL).await.ok()?;
                Some(ok(match answer {
                    Ok(resp) => resp.remark.unwrap_or_default(),
                    Err(e) => format!("callback failed: {e}"),
                }))
            },
        )
        .with(
            CLOSE_MY_CONNECTION,
            |ctx: RequestContext, _req: RemotingCommand| async move {
                ctx.connection.close();
                None
            },
        )
}

fn echo(x: &str) -> RemotingCommand {
    let mut req = RemotingCommand::request(ECHO).with_body(x.as_bytes().to_vec());
    req.ext_fields.insert("x", x);
    req
}

async fn echo_ok<T: Transport>(client: &RpcClient<T>, addr: &str, x: &str) -> Result<(), Error> {
    let resp = client.invoke(addr, echo(x), CALL).await?;
    assert_eq!(resp.code, response_code::SUCCESS);
    assert_eq!(resp.remark.as_deref(), Some(x));
    assert_eq!(&resp.body[..], x.as_bytes());
    Ok(())
}

pub async fn request_response_correlates_concurrent_calls<T: Transport>(
    t: T,
    addr: String,
    _c: Arc<Control>,
) {
    let client = RpcClient::new(t, RpcConfig::default());
    let calls = (0..64).map(|i| {
        let client = client.clone();
        let addr = addr.clone();
        async move { echo_ok(&client, &addr, &format!("payload-{i}")).await }
    });
    for result in futures_join_all(calls).await {
        result.expect("every call gets its own response");
    }
}

/// Awaits all futures concurrently (a tiny `join_all` without a dependency).
async fn futures_join_all<F: std::future::Future + Send + 'static>(
    futs: impl Iterator<Item = F>,
) -> Vec<F::Output>
where
    F::Output: Send + 'static,
{
    let handles: Vec<_> = futs.map(tokio::spawn).collect();
    let mut out = Vec::with_capacity(handles.len());
    for h in handles {
        out.push(h.await.expect("task does not panic"));
    }
    out
}

pub async fn oneway_requests_get_no_response<T: Transport>(t: T, addr: String, _c: Arc<Control>) {
    // Raw socket: a oneway frame then a normal request; the first frame back
    // must answer the normal request.
    let Socket {
        reader, mut writer, ..
    } = t.connect(&addr).await.expect("connect");
    let limits = FrameLimits::default();
    let mut out = BytesMut::new();
    let mut oneway = RemotingCommand::request(RECORD_ONEWAY);
    oneway.mark_oneway();
    oneway.opaque = 1;
    frame::encode(&oneway, &limits, &mut out).expect("encode");
    let mut count = RemotingCommand::request(COUNT_ONEWAYS);
    count.opaque = 2;
    frame::encode(&count, &limits, &mut out).expect("encode");
    writer.write_all(&out).await.expect("write");
    let mut frames = FrameReader::new(reader, limits);
    let first = tokio::time::timeout(CALL, frames.next())
        .await
        .expect("answered")
        .expect("valid")
        .expect("frame");
    assert_eq!(first.opaque, 2, "only the normal request is answered");
    assert_eq!(first.remark.as_deref(), Some("1"));
    // And through the client API.
    let client = RpcClient::new(t, RpcConfig::default());
    client
        .invoke_oneway(&addr, RemotingCommand::request(RECORD_ONEWAY), CALL)
        .await
        .expect("sent");
    let deadline = Instant::now() + CALL;
    loop {
        let resp = client
            .invoke(&addr, RemotingCommand::request(COUNT_ONEWAYS), CALL)
            .await
            .expect("count");
        if resp.remark.as_deref() == Some("2") {
            break;
        }
        assert!(Instant::now() < deadline, "oneway never arrived");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

pub async fn unknown_code_is_answered_not_supported<T: Transport>(
    t: T,
    addr: String,
    _c: Arc<Control>,
) {
    let client = RpcClient::new(t, RpcConfig::default());
    let resp = client
        .invoke(&addr, RemotingCommand::request(4242), CALL)
        .await
        .expect("answered");
    assert_eq!(resp.code, response_code::REQUEST_CODE_NOT_SUPPORTED);
    assert_eq!(
        resp.remark.as_deref(),
        Some(" request type 4242 not supported")
    );
}

pub async fn held_response_times_out_and_next_call_reconnects<T: Transport>(
    t: T,
    addr: String,
    _c: Arc<Control>,
) {
    let client = RpcClient::new(t, RpcConfig::default());
    echo_ok(&client, &addr, "before").await.expect("first call");
    let first = client.connection(&addr).await.expect("connected");
    let started = Instant::now();
    let err = client
        .invoke(
            &addr,
            RemotingCommand::request(NEVER_ANSWER),
            Duration::from_millis(300),
        )
        .await
        .expect_err("held response must time out");
    assert!(
        matches!(
            err,
            Error::Timeout {
                code: NEVER_ANSWER,
                ..
            }
        ),
        "{err}"
    );
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(300) && waited < Duration::from_millis(400),
        "{waited:?}"
    );
    assert!(first.is_closed(), "a timed-out connection is replaced");
    echo_ok(&client, &addr, "after").await.expect("reconnected");
    assert_ne!(
        client.connection(&addr).await.expect("connected").id(),
        first.id()
    );
}

pub async fn reconnects_after_server_closes_connection<T: Transport>(
    t: T,
    addr: String,
    _c: Arc<Control>,
) {
    let client = RpcClient::new(t, RpcConfig::default());
    let first = client.connection(&addr).await.expect("connected");
    let err = client
        .invoke(&addr, RemotingCommand::request(CLOSE_MY_CONNECTION), CALL)
        .await
        .expect_err("the server closed instead of answering");
    assert!(matches!(err, Error::ConnectionClosed { .. }), "{err}");
    first.closed().await;
    echo_ok(&client, &addr, "again").await.expect("re-dialled");
}

pub async fn server_initiated_requests_are_answered_by_the_client<T: Transport>(
    t: T,
    addr: String,
    _c: Arc<Control>,
) {
    let checks = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&checks);
    let handler = HandlerTable::new()
        .with(
            request_code::NOTIFY_CONSUMER_IDS_CHANGED,
            |_ctx: RequestContext, req: RemotingCommand| async move {
                let header: NotifyConsumerIdsChangedRequestHeader = req.header().ok()?;
                Some(ok(format!("rebalanced {}", header.consumer_group)))
            },
        )
        .with(
            request_code::CHECK_TRANSACTION_STATE,
            move |_ctx: RequestContext, req: RemotingCommand| {
                assert!(req.is_oneway());
                let header: CheckTransactionStateRequestHeader =
                    req.header().expect("typed header");
                assert_eq!(header.commit_log_offset, 77);
                seen.fetch_add(1, Ordering::SeqCst);
                async { None }
            },
        );
    let client = RpcClient::with_handler(t, RpcConfig::default(), handler);
    let resp = client
        .invoke(&addr, RemotingCommand::request(CALL_CLIENT_BACK), CALL)
        .await
        .expect("answered");
    assert_eq!(resp.remark.as_deref(), Some("rebalanced g1"));
    let deadline = Instant::now() + CALL;
    while checks.load(Ordering::SeqCst) == 0 {
        assert!(Instant::now() < deadline, "oneway check never arrived");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn shut_down(control: &Control, grace: Duration) {
    *control.grace.lock().expect("not poisoned") = grace;
    control.shutdown.notify_one();
}

pub async fn shutdown_finishes_in_flight_requests<T: Transport>(
    t: T,
    addr: String,
    c: Arc<Control>,
) {
    let client = RpcClient::new(t, RpcConfig::default());
    echo_ok(&client, &addr, "warm").await.expect("connected");
    let calls: Vec<_> = (0..4)
        .map(|_| {
            let client = client.clone();
            let addr = addr.clone();
            tokio::spawn(async move {
                client
                    .invoke(&addr, RemotingCommand::request(SLOW), CALL)
                    .await
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(SLOW_MS / 2)).await;
    shut_down(&c, Duration::from_secs(5));
    for call in calls {
        let resp = call
            .await
            .expect("no panic")
            .expect("in-flight request finishes");
        assert_eq!(resp.remark.as_deref(), Some("slow done"));
    }
    c.done.notified().await;
    let err = client
        .invoke(&addr, echo("late"), CALL)
        .await
        .expect_err("server is gone");
    assert!(
        matches!(err, Error::Connect { .. } | Error::ConnectionClosed { .. }),
        "{err}"
    );
}

pub async fn shutdown_fails_requests_that_never_finish<T: Transport>(
    t: T,
    addr: String,
    c: Arc<Control>,
) {
    let client = RpcClient::new(t, RpcConfig::default());
    echo_ok(&client, &addr, "warm").await.expect("connected");
    let stuck = {
        let client = client.clone();
        let addr = addr.clone();
        tokio::spawn(async move {
            client
                .invoke(
                    &addr,
                    RemotingCommand::request(NEVER_ANSWER),
                    Duration::from_secs(30),
                )
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = Instant::now();
    shut_down(&c, Duration::from_millis(200));
    let err = stuck.await.expect("no panic").expect_err("cannot finish");
    assert!(matches!(err, Error::ConnectionClosed { .. }), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "failed promptly, not by the 30 s timeout"
    );
}

pub async fn in_flight_bound_rejects_excess_calls<T: Transport>(
    t: T,
    addr: String,
    _c: Arc<Control>,
) {
    let config = RpcConfig {
        in_flight_max: 2,
        ..RpcConfig::default()
    };
    let client = RpcClient::new(t, config);
    let connection = client.connection(&addr).await.expect("connected");
    let held: Vec<_> = (0..2)
        .map(|_| {
            let connection = connection.clone();
            tokio::spawn(async move {
                connection
                    .invoke(RemotingCommand::request(SLOW), CALL)
                    .await
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(SLOW_MS / 3)).await;
    let err = client
        .invoke(&addr, echo("third"), CALL)
        .await
        .expect_err("bound reached");
    assert!(
        matches!(err, Error::TooManyInFlight { max: 2, .. }),
        "{err}"
    );
    for call in held {
        call.await
            .expect("no panic")
            .expect("bounded calls still complete");
    }
    echo_ok(&client, &addr, "room again")
        .await
        .expect("permits released");
}

pub async fn malformed_frame_closes_only_that_connection<T: Transport>(
    t: T,
    addr: String,
    _c: Arc<Control>,
) {
    let client = RpcClient::new(t.clone(), RpcConfig::default());
    echo_ok(&client, &addr, "bystander")
        .await
        .expect("connected");
    let Socket {
        reader, mut writer, ..
    } = t.connect(&addr).await.expect("connect");
    // A frame claiming 1 GiB: rejected before allocation, connection closed.
    writer
        .write_all(&(1i32 << 30).to_be_bytes())
        .await
        .expect("write");
    writer.write_all(b"garbage!").await.expect("write");
    let mut frames = FrameReader::new(reader, FrameLimits::default());
    let end = tokio::time::timeout(CALL, frames.next())
        .await
        .expect("closed promptly");
    assert!(
        matches!(end, Ok(None) | Err(_)),
        "server closed the bad connection"
    );
    echo_ok(&client, &addr, "bystander still served")
        .await
        .expect("other connection unaffected");
}

pub async fn held_link_times_out_then_recovers_after_release<T: Transport>(
    t: T,
    addr: String,
    _c: Arc<Control>,
) {
    let client = RpcClient::new(t, RpcConfig::default());
    echo_ok(&client, &addr, "before").await.expect("first call");
    turmoil::hold("client", "server");
    let err = client
        .invoke(&addr, echo("held"), Duration::from_millis(500))
        .await
        .expect_err("held");
    assert!(matches!(err, Error::Timeout { .. }), "{err}");
    turmoil::release("client", "server");
    echo_ok(&client, &addr, "after").await.expect("recovered");
}

pub async fn reconnects_after_partition_heals<T: Transport>(t: T, addr: String, _c: Arc<Control>) {
    let client = RpcClient::new(t, RpcConfig::default());
    echo_ok(&client, &addr, "before").await.expect("first call");
    turmoil::partition("client", "server");
    let err = client
        .invoke(&addr, echo("cut"), Duration::from_millis(500))
        .await
        .expect_err("partitioned");
    assert!(matches!(err, Error::Timeout { .. }), "{err}");
    let err = client
        .invoke(&addr, echo("cut"), Duration::from_millis(500))
        .await
        .expect_err("still partitioned");
    assert!(
        matches!(err, Error::Connect { .. }),
        "partitioned connects fail at once: {err}"
    );
    turmoil::repair("client", "server");
    echo_ok(&client, &addr, "healed")
        .await
        .expect("reconnected after heal");
}

pub async fn large_bodies_round_trip_uncopied<T: Transport>(t: T, addr: String, _c: Arc<Control>) {
    let client = RpcClient::new(t, RpcConfig::default());
    let body: Vec<u8> = (0..4 * 1024 * 1024 + 7)
        .map(|i: u32| (i % 251) as u8)
        .collect();
    let small = echo("small-before");
    let big = RemotingCommand::request(ECHO).with_body(body.clone());
    let (a, b) = tokio::join!(
        client.invoke(&addr, small, CALL),
        client.invoke(&addr, big, CALL)
    );
    assert_eq!(a.expect("small").remark.as_deref(), Some("small-before"));
    assert_eq!(b.expect("big").body, body);
}
