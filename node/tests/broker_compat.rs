//! Answers as Apache's broker gives them, on a real `sluice-node` process,
//! for what independent clients do and our own client does not: a batch
//! flagged in the header of an ordinary send, `LITE_PULL_MESSAGE`,
//! request-reply (the `CLUSTER` property, `SEND_REPLY_MESSAGE(_V2)` and the
//! push to the requester), the reset-offset body a C++ consumer parses, and
//! a gRPC client dialling the remoting port.

mod support;

use std::io::{Read, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use sluice_core::message::{encode_batch, keys, BatchItem, Properties};
use sluice_net::body::{self, ConsumerData, HeartbeatData, ProducerData, SubscriptionData};
use sluice_net::header::{
    PullMessageRequestHeader, ReplyMessageRequestHeader, ResetOffsetRequestHeader,
    SendMessageRequestHeader, SendMessageRequestHeaderV2, SendMessageResponseHeader,
};
use sluice_net::remoting::{request_code, response_code, LanguageCode};
use sluice_net::rpc::{RpcClient, RpcConfig};
use sluice_net::{RemotingCommand, RequestContext, TokioTransport};
use support::{split_records, Client, Node};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

fn props(pairs: &[(&str, &str)]) -> String {
    let mut p = Properties::new();
    for (k, v) in pairs {
        p.insert(k, v).expect("property");
    }
    String::from_utf8(p.encode()).expect("utf-8")
}

fn v1_header(topic: &str, properties: String) -> SendMessageRequestHeader {
    SendMessageRequestHeader {
        producer_group: "compat-producer".into(),
        topic: topic.into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 4,
        queue_id: 0,
        sys_flag: 0,
        born_timestamp: 1_700_000_000_000,
        flag: 0,
        properties: Some(properties),
        reconsume_times: Some(0),
        unit_mode: Some(false),
        batch: Some(false),
        max_reconsume_times: None,
        broker_name: None,
    }
}

/// Every request the peer pushes to a client connection, answered SUCCESS.
type Pushed = Arc<Mutex<Vec<RemotingCommand>>>;

fn capturing_client() -> (RpcClient<TokioTransport>, Pushed) {
    let pushed: Pushed = Arc::default();
    let p = Arc::clone(&pushed);
    let rpc = RpcClient::with_handler(
        TokioTransport,
        RpcConfig::default(),
        move |_ctx: RequestContext, request: RemotingCommand| {
            let p = Arc::clone(&p);
            async move {
                p.lock().expect("lock").push(request);
                Some(RemotingCommand::success().with_body(Bytes::from_static(b"from-client")))
            }
        },
    );
    (rpc, pushed)
}

async fn wait_for_push(pushed: &Pushed, code: i32) -> RemotingCommand {
    for _ in 0..100 {
        if let Some(cmd) = pushed.lock().expect("lock").iter().find(|c| c.code == code) {
            return cmd.clone();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no request {code} was pushed to the client");
}

#[test]
fn a_send_message_flagged_batch_stores_each_message_with_its_own_tags() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = Node::start(dir.path(), "async");
    runtime().block_on(async {
        let c = Client::new(&node.broker);
        let items: Vec<BatchItem> = (0..5)
            .map(|i| BatchItem {
                flag: 0,
                body: Bytes::from(format!("item-{i}")),
                properties: Bytes::from(props(&[(keys::TAGS, &format!("tag{i}"))])),
            })
            .collect();
        let body = encode_batch(&items).expect("batch");
        // The C++ client's way: SEND_MESSAGE (V1 header) with batch=true.
        let mut h = v1_header("CompatBatch", props(&[(keys::WAIT, "true")]));
        h.batch = Some(true);
        let cmd = RemotingCommand::request_with_header(request_code::SEND_MESSAGE, &h)
            .with_body(Bytes::from(body));
        let r = c.call(cmd, Duration::from_secs(5)).await.expect("send");
        assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
        let header: SendMessageResponseHeader = r.header().expect("send answer");
        assert_eq!(header.msg_id.split(',').count(), 5, "one id per message");

        let stored = c.drain("CompatBatch", 0).await;
        let got: Vec<(String, Option<String>)> = stored
            .iter()
            .map(|rec| {
                let p = Properties::parse(&rec.properties).expect("properties");
                (
                    String::from_utf8_lossy(&rec.body).into_owned(),
                    p.tags().map(str::to_owned),
                )
            })
            .collect();
        let want: Vec<(String, Option<String>)> = (0..5)
            .map(|i| (format!("item-{i}"), Some(format!("tag{i}"))))
            .collect();
        assert_eq!(got, want);
    });
}

#[test]
fn lite_pull_message_is_served_like_pull_message() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = Node::start(dir.path(), "async");
    runtime().block_on(async {
        let c = Client::new(&node.broker);
        let sent = c
            .send("CompatLite", 0, b"lite", "k", "t")
            .await
            .expect("send");
        assert_eq!(sent.code, response_code::SUCCESS);
        let h = PullMessageRequestHeader {
            consumer_group: "compat-lite".into(),
            topic: "CompatLite".into(),
            queue_id: 0,
            queue_offset: 0,
            max_msg_nums: 32,
            sys_flag: 0,
            commit_offset: 0,
            suspend_timeout_millis: 0,
            subscription: Some("*".into()),
            sub_version: 0,
            expression_type: Some("TAG".into()),
            max_msg_bytes: None,
        };
        let cmd = RemotingCommand::request_with_header(request_code::LITE_PULL_MESSAGE, &h);
        let r = c
            .call(cmd, Duration::from_secs(5))
            .await
            .expect("lite pull");
        assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
        let records = split_records(&r.body);
        assert_eq!(records.len(), 1);
        assert_eq!(&records[0].body[..], b"lite");
    });
}

#[test]
fn all_topic_config_lists_every_topic_with_the_table_version() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = Node::start(dir.path(), "async");
    runtime().block_on(async {
        let c = Client::new(&node.broker);
        let sent = c
            .send("CompatAllTopics", 0, b"x", "k", "t")
            .await
            .expect("send");
        assert_eq!(sent.code, response_code::SUCCESS);
        let r = c
            .call(
                RemotingCommand::request(request_code::GET_ALL_TOPIC_CONFIG),
                Duration::from_secs(5),
            )
            .await
            .expect("answered");
        assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
        let json: serde_json::Value = serde_json::from_slice(&r.body).expect("json");
        let table = &json["topicConfigTable"];
        assert_eq!(table["CompatAllTopics"]["topicName"], "CompatAllTopics");
        assert!(table["CompatAllTopics"]["writeQueueNums"].as_i64() > Some(0));
        assert!(json["dataVersion"]["counter"].as_i64() > Some(0), "{json}");
    });
}

