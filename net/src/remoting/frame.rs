//! Frame codec: `i32 totalLen | i32 (serializeType << 24 | headerLen) |
//! header | body`, where totalLen counts everything after itself. Every
//! length is checked against [`FrameLimits`] before anything is allocated.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use super::{binary_header, json_header, RemotingCommand, SerializeType};
use crate::FrameError;

/// Java's default `com.rocketmq.remoting.frameMaxLength`: 16 MiB.
pub const FRAME_BYTES_MAX_DEFAULT: usize = 16 * 1024 * 1024;
/// Default cap on the header alone. Headers carry message properties, which
/// RocketMQ bounds at 32 KiB; 1 MiB leaves ample room.
pub const HEADER_BYTES_MAX_DEFAULT: usize = 1024 * 1024;
/// Default cap on the number of `extFields` entries.
pub const EXT_FIELDS_MAX_DEFAULT: usize = 1024;
/// The header-length word stores the length in its low 24 bits.
const HEADER_LEN_MASK: u32 = 0x00ff_ffff;

/// Limits applied to every frame, checked before allocating.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameLimits {
    /// Largest frame, length prefix included.
    pub frame_bytes_max: usize,
    /// Largest header.
    pub header_bytes_max: usize,
    /// Most `extFields` entries.
    pub ext_fields_max: usize,
}

impl Default for FrameLimits {
    fn default() -> Self {
        Self {
            frame_bytes_max: FRAME_BYTES_MAX_DEFAULT,
            header_bytes_max: HEADER_BYTES_MAX_DEFAULT,
            ext_fields_max: EXT_FIELDS_MAX_DEFAULT,
        }
    }
}

/// Appends the complete frame of `cmd` (length prefix included) to `dst`.
///
/// Fails without touching the peer if the frame would break `limits`.
pub fn encode(
    cmd: &RemotingCommand,
    limits: &FrameLimits,
    dst: &mut BytesMut,
) -> Result<(), FrameError> {
    encode_head(cmd, limits, dst)?;
    dst.put_slice(&cmd.body);
    for chunk in &cmd.body_chunks {
        dst.put_slice(chunk);
    }
    Ok(())
}

/// Appends the length prefix and header of `cmd` to `dst`: the whole frame
/// except the body (`body`, then every chunk), which must follow on the wire
/// unchanged. This lets a large body (a pull response's stored records) be
/// written without copying it.
pub fn encode_head(
    cmd: &RemotingCommand,
    limits: &FrameLimits,
    dst: &mut BytesMut,
) -> Result<(), FrameError> {
    let start = dst.len();
    dst.put_u64(0); // length and header-length words, patched below
    let header_start = dst.len();
    let written = match cmd.serialize_type {
        SerializeType::Json => {
            json_header::encode(cmd, dst);
            Ok(())
        }
        SerializeType::RocketMq => binary_header::encode(cmd, dst),
    };
    let header_len = dst.len() - header_start;
    let frame_len = 8 + header_len + cmd.body_len();
    let words = written
        .and_then(|()| check(header_len, limits.header_bytes_max, "header"))
        .and_then(|()| check(frame_len, limits.frame_bytes_max, "frame"))
        .and_then(|()| {
            let header_len = u32::try_from(header_len)
                .ok()
                .filter(|len| len & !HEADER_LEN_MASK == 0)
                .ok_or(FrameError::TooLarge {
                    what: "header",
                    len: header_len as u64,
                    max: u64::from(HEADER_LEN_MASK),
                })?;
            let total = i32::try_from(frame_len - 4).map_err(|_| FrameError::TooLarge {
                what: "frame",
                len: frame_len as u64,
                max: i32::MAX as u64,
            })?;
            Ok((
                total,
                (u32::from(cmd.serialize_type.as_u8()) << 24) | header_len,
            ))
        });
    match words {
        Ok((total, header_word)) => {
            dst[start..start + 4].copy_from_slice(&total.to_be_bytes());
            dst[start + 4..start + 8].copy_from_slice(&header_word.to_be_bytes());
            Ok(())
        }
        Err(e) => {
            dst.truncate(start);
            Err(e)
        }
    }
}

/// A frame split into its encoded head and the command's own body buffers
/// (shared, not copied); write `head`, `body`, then each of `body_chunks`.
#[derive(Debug, Clone)]
pub struct EncodedFrame {
    /// Length prefix, header-length word and header.
    pub head: Bytes,
    /// The body, as given.
    pub body: Bytes,
    /// The body's further chunks, as given.
    pub body_chunks: Vec<Bytes>,
}

