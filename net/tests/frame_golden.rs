//! Golden frames, byte for byte, as real clients send them, decoded into the
//! typed `GET_ROUTEINFO_BY_TOPIC` header; and the exact bytes of our responses.

use std::collections::BTreeMap;

use bytes::BytesMut;
use sluice_net::body::{BrokerData, JsonStyle, QueueData, TopicRouteData};
use sluice_net::header::GetRouteInfoRequestHeader;
use sluice_net::remoting::frame::{self, FrameLimits};
use sluice_net::remoting::{request_code, response_code, LanguageCode, SerializeType};
use sluice_net::RemotingCommand;

const CPP_HEADER: &str = r#"{"code":105,"extFields":{"AccessKey":"","OnsChannel":"ALIYUN","Signature":"N/YT7X6tJe5UfutmW+uNwTTJ7Fc=","topic":"TopicTest"},"flag":0,"language":"CPP","opaque":0,"remark":"","version":63}"#;
const JAVA_HEADER: &str = r#"{"code":105,"language":"JAVA","opaque":1,"flag":0,"version":121,"extFields":{"topic":"TopicTest"}}"#;

fn frame_bytes(total: [u8; 4], header_word: [u8; 4], header: &str, body: &[u8]) -> Vec<u8> {
    [&total[..], &header_word[..], header.as_bytes(), body].concat()
}

fn decode_all(bytes: &[u8]) -> RemotingCommand {
    let mut buf = BytesMut::from(bytes);
    let cmd = frame::decode(&mut buf, &FrameLimits::default())
        .expect("valid frame")
        .expect("complete frame");
    assert!(buf.is_empty(), "decoder must consume exactly one frame");
    cmd
}

fn encode(cmd: &RemotingCommand) -> Vec<u8> {
    frame::encode_to_bytes(cmd, &FrameLimits::default())
        .expect("encodable")
        .to_vec()
}

#[test]
fn cpp_client_route_request_decodes_into_typed_header() {
    assert_eq!(CPP_HEADER.len(), 188);
    // totalLen = 4 + 188 = 192 = 0xC0; header word = JSON (0) << 24 | 188 (0xBC).
    let wire = frame_bytes([0, 0, 0, 0xC0], [0, 0, 0, 0xBC], CPP_HEADER, b"");
    let cmd = decode_all(&wire);
    assert_eq!(cmd.code, request_code::GET_ROUTEINFO_BY_TOPIC);
    assert_eq!(cmd.language, LanguageCode::Cpp);
    assert_eq!(cmd.version, 63);
    assert_eq!(cmd.opaque, 0);
    assert_eq!(cmd.remark.as_deref(), Some(""));
    assert_eq!(cmd.serialize_type, SerializeType::Json);
    assert!(!cmd.is_response() && !cmd.is_oneway());
    let header: GetRouteInfoRequestHeader = cmd.header().expect("typed header");
    assert_eq!(header.topic, "TopicTest");
    assert_eq!(header.accept_standard_json_only, None);
    // Our encoder writes keys in fastjson's order, so the frame re-encodes
    // identically but for the `serializeTypeCurrentRPC` key every Apache
    // `RemotingCommand` writes (the C++ client's own encoder omits it).
    let apache = CPP_HEADER.replace(
        r#","version""#,
        r#","serializeTypeCurrentRPC":"JSON","version""#,
    );
    assert_eq!(apache.len(), 188 + 33);
    // 4 + 221 = 225 = 0xE1; header word 221 = 0xDD.
    assert_eq!(
        encode(&cmd),
        frame_bytes([0, 0, 0, 0xE1], [0, 0, 0, 0xDD], &apache, b"")
    );
}

#[test]
fn java_style_route_request_decodes_into_typed_header() {
    assert_eq!(JAVA_HEADER.len(), 98);
    // totalLen = 4 + 98 = 102 = 0x66; header word = 98 = 0x62.
    let wire = frame_bytes([0, 0, 0, 0x66], [0, 0, 0, 0x62], JAVA_HEADER, b"");
    let cmd = decode_all(&wire);
    assert_eq!(cmd.language, LanguageCode::Java);
    assert_eq!(
        (cmd.code, cmd.opaque, cmd.flag, cmd.version),
        (105, 1, 0, 121)
    );
    assert_eq!(cmd.remark, None);
    let header: GetRouteInfoRequestHeader = cmd.header().expect("typed header");
    assert_eq!(header.topic, "TopicTest");
}

#[test]
fn topic_not_exist_response_bytes_are_exact() {
    let request = decode_all(&frame_bytes(
        [0, 0, 0, 0x66],
        [0, 0, 0, 0x62],
        JAVA_HEADER,
        b"",
    ));
    let response = RemotingCommand::response_to(&request, response_code::TOPIC_NOT_EXIST)
        .with_remark("No topic route info in name server for the topic: TopicTest");
    let header = r#"{"code":17,"flag":1,"language":"JAVA","opaque":1,"remark":"No topic route info in name server for the topic: TopicTest","serializeTypeCurrentRPC":"JSON","version":409}"#;
    assert_eq!(header.len(), 167);
    // totalLen = 4 + 167 = 171 = 0xAB; header word = 167 = 0xA7.
    assert_eq!(
        encode(&response),
        frame_bytes([0, 0, 0, 0xAB], [0, 0, 0, 0xA7], header, b"")
    );
}

