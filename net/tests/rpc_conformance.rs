//! One RPC conformance suite, run over tokio on loopback and over turmoil:
//! request/response, oneway, held responses time out, reconnects, requests
//! initiated by the server, and shutdown with requests in flight.

mod rpc_suite;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use rpc_suite::{server_table, Control, ServerState};
use sluice_net::{RpcConfig, RpcServer, TokioTransport, TurmoilTransport};

// ---------- tokio ----------

async fn on_tokio<F, Fut>(scenario: F)
where
    F: FnOnce(TokioTransport, String, Arc<Control>) -> Fut,
    Fut: Future<Output = ()>,
{
    let control = Arc::new(Control::default());
    let state = Arc::new(ServerState::default());
    let server = RpcServer::bind(
        &TokioTransport,
        "127.0.0.1:0",
        RpcConfig::default(),
        server_table(&state),
    )
    .await
    .expect("bind loopback");
    let addr = server.local_addr().to_string();
    let watcher = tokio::spawn(rpc_suite::serve_until_shutdown(
        server,
        Arc::clone(&control),
    ));
    scenario(TokioTransport, addr, control).await;
    watcher.abort();
}

macro_rules! tokio_cases {
    ($($name:ident),* $(,)?) => {
        mod over_tokio {
            use super::*;
            $(
                #[tokio::test]
                async fn $name() {
                    on_tokio(rpc_suite::$name).await;
                }
            )*
        }
    };
}

// ---------- turmoil ----------

const SERVER: &str = "server";
const CLIENT: &str = "client";
const PORT: u16 = 9876;

fn on_turmoil<F, Fut>(seed: u64, scenario: F)
where
    F: FnOnce(TurmoilTransport, String, Arc<Control>) -> Fut + 'static,
    Fut: Future<Output = ()> + 'static,
{
    let mut sim = turmoil::Builder::new()
        .rng_seed(seed)
        .simulation_duration(Duration::from_secs(120))
        .build();
    let control = Arc::new(Control::default());
    let host_control = Arc::clone(&control);
    sim.host(SERVER, move || {
        let control = Arc::clone(&host_control);
        async move {
            let state = Arc::new(ServerState::default());
            let server = RpcServer::bind(
                &TurmoilTransport,
                &format!("0.0.0.0:{PORT}"),
                RpcConfig::default(),
                server_table(&state),
            )
            .await?;
            rpc_suite::serve_until_shutdown(server, control).await;
            std::future::pending::<()>().await;
            Ok(())
        }
    });
    sim.client(CLIENT, async move {
        scenario(TurmoilTransport, format!("{SERVER}:{PORT}"), control).await;
        Ok(())
    });
    sim.run().expect("simulation succeeds");
}

macro_rules! turmoil_cases {
    ($($name:ident),* $(,)?) => {
        mod over_turmoil {
            use super::*;
            $(
                #[test]
                fn $name() {
                    for seed in [1, 2, 3] {
                        on_turmoil(seed, rpc_suite::$name);
                    }
                }
            )*
        }
    };
}

tokio_cases!(
    request_response_correlates_concurrent_calls,
    oneway_requests_get_no_response,
    unknown_code_is_answered_not_supported,
    held_response_times_out_and_next_call_reconnects,
    reconnects_after_server_closes_connection,
    server_initiated_requests_are_answered_by_the_client,
    shutdown_finishes_in_flight_requests,
    shutdown_fails_requests_that_never_finish,
    in_flight_bound_rejects_excess_calls,
    malformed_frame_closes_only_that_connection,
    large_bodies_round_trip_uncopied,
);

turmoil_cases!(
    request_response_correlates_concurrent_calls,
    oneway_requests_get_no_response,
    unknown_code_is_answered_not_supported,
    held_response_times_out_and_next_call_reconnects,
    reconnects_after_server_closes_connection,
    server_initiated_requests_are_answered_by_the_client,
    shutdown_finishes_in_flight_requests,
    shutdown_fails_requests_that_never_finish,
    in_flight_bound_rejects_excess_calls,
    malformed_frame_closes_only_that_connection,
    large_bodies_round_trip_uncopied,
    held_link_times_out_then_recovers_after_release,
    reconnects_after_partition_heals,
);

/// Replays one seed twice and compares the simulated times at which every
/// call completed: the RPC layer adds no nondeterminism of its own.
#[test]
fn turmoil_runs_are_deterministic_per_seed() {
    fn trace(seed: u64) -> Vec<(Duration, String)> {
        let events = Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = Arc::clone(&events);
        on_turmoil(seed, move |t, addr, _control| async move {
            let client = sluice_net::RpcClient::new(t, RpcConfig::default());
            let record = |what: String| {
                let at = turmoil::sim_elapsed().unwrap_or_default();
                sink.lock().expect("not poisoned").push((at, what));
            };
            for i in 0..20 {
                let mut req = sluice_net::RemotingCommand::request(rpc_suite::ECHO);
                req.ext_fields.insert("x", i.to_string());
                let outcome = client.invoke(&addr, req, Duration::from_millis(150)).await;
                record(format!("{i}: {:?}", outcome.map(|r| r.remark)));
                if i == 10 {
                    turmoil::partition(CLIENT, SERVER);
                }
                if i == 13 {
                    turmoil::repair(CLIENT, SERVER);
                }
            }
        });
        let out = events.lock().expect("not poisoned").clone();
        out
    }
    let first = trace(42);
    assert_eq!(first.len(), 20);
    assert_eq!(first, trace(42));
    assert_ne!(first, trace(43), "message latencies depend on the seed");
}
