//! ACL on a real `sluice-node standalone` process, at the wire: a
//! signature computed independently (Python's `hmac` over the documented
//! content) is accepted; a request altered after signing, a non-admin's
//! admin request, an unsigned request of an unknown code and a fake broker
//! registration are refused with `NO_PERMISSION`, and nothing is written
//! for them; permissive mode lets requests through and counts them; a
//! changed policy file is put in force without a restart (SIGHUP, or its
//! modification time).

mod support;

use std::io::Write as _;
use std::process::{Command, Stdio};
use std::time::Duration;

use sluice_net::body::{self, KvTable, RegisterBrokerBody, TopicConfigSerializeWrapper};
use sluice_net::header::{
    CreateTopicRequestHeader, GetRouteInfoRequestHeader, QueueRequestHeader,
    RegisterBrokerRequestHeader, SendMessageRequestHeaderV2,
};
use sluice_net::remoting::{request_code, response_code};
use sluice_net::{Credentials, RemotingCommand, RpcClient, RpcConfig, TokioTransport};
use support::Node;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

fn rpc() -> RpcClient<TokioTransport> {
    RpcClient::new(TokioTransport, RpcConfig::default())
}

async fn call(addr: &str, request: RemotingCommand) -> RemotingCommand {
    rpc()
        .invoke(addr, request, Duration::from_secs(5))
        .await
        .expect("answered")
}

fn signed(mut request: RemotingCommand, key: &str, secret: &str) -> RemotingCommand {
    Credentials::new(key, secret).sign(&mut request);
    request
}

fn send(topic: &str, body: &str) -> RemotingCommand {
    let header = SendMessageRequestHeaderV2 {
        a: "acl-test-producer".into(),
        b: topic.into(),
        c: "TBW102".into(),
        d: 4,
        e: 0,
        f: 0,
        g: 0,
        h: 0,
        i: None,
        j: Some(0),
        k: Some(false),
        l: None,
        m: Some(false),
        n: None,
    };
    RemotingCommand::request_with_header(request_code::SEND_MESSAGE_V2, &header)
        .with_body(body.as_bytes().to_vec())
}

/// Base64(HmacSHA1(secret, values of every extField sorted by key, then
/// the body)), computed by Python's standard library, not by our code.
fn python_signature(request: &RemotingCommand, secret: &str) -> String {
    let fields: Vec<(String, String)> = request
        .ext_fields
        .iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    let script = r#"
import base64, hashlib, hmac, json, sys
doc = json.loads(sys.stdin.buffer.read())
content = "".join(v for k, v in sorted(doc["fields"]) if k != "Signature").encode() + doc["body"].encode()
print(base64.b64encode(hmac.new(doc["secret"].encode(), content, hashlib.sha1).digest()).decode())
"#;
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_owned());
    let mut child = Command::new(python)
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 runs (the test command installs it)");
    let doc = serde_json::json!({
        "fields": fields,
        "body": String::from_utf8(request.body.to_vec()).expect("utf-8 body"),
        "secret": secret,
    });
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(doc.to_string().as_bytes())
        .expect("write");
    let out = child.wait_with_output().expect("python output");
    assert!(out.status.success(), "python failed");
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .trim()
        .to_owned()
}

fn assert_refused(response: &RemotingCommand, remark: &str) {
    assert_eq!(
        response.code,
        response_code::NO_PERMISSION,
        "{:?}",
        response.remark
    );
    let got = response.remark.as_deref().unwrap_or_default();
    assert!(got.contains(remark), "remark {got:?} lacks {remark:?}");
    assert!(!got.contains("-secret"), "a secret leaked: {got}");
}

async fn max_offset(broker: &str, topic: &str) -> i64 {
    let header = QueueRequestHeader {
        topic: topic.into(),
        queue_id: 0,
    };
    let request = RemotingCommand::request_with_header(request_code::GET_MAX_OFFSET, &header);
    let r = call(broker, signed(request, "root", "root-secret")).await;
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    r.ext_fields
        .get("offset")
        .and_then(|o| o.parse().ok())
        .expect("offset")
}

