//! Idle connections are closed when `RpcConfig::idle_timeout` is set, and
//! kept while traffic flows.

use std::time::Duration;

use sluice_net::remoting::response_code;
use sluice_net::{
    HandlerTable, RemotingCommand, RequestContext, RpcClient, RpcConfig, RpcServer, TokioTransport,
};

#[tokio::test]
async fn server_closes_connections_idle_past_the_timeout() {
    let config = RpcConfig {
        idle_timeout: Some(Duration::from_millis(300)),
        ..RpcConfig::default()
    };
    let table = HandlerTable::new().with(1, |_ctx: RequestContext, _req: RemotingCommand| async {
        Some(RemotingCommand::success())
    });
    let server = RpcServer::bind(&TokioTransport, "127.0.0.1:0", config, table)
        .await
        .expect("bind");
    let addr = server.local_addr().to_string();
    let client = RpcClient::new(TokioTransport, RpcConfig::default());
    let connection = client.connection(&addr).await.expect("connect");
    // Traffic every 100 ms keeps the connection open past the idle timeout.
    for _ in 0..6 {
        let resp = client
            .invoke(&addr, RemotingCommand::request(1), Duration::from_secs(1))
            .await
            .expect("answered");
        assert_eq!(resp.code, response_code::SUCCESS);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(!connection.is_closed());
    // Silence: the server closes it.
    tokio::time::timeout(Duration::from_secs(2), connection.closed())
        .await
        .expect("closed by the server");
    assert!(server.connections().is_empty());
}
