//! Generates the server side of `apache.rocketmq.v2.MessagingService`
//! (the RocketMQ 5 gRPC protocol) from a description of its methods; the
//! message types are the prost structs in `src/grpc/proto`.

use tonic_build::manual::{Builder, Method, Service};

/// (Rust name, wire name, request, response, client streams, server streams)
const METHODS: &[(&str, &str, &str, &str, bool, bool)] = &[
    (
        "query_route",
        "QueryRoute",
        "QueryRouteRequest",
        "QueryRouteResponse",
        false,
        false,
    ),
    (
        "heartbeat",
        "Heartbeat",
        "HeartbeatRequest",
        "HeartbeatResponse",
        false,
        false,
    ),
    (
        "send_message",
        "SendMessage",
        "SendMessageRequest",
        "SendMessageResponse",
        false,
        false,
    ),
    (
        "query_assignment",
        "QueryAssignment",
        "QueryAssignmentRequest",
        "QueryAssignmentResponse",
        false,
        false,
    ),
    (
        "receive_message",
        "ReceiveMessage",
        "ReceiveMessageRequest",
        "ReceiveMessageResponse",
        false,
        true,
    ),
    (
        "ack_message",
        "AckMessage",
        "AckMessageRequest",
        "AckMessageResponse",
        false,
        false,
    ),
    (
        "forward_message_to_dead_letter_queue",
        "ForwardMessageToDeadLetterQueue",
        "ForwardMessageToDeadLetterQueueRequest",
        "ForwardMessageToDeadLetterQueueResponse",
        false,
        false,
    ),
    (
        "pull_message",
        "PullMessage",
        "PullMessageRequest",
        "PullMessageResponse",
        false,
        true,
    ),
    (
        "update_offset",
        "UpdateOffset",
        "UpdateOffsetRequest",
        "UpdateOffsetResponse",
        false,
        false,
    ),
    (
        "get_offset",
        "GetOffset",
        "GetOffsetRequest",
        "GetOffsetResponse",
        false,
        false,
    ),
    (
        "query_offset",
        "QueryOffset",
        "QueryOffsetRequest",
        "QueryOffsetResponse",
        false,
        false,
    ),
    (
        "end_transaction",
        "EndTransaction",
        "EndTransactionRequest",
        "EndTransactionResponse",
        false,
        false,
    ),
    (
        "telemetry",
        "Telemetry",
        "TelemetryCommand",
        "TelemetryCommand",
        true,
        true,
    ),
    (
        "notify_client_termination",
        "NotifyClientTermination",
        "NotifyClientTerminationRequest",
        "NotifyClientTerminationResponse",
        false,
        false,
    ),
    (
        "change_invisible_duration",
        "ChangeInvisibleDuration",
        "ChangeInvisibleDurationRequest",
        "ChangeInvisibleDurationResponse",
        false,
        false,
    ),
    (
        "recall_message",
        "RecallMessage",
        "RecallMessageRequest",
        "RecallMessageResponse",
        false,
        false,
    ),
    (
        "sync_lite_subscription",
        "SyncLiteSubscription",
        "SyncLiteSubscriptionRequest",
        "SyncLiteSubscriptionResponse",
        false,
        false,
    ),
];

fn main() {
    let mut service = Service::builder()
        .name("MessagingService")
        .package("apache.rocketmq.v2");
    for &(name, route, input, output, client_streams, server_streams) in METHODS {
        let mut method = Method::builder()
            .name(name)
            .route_name(route)
            .input_type(format!("sluice_net::v2::{input}"))
            .output_type(format!("sluice_net::v2::{output}"))
            .codec_path("tonic_prost::ProstCodec");
        if client_streams {
            method = method.client_streaming();
        }
        if server_streams {
            method = method.server_streaming();
        }
        service = service.method(method.build());
    }
    Builder::new()
        .build_client(false)
        .build_transport(false)
        .compile(&[service.build()]);
    println!("cargo:rerun-if-changed=build.rs");
}