impl EncodedFrame {
    /// Bytes of body on the wire: `body` and every chunk.
    pub fn body_len(&self) -> usize {
        self.body.len() + self.body_chunks.iter().map(Bytes::len).sum::<usize>()
    }

    /// Total bytes on the wire.
    pub fn len(&self) -> usize {
        self.head.len() + self.body_len()
    }

    /// True if the frame has no bytes (never the case for a valid frame).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Encodes `cmd` without copying its body.
pub fn encode_split(
    cmd: &RemotingCommand,
    limits: &FrameLimits,
) -> Result<EncodedFrame, FrameError> {
    let mut head = BytesMut::with_capacity(head_capacity(cmd));
    encode_head(cmd, limits, &mut head)?;
    Ok(EncodedFrame {
        head: head.freeze(),
        body: cmd.body.clone(),
        body_chunks: cmd.body_chunks.clone(),
    })
}

/// Header size estimate: fixed fields plus each extField with quoting and separators.
fn head_capacity(cmd: &RemotingCommand) -> usize {
    let ext_bytes: usize = cmd
        .ext_fields
        .iter()
        .map(|(k, v)| k.len() + v.len() + 8)
        .sum();
    let remark_bytes = cmd.remark.as_ref().map_or(0, |r| r.len() + 16);
    128 + ext_bytes + remark_bytes
}

/// Encodes `cmd` into a fresh buffer.
pub fn encode_to_bytes(cmd: &RemotingCommand, limits: &FrameLimits) -> Result<Bytes, FrameError> {
    let mut buf = BytesMut::with_capacity(head_capacity(cmd) + cmd.body_len());
    encode(cmd, limits, &mut buf)?;
    Ok(buf.freeze())
}

fn check(len: usize, max: usize, what: &'static str) -> Result<(), FrameError> {
    if len > max {
        return Err(FrameError::TooLarge {
            what,
            len: len as u64,
            max: max as u64,
        });
    }
    Ok(())
}

/// Names the protocol a peer speaks when its first four bytes, read as a
/// length, are another protocol's opening (HTTP/2's `PRI ` preface, which
/// RocketMQ 5 gRPC clients send; HTTP/1; a TLS record on a plain port).
fn foreign_protocol(prefix: &[u8]) -> Option<&'static str> {
    match prefix {
        b"PRI " => Some(
            "an HTTP/2 preface (a RocketMQ 5.x gRPC client?): this port speaks the RocketMQ 4.x \
             remoting protocol; gRPC clients must use a gRPC endpoint",
        ),
        b"GET " | b"POST" | b"HEAD" | b"PUT " => {
            Some("an HTTP/1 request: this port speaks the RocketMQ 4.x remoting protocol, not HTTP")
        }
        // Only a plain listener (tls mode disabled) ever reads one: TLS
        // listeners take the handshake before any frame is read.
        [0x16, 0x03, ..] => Some(
            "a TLS handshake: this port speaks plain RocketMQ remoting (its tls mode is \
             disabled; permissive or enforcing serve TLS)",
        ),
        _ => None,
    }
}

/// Reads the length prefix at the start of `src`, validating it.
///
/// Returns the whole frame length (prefix included), or `Incomplete` when
/// fewer than 4 bytes are available.
pub fn frame_len(src: &[u8], limits: &FrameLimits) -> Result<usize, FrameError> {
    let Some(prefix) = src.get(..4) else {
        return Err(FrameError::Incomplete);
    };
    let total = i32::from_be_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]);
    if total > 0 && usize::try_from(total).is_ok_and(|t| t + 4 > limits.frame_bytes_max) {
        if let Some(protocol) = foreign_protocol(prefix) {
            return Err(FrameError::ForeignProtocol(protocol));
        }
    }
    let total = usize::try_from(total)
        .map_err(|_| FrameError::corrupt(format!("negative frame length {total}")))?;
    if total < 4 {
        return Err(FrameError::corrupt(format!(
            "frame length {total} cannot hold the header-length word"
        )));
    }
    let frame_len = total + 4;
    check(frame_len, limits.frame_bytes_max, "frame")?;
    Ok(frame_len)
}

/// Decodes one frame from the front of `src`, consuming it.
///
/// `Ok(None)` means more bytes are needed; `src` keeps them. On error the
/// stream is unusable and the connection should be closed.
pub fn decode(
    src: &mut BytesMut,
    limits: &FrameLimits,
) -> Result<Option<RemotingCommand>, FrameError> {
    let len = match frame_len(src, limits) {
        Ok(len) => len,
        Err(FrameError::Incomplete) => return Ok(None),
        Err(e) => return Err(e),
    };
    if src.len() < len {
        src.reserve(len - src.len());
        return Ok(None);
    }
    let mut frame = src.split_to(len).freeze();
    frame.advance(4);
    decode_body(frame, limits).map(Some)
}

