//! The one request shape (`sluice_node::dispatch`): a handler per code in a
//! `Routes` table, refusals and `?` turned into responses in one place,
//! unknown codes answered as Apache does.

#![allow(clippy::unused_async)] // handlers have the one async shape, awaiting or not

use std::sync::Arc;
use std::time::Duration;

use sluice_net::header::QueueRequestHeader;
use sluice_net::remoting::response_code;
use sluice_net::{
    RemotingCommand, RequestContext, RpcClient, RpcConfig, RpcServer, TokioTransport,
};
use sluice_node::dispatch::{Observer, Refusal, Reply, Route, Routes};

struct Counter {
    calls: std::sync::atomic::AtomicU32,
}

/// Reads a queue header with `?`; answers its queue id in the remark.
async fn read_header(s: &Counter, _: &RequestContext, req: &RemotingCommand) -> Reply {
    s.calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let h: QueueRequestHeader = req.header()?;
    Ok(RemotingCommand::response(
        response_code::SUCCESS,
        format!("queue {}", h.queue_id),
    ))
}

/// Refuses with its own code.
async fn refuse(_: &Counter, _: &RequestContext, _: &RemotingCommand) -> Reply {
    Err(Refusal::new(response_code::NO_PERMISSION, "not yours"))
}

/// A store error converted by `?`.
async fn store_full(_: &Counter, _: &RequestContext, _: &RemotingCommand) -> Reply {
    Err(sluice_core::Error::DiskFull {
        reason: "95% used".into(),
    })?
}

async fn serve() -> (RpcServer, Arc<Counter>) {
    let state = Arc::new(Counter {
        calls: std::sync::atomic::AtomicU32::new(0),
    });
    let table: &[(i32, Route<Counter>)] = &[
        (1, |s, c, r| Box::pin(read_header(s, c, r))),
        (2, |s, c, r| Box::pin(refuse(s, c, r))),
        (3, |s, c, r| Box::pin(store_full(s, c, r))),
    ];
    let routes = Routes::new("test", Arc::clone(&state), table);
    assert_eq!(routes.codes().collect::<Vec<_>>(), vec![1, 2, 3]);
    let server = RpcServer::bind(&TokioTransport, "127.0.0.1:0", RpcConfig::default(), routes)
        .await
        .expect("bind");
    (server, state)
}

async fn call(
    client: &RpcClient<TokioTransport>,
    addr: &str,
    req: RemotingCommand,
) -> RemotingCommand {
    client
        .invoke(addr, req, Duration::from_secs(2))
        .await
        .expect("answered")
}

#[tokio::test]
async fn handlers_answer_refusals_and_bad_headers_in_one_place() {
    let (server, state) = serve().await;
    let addr = server.local_addr().to_string();
    let client = RpcClient::new(TokioTransport, RpcConfig::default());

    let good = RemotingCommand::request_with_header(
        1,
        &QueueRequestHeader {
            topic: "T".into(),
            queue_id: 3,
        },
    );
    let ok = call(&client, &addr, good).await;
    assert_eq!(ok.code, response_code::SUCCESS);
    assert_eq!(ok.remark.as_deref(), Some("queue 3"));

    // A missing header field: `?` in the handler, SYSTEM_ERROR naming it.
    let bad = call(&client, &addr, RemotingCommand::request(1)).await;
    assert_eq!(bad.code, response_code::SYSTEM_ERROR);
    let remark = bad.remark.unwrap_or_default();
    assert!(remark.contains("bad request"), "{remark}");

    let refused = call(&client, &addr, RemotingCommand::request(2)).await;
    assert_eq!(refused.code, response_code::NO_PERMISSION);
    assert_eq!(refused.remark.as_deref(), Some("not yours"));

    let full = call(&client, &addr, RemotingCommand::request(3)).await;
    assert_eq!(full.code, response_code::SERVICE_NOT_AVAILABLE);
    assert_eq!(state.calls.load(std::sync::atomic::Ordering::Relaxed), 2);
}

#[tokio::test]
async fn an_unknown_code_is_answered_as_apache_answers_it() {
    let (server, state) = serve().await;
    let addr = server.local_addr().to_string();
    let client = RpcClient::new(TokioTransport, RpcConfig::default());
    let answer = call(&client, &addr, RemotingCommand::request(4242)).await;
    assert_eq!(answer.code, response_code::REQUEST_CODE_NOT_SUPPORTED);
    assert_eq!(
        answer.remark.as_deref(),
        Some(" request type 4242 not supported")
    );
    assert_eq!(state.calls.load(std::sync::atomic::Ordering::Relaxed), 0);
}

/// A server state with a clock that moves 5 ms per reading and a log of
/// what the table's observer was told.
#[derive(Default)]
struct Observed {
    ticks: std::sync::atomic::AtomicU64,
    seen: std::sync::Mutex<Vec<(i32, i32, Duration)>>,
}

async fn ok(_: &Observed, _: &RequestContext, _: &RemotingCommand) -> Reply {
    Ok(RemotingCommand::success())
}

#[tokio::test]
async fn an_observed_table_reports_every_answer_with_its_latency() {
    let state = Arc::new(Observed::default());
    let table: &[(i32, Route<Observed>)] = &[(7, |s, c, r| Box::pin(ok(s, c, r)))];
    let observer = Observer {
        now: |s: &Observed| {
            let n = s.ticks.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Duration::from_millis(5 * n)
        },
        record: |s: &Observed, code, response, elapsed| {
            s.seen
                .lock()
                .expect("not poisoned")
                .push((code, response, elapsed));
        },
    };
    let routes = Routes::observed("test", Arc::clone(&state), table, observer);
    let server = RpcServer::bind(&TokioTransport, "127.0.0.1:0", RpcConfig::default(), routes)
        .await
        .expect("bind");
    let addr = server.local_addr().to_string();
    let client = RpcClient::new(TokioTransport, RpcConfig::default());
    call(&client, &addr, RemotingCommand::request(7)).await;
    call(&client, &addr, RemotingCommand::request(8)).await;
    let seen = state.seen.lock().expect("not poisoned").clone();
    let five = Duration::from_millis(5);
    assert_eq!(
        seen,
        vec![
            (7, response_code::SUCCESS, five),
            (8, response_code::REQUEST_CODE_NOT_SUPPORTED, five),
        ]
    );
}