#[test]
fn stored_messages_carry_the_cluster_and_a_reply_reaches_the_requester() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = Node::start(dir.path(), "async");
    runtime().block_on(async {
        // The requester: a producer that heartbeats, then sends a request.
        let (requester, pushed) = capturing_client();
        let hb = HeartbeatData {
            client_id: "10.0.0.9@requester".into(),
            producer_data_set: vec![ProducerData {
                group_name: "requesters".into(),
            }],
            consumer_data_set: vec![],
        };
        let cmd = RemotingCommand::request(request_code::HEART_BEAT)
            .with_body(body::encode(&hb, "HeartbeatData").expect("heartbeat"));
        let r = requester
            .invoke(&node.broker, cmd, Duration::from_secs(5))
            .await
            .expect("heartbeat");
        assert_eq!(r.code, response_code::SUCCESS);
        // Apache 5.x answers every heartbeat with both keys.
        assert_eq!(r.ext_fields.get("IS_SUPPORT_HEART_BEAT_V2"), Some("false"));
        assert_eq!(r.ext_fields.get("IS_SUB_CHANGE"), Some("true"));
        let c = Client::new(&node.broker);
        let request_props = [
            (keys::CORRELATION_ID, "corr-1"),
            (keys::REPLY_TO_CLIENT, "10.0.0.9@requester"),
            (keys::TTL, "3000"),
        ];
        let sent = c
            .send_with_properties("CompatRequests", 0, b"ping", &request_props)
            .await
            .expect("request");
        assert_eq!(sent.code, response_code::SUCCESS);
        let stored = c.drain("CompatRequests", 0).await;
        let p = Properties::parse(&stored[0].properties).expect("properties");
        // A responder names the reply topic after this property.
        assert_eq!(p.get(keys::CLUSTER), Some("DefaultCluster"));

        // The responder replies with SEND_REPLY_MESSAGE_V2.
        let reply_props = props(&[
            (keys::CORRELATION_ID, "corr-1"),
            (keys::REPLY_TO_CLIENT, "10.0.0.9@requester"),
            (keys::MSG_TYPE, "reply"),
            (keys::CLUSTER, "DefaultCluster"),
        ]);
        let h: SendMessageRequestHeaderV2 =
            v1_header("DefaultCluster_REPLY_TOPIC", reply_props).into();
        let cmd = RemotingCommand::request_with_header(request_code::SEND_REPLY_MESSAGE_V2, &h)
            .with_body(Bytes::from_static(b"pong"));
        let r = c.call(cmd, Duration::from_secs(5)).await.expect("reply");
        assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);

        let push = wait_for_push(&pushed, request_code::PUSH_REPLY_MESSAGE_TO_CLIENT).await;
        assert_eq!(&push.body[..], b"pong");
        let ph: ReplyMessageRequestHeader = push.header().expect("reply header");
        assert_eq!(ph.topic, "DefaultCluster_REPLY_TOPIC");
        let pp = Properties::parse(ph.properties.as_deref().unwrap_or("").as_bytes())
            .expect("reply properties");
        assert_eq!(pp.get(keys::CORRELATION_ID), Some("corr-1"));
        assert!(ph.store_timestamp > 0 && !ph.born_host.is_empty());
        // Stored too, as Apache does by default.
        let replies = c.drain("DefaultCluster_REPLY_TOPIC", 0).await;
        assert_eq!(replies.len(), 1);
        assert_eq!(&replies[0].body[..], b"pong");
    });
}

