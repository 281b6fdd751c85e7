//! Criterion micro-benchmarks: encode and decode of a `SEND_MESSAGE_V2` frame
//! with a 1 KiB body, for both header encodings, and the typed decode of its
//! header from `extFields`.

use bytes::BytesMut;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use sluice_net::header::field::HeaderField;
use sluice_net::header::{CommandHeader, SendMessageRequestHeaderV2, SendMessageResponseHeader};
use sluice_net::remoting::frame::{self, FrameLimits};
use sluice_net::remoting::{request_code, SerializeType};
use sluice_net::{ExtFields, RemotingCommand};

fn send_v2(serialize_type: SerializeType) -> RemotingCommand {
    let header = SendMessageRequestHeaderV2 {
        a: "please_rename_unique_group_name".into(),
        b: "TopicTest".into(),
        c: "TBW102".into(),
        d: 4,
        e: 3,
        f: 0,
        g: 1_700_000_000_000,
        h: 0,
        i: Some("KEYS\u{1}order-42\u{2}UNIQ_KEY\u{1}7F0000010001000000000000000000AB\u{2}WAIT\u{1}true\u{2}TAGS\u{1}TagA\u{2}".into()),
        j: Some(0),
        k: Some(false),
        l: None,
        m: Some(false),
        n: Some("broker-a".into()),
    };
    let mut cmd = RemotingCommand::request_with_header(request_code::SEND_MESSAGE_V2, &header)
        .with_body(vec![b'x'; 1024]);
    cmd.opaque = 12_345;
    cmd.serialize_type = serialize_type;
    cmd
}

fn codec(c: &mut Criterion) {
    let limits = FrameLimits::default();
    for (name, st) in [
        ("json", SerializeType::Json),
        ("rocketmq", SerializeType::RocketMq),
    ] {
        let cmd = send_v2(st);
        let wire = frame::encode_to_bytes(&cmd, &limits).expect("encodable");
        let mut group = c.benchmark_group(format!("send_v2_1KiB_{name}"));
        group.throughput(Throughput::Elements(1));
        group.bench_function("encode", |b| {
            let mut buf = BytesMut::with_capacity(4096);
            b.iter(|| {
                buf.clear();
                frame::encode(&cmd, &limits, &mut buf).expect("encodable");
                criterion::black_box(buf.len())
            });
        });
        group.bench_function("decode", |b| {
            b.iter_batched(
                || BytesMut::from(&wire[..]),
                |mut buf| {
                    frame::decode(&mut buf, &limits)
                        .expect("valid")
                        .expect("complete")
                },
                BatchSize::SmallInput,
            );
        });
        group.finish();
    }
}

/// The `extFields` of a Java client's `SEND_MESSAGE_V2`, as the broker holds
/// them after decoding the frame (`l`, `maxReconsumeTimes`, is only sent on
/// retries).
fn send_v2_ext_fields() -> ExtFields {
    let properties = "UNIQ_KEY\u{1}7F0000010001000000000000000000AB\u{2}\
                      WAIT\u{1}true\u{2}TAGS\u{1}TagA\u{2}";
    [
        ("a", "please_rename_unique_group_name"),
        ("b", "TopicTest"),
        ("c", "TBW102"),
        ("d", "4"),
        ("e", "3"),
        ("f", "0"),
        ("g", "1700000000000"),
        ("h", "0"),
        ("i", properties),
        ("j", "0"),
        ("k", "false"),
        ("m", "false"),
        ("n", "broker-a"),
    ]
    .into_iter()
    .collect()
}

/// The decode `from_ext_fields` did before its one pass: one lookup per
/// field, kept here so both are measured in the same run.
fn send_v2_per_field(ext: &ExtFields) -> sluice_net::Result<SendMessageRequestHeaderV2> {
    Ok(SendMessageRequestHeaderV2 {
        a: HeaderField::read(ext, "a")?,
        b: HeaderField::read(ext, "b")?,
        c: HeaderField::read(ext, "c")?,
        d: HeaderField::read(ext, "d")?,
        e: HeaderField::read(ext, "e")?,
        f: HeaderField::read(ext, "f")?,
        g: HeaderField::read(ext, "g")?,
        h: HeaderField::read(ext, "h")?,
        i: HeaderField::read(ext, "i")?,
        j: HeaderField::read(ext, "j")?,
        k: HeaderField::read(ext, "k")?,
        l: HeaderField::read(ext, "l")?,
        m: HeaderField::read(ext, "m")?,
        n: HeaderField::read(ext, "n")?,
    })
}

fn header_decode(c: &mut Criterion) {
    let ext = send_v2_ext_fields();
    let mut group = c.benchmark_group("header_decode");
    group.throughput(Throughput::Elements(1));
    group.bench_function("send_v2_from_ext_fields", |b| {
        b.iter(|| {
            SendMessageRequestHeaderV2::from_ext_fields(criterion::black_box(&ext)).expect("valid")
        });
    });
    group.bench_function("send_v2_per_field_read", |b| {
        b.iter(|| send_v2_per_field(criterion::black_box(&ext)).expect("valid"));
    });
    group.finish();
}

/// A stored send's answer as the broker builds it (typed header to
/// `extFields`, the id, queue and offset rendered) and encodes it (JSON,
/// as most clients ask).
fn send_answer(c: &mut Criterion) {
    let limits = FrameLimits::default();
    let mut group = c.benchmark_group("send_answer");
    group.throughput(Throughput::Elements(1));
    group.bench_function("build_and_encode_json", |b| {
        let mut buf = BytesMut::with_capacity(1024);
        let mut offset = 1_234_567_i64;
        b.iter(|| {
            offset += 1;
            let header = SendMessageResponseHeader::new(
                "7F00000100002A9F000000000012D687",
                3,
                criterion::black_box(offset),
            );
            let mut cmd = RemotingCommand::success().with_header(&header);
            cmd.opaque = 12_345;
            cmd.serialize_type = SerializeType::Json;
            buf.clear();
            frame::encode(&cmd, &limits, &mut buf).expect("encodable");
            criterion::black_box(buf.len())
        });
    });
    group.finish();
}

criterion_group!(benches, codec, header_decode, send_answer);
criterion_main!(benches);
