//! Two connected in-process ends of one remoting connection, for a server
//! that fronts the broker with another protocol (the RocketMQ 5 gRPC
//! endpoint): the broker sees one ordinary connection per front-end
//! session, so its registries, callbacks (`CHECK_TRANSACTION_STATE`,
//! `NOTIFY_CONSUMER_IDS_CHANGED`) and close hooks work unchanged.

use std::net::SocketAddr;
use std::sync::Arc;

use super::connection::ConnectionHandle;
use super::handler::Handler;
use super::RpcConfig;
use crate::transport::Socket;

/// One end of a [`local_pair`]: the address the other end is told it
/// talks to, and the handler of the requests that arrive at this end.
pub struct LocalEnd {
    /// The peer address the other end's handlers see for this end.
    pub addr: SocketAddr,
    /// Serves requests the other end sends.
    pub handler: Arc<dyn Handler>,
}

/// Connects `server` and `client` through an in-memory pipe and returns
/// their connection handles `(server side, client side)`. The server side
/// is what `server.handler` sees as `RequestContext::connection` when the
/// client side invokes it, and calls made on it reach `client.handler`.
/// Neither side closes for idleness; closing either closes both.
pub fn local_pair(
    config: &RpcConfig,
    server: LocalEnd,
    client: LocalEnd,
) -> (ConnectionHandle, ConnectionHandle) {
    let config = RpcConfig {
        idle_timeout: None,
        ..config.clone()
    };
    let (ours, theirs) = tokio::io::duplex(256 * 1024);
    let (server_reader, server_writer) = tokio::io::split(ours);
    let (client_reader, client_writer) = tokio::io::split(theirs);
    let server_side = ConnectionHandle::spawn(
        Socket {
            reader: server_reader,
            writer: server_writer,
            peer_addr: client.addr,
        },
        server.handler,
        &config,
        None,
    );
    let client_side = ConnectionHandle::spawn(
        Socket {
            reader: client_reader,
            writer: client_writer,
            peer_addr: server.addr,
        },
        client.handler,
        &config,
        None,
    );
    (server_side, client_side)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::remoting::{request_code, response_code};
    use crate::{HandlerTable, RemotingCommand, RequestContext};

    fn answering(code: i32, remark: &'static str) -> Arc<dyn Handler> {
        Arc::new(HandlerTable::new().with(
            code,
            move |ctx: RequestContext, _req: RemotingCommand| async move {
                let who = ctx.peer_addr().to_string();
                Some(RemotingCommand::response(
                    response_code::SUCCESS,
                    format!("{remark} {who}"),
                ))
            },
        ))
    }

    #[tokio::test]
    async fn each_end_reaches_the_others_handler_and_sees_its_address() {
        let server_addr: SocketAddr = "127.0.0.1:10911".parse().expect("addr");
        let client_addr: SocketAddr = "10.0.0.7:5000".parse().expect("addr");
        let (server_side, client_side) = local_pair(
            &RpcConfig::default(),
            LocalEnd {
                addr: server_addr,
                handler: answering(request_code::HEART_BEAT, "server saw"),
            },
            LocalEnd {
                addr: client_addr,
                handler: answering(request_code::CHECK_TRANSACTION_STATE, "client saw"),
            },
        );
        assert_eq!(server_side.peer_addr(), client_addr);
        assert_eq!(client_side.peer_addr(), server_addr);
        let up = client_side
            .invoke(
                RemotingCommand::request(request_code::HEART_BEAT),
                Duration::from_secs(3),
            )
            .await
            .expect("client to server");
        assert_eq!(up.remark.as_deref(), Some("server saw 10.0.0.7:5000"));
        let down = server_side
            .invoke(
                RemotingCommand::request(request_code::CHECK_TRANSACTION_STATE),
                Duration::from_secs(3),
            )
            .await
            .expect("server to client");
        assert_eq!(down.remark.as_deref(), Some("client saw 127.0.0.1:10911"));
        client_side.close();
        tokio::time::timeout(Duration::from_secs(3), server_side.closed())
            .await
            .expect("closing one end closes the other");
    }
}
