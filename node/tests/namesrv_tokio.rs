//! The name server over real TCP on 127.0.0.1: fake brokers register, fake
//! clients read routes, cluster info, topic lists and KV config, and a
//! broker whose connection closes disappears.

mod namesrv_support;

use std::time::Duration;

use namesrv_support::{kv_key, put_kv, register, register_body, route_request, CLUSTER};
use sluice_core::SystemClock;
use sluice_net::body::{self, ClusterInfo, TopicList, TopicRouteData};
use sluice_net::header::{
    GetKvConfigResponseHeader, GetTopicsByClusterRequestHeader, RegisterBrokerResponseHeader,
};
use sluice_net::remoting::{request_code, response_code};
use sluice_net::{RemotingCommand, RpcClient, RpcConfig, TokioTransport};
use sluice_node::namesrv::{NameServer, NameServerConfig};

const TIMEOUT: Duration = Duration::from_secs(5);
/// A client version before `V4_9_4`: gets fastjson-style routes.
const OLD_CLIENT: i32 = 373;
/// `V4_9_8`: gets standard JSON routes.
const NEW_CLIENT: i32 = 409;

struct Fixture {
    server: NameServer<SystemClock>,
    addr: String,
}

impl Fixture {
    async fn start() -> Self {
        let config = NameServerConfig {
            listen_addr: "127.0.0.1:0".into(),
            ..NameServerConfig::default()
        };
        let server = NameServer::start(config, SystemClock::new(), &TokioTransport)
            .await
            .expect("binds an ephemeral port");
        let addr = server.local_addr().to_string();
        Self { server, addr }
    }

    /// A new client: one connection per client, like one broker process.
    fn client() -> RpcClient<TokioTransport> {
        RpcClient::new(TokioTransport, RpcConfig::default())
    }

    async fn call(
        &self,
        client: &RpcClient<TokioTransport>,
        request: RemotingCommand,
    ) -> RemotingCommand {
        client
            .invoke(&self.addr, request, TIMEOUT)
            .await
            .expect("answered")
    }

    async fn call_once(&self, request: RemotingCommand) -> RemotingCommand {
        self.call(&Self::client(), request).await
    }
}

fn assert_success(response: &RemotingCommand) {
    assert_eq!(
        response.code,
        response_code::SUCCESS,
        "{:?}",
        response.remark
    );
}