#[test]
fn an_offset_reset_reaches_a_cpp_consumer_as_a_list_and_a_java_one_as_a_map() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = Node::start(dir.path(), "async");
    runtime().block_on(async {
        let c = Client::new(&node.broker);
        for i in 0..3 {
            let sent = c
                .send("CompatReset", 0, format!("m{i}").as_bytes(), "k", "t")
                .await
                .expect("send");
            assert_eq!(sent.code, response_code::SUCCESS);
        }
        let mut consumers = Vec::new();
        for (language, id) in [(LanguageCode::Cpp, "cpp@1"), (LanguageCode::Java, "java@1")] {
            let (rpc, pushed) =
                consumer(&node.broker, "compat-reset", "CompatReset", id, language).await;
            consumers.push((language, rpc, pushed));
        }
        let h = ResetOffsetRequestHeader {
            topic: "CompatReset".into(),
            group: "compat-reset".into(),
            timestamp: 0,
            is_force: Some(true),
            ..ResetOffsetRequestHeader::default()
        };
        let cmd =
            RemotingCommand::request_with_header(request_code::INVOKE_BROKER_TO_RESET_OFFSET, &h);
        let r = c.call(cmd, Duration::from_secs(5)).await.expect("reset");
        assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
        for (language, _rpc, pushed) in &consumers {
            let push = wait_for_push(pushed, request_code::RESET_CONSUMER_CLIENT_OFFSET).await;
            let text = String::from_utf8_lossy(&push.body).into_owned();
            if *language == LanguageCode::Cpp {
                // The C++ client parses standard JSON with a list of queues.
                let v: serde_json::Value = serde_json::from_str(&text).expect("standard JSON");
                let list = v["offsetTable"].as_array().expect("a list");
                let q0 = list.iter().find(|q| q["queueId"] == 0).expect("queue 0");
                assert_eq!(q0["offset"], 0, "{text}");
                assert_eq!(q0["topic"], "CompatReset", "{text}");
                assert!(q0["brokerName"].is_string(), "{text}");
            } else {
                // Java's fastjson map keyed by queue objects.
                assert!(
                    text.starts_with("{\"offsetTable\":{{\"brokerName\""),
                    "{text}"
                );
            }
        }
    });
}

