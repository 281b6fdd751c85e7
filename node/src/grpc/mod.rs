//! The RocketMQ 5 endpoint: `apache.rocketmq.v2.MessagingService` over
//! gRPC, served by every broker beside its remoting port, over the same
//! store — no separate proxy.
//!
//! Each 5.x client (by its `x-mq-client-id`) gets a [`session`]: one
//! in-process remoting connection to this broker, so its sends, heartbeats
//! and transaction ends run through the very handlers 4.x clients use
//! (validation, dedupe, timers, transactions, stats) and the broker calls
//! it back (transaction check-backs) as it would a 4.x producer; the
//! session turns those calls into Telemetry commands. Consumption is POP
//! (see `broker::pop`): server-side leases and per-message acks.
//!
//! Answers follow Apache's proxy: every unary response carries a `status`
//! (errors are statuses, not gRPC errors), a receive streams its status
//! first, then the messages, then a delivery timestamp.

mod auth;
mod consume;
mod convert;
mod produce;
pub mod proto;
mod route;
mod session;
mod telemetry;

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;

use sluice_core::disk::Disk;
use sluice_core::Clock;
use sluice_net::Transport;
use tokio_stream::Stream;
use tonic::{Request, Response, Status};

use crate::broker::Broker;
use proto::messaging_service_server::{MessagingService, MessagingServiceServer};
use proto::Code;

pub use session::Sessions;

/// Where the endpoint listens unless configured: the broker's port + 8
/// (`grpc_listen`); standalone uses [`STANDALONE_GRPC_LISTEN`].
pub const GRPC_PORT_OFFSET: u16 = 8;
/// Standalone's 5.x endpoint, where Apache's proxy listens by default.
pub const STANDALONE_GRPC_LISTEN: &str = "127.0.0.1:8081";

/// The gRPC messaging service of one broker.
pub struct Messaging<D: Disk, C: Clock, T: Transport> {
    broker: Arc<Broker<D, C>>,
    sessions: Arc<Sessions<D, C>>,
    transport: T,
    /// The address this endpoint listens on (for routes to this broker).
    local: SocketAddr,
}

/// The default endpoint beside a broker listening on `broker_listen`:
/// the same host, the port + [`GRPC_PORT_OFFSET`].
pub fn default_listen(broker_listen: &str) -> String {
    match broker_listen.rsplit_once(':') {
        Some((host, port)) => match port.parse::<u16>() {
            Ok(0) => format!("{host}:0"),
            Ok(p) => format!("{host}:{}", p.saturating_add(GRPC_PORT_OFFSET)),
            Err(_) => broker_listen.to_owned(),
        },
        None => broker_listen.to_owned(),
    }
}

/// A `Status` with `code` and `message`.
pub(crate) fn status(code: Code, message: impl Into<String>) -> proto::Status {
    proto::Status {
        code: code as i32,
        message: message.into(),
    }
}

/// The OK status.
pub(crate) fn ok() -> proto::Status {
    status(Code::Ok, "OK")
}

