use std::net::SocketAddr;

use bytes::Bytes;
use sluice_core::message::{MessageInput, RecordStamp, StoredRecord};

use super::*;

fn v2(message_type: MessageType) -> proto::Message {
    proto::Message {
        topic: Some(proto::Resource {
            resource_namespace: String::new(),
            name: "orders".into(),
        }),
        user_properties: [("color".to_owned(), "blue".to_owned())]
            .into_iter()
            .collect(),
        system_properties: Some(proto::SystemProperties {
            tag: Some("created".into()),
            keys: vec!["k1".into(), "k2".into()],
            message_id: "01ABCDEF".into(),
            message_type: message_type as i32,
            message_group: Some("order-7".into()),
            born_timestamp: Some(proto::Timestamp::from_millis(1_700_000_000_123)),
            body_encoding: Encoding::Identity as i32,
            ..Default::default()
        }),
        body: Bytes::from_static(b"hello"),
    }
}

fn stored(cmd: &RemotingCommand, sys_flag_extra: i32, body: Bytes) -> StoredRecord {
    let h: SendMessageRequestHeaderV2 = cmd.header().expect("send header");
    let addr: SocketAddr = "127.0.0.1:10911".parse().expect("addr");
    let input = MessageInput {
        topic: h.b.clone(),
        queue_id: h.e,
        flag: h.h,
        sys_flag: h.f | sys_flag_extra,
        born_timestamp_ms: h.g,
        born_host: addr,
        store_host: addr,
        reconsume_times: 0,
        prepared_transaction_offset: 0,
        body,
        properties: Bytes::from(h.i.unwrap_or_default().into_bytes()),
    };
    let stamp = RecordStamp {
        queue_offset: 3,
        phys_offset: 4_096,
        store_timestamp_ms: 1_700_000_000_500,
    };
    let raw = input.encode_to_vec(&stamp).expect("encode");
    StoredRecord::decode(&Bytes::from(raw)).expect("decode")
}

#[test]
fn a_v2_message_is_stored_with_apaches_properties_and_read_back_intact() {
    let cmd = send_command(&v2(MessageType::Fifo), 2, 0).expect("command");
    let h: SendMessageRequestHeaderV2 = cmd.header().expect("header");
    assert_eq!(
        (h.a.as_str(), h.b.as_str(), h.e, h.g),
        ("orders", "orders", 2, 1_700_000_000_123)
    );
    let props = Properties::parse(h.i.as_deref().unwrap_or_default().as_bytes()).expect("props");
    assert_eq!(props.get(keys::TAGS), Some("created"));
    assert_eq!(props.get(keys::KEYS), Some("k1 k2"));
    assert_eq!(props.get(keys::UNIQ_KEY), Some("01ABCDEF"));
    assert_eq!(props.get(keys::SHARDING_KEY), Some("order-7"));
    assert_eq!(props.get(keys::PGROUP), Some("orders"));
    assert_eq!(props.get("color"), Some("blue"));

    let rec = stored(&cmd, 0, Bytes::from_static(b"hello"));
    let back = to_message(&rec, None);
    let sp = back.system_properties.expect("system properties");
    assert_eq!(back.topic.map(|t| t.name), Some("orders".into()));
    assert_eq!(back.body, Bytes::from_static(b"hello"));
    assert_eq!(sp.tag.as_deref(), Some("created"));
    assert_eq!(sp.keys, vec!["k1".to_owned(), "k2".to_owned()]);
    assert_eq!(sp.message_id, "01ABCDEF");
    assert_eq!(sp.message_group.as_deref(), Some("order-7"));
    assert_eq!(sp.message_type, MessageType::Fifo as i32);
    assert_eq!(sp.body_encoding, Encoding::Identity as i32);
    assert_eq!(sp.delivery_attempt, Some(1));
    let digest = sp.body_digest.expect("digest");
    assert_eq!(
        (digest.r#type, digest.checksum.as_str()),
        (DigestType::Crc32 as i32, "3610A686")
    );
    // Only the user's own properties come back as user properties.
    assert_eq!(back.user_properties.len(), 1);
    assert_eq!(
        back.user_properties.get("color").map(String::as_str),
        Some("blue")
    );
}

#[test]
fn system_property_names_and_empty_ids_or_bodies_are_refused() {
    let mut m = v2(MessageType::Normal);
    m.user_properties
        .insert(keys::UNIQ_KEY.to_owned(), "x".into());
    let refused = send_command(&m, 0, 0).expect_err("system key");
    assert_eq!(refused.code, Code::IllegalMessagePropertyKey as i32);
    let mut m = v2(MessageType::Normal);
    if let Some(sp) = m.system_properties.as_mut() {
        sp.message_id.clear();
    }
    assert_eq!(
        send_command(&m, 0, 0).expect_err("id").code,
        Code::IllegalMessageId as i32
    );
    let mut m = v2(MessageType::Normal);
    m.body = Bytes::new();
    assert_eq!(
        send_command(&m, 0, 0).expect_err("body").code,
        Code::MessageBodyEmpty as i32
    );
}

#[test]
fn transactions_are_prepared_and_delivery_times_in_ms_are_understood() {
    let mut m = v2(MessageType::Transaction);
    if let Some(sp) = m.system_properties.as_mut() {
        // The Python client writes milliseconds into `seconds`.
        sp.delivery_timestamp = Some(proto::Timestamp {
            seconds: 1_700_000_060_000,
            nanos: 0,
        });
    }
    let cmd = send_command(&m, 0, 0).expect("command");
    let h: SendMessageRequestHeaderV2 = cmd.header().expect("header");
    assert_eq!(
        h.f & sys_flag::TRANSACTION_MASK,
        sys_flag::TRANSACTION_PREPARED
    );
    let props = Properties::parse(h.i.as_deref().unwrap_or_default().as_bytes()).expect("props");
    assert_eq!(props.get(keys::TRAN_MSG), Some("true"));
    assert_eq!(props.get(keys::TIMER_DELIVER_MS), Some("1700000060000"));
}

#[test]
fn a_4x_zlib_body_reaches_5x_clients_inflated() {
    let cmd = send_command(&v2(MessageType::Normal), 0, 0).expect("command");
    let mut deflated = Vec::new();
    {
        use std::io::Write as _;
        let mut z = flate2::write::ZlibEncoder::new(&mut deflated, flate2::Compression::default());
        z.write_all(b"a large body, compressed by a 4.x producer")
            .expect("deflate");
        z.finish().expect("finish");
    }
    let rec = stored(&cmd, sys_flag::COMPRESSED, Bytes::from(deflated));
    let back = to_message(&rec, None);
    assert_eq!(
        &back.body[..],
        b"a large body, compressed by a 4.x producer"
    );
    let sp = back.system_properties.expect("sp");
    assert_eq!(sp.body_encoding, Encoding::Identity as i32);
}