#[test]
fn an_independently_computed_signature_is_accepted_and_an_altered_request_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = Node::start_with_config(dir.path(), "async", support::ACL_TOML);
    runtime().block_on(async {
        let mut request = send("Orders", "first");
        request.ext_fields.insert("AccessKey", "app");
        let signature = python_signature(&request, "app-secret");
        assert_eq!(
            signature,
            sluice_net::auth::signature(b"app-secret", &request),
            "both sides compute the documented content"
        );
        request.ext_fields.insert("Signature", &signature);
        let ok = call(&node.broker, request.clone()).await;
        assert_eq!(ok.code, response_code::SUCCESS, "{:?}", ok.remark);
        assert_eq!(max_offset(&node.broker, "Orders").await, 1);

        let mut altered = request.clone();
        altered.body = bytes::Bytes::from_static(b"forged");
        assert_refused(
            &call(&node.broker, altered).await,
            "Check signature failed for accessKey=app",
        );
        let mut retargeted = request.clone();
        retargeted.ext_fields.insert("d", "8");
        assert_refused(
            &call(&node.broker, retargeted).await,
            "Check signature failed",
        );
        assert_refused(
            &call(&node.broker, send("Orders", "unsigned")).await,
            "no AccessKey",
        );
        assert_refused(
            &call(
                &node.broker,
                signed(send("Orders", "x"), "app", "not-the-secret"),
            )
            .await,
            "Check signature failed for accessKey=app",
        );
        assert_refused(
            &call(
                &node.broker,
                signed(send("Orders", "x"), "nobody", "whatever"),
            )
            .await,
            "No acl config for accessKey=nobody",
        );
        assert_refused(
            &call(
                &node.broker,
                signed(send("ReadOnly", "x"), "app", "app-secret"),
            )
            .await,
            "No permission for topic ReadOnly: accessKey=app needs PUB, has SUB",
        );
        assert_eq!(
            max_offset(&node.broker, "Orders").await,
            1,
            "nothing written for a refused send"
        );
        let info = runtime_info(&node.broker).await;
        assert_eq!(
            info.table.get("sluiceAclRefused").map(String::as_str),
            Some("6")
        );
    });
}

async fn runtime_info(broker: &str) -> KvTable {
    let r = call(
        broker,
        signed(
            RemotingCommand::request(request_code::GET_BROKER_RUNTIME_INFO),
            "root",
            "root-secret",
        ),
    )
    .await;
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    body::decode(&r.body, "KvTable").expect("runtime info")
}

fn create_topic(topic: &str) -> RemotingCommand {
    let header = CreateTopicRequestHeader {
        topic: topic.into(),
        default_topic: "TBW102".into(),
        read_queue_nums: 4,
        write_queue_nums: 4,
        perm: 6,
        topic_filter_type: "SINGLE_TAG".into(),
        topic_sys_flag: None,
        order: false,
    };
    RemotingCommand::request_with_header(request_code::UPDATE_AND_CREATE_TOPIC, &header)
}

#[test]
fn admin_codes_need_an_admin_and_unknown_codes_tell_strangers_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = Node::start_with_config(dir.path(), "async", support::ACL_TOML);
    runtime().block_on(async {
        assert_refused(
            &call(
                &node.broker,
                signed(create_topic("Evil"), "app", "app-secret"),
            )
            .await,
            "Need admin permission for request code=17, but accessKey=app is not",
        );
        // An admin's signed request replayed under another key.
        let mut replayed = signed(create_topic("Evil"), "root", "root-secret");
        replayed.ext_fields.insert("AccessKey", "app");
        assert_refused(
            &call(&node.broker, replayed).await,
            "Check signature failed",
        );
        let made = call(
            &node.broker,
            signed(create_topic("Made"), "root", "root-secret"),
        )
        .await;
        assert_eq!(made.code, response_code::SUCCESS, "{:?}", made.remark);
        let all = call(
            &node.broker,
            signed(
                RemotingCommand::request(request_code::GET_ALL_TOPIC_CONFIG),
                "root",
                "root-secret",
            ),
        )
        .await;
        let wrapper: TopicConfigSerializeWrapper =
            body::decode(&all.body, "TopicConfigSerializeWrapper").expect("topics");
        assert!(wrapper.topic_config_table.contains_key("Made"));
        assert!(
            !wrapper.topic_config_table.contains_key("Evil"),
            "nothing written"
        );

        let unknown = call(&node.broker, RemotingCommand::request(9_999)).await;
        assert_refused(&unknown, "no AccessKey");
        assert!(!unknown.remark.unwrap_or_default().contains("9999"));
        let known = call(
            &node.broker,
            signed(RemotingCommand::request(9_999), "app", "app-secret"),
        )
        .await;
        assert_eq!(known.code, response_code::REQUEST_CODE_NOT_SUPPORTED);
    });
}

fn register(topic: &str, broker_addr: &str) -> RemotingCommand {
    let mut wrapper = TopicConfigSerializeWrapper::default();
    wrapper.topic_config_table.insert(
        topic.into(),
        sluice_net::body::TopicConfig {
            topic_name: topic.into(),
            read_queue_nums: 4,
            write_queue_nums: 4,
            perm: 6,
            ..Default::default()
        },
    );
    let body = body::encode(
        &RegisterBrokerBody {
            topic_config_serialize_wrapper: wrapper,
            filter_server_list: Vec::new(),
        },
        "RegisterBrokerBody",
    )
    .expect("encode");
    let header = RegisterBrokerRequestHeader {
        broker_name: "broker-a".into(),
        broker_addr: broker_addr.into(),
        cluster_name: "DefaultCluster".into(),
        ha_server_addr: String::new(),
        broker_id: 0,
        compressed: Some(false),
        body_crc32: None,
        master_epoch: None,
    };
    RemotingCommand::request_with_header(request_code::REGISTER_BROKER, &header).with_body(body)
}