/// Serves the 5.x endpoint of `broker` on `listener` until `shutdown`.
pub async fn serve<D: Disk, C: Clock, T: Transport>(
    broker: Arc<Broker<D, C>>,
    transport: T,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> crate::error::Result<()> {
    let local = listener
        .local_addr()
        .map_err(|e| crate::error::Error::Config(format!("gRPC listener: {e}")))?;
    let service = Messaging {
        sessions: Arc::new(Sessions::new(Arc::clone(&broker))),
        broker,
        transport,
        local,
    };
    tracing::info!(%local, "RocketMQ 5 gRPC endpoint serving");
    let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
    tonic::transport::Server::builder()
        .add_service(MessagingServiceServer::new(service))
        .serve_with_incoming_shutdown(incoming, shutdown)
        .await
        .map_err(|e| crate::error::Error::Config(format!("gRPC endpoint: {e}")))
}

/// Binds the endpoint on `listen` and serves it in the background until
/// `shutdown`; the bound address, or `None` where it must stay closed:
/// it serves plain TCP, so with the remoting ports' TLS enforcing it
/// does not open (a warning says so).
pub async fn start<D: Disk, C: Clock>(
    broker: &Arc<Broker<D, C>>,
    listen: &str,
    transport: &sluice_net::TlsTransport,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> crate::error::Result<Option<SocketAddr>> {
    if transport.mode() == sluice_net::TlsMode::Enforcing {
        tracing::warn!(
            listen,
            "the RocketMQ 5 gRPC endpoint serves plain TCP only and [tls] mode is enforcing: \
             not serving it"
        );
        return Ok(None);
    }
    let listener = match tokio::net::TcpListener::bind(listen).await {
        Ok(l) => l,
        Err(e) if broker.config().grpc_listen_defaulted => {
            tracing::warn!(
                listen,
                error = %e,
                "the RocketMQ 5 gRPC endpoint's default port is not free: not serving it \
                 (set grpc_listen, or \"off\")"
            );
            return Ok(None);
        }
        Err(e) => {
            return Err(crate::error::Error::Config(format!(
                "gRPC endpoint {listen}: {e}"
            )));
        }
    };
    let addr = listener
        .local_addr()
        .map_err(|e| crate::error::Error::Config(format!("gRPC endpoint {listen}: {e}")))?;
    let (broker, transport) = (Arc::clone(broker), transport.clone());
    tokio::spawn(async move {
        if let Err(e) = serve(broker, transport, listener, shutdown).await {
            tracing::error!(error = %e, "gRPC endpoint stopped");
        }
    });
    Ok(Some(addr))
}

type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

#[tonic::async_trait]
impl<D: Disk, C: Clock, T: Transport> MessagingService for Messaging<D, C, T> {
    async fn query_route(
        &self,
        request: Request<proto::QueryRouteRequest>,
    ) -> Result<Response<proto::QueryRouteResponse>, Status> {
        let _who = self.admit(&request)?;
        Ok(Response::new(
            route::query_route(self, request.get_ref()).await,
        ))
    }

    async fn heartbeat(
        &self,
        request: Request<proto::HeartbeatRequest>,
    ) -> Result<Response<proto::HeartbeatResponse>, Status> {
        let who = self.admit(&request)?;
        let session = self.sessions.get(&who);
        Ok(Response::new(proto::HeartbeatResponse {
            status: Some(self.sessions.heartbeat(&session, request.get_ref()).await),
        }))
    }

    async fn send_message(
        &self,
        request: Request<proto::SendMessageRequest>,
    ) -> Result<Response<proto::SendMessageResponse>, Status> {
        let who = self.admit(&request)?;
        let session = self.sessions.get(&who);
        Ok(Response::new(
            produce::send(self, &session, &who, request.into_inner()).await,
        ))
    }

    async fn query_assignment(
        &self,
        request: Request<proto::QueryAssignmentRequest>,
    ) -> Result<Response<proto::QueryAssignmentResponse>, Status> {
        let _who = self.admit(&request)?;
        Ok(Response::new(
            route::query_assignment(self, request.get_ref()).await,
        ))
    }

    type ReceiveMessageStream = BoxStream<proto::ReceiveMessageResponse>;

    async fn receive_message(
        &self,
        request: Request<proto::ReceiveMessageRequest>,
    ) -> Result<Response<Self::ReceiveMessageStream>, Status> {
        let who = self.admit(&request)?;
        let deadline = request_deadline(&request);
        let responses = consume::receive(self, &who, request.into_inner(), deadline).await;
        Ok(Response::new(Box::pin(tokio_stream::iter(
            responses.into_iter().map(Ok),
        ))))
    }

    async fn ack_message(
        &self,
        request: Request<proto::AckMessageRequest>,
    ) -> Result<Response<proto::AckMessageResponse>, Status> {
        let who = self.admit(&request)?;
        Ok(Response::new(
            consume::ack(self, &who, request.get_ref()).await,
        ))
    }

    async fn forward_message_to_dead_letter_queue(
        &self,
        request: Request<proto::ForwardMessageToDeadLetterQueueRequest>,
    ) -> Result<Response<proto::ForwardMessageToDeadLetterQueueResponse>, Status> {
        let who = self.admit(&request)?;
        Ok(Response::new(
            consume::forward_to_dead_letter(self, &who, request.get_ref()).await,
        ))
    }

    type PullMessageStream = BoxStream<proto::PullMessageResponse>;

    async fn pull_message(
        &self,
        _request: Request<proto::PullMessageRequest>,
    ) -> Result<Response<Self::PullMessageStream>, Status> {
        let answer = proto::PullMessageResponse {
            content: Some(proto::pull_message_response::Content::Status(unsupported(
                "PullMessage",
            ))),
        };
        Ok(Response::new(Box::pin(tokio_stream::once(Ok(answer)))))
    }

    async fn update_offset(
        &self,
        _request: Request<proto::UpdateOffsetRequest>,
    ) -> Result<Response<proto::UpdateOffsetResponse>, Status> {
        Ok(Response::new(proto::UpdateOffsetResponse {
            status: Some(unsupported("UpdateOffset")),
        }))
    }

    async fn get_offset(
        &self,
        _request: Request<proto::GetOffsetRequest>,
    ) -> Result<Response<proto::GetOffsetResponse>, Status> {
        Ok(Response::new(proto::GetOffsetResponse {
            status: Some(unsupported("GetOffset")),
            offset: 0,
        }))
    }

    async fn query_offset(
        &self,
        _request: Request<proto::QueryOffsetRequest>,
    ) -> Result<Response<proto::QueryOffsetResponse>, Status> {
        Ok(Response::new(proto::QueryOffsetResponse {
            status: Some(unsupported("QueryOffset")),
            offset: 0,
        }))
    }

    async fn end_transaction(
        &self,
        request: Request<proto::EndTransactionRequest>,
    ) -> Result<Response<proto::EndTransactionResponse>, Status> {
        let who = self.admit(&request)?;
        let session = self.sessions.get(&who);
        Ok(Response::new(proto::EndTransactionResponse {
            status: Some(produce::end_transaction(self, &session, &who, request.get_ref()).await),
        }))
    }

    type TelemetryStream = BoxStream<proto::TelemetryCommand>;

    async fn telemetry(
        &self,
        request: Request<tonic::Streaming<proto::TelemetryCommand>>,
    ) -> Result<Response<Self::TelemetryStream>, Status> {
        let who = self.admit(&request)?;
        let session = self.sessions.get(&who);
        let commands = telemetry::open(self, session, request.into_inner());
        Ok(Response::new(commands))
    }

    async fn notify_client_termination(
        &self,
        request: Request<proto::NotifyClientTerminationRequest>,
    ) -> Result<Response<proto::NotifyClientTerminationResponse>, Status> {
        let who = self.admit(&request)?;
        self.sessions.end(&who.client_id);
        Ok(Response::new(proto::NotifyClientTerminationResponse {
            status: Some(ok()),
        }))
    }

    async fn change_invisible_duration(
        &self,
        request: Request<proto::ChangeInvisibleDurationRequest>,
    ) -> Result<Response<proto::ChangeInvisibleDurationResponse>, Status> {
        let who = self.admit(&request)?;
        Ok(Response::new(
            consume::change_invisible_duration(self, &who, request.get_ref()).await,
        ))
    }

    async fn recall_message(
        &self,
        _request: Request<proto::RecallMessageRequest>,
    ) -> Result<Response<proto::RecallMessageResponse>, Status> {
        Ok(Response::new(proto::RecallMessageResponse {
            status: Some(unsupported("RecallMessage")),
            message_id: String::new(),
        }))
    }

    async fn sync_lite_subscription(
        &self,
        _request: Request<proto::SyncLiteSubscriptionRequest>,
    ) -> Result<Response<proto::SyncLiteSubscriptionResponse>, Status> {
        Ok(Response::new(proto::SyncLiteSubscriptionResponse {
            status: Some(unsupported("SyncLiteSubscription")),
        }))
    }
}

fn unsupported(what: &str) -> proto::Status {
    status(
        Code::NotImplemented,
        format!("[sluice] {what} is not served by this broker"),
    )
}

/// The time a request's client waits (its `grpc-timeout`), if it said.
fn request_deadline<R>(request: &Request<R>) -> Option<std::time::Duration> {
    let raw = request.metadata().get("grpc-timeout")?.to_str().ok()?;
    let (digits, unit) = raw.split_at(raw.len().checked_sub(1)?);
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => std::time::Duration::from_secs(n * 3600),
        "M" => std::time::Duration::from_secs(n * 60),
        "S" => std::time::Duration::from_secs(n),
        "m" => std::time::Duration::from_millis(n),
        "u" => std::time::Duration::from_micros(n),
        "n" => std::time::Duration::from_nanos(n),
        _ => return None,
    })
}

/// Who sent a request: its client id and address.
#[derive(Debug, Clone)]
pub(crate) struct Caller {
    /// `x-mq-client-id`.
    pub client_id: String,
    /// The peer's address.
    pub addr: SocketAddr,
    /// The account that signed the request (ACL on).
    pub access_key: Option<String>,
}

impl<D: Disk, C: Clock, T: Transport> Messaging<D, C, T> {
    /// Identifies (and with ACL on, authenticates) the caller.
    fn admit<R>(&self, request: &Request<R>) -> Result<Caller, Status> {
        let client_id = request
            .metadata()
            .get("x-mq-client-id")
            .and_then(|v| v.to_str().ok())
            .filter(|v| !v.trim().is_empty())
            .ok_or_else(|| Status::invalid_argument("client id cannot be empty (x-mq-client-id)"))?
            .to_owned();
        let addr = request
            .remote_addr()
            .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 0)));
        let access_key = auth::authenticate(&self.broker, request.metadata())?;
        Ok(Caller {
            client_id,
            addr,
            access_key,
        })
    }
}