/// Decodes one frame from a byte slice (for tests and fuzzing): the command
/// and the number of bytes consumed, or `Incomplete`.
pub fn decode_slice(
    src: &[u8],
    limits: &FrameLimits,
) -> Result<(RemotingCommand, usize), FrameError> {
    let len = frame_len(src, limits)?;
    let Some(frame) = src.get(4..len) else {
        return Err(FrameError::Incomplete);
    };
    let cmd = decode_body(Bytes::copy_from_slice(frame), limits)?;
    Ok((cmd, len))
}

/// Decodes a frame without its length prefix; the body is a zero-copy slice.
fn decode_body(mut frame: Bytes, limits: &FrameLimits) -> Result<RemotingCommand, FrameError> {
    if frame.len() < 4 {
        return Err(FrameError::corrupt(
            "frame shorter than the header-length word",
        ));
    }
    let word = frame.get_u32();
    let header_len = (word & HEADER_LEN_MASK) as usize;
    let serialize_byte = u8::try_from(word >> 24).expect("invariant: a u32 shifted by 24 fits u8");
    let serialize_type = SerializeType::from_u8(serialize_byte)
        .ok_or_else(|| FrameError::corrupt(format!("unknown serialize type {serialize_byte}")))?;
    check(header_len, limits.header_bytes_max, "header")?;
    if header_len > frame.len() {
        return Err(FrameError::corrupt(format!(
            "header length {header_len} exceeds the {} bytes left in the frame",
            frame.len()
        )));
    }
    let header = frame.split_to(header_len);
    let mut cmd = match serialize_type {
        SerializeType::Json => json_header::decode(&header, limits.ext_fields_max)?,
        SerializeType::RocketMq => binary_header::decode(&header, limits.ext_fields_max)?,
    };
    cmd.body = frame;
    Ok(cmd)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streaming_decode_waits_for_the_whole_frame() {
        let cmd = RemotingCommand::request(11).with_body(&b"body"[..]);
        let bytes = encode_to_bytes(&cmd, &FrameLimits::default()).expect("encodable");
        let mut buf = BytesMut::new();
        for (i, b) in bytes.iter().enumerate() {
            buf.put_u8(*b);
            let out = decode(&mut buf, &FrameLimits::default()).expect("valid prefix");
            assert_eq!(out.is_some(), i + 1 == bytes.len());
            if let Some(got) = out {
                assert_eq!(got, cmd);
            }
        }
        assert!(buf.is_empty());
    }

    #[test]
    fn oversized_length_is_rejected_before_allocating() {
        let mut buf = BytesMut::from(&i32::MAX.to_be_bytes()[..]);
        let err = decode(&mut buf, &FrameLimits::default()).expect_err("too large");
        assert!(matches!(err, FrameError::TooLarge { what: "frame", .. }));
        let preface = frame_len(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", &FrameLimits::default())
            .expect_err("an HTTP/2 preface is not a frame");
        assert!(
            matches!(preface, FrameError::ForeignProtocol(p) if p.contains("gRPC")),
            "{preface:?}"
        );
        // A TLS 1.2/1.3 ClientHello record header on a plain port.
        let hello = frame_len(&[0x16, 0x03, 0x01, 0x02, 0x00], &FrameLimits::default())
            .expect_err("a TLS record is not a frame");
        assert!(
            matches!(hello, FrameError::ForeignProtocol(p) if p.contains("tls mode is disabled")),
            "{hello:?}"
        );
        assert!(buf.capacity() < 1024);
    }

    #[test]
    fn header_longer_than_frame_is_corrupt() {
        let mut raw = Vec::new();
        raw.extend_from_slice(&8i32.to_be_bytes());
        raw.extend_from_slice(&100u32.to_be_bytes());
        raw.extend_from_slice(b"{}{}");
        let err = decode_slice(&raw, &FrameLimits::default()).expect_err("corrupt");
        assert!(matches!(err, FrameError::Corrupt(_)));
    }

    #[test]
    fn encoder_refuses_frames_over_the_limit() {
        let limits = FrameLimits {
            frame_bytes_max: 64,
            ..FrameLimits::default()
        };
        let cmd = RemotingCommand::request(10).with_body(vec![0u8; 100]);
        let mut buf = BytesMut::new();
        assert!(encode(&cmd, &limits, &mut buf).is_err());
        assert!(buf.is_empty());
    }
}