async fn route_addr(namesrv: &str, topic: &str) -> String {
    let header = GetRouteInfoRequestHeader {
        topic: topic.into(),
        accept_standard_json_only: None,
    };
    let request =
        RemotingCommand::request_with_header(request_code::GET_ROUTEINFO_BY_TOPIC, &header);
    let r = call(namesrv, signed(request, "app", "app-secret")).await;
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    let route = body::TopicRouteData::from_json(&r.body).expect("route");
    route.broker_datas[0]
        .broker_addrs
        .values()
        .next()
        .cloned()
        .expect("an address")
}

#[test]
fn a_fake_registration_cannot_redirect_a_route() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = Node::start_with_config(dir.path(), "async", support::ACL_TOML);
    runtime().block_on(async {
        let made = call(
            &node.broker,
            signed(create_topic("Orders"), "root", "root-secret"),
        )
        .await;
        assert_eq!(made.code, response_code::SUCCESS, "{:?}", made.remark);
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(route_addr(&node.namesrv, "Orders").await, node.broker);
        let evil = "127.0.0.1:6666";
        assert_refused(
            &call(&node.namesrv, register("Orders", evil)).await,
            "no AccessKey",
        );
        assert_refused(
            &call(
                &node.namesrv,
                signed(register("Orders", evil), "app", "app-secret"),
            )
            .await,
            "Need a broker credential for request code=103",
        );
        let unregister = RemotingCommand::request_with_header(
            request_code::UNREGISTER_BROKER,
            &sluice_net::header::BrokerIdentityRequestHeader {
                broker_name: "broker-a".into(),
                broker_addr: node.broker.clone(),
                cluster_name: "DefaultCluster".into(),
                broker_id: 0,
            },
        );
        assert_refused(&call(&node.namesrv, unregister).await, "no AccessKey");
        let kv = RemotingCommand::request(request_code::PUT_KV_CONFIG);
        assert_refused(
            &call(&node.namesrv, signed(kv, "app", "app-secret")).await,
            "Need admin permission for request code=100",
        );
        assert_eq!(
            route_addr(&node.namesrv, "Orders").await,
            node.broker,
            "the route still names the real broker"
        );
    });
}

#[test]
fn permissive_mode_serves_unsigned_requests_and_counts_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let toml = support::ACL_TOML.replace("mode = \"enforcing\"", "mode = \"permissive\"");
    let node = Node::start_with_config(dir.path(), "async", &toml);
    runtime().block_on(async {
        let r = call(&node.broker, send("Anything", "unsigned")).await;
        assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
        let info = runtime_info(&node.broker).await;
        assert_eq!(
            info.table.get("sluiceAclRefused").map(String::as_str),
            Some("0")
        );
        let would: u64 = info
            .table
            .get("sluiceAclWouldRefuse")
            .and_then(|v| v.parse().ok())
            .expect("counted");
        assert!(would >= 1, "the unsigned send is counted");
    });
}

#[test]
fn a_changed_policy_file_is_reloaded_without_a_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let policy = dir.path().join("acl-accounts.toml");
    let late = "[[accounts]]\naccess_key = \"late\"\nsecret_key = \"late-secret\"\n\
                default_topic_perm = \"PUB\"\n";
    std::fs::write(&policy, "").expect("empty policy file");
    // `file` goes in the [acl] table, before its first account.
    let toml = support::ACL_TOML.replacen(
        "mode = \"enforcing\"\n",
        &format!("mode = \"enforcing\"\nfile = \"{}\"\n", policy.display()),
        1,
    );
    let node = Node::start_with_config(dir.path(), "async", &toml);
    runtime().block_on(async {
        assert_refused(
            &call(
                &node.broker,
                signed(send("Late", "x"), "late", "late-secret"),
            )
            .await,
            "No acl config for accessKey=late",
        );
        std::fs::write(&policy, late).expect("write policy");
        let pid = node.pid().to_string();
        let hup = std::process::Command::new("kill")
            .args(["-HUP", &pid])
            .status()
            .expect("kill");
        assert!(hup.success());
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let r = call(
                &node.broker,
                signed(send("Late", "x"), "late", "late-secret"),
            )
            .await;
            if r.code == response_code::SUCCESS {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the reloaded key is still refused: {:?}",
                r.remark
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
}
