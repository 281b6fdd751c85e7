//! `RemotingCommand`: one request or response of the remoting protocol, with
//! flag helpers and builders. The body is a `Bytes` slice of the received
//! frame; an outgoing body may be several buffers, sent back to back.

use bytes::Bytes;

use super::{response_code, ExtFields, LanguageCode};
use crate::header::CommandHeader;
use crate::Result;

/// `flag` bit 0: the command is a response.
pub const FLAG_RESPONSE: i32 = 1;
/// `flag` bit 1: the request is oneway (no response is sent).
pub const FLAG_ONEWAY: i32 = 1 << 1;

/// The `version` Sluice puts in commands it originates: `V4_9_8`.
pub const SLUICE_VERSION: i32 = 409;

/// How a command's header is serialized (top byte of the header-length word).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SerializeType {
    /// fastjson-compatible JSON (byte 0).
    #[default]
    Json,
    /// The compact ROCKETMQ binary header (byte 1).
    RocketMq,
}

impl SerializeType {
    /// The wire byte.
    pub fn as_u8(self) -> u8 {
        match self {
            Self::Json => 0,
            Self::RocketMq => 1,
        }
    }

    /// Decodes the wire byte; `None` for unknown types.
    pub fn from_u8(byte: u8) -> Option<Self> {
        match byte {
            0 => Some(Self::Json),
            1 => Some(Self::RocketMq),
            _ => None,
        }
    }
}

/// One remoting command: a request or a response.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RemotingCommand {
    /// Request code (requests) or response code (responses).
    pub code: i32,
    /// Language of the sender.
    pub language: LanguageCode,
    /// Version ordinal of the sender (`MQVersion.Version`).
    pub version: i32,
    /// Correlates a response with its request.
    pub opaque: i32,
    /// Bit 0 = response, bit 1 = oneway.
    pub flag: i32,
    /// Optional human-readable remark (errors carry their reason here).
    pub remark: Option<String>,
    /// The flattened typed header.
    pub ext_fields: ExtFields,
    /// Opaque body bytes: the whole body of a decoded command.
    pub body: Bytes,
    /// More body buffers, sent on the wire right after `body` and each
    /// written as is, so a response made of many stored records (a pull)
    /// goes out without being copied into one buffer. Always empty in a
    /// decoded command; [`RemotingCommand::body_to_bytes`] joins them.
    pub body_chunks: Vec<Bytes>,
    /// Header serialization used on the wire; responses copy the request's.
    pub serialize_type: SerializeType,
}

impl RemotingCommand {
    /// A new request with `code`, sent by Sluice.
    pub fn request(code: i32) -> Self {
        Self {
            code,
            language: LanguageCode::Java,
            version: SLUICE_VERSION,
            ..Self::default()
        }
    }

    /// A new request carrying a typed header.
    pub fn request_with_header(code: i32, header: &impl CommandHeader) -> Self {
        Self::request(code).with_header(header)
    }

    /// A response to `request`: same opaque and serialize type, response flag set.
    pub fn response_to(request: &RemotingCommand, code: i32) -> Self {
        Self {
            code,
            language: LanguageCode::Java,
            version: SLUICE_VERSION,
            opaque: request.opaque,
            flag: FLAG_RESPONSE,
            serialize_type: request.serialize_type,
            ..Self::default()
        }
    }

    /// A response (opaque filled in later by the RPC layer) with `code` and `remark`.
    pub fn response(code: i32, remark: impl Into<String>) -> Self {
        Self {
            code,
            language: LanguageCode::Java,
            version: SLUICE_VERSION,
            flag: FLAG_RESPONSE,
            remark: Some(remark.into()),
            ..Self::default()
        }
    }

    /// A SUCCESS response with no remark.
    pub fn success() -> Self {
        Self {
            remark: None,
            ..Self::response(response_code::SUCCESS, "")
        }
    }

    /// Merges a typed header into `ext_fields`.
    #[must_use]
    pub fn with_header(mut self, header: &impl CommandHeader) -> Self {
        header.to_ext_fields(&mut self.ext_fields);
        self
    }