#[tokio::test]
async fn registered_topic_is_routed_to_its_master() {
    let ns = Fixture::start().await;
    let broker = Fixture::client();
    let registered = ns
        .call(
            &broker,
            register("broker-a", "10.0.0.1:10911", 0, register_body(&["T"])),
        )
        .await;
    assert_success(&registered);

    let response = ns.call_once(route_request("T", OLD_CLIENT)).await;
    assert_success(&response);
    let text = std::str::from_utf8(&response.body).expect("utf8");
    assert!(
        text.contains(r#""brokerAddrs":{0:"10.0.0.1:10911"}"#),
        "fastjson keys for old clients: {text}"
    );
    let route = TopicRouteData::from_json(&response.body).expect("parses");
    assert_eq!(route.broker_datas.len(), 1);
    assert_eq!(route.broker_datas[0].broker_name, "broker-a");
    assert_eq!(route.broker_datas[0].cluster, CLUSTER);
    assert_eq!(
        route.broker_datas[0]
            .broker_addrs
            .iter()
            .collect::<Vec<_>>(),
        vec![(&0, &"10.0.0.1:10911".to_owned())]
    );
    assert_eq!(route.queue_datas.len(), 1);
    assert_eq!(route.queue_datas[0].write_queue_nums, 4);

    let response = ns.call_once(route_request("T", NEW_CLIENT)).await;
    let text = std::str::from_utf8(&response.body).expect("utf8");
    assert!(
        text.contains(r#""brokerAddrs":{"0":"10.0.0.1:10911"}"#),
        "standard JSON for 4.9.4+: {text}"
    );
}

#[tokio::test]
async fn unknown_topic_answers_topic_not_exist() {
    let ns = Fixture::start().await;
    let response = ns.call_once(route_request("nowhere", NEW_CLIENT)).await;
    assert_eq!(response.code, response_code::TOPIC_NOT_EXIST);
    assert!(response
        .remark
        .as_deref()
        .unwrap_or_default()
        .contains("nowhere"));
}

#[tokio::test]
async fn slave_learns_its_master_and_both_are_routed() {
    let ns = Fixture::start().await;
    let master = Fixture::client();
    let slave = Fixture::client();
    assert_success(
        &ns.call(
            &master,
            register("broker-a", "m:10911", 0, register_body(&["T"])),
        )
        .await,
    );
    let answer = ns
        .call(
            &slave,
            register("broker-a", "s:10911", 1, register_body(&["T"])),
        )
        .await;
    assert_success(&answer);
    let header: RegisterBrokerResponseHeader = answer.header().expect("typed");
    assert_eq!(header.master_addr.as_deref(), Some("m:10911"));
    assert_eq!(header.ha_server_addr.as_deref(), Some("m:10911-ha"));

    let route = TopicRouteData::from_json(&ns.call_once(route_request("T", OLD_CLIENT)).await.body)
        .expect("parses");
    let addrs = &route.broker_datas[0].broker_addrs;
    assert_eq!(addrs.get(&0).map(String::as_str), Some("m:10911"));
    assert_eq!(addrs.get(&1).map(String::as_str), Some("s:10911"));
}

#[tokio::test]
async fn cluster_info_and_topic_lists_show_the_broker() {
    let ns = Fixture::start().await;
    let broker = Fixture::client();
    assert_success(
        &ns.call(
            &broker,
            register("broker-a", "m:10911", 0, register_body(&["T", "U"])),
        )
        .await,
    );

    let response = ns
        .call_once(RemotingCommand::request(
            request_code::GET_BROKER_CLUSTER_INFO,
        ))
        .await;
    assert_success(&response);
    let info = ClusterInfo::from_json(&response.body).expect("parses");
    assert_eq!(
        info.cluster_addr_table[CLUSTER],
        vec!["broker-a".to_owned()]
    );
    assert_eq!(
        info.broker_addr_table["broker-a"]
            .broker_addrs
            .get(&0)
            .map(String::as_str),
        Some("m:10911")
    );

    let response = ns
        .call_once(RemotingCommand::request(
            request_code::GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
        ))
        .await;
    let all: TopicList = body::decode(&response.body, "TopicList").expect("parses");
    assert_eq!(all.topic_list, vec!["T".to_owned(), "U".to_owned()]);

    for (cluster, expected) in [
        (CLUSTER, vec!["T".to_owned(), "U".to_owned()]),
        ("other", vec![]),
    ] {
        let request = RemotingCommand::request_with_header(
            request_code::GET_TOPICS_BY_CLUSTER,
            &GetTopicsByClusterRequestHeader {
                cluster: cluster.into(),
            },
        );
        let response = ns.call_once(request).await;
        assert_success(&response);
        let list: TopicList = body::decode(&response.body, "TopicList").expect("parses");
        assert_eq!(list.topic_list, expected, "cluster {cluster}");
    }
}

#[tokio::test]
async fn closing_the_broker_connection_removes_it() {
    let ns = Fixture::start().await;
    let broker = Fixture::client();
    assert_success(
        &ns.call(
            &broker,
            register("broker-a", "m:10911", 0, register_body(&["T"])),
        )
        .await,
    );
    assert_eq!(ns.server.live_brokers(), vec!["m:10911".to_owned()]);

    broker.close_connection(&ns.addr);
    let gone = async {
        while !ns.server.live_brokers().is_empty() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(TIMEOUT, gone)
        .await
        .expect("broker dropped on close");
    let response = ns.call_once(route_request("T", NEW_CLIENT)).await;
    assert_eq!(response.code, response_code::TOPIC_NOT_EXIST);
    assert!(ns.server.cluster_info().broker_addr_table.is_empty());
}

#[tokio::test]
async fn unregistered_broker_is_no_longer_routed() {
    let ns = Fixture::start().await;
    let broker = Fixture::client();
    assert_success(
        &ns.call(
            &broker,
            register("broker-a", "m:10911", 0, register_body(&["T"])),
        )
        .await,
    );
    let header = sluice_net::header::BrokerIdentityRequestHeader {
        broker_name: "broker-a".into(),
        broker_addr: "m:10911".into(),
        cluster_name: CLUSTER.into(),
        broker_id: 0,
    };
    let request = RemotingCommand::request_with_header(request_code::UNREGISTER_BROKER, &header);
    assert_success(&ns.call(&broker, request).await);
    let response = ns.call_once(route_request("T", NEW_CLIENT)).await;
    assert_eq!(response.code, response_code::TOPIC_NOT_EXIST);
}

#[tokio::test]
async fn kv_config_put_get_delete() {
    let ns = Fixture::start().await;
    assert_success(&ns.call_once(put_kv("ns", "k", "v")).await);
    let got = ns
        .call_once(kv_key(request_code::GET_KV_CONFIG, "ns", "k"))
        .await;
    assert_success(&got);
    let header: GetKvConfigResponseHeader = got.header().expect("typed");
    assert_eq!(header.value.as_deref(), Some("v"));

    assert_success(
        &ns.call_once(kv_key(request_code::DELETE_KV_CONFIG, "ns", "k"))
            .await,
    );
    let missing = ns
        .call_once(kv_key(request_code::GET_KV_CONFIG, "ns", "k"))
        .await;
    assert_eq!(missing.code, response_code::QUERY_NOT_FOUND);
}

#[tokio::test]
async fn registering_broker_receives_the_order_topic_table() {
    let ns = Fixture::start().await;
    assert_success(
        &ns.call_once(put_kv("ORDER_TOPIC_CONFIG", "T", "broker-a:4"))
            .await,
    );
    let broker = Fixture::client();
    let answer = ns
        .call(
            &broker,
            register("broker-a", "m:10911", 0, register_body(&["T"])),
        )
        .await;
    assert_success(&answer);
    let table: sluice_net::body::KvTable = body::decode(&answer.body, "KvTable").expect("parses");
    assert_eq!(table.table.get("T").map(String::as_str), Some("broker-a:4"));
}

#[tokio::test]
async fn malformed_registrations_are_rejected_with_a_remark() {
    let ns = Fixture::start().await;
    let mut bad_crc = register("broker-a", "m:10911", 0, register_body(&["T"]));
    bad_crc.ext_fields.insert("bodyCrc32", "12345");
    let mut no_name = register("broker-a", "m:10911", 0, register_body(&["T"]));
    no_name.ext_fields.remove("brokerName");
    let mut bad_id = register("broker-a", "m:10911", 0, register_body(&["T"]));
    bad_id.ext_fields.insert("brokerId", "zero");
    let cases = [
        (
            register("broker-a", "m:10911", 0, b"{not json".to_vec()),
            "bad body",
        ),
        (
            register("broker-a", "m:10911", 0, vec![0xff; 64]),
            "bad body",
        ),
        (bad_crc, "crc32"),
        (no_name, "brokerName"),
        (bad_id, "brokerId"),
    ];
    for (request, remark) in cases {
        let response = ns.call_once(request).await;
        assert_eq!(response.code, response_code::SYSTEM_ERROR);
        let text = response.remark.unwrap_or_default();
        assert!(
            text.contains(remark),
            "remark {text:?} should mention {remark}"
        );
    }
    assert!(ns.server.live_brokers().is_empty(), "nothing registered");
    // Still serving.
    assert_success(&ns.call_once(put_kv("ns", "k", "v")).await);
}

#[tokio::test]
async fn matching_body_crc_is_accepted_masked_or_plain() {
    let ns = Fixture::start().await;
    let body = register_body(&["T"]);
    let plain = crc32fast::hash(&body);
    // Java clears the top bit; a plain CRC-32 is sent as a signed int.
    let forms = [
        (plain & 0x7FFF_FFFF).to_string(),
        i32::from_be_bytes(plain.to_be_bytes()).to_string(),
    ];
    for (id, crc) in (0..).zip(forms) {
        let broker = Fixture::client();
        let addr = format!("m{id}:10911");
        let mut request = register("broker-a", &addr, id, body.clone());
        request.ext_fields.insert("bodyCrc32", crc.clone());
        assert_success(&ns.call(&broker, request).await);
        assert!(ns.server.live_brokers().contains(&addr), "crc {crc}");
    }
}

#[tokio::test]
async fn unknown_request_code_is_not_supported() {
    let ns = Fixture::start().await;
    let response = ns
        .call_once(RemotingCommand::request(request_code::SEND_MESSAGE_V2))
        .await;
    assert_eq!(response.code, response_code::REQUEST_CODE_NOT_SUPPORTED);
}

#[tokio::test]
async fn old_client_asking_for_standard_json_gets_quoted_keys() {
    let ns = Fixture::start().await;
    let broker = Fixture::client();
    assert_success(
        &ns.call(
            &broker,
            register("broker-a", "m:10911", 0, register_body(&["T"])),
        )
        .await,
    );
    let mut request = route_request("T", OLD_CLIENT);
    request.ext_fields.insert("acceptStandardJsonOnly", "true");
    let response = ns.call_once(request).await;
    let text = std::str::from_utf8(&response.body).expect("utf8");
    assert!(text.contains(r#""brokerAddrs":{"0":"m:10911"}"#), "{text}");
}

#[tokio::test]
async fn data_version_query_reports_whether_topics_changed() {
    let ns = Fixture::start().await;
    let broker = Fixture::client();
    assert_success(
        &ns.call(
            &broker,
            register("broker-a", "m:10911", 0, register_body(&["T"])),
        )
        .await,
    );
    let header = sluice_net::header::BrokerIdentityRequestHeader {
        broker_name: "broker-a".into(),
        broker_addr: "m:10911".into(),
        cluster_name: CLUSTER.into(),
        broker_id: 0,
    };
    for (counter, changed) in [(1, false), (2, true)] {
        let version = sluice_net::body::DataVersion {
            timestamp: 1,
            counter,
            state_version: 0,
        };
        let request =
            RemotingCommand::request_with_header(request_code::QUERY_DATA_VERSION, &header)
                .with_body(body::encode(&version, "DataVersion").expect("serializable"));
        let response = ns.call(&broker, request).await;
        assert_success(&response);
        let answer: sluice_net::header::QueryDataVersionResponseHeader =
            response.header().expect("typed");
        assert_eq!(answer.changed, changed, "counter {counter}");
        let known: sluice_net::body::DataVersion =
            body::decode(&response.body, "DataVersion").expect("parses");
        assert_eq!(known.counter, 1, "the name server reports what it holds");
    }
}