#[test]
fn a_grpc_client_on_the_remoting_port_is_told_why_in_the_log_and_closed() {
    use std::process::{Command, Stdio};
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("broker.toml");
    std::fs::write(&config, support::with_small_store("")).expect("broker.toml");
    let broker = format!("127.0.0.1:{}", support::free_port_pair());
    let namesrv = format!("127.0.0.1:{}", support::free_port());
    let mut child = Command::new(support::node_binary())
        .arg("standalone")
        .arg("--config")
        .arg(&config)
        .arg("--data-dir")
        .arg(dir.path())
        .args(["--namesrv-listen", &namesrv, "--broker-listen", &broker])
        .args(["--metrics-listen", "off"])
        .env("RUST_LOG", "warn,sluice=info,sluice_node=info")
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn sluice-node");
    let rx = support::stdout_lines(&mut child);
    // Lines arrive within 20 s or the node never logged what we wait for.
    let wait_for = |needle: &str| loop {
        match rx.recv_timeout(Duration::from_secs(20)) {
            Ok(line) if line.contains(needle) => return line,
            Ok(_) => {}
            Err(e) => panic!("sluice-node never logged {needle:?}: {e}"),
        }
    };
    wait_for("sluice broker listening");
    let mut s = std::net::TcpStream::connect(&broker).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    s.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        .expect("preface");
    let mut buf = [0u8; 64];
    let n = s.read(&mut buf).expect("the node closes, it does not hang");
    assert_eq!(
        n,
        0,
        "the node answered a gRPC preface with {:?}",
        &buf[..n]
    );
    let line = wait_for("HTTP/2");
    assert!(line.contains("gRPC") && line.contains("remoting"), "{line}");
    runtime().block_on(async {
        let c = Client::new(&broker);
        let sent = c.send("AfterGrpc", 0, b"x", "k", "t").await.expect("send");
        assert_eq!(sent.code, response_code::SUCCESS);
    });
    child.kill().expect("kill");
    child.wait().expect("reap");
}

/// Registers a capturing consumer of `group` on `topic` as `client_id`.
async fn consumer(
    broker: &str,
    group: &str,
    topic: &str,
    client_id: &str,
    language: LanguageCode,
) -> (RpcClient<TokioTransport>, Pushed) {
    let (rpc, pushed) = capturing_client();
    let hb = HeartbeatData {
        client_id: client_id.into(),
        producer_data_set: vec![],
        consumer_data_set: vec![ConsumerData {
            group_name: group.into(),
            consume_type: "CONSUME_PASSIVELY".into(),
            message_model: "CLUSTERING".into(),
            consume_from_where: "CONSUME_FROM_LAST_OFFSET".into(),
            subscription_data_set: vec![SubscriptionData {
                topic: topic.into(),
                sub_string: "*".into(),
                ..SubscriptionData::default()
            }],
            unit_mode: false,
        }],
    };
    let mut cmd = RemotingCommand::request(request_code::HEART_BEAT)
        .with_body(body::encode(&hb, "HeartbeatData").expect("heartbeat"));
    cmd.language = language;
    let r = rpc
        .invoke(broker, cmd, Duration::from_secs(5))
        .await
        .expect("heartbeat");
    assert_eq!(r.code, response_code::SUCCESS);
    (rpc, pushed)
}

