//! `--protocol grpc`: the bench as a RocketMQ 5 client of a broker's gRPC
//! endpoint (`sluice_net::v2` over tonic): producers call `SendMessage`
//! (one request per send or batch), consumers loop `ReceiveMessage` +
//! `AckMessage` like a 5.x `SimpleConsumer`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{bail, Context};
use bytes::Bytes;
use sluice_net::v2::{self, receive_message_response::Content, Code};
use tokio_stream::StreamExt;
use tonic::codegen::http::uri::PathAndQuery;
use tonic::transport::Channel;

const SEND: &str = "/apache.rocketmq.v2.MessagingService/SendMessage";
const RECEIVE: &str = "/apache.rocketmq.v2.MessagingService/ReceiveMessage";
const ACK: &str = "/apache.rocketmq.v2.MessagingService/AckMessage";

/// Message ids: unique per process and client.
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

/// One 5.x client: a channel to the endpoint and its client id.
#[derive(Clone)]
pub struct GrpcClient {
    channel: Channel,
    client_id: String,
}

/// One received message: its body and what acks it.
pub struct Received {
    pub body: Bytes,
    pub message_id: String,
    pub receipt_handle: String,
}

fn resource(name: &str) -> v2::Resource {
    v2::Resource {
        resource_namespace: String::new(),
        name: name.to_owned(),
    }
}

fn check(status: Option<&v2::Status>, what: &str) -> anyhow::Result<()> {
    match status {
        Some(s) if s.code == Code::Ok as i32 => Ok(()),
        Some(s) => bail!("{what}: code {} {}", s.code, s.message),
        None => bail!("{what}: no status"),
    }
}

impl GrpcClient {
    /// Connects to `endpoint` (`host:port`) as `client_id`.
    pub async fn connect(endpoint: &str, client_id: &str) -> anyhow::Result<Self> {
        let channel = Channel::from_shared(format!("http://{endpoint}"))
            .with_context(|| format!("--grpc-endpoint {endpoint}"))?
            .connect()
            .await
            .with_context(|| format!("gRPC endpoint {endpoint}"))?;
        Ok(Self {
            channel,
            client_id: client_id.to_owned(),
        })
    }

    fn request<M>(&self, message: M, timeout: Duration) -> tonic::Request<M> {
        let mut request = tonic::Request::new(message);
        request.set_timeout(timeout);
        if let Ok(v) = self.client_id.parse() {
            request.metadata_mut().insert("x-mq-client-id", v);
        }
        request
    }

    async fn grpc(&self) -> anyhow::Result<tonic::client::Grpc<Channel>> {
        let mut grpc = tonic::client::Grpc::new(self.channel.clone());
        grpc.ready().await.context("gRPC channel")?;
        Ok(grpc)
    }

    /// Sends `bodies` to `topic` in one `SendMessage`; every entry must be OK.
    pub async fn send(&self, topic: &str, bodies: &[Bytes]) -> anyhow::Result<()> {
        let messages = bodies
            .iter()
            .map(|body| v2::Message {
                topic: Some(resource(topic)),
                user_properties: std::collections::BTreeMap::new(),
                system_properties: Some(v2::SystemProperties {
                    message_id: format!(
                        "{}-{}",
                        self.client_id,
                        NEXT_ID.fetch_add(1, Ordering::Relaxed)
                    ),
                    message_type: v2::MessageType::Normal as i32,
                    body_encoding: v2::Encoding::Identity as i32,
                    ..Default::default()
                }),
                body: body.clone(),
            })
            .collect();
        let request = self.request(v2::SendMessageRequest { messages }, Duration::from_secs(3));
        let codec =
            tonic_prost::ProstCodec::<v2::SendMessageRequest, v2::SendMessageResponse>::default();
        let answer = self
            .grpc()
            .await?
            .unary(request, PathAndQuery::from_static(SEND), codec)
            .await?
            .into_inner();
        check(answer.status.as_ref(), "SendMessage")
    }

    /// Up to `batch` messages of `topic` for `group`, each invisible for
    /// `invisible`; the receive is held up to `hold` when there are none.
    pub async fn receive(
        &self,
        group: &str,
        topic: &str,
        batch: i32,
        invisible: Duration,
        hold: Duration,
    ) -> anyhow::Result<Vec<Received>> {
        let millis = |d: Duration| {
            v2::Duration::from_millis(i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        };
        let message = v2::ReceiveMessageRequest {
            group: Some(resource(group)),
            message_queue: Some(v2::MessageQueue {
                topic: Some(resource(topic)),
                id: -1,
                ..Default::default()
            }),
            filter_expression: None,
            batch_size: batch,
            invisible_duration: Some(millis(invisible)),
            auto_renew: false,
            long_polling_timeout: Some(millis(hold)),
            attempt_id: None,
        };
        let request = self.request(message, hold + Duration::from_secs(3));
        let codec = tonic_prost::ProstCodec::<v2::ReceiveMessageRequest, v2::ReceiveMessageResponse>::default();
        let mut stream = self
            .grpc()
            .await?
            .server_streaming(request, PathAndQuery::from_static(RECEIVE), codec)
            .await?
            .into_inner();
        let mut got = Vec::new();
        while let Some(item) = stream.next().await {
            match item?.content {
                Some(Content::Message(m)) => {
                    let sp = m.system_properties.unwrap_or_default();
                    got.push(Received {
                        body: m.body,
                        message_id: sp.message_id,
                        receipt_handle: sp.receipt_handle.unwrap_or_default(),
                    });
                }
                Some(Content::Status(s))
                    if s.code != Code::Ok as i32 && s.code != Code::MessageNotFound as i32 =>
                {
                    bail!("ReceiveMessage: code {} {}", s.code, s.message);
                }
                _ => {}
            }
        }
        Ok(got)
    }

    /// Acknowledges `received` in one `AckMessage`.
    pub async fn ack(&self, group: &str, topic: &str, received: &[Received]) -> anyhow::Result<()> {
        let entries = received
            .iter()
            .map(|r| v2::AckMessageEntry {
                message_id: r.message_id.clone(),
                receipt_handle: r.receipt_handle.clone(),
                lite_topic: None,
            })
            .collect();
        let message = v2::AckMessageRequest {
            group: Some(resource(group)),
            topic: Some(resource(topic)),
            entries,
        };
        let request = self.request(message, Duration::from_secs(3));
        let codec =
            tonic_prost::ProstCodec::<v2::AckMessageRequest, v2::AckMessageResponse>::default();
        let answer = self
            .grpc()
            .await?
            .unary(request, PathAndQuery::from_static(ACK), codec)
            .await?
            .into_inner();
        check(answer.status.as_ref(), "AckMessage")
    }
}
