//! Property tests of the frame codec: both header encodings round-trip any
//! command, a body sent in chunks makes the same frame as the whole body,
//! and arbitrary bytes never panic the decoder.

use bytes::{Bytes, BytesMut};
use proptest::prelude::*;
use sluice_net::remoting::frame::{self, FrameLimits};
use sluice_net::remoting::{LanguageCode, SerializeType};
use sluice_net::{FrameError, RemotingCommand};

fn command(binary: bool) -> impl Strategy<Value = RemotingCommand> {
    let small = if binary {
        (i32::from(i16::MIN)..=i32::from(i16::MAX)).boxed()
    } else {
        any::<i32>().boxed()
    };
    (
        small.clone(),
        prop::sample::select(LanguageCode::ALL.to_vec()),
        small,
        any::<i32>(),
        any::<i32>(),
        // The binary header cannot tell an empty remark from none.
        prop::option::of(if binary { ".{1,20}" } else { ".{0,20}" }),
        prop::collection::btree_map(".{0,12}", ".{0,24}", 0..8),
        prop::collection::vec(any::<u8>(), 0..256),
    )
        .prop_map(
            move |(code, language, version, opaque, flag, remark, ext_fields, body)| {
                RemotingCommand {
                    code,
                    language,
                    version,
                    opaque,
                    flag,
                    remark,
                    ext_fields: ext_fields.into(),
                    body: Bytes::from(body),
                    body_chunks: Vec::new(),
                    serialize_type: if binary {
                        SerializeType::RocketMq
                    } else {
                        SerializeType::Json
                    },
                }
            },
        )
}

fn round_trip(cmd: &RemotingCommand) -> RemotingCommand {
    let limits = FrameLimits::default();
    let bytes = frame::encode_to_bytes(cmd, &limits).expect("encodable");
    let (back, used) = frame::decode_slice(&bytes, &limits).expect("decodable");
    assert_eq!(used, bytes.len());
    back
}

proptest! {
    #[test]
    fn json_frames_round_trip(cmd in command(false)) {
        prop_assert_eq!(round_trip(&cmd), cmd);
    }

    #[test]
    fn binary_frames_round_trip(cmd in command(true)) {
        prop_assert_eq!(round_trip(&cmd), cmd);
    }

    #[test]
    fn concatenated_frames_stream_back_in_order(cmds in prop::collection::vec(command(false), 1..6), chunk in 1usize..64) {
        let limits = FrameLimits::default();
        let mut wire = BytesMut::new();
        for cmd in &cmds {
            frame::encode(cmd, &limits, &mut wire).expect("encodable");
        }
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        for piece in wire.chunks(chunk) {
            buf.extend_from_slice(piece);
            while let Some(cmd) = frame::decode(&mut buf, &limits).expect("valid stream") {
                out.push(cmd);
            }
        }
        prop_assert_eq!(out, cmds);
    }

    #[test]
    fn split_encoding_is_the_whole_frame(cmd in command(false)) {
        let limits = FrameLimits::default();
        let whole = frame::encode_to_bytes(&cmd, &limits).expect("encodable");
        let split = frame::encode_split(&cmd, &limits).expect("encodable");
        prop_assert_eq!([&split.head[..], &split.body[..]].concat(), whole.to_vec());
    }

    #[test]
    fn a_body_in_chunks_encodes_to_the_same_frame_as_the_whole_body(
        cmd in command(false),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..6),
    ) {
        let limits = FrameLimits::default();
        let whole = frame::encode_to_bytes(&cmd, &limits).expect("encodable");
        let mut at: Vec<usize> = cuts.iter().map(|i| i.index(cmd.body.len() + 1)).collect();
        at.sort_unstable();
        let mut chunks = Vec::new();
        let mut from = 0;
        for to in at.into_iter().chain([cmd.body.len()]) {
            chunks.push(cmd.body.slice(from..to));
            from = to;
        }
        let chunked = cmd.clone().with_body_chunks(chunks);
        prop_assert_eq!(chunked.body_to_bytes(), cmd.body.clone());
        prop_assert_eq!(frame::encode_to_bytes(&chunked, &limits).expect("encodable"), whole.clone());
        let split = frame::encode_split(&chunked, &limits).expect("encodable");
        let mut wire = [&split.head[..], &split.body[..]].concat();
        for chunk in &split.body_chunks {
            wire.extend_from_slice(chunk);
        }
        prop_assert_eq!(split.len(), whole.len());
        prop_assert_eq!(wire, whole.to_vec());
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_decoder(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let limits = FrameLimits::default();
        let _ = frame::decode_slice(&bytes, &limits);
        let mut buf = BytesMut::from(&bytes[..]);
        while let Ok(Some(_)) = frame::decode(&mut buf, &limits) {}
    }

    #[test]
    fn well_framed_garbage_is_an_error_not_a_panic(
        serialize_type in 0u8..3,
        header_len in 0u32..300,
        tail in prop::collection::vec(any::<u8>(), 0..300),
    ) {
        let mut bytes = Vec::new();
        let total = u32::try_from(4 + tail.len()).expect("small");
        bytes.extend_from_slice(&total.to_be_bytes());
        bytes.extend_from_slice(&((u32::from(serialize_type) << 24) | header_len).to_be_bytes());
        bytes.extend_from_slice(&tail);
        match frame::decode_slice(&bytes, &FrameLimits::default()) {
            Ok((_, used)) => prop_assert_eq!(used, bytes.len()),
            Err(FrameError::Incomplete) => prop_assert!(false, "a whole frame is never incomplete"),
            Err(_) => {}
        }
    }

    #[test]
    fn ext_field_limit_is_enforced_for_both_encodings(n in 0usize..40, binary in any::<bool>()) {
        let limits = FrameLimits { ext_fields_max: 16, ..FrameLimits::default() };
        let mut cmd = RemotingCommand::request(10);
        cmd.serialize_type = if binary { SerializeType::RocketMq } else { SerializeType::Json };
        cmd.ext_fields = (0..n).map(|i| (format!("k{i}"), "v".to_owned())).collect::<sluice_net::ExtFields>();
        let bytes = frame::encode_to_bytes(&cmd, &FrameLimits::default()).expect("encodable");
        let result = frame::decode_slice(&bytes, &limits);
        prop_assert_eq!(result.is_ok(), n <= 16);
    }
}