#[test]
fn running_info_and_direct_consumption_are_forwarded_to_the_named_consumer() {
    use sluice_net::header::{
        ConsumeMessageDirectlyRequestHeader, GetConsumerRunningInfoRequestHeader,
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let node = Node::start(dir.path(), "async");
    runtime().block_on(async {
        let c = Client::new(&node.broker);
        let h = v1_header("CompatDirect", props(&[(keys::TAGS, "t")]));
        let cmd = RemotingCommand::request_with_header(request_code::SEND_MESSAGE, &h)
            .with_body(Bytes::from_static(b"direct"));
        let r = c.call(cmd, Duration::from_secs(5)).await.expect("send");
        let sent: SendMessageResponseHeader = r.header().expect("send answer");
        let (_rpc, pushed) = consumer(
            &node.broker,
            "compat-direct",
            "CompatDirect",
            "c@1",
            LanguageCode::Java,
        )
        .await;

        let info = GetConsumerRunningInfoRequestHeader {
            consumer_group: "compat-direct".into(),
            client_id: "c@1".into(),
            jstack_enable: Some(false),
        };
        let cmd =
            RemotingCommand::request_with_header(request_code::GET_CONSUMER_RUNNING_INFO, &info);
        let r = c
            .call(cmd, Duration::from_secs(5))
            .await
            .expect("running info");
        assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
        assert_eq!(&r.body[..], b"from-client", "the consumer's own answer");
        wait_for_push(&pushed, request_code::GET_CONSUMER_RUNNING_INFO).await;

        let direct = ConsumeMessageDirectlyRequestHeader {
            consumer_group: "compat-direct".into(),
            client_id: Some("c@1".into()),
            msg_id: Some(sent.msg_id.clone()),
            ..ConsumeMessageDirectlyRequestHeader::default()
        };
        let cmd =
            RemotingCommand::request_with_header(request_code::CONSUME_MESSAGE_DIRECTLY, &direct);
        let r = c.call(cmd, Duration::from_secs(5)).await.expect("direct");
        assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
        let forwarded = wait_for_push(&pushed, request_code::CONSUME_MESSAGE_DIRECTLY).await;
        let records = split_records(&forwarded.body);
        assert_eq!(records.len(), 1);
        assert_eq!(&records[0].body[..], b"direct");
        let fh: ConsumeMessageDirectlyRequestHeader = forwarded.header().expect("header");
        assert!(fh.broker_name.is_some());

        let gone = GetConsumerRunningInfoRequestHeader {
            client_id: "nobody@1".into(),
            ..info
        };
        let cmd =
            RemotingCommand::request_with_header(request_code::GET_CONSUMER_RUNNING_INFO, &gone);
        let r = c.call(cmd, Duration::from_secs(5)).await.expect("answered");
        assert_eq!(r.code, response_code::SYSTEM_ERROR);
        assert!(r.remark.unwrap_or_default().contains("not online"));
    });
}

/// The request codes a fixture lists (`CODE NAME` lines, `#` comments).
fn fixture_codes(text: &str) -> Vec<(i32, String)> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (code, name) = l.split_once(' ').expect("CODE NAME");
            (code.parse().expect("a number"), name.trim().to_owned())
        })
        .collect()
}

/// Codes the Java client may send that Sluice does not serve yet; they
/// must be answered `REQUEST_CODE_NOT_SUPPORTED`, and nothing else may be.
const NOT_SERVED: &[i32] = &[302, 303, 370, 400, 200_050, 200_051, 200_053, 200_151];

#[test]
fn every_request_code_a_java_client_sends_is_answered_and_never_drops_the_connection() {
    let codes = fixture_codes(include_str!("fixtures/java_client_request_codes.txt"));
    assert!(codes.len() > 30, "the fixture lists the client's codes");
    for (code, name) in &codes {
        assert_eq!(
            request_code::name(*code),
            Some(name.as_str()),
            "request_code.rs names {code} as Apache does"
        );
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let node = Node::start(dir.path(), "async");
    runtime().block_on(async {
        let broker = Client::new(&node.broker);
        let namesrv = Client::new(&node.namesrv);
        let mut unsupported = Vec::new();
        for (code, name) in &codes {
            let target = if *code == request_code::GET_ROUTEINFO_BY_TOPIC {
                &namesrv
            } else {
                &broker
            };
            // A bare request: no header, no body. A served code refuses it
            // with a reason; an unserved one says so; none may hang or close.
            let r = target
                .call(RemotingCommand::request(*code), Duration::from_secs(5))
                .await
                .unwrap_or_else(|e| panic!("{name} ({code}) got no answer: {e}"));
            if r.code == response_code::REQUEST_CODE_NOT_SUPPORTED {
                unsupported.push(*code);
            }
        }
        let unexpected: Vec<i32> = unsupported
            .iter()
            .copied()
            .filter(|c| !NOT_SERVED.contains(c))
            .collect();
        assert!(
            unexpected.is_empty(),
            "codes refused as unsupported: {unexpected:?}"
        );
        // The same connection still serves after all of them.
        let sent = broker
            .send("AfterCodes", 0, b"x", "k", "t")
            .await
            .expect("send");
        assert_eq!(sent.code, response_code::SUCCESS);
        let r = broker
            .call(RemotingCommand::request(99_999), Duration::from_secs(5))
            .await
            .expect("an unknown code is answered");
        assert_eq!(r.code, response_code::REQUEST_CODE_NOT_SUPPORTED);
    });
}