#[test]
fn route_response_for_cpp_client_uses_fastjson_keys() {
    let request = decode_all(&frame_bytes(
        [0, 0, 0, 0xC0],
        [0, 0, 0, 0xBC],
        CPP_HEADER,
        b"",
    ));
    let route = TopicRouteData {
        broker_datas: vec![BrokerData {
            broker_addrs: BTreeMap::from([(0, "127.0.0.1:10911".to_owned())]),
            broker_name: "broker-a".into(),
            cluster: "DefaultCluster".into(),
            enable_acting_master: false,
        }],
        queue_datas: vec![QueueData {
            broker_name: "broker-a".into(),
            read_queue_nums: 4,
            write_queue_nums: 4,
            perm: 6,
            topic_sys_flag: 0,
        }],
        ..TopicRouteData::default()
    };
    let style = JsonStyle::for_client(request.version, false);
    assert_eq!(style, JsonStyle::Fastjson);
    let body = route.to_json(style).expect("serializable");
    let expected_body = r#"{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911"},"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSynFlag":0,"topicSysFlag":0,"writeQueueNums":4}]}"#;
    assert_eq!(
        String::from_utf8(body.clone()).expect("utf8"),
        expected_body
    );
    let response = RemotingCommand::response_to(&request, response_code::SUCCESS).with_body(body);
    let header = r#"{"code":0,"flag":1,"language":"JAVA","opaque":0,"serializeTypeCurrentRPC":"JSON","version":409}"#;
    let total = u32::try_from(4 + header.len() + expected_body.len()).expect("small");
    let header_word = u32::try_from(header.len()).expect("small");
    assert_eq!((total, header_word), (4 + 95 + 277, 95));
    assert_eq!(
        encode(&response),
        frame_bytes(
            total.to_be_bytes(),
            header_word.to_be_bytes(),
            header,
            expected_body.as_bytes()
        )
    );
    let back = decode_all(&encode(&response));
    assert_eq!(
        TopicRouteData::from_json(&back.body).expect("parses"),
        route
    );
}

#[test]
fn binary_header_frame_is_exact() {
    let mut cmd = RemotingCommand::request(request_code::GET_ROUTEINFO_BY_TOPIC).with_header(
        &GetRouteInfoRequestHeader {
            topic: "T".into(),
            accept_standard_json_only: None,
        },
    );
    cmd.serialize_type = SerializeType::RocketMq;
    cmd.opaque = 3;
    let header: Vec<u8> = [
        &[0, 105][..],  // code
        &[0],           // language JAVA
        &[1, 153],      // version 409
        &[0, 0, 0, 3],  // opaque
        &[0, 0, 0, 0],  // flag
        &[0, 0, 0, 0],  // no remark
        &[0, 0, 0, 12], // extFields length
        &[0, 5],
        b"topic",
        &[0, 0, 0, 1],
        b"T",
    ]
    .concat();
    assert_eq!(header.len(), 33);
    let expected = [&[0, 0, 0, 37][..], &[1, 0, 0, 33], &header].concat();
    assert_eq!(encode(&cmd), expected);
    assert_eq!(decode_all(&expected), cmd);
}

#[test]
fn java_send_v2_frame_decodes_into_the_v1_view() {
    // As the 4.9.x Java client writes it: fastjson key order, letter-named
    // fields, properties joined by \u0001/\u0002, the serializeTypeCurrentRPC key.
    let header = r#"{"code":310,"extFields":{"a":"pg","b":"TopicTest","c":"TBW102","d":"4","e":"1","f":"0","g":"1700000000000","h":"0","i":"TAGS\u0001TagA\u0002WAIT\u0001true\u0002","j":"0","k":"false","m":"false"},"flag":0,"language":"JAVA","opaque":5,"serializeTypeCurrentRPC":"JSON","version":409}"#;
    let body = b"Hello RocketMQ";
    let total = u32::try_from(4 + header.len() + body.len()).expect("small");
    let word = u32::try_from(header.len()).expect("small");
    let cmd = decode_all(&frame_bytes(
        total.to_be_bytes(),
        word.to_be_bytes(),
        header,
        body,
    ));
    assert_eq!(&cmd.body[..], body);
    let send = sluice_net::header::SendMessageRequestHeader::from_request(&cmd).expect("V2 header");
    assert_eq!(send.producer_group, "pg");
    assert_eq!(send.topic, "TopicTest");
    assert_eq!(send.default_topic_queue_nums, 4);
    assert_eq!(send.queue_id, 1);
    assert_eq!(send.born_timestamp, 1_700_000_000_000);
    assert_eq!(
        send.properties.as_deref(),
        Some("TAGS\u{1}TagA\u{2}WAIT\u{1}true\u{2}")
    );
    assert_eq!(
        (send.unit_mode, send.batch, send.max_reconsume_times),
        (Some(false), Some(false), None)
    );
}

#[test]
fn send_response_carries_region_and_trace_switch_on_the_wire() {
    let mut request = RemotingCommand::request(request_code::SEND_MESSAGE_V2);
    request.opaque = 9;
    let response = RemotingCommand::response_to(&request, response_code::SUCCESS).with_header(
        &sluice_net::header::SendMessageResponseHeader::new(
            "0A00000100002A9F0000000000000000",
            2,
            17,
        ),
    );
    let header = r#"{"code":0,"extFields":{"MSG_REGION":"DefaultRegion","TRACE_ON":"true","msgId":"0A00000100002A9F0000000000000000","queueId":"2","queueOffset":"17"},"flag":1,"language":"JAVA","opaque":9,"serializeTypeCurrentRPC":"JSON","version":409}"#;
    let total = u32::try_from(4 + header.len()).expect("small");
    let word = u32::try_from(header.len()).expect("small");
    assert_eq!(
        encode(&response),
        frame_bytes(total.to_be_bytes(), word.to_be_bytes(), header, b"")
    );
}
