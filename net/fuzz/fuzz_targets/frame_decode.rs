//! Fuzz target: arbitrary bytes through the frame decoder (slice and
//! streaming), typed send headers and JSON bodies. Nothing may panic, and a
//! decoded frame must re-encode to a frame that decodes identically.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use sluice_net::body::{HeartbeatData, TopicRouteData};
use sluice_net::header::SendMessageRequestHeader;
use sluice_net::remoting::frame::{self, FrameLimits};

fuzz_target!(|data: &[u8]| {
    let limits = FrameLimits {
        frame_bytes_max: 1 << 20,
        ..FrameLimits::default()
    };
    if let Ok((cmd, used)) = frame::decode_slice(data, &limits) {
        assert!(used <= data.len());
        let _ = SendMessageRequestHeader::from_request(&cmd);
        let _ = TopicRouteData::from_json(&cmd.body);
        let _ = sluice_net::body::decode::<HeartbeatData>(&cmd.body, "HeartbeatData");
        if let Ok(bytes) = frame::encode_to_bytes(&cmd, &FrameLimits::default()) {
            let (again, _) = frame::decode_slice(&bytes, &FrameLimits::default())
                .expect("re-encoded frame decodes");
            assert_eq!(again, cmd);
        }
    }
    let mut buf = BytesMut::from(data);
    while let Ok(Some(_)) = frame::decode(&mut buf, &limits) {}
    let _ = TopicRouteData::from_json(data);
});