    /// Replaces the body.
    #[must_use]
    pub fn with_body(mut self, body: impl Into<Bytes>) -> Self {
        self.body = body.into();
        self.body_chunks = Vec::new();
        self
    }

    /// Replaces the body with `chunks`, sent back to back with no copy.
    #[must_use]
    pub fn with_body_chunks(mut self, chunks: Vec<Bytes>) -> Self {
        self.body = Bytes::new();
        self.body_chunks = chunks;
        self
    }

    /// Length of the whole body: `body` and every chunk.
    pub fn body_len(&self) -> usize {
        self.body.len() + self.body_chunks.iter().map(Bytes::len).sum::<usize>()
    }

    /// The whole body as one buffer: `body` itself (no copy) unless there
    /// are chunks, which are then copied together (for in-process readers
    /// and tests; the wire path never joins them).
    pub fn body_to_bytes(&self) -> Bytes {
        if self.body_chunks.is_empty() {
            return self.body.clone();
        }
        let mut whole = Vec::with_capacity(self.body_len());
        whole.extend_from_slice(&self.body);
        for chunk in &self.body_chunks {
            whole.extend_from_slice(chunk);
        }
        whole.into()
    }

    /// Sets the remark.
    #[must_use]
    pub fn with_remark(mut self, remark: impl Into<String>) -> Self {
        self.remark = Some(remark.into());
        self
    }

    /// Decodes `ext_fields` into a typed header.
    pub fn header<H: CommandHeader>(&self) -> Result<H> {
        H::from_ext_fields(&self.ext_fields)
    }

    /// True for responses (flag bit 0).
    pub fn is_response(&self) -> bool {
        self.flag & FLAG_RESPONSE != 0
    }

    /// True for oneway requests (flag bit 1).
    pub fn is_oneway(&self) -> bool {
        self.flag & FLAG_ONEWAY != 0
    }

    /// Sets the response bit.
    pub fn mark_response(&mut self) {
        self.flag |= FLAG_RESPONSE;
    }

    /// Sets the oneway bit.
    pub fn mark_oneway(&mut self) {
        self.flag |= FLAG_ONEWAY;
    }

    /// A short description for logs: `request 105 (GET_ROUTEINFO_BY_TOPIC) opaque 7`.
    pub fn describe(&self) -> String {
        let (kind, name) = if self.is_response() {
            ("response", super::response_code::name(self.code))
        } else {
            ("request", super::request_code::name(self.code))
        };
        format!(
            "{kind} {} ({}) opaque {}",
            self.code,
            name.unwrap_or("?"),
            self.opaque
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remoting::request_code;

    #[test]
    fn response_to_copies_opaque_and_serialize_type() {
        let mut req = RemotingCommand::request(request_code::PULL_MESSAGE);
        req.opaque = 42;
        req.serialize_type = SerializeType::RocketMq;
        let resp = RemotingCommand::response_to(&req, response_code::PULL_NOT_FOUND);
        assert!(resp.is_response());
        assert!(!resp.is_oneway());
        assert_eq!(resp.opaque, 42);
        assert_eq!(resp.serialize_type, SerializeType::RocketMq);
    }

    #[test]
    fn chunked_body_joins_to_the_whole_body() {
        let cmd = RemotingCommand::success()
            .with_body_chunks(vec![Bytes::from_static(b"ab"), Bytes::from_static(b"cde")]);
        assert_eq!(cmd.body_len(), 5);
        assert_eq!(cmd.body_to_bytes(), Bytes::from_static(b"abcde"));
        let single = cmd.with_body(&b"xyz"[..]);
        assert!(
            single.body_chunks.is_empty(),
            "with_body replaces the chunks"
        );
        assert_eq!(single.body_to_bytes(), Bytes::from_static(b"xyz"));
    }

    #[test]
    fn flag_bits_match_the_wire() {
        let mut req = RemotingCommand::request(request_code::UPDATE_CONSUMER_OFFSET);
        assert_eq!(req.flag, 0);
        req.mark_oneway();
        assert_eq!(req.flag, 2);
        assert!(req.is_oneway() && !req.is_response());
        assert_eq!(RemotingCommand::success().flag, 1);
    }
}
