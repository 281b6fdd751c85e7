//! The ROCKETMQ binary header (serialize type 1):
//! `i16 code | u8 language | i16 version | i32 opaque | i32 flag |
//! i32 remarkLen + remark | i32 extLen + (i16 keyLen, key, i32 valLen, val)*`.
//! Every length is checked against the bytes that remain before allocating.

use bytes::BufMut;

use super::{ExtFields, LanguageCode, RemotingCommand, SerializeType};
use crate::FrameError;

/// Appends the binary header of `cmd` to `dst`.
///
/// Fails when a field does not fit its wire width (a code or version outside
/// `i16`, a key longer than `i16::MAX`), rather than truncating as Java does.
pub fn encode(cmd: &RemotingCommand, dst: &mut impl BufMut) -> Result<(), FrameError> {
    let code = i16::try_from(cmd.code)
        .map_err(|_| FrameError::corrupt(format!("code {} does not fit i16", cmd.code)))?;
    let version = i16::try_from(cmd.version)
        .map_err(|_| FrameError::corrupt(format!("version {} does not fit i16", cmd.version)))?;
    dst.put_i16(code);
    dst.put_u8(cmd.language.as_u8());
    dst.put_i16(version);
    dst.put_i32(cmd.opaque);
    dst.put_i32(cmd.flag);
    match &cmd.remark {
        Some(remark) if !remark.is_empty() => {
            dst.put_i32(len_i32(remark.len(), "remark")?);
            dst.put_slice(remark.as_bytes());
        }
        _ => dst.put_i32(0),
    }
    let ext_len: usize = cmd
        .ext_fields
        .iter()
        .map(|(k, v)| 2 + k.len() + 4 + v.len())
        .sum();
    dst.put_i32(len_i32(ext_len, "extFields")?);
    for (key, value) in cmd.ext_fields.iter() {
        let key_len = i16::try_from(key.len())
            .map_err(|_| FrameError::corrupt("extFields key longer than i16::MAX"))?;
        dst.put_i16(key_len);
        dst.put_slice(key.as_bytes());
        dst.put_i32(len_i32(value.len(), "extFields value")?);
        dst.put_slice(value.as_bytes());
    }
    Ok(())
}

fn len_i32(len: usize, what: &'static str) -> Result<i32, FrameError> {
    i32::try_from(len).map_err(|_| FrameError::TooLarge {
        what,
        len: len as u64,
        max: i32::MAX as u64,
    })
}

/// A bounds-checked reader over the header bytes.
struct Cursor<'a> {
    bytes: &'a [u8],
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], FrameError> {
        if self.bytes.len() < n {
            return Err(FrameError::corrupt(format!(
                "binary header truncated in {what}: need {n} bytes, have {}",
                self.bytes.len()
            )));
        }
        let (head, tail) = self.bytes.split_at(n);
        self.bytes = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], FrameError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N, what)?);
        Ok(out)
    }

    fn i16(&mut self, what: &str) -> Result<i16, FrameError> {
        Ok(i16::from_be_bytes(self.array(what)?))
    }

    fn i32(&mut self, what: &str) -> Result<i32, FrameError> {
        Ok(i32::from_be_bytes(self.array(what)?))
    }

    /// A length field: negative lengths are corrupt; the bytes must be present.
    fn len(&mut self, len: i64, what: &str) -> Result<&'a [u8], FrameError> {
        let len = usize::try_from(len)
            .map_err(|_| FrameError::corrupt(format!("negative {what} length {len}")))?;
        self.take(len, what)
    }

    fn string(&mut self, len: i64, what: &str) -> Result<String, FrameError> {
        self.str(len, what).map(str::to_owned)
    }

    fn str(&mut self, len: i64, what: &str) -> Result<&'a str, FrameError> {
        let bytes = self.len(len, what)?;
        std::str::from_utf8(bytes).map_err(|_| FrameError::corrupt(format!("{what} is not UTF-8")))
    }
}

/// Parses a binary header; a zero remark length decodes as no remark.
pub fn decode(bytes: &[u8], ext_fields_max: usize) -> Result<RemotingCommand, FrameError> {
    let mut cur = Cursor { bytes };
    let code = i32::from(cur.i16("code")?);
    let [language] = cur.array::<1>("language")?;
    let version = i32::from(cur.i16("version")?);
    let opaque = cur.i32("opaque")?;
    let flag = cur.i32("flag")?;
    let remark_len = cur.i32("remark length")?;
    let remark = if remark_len == 0 {
        None
    } else {
        Some(cur.string(i64::from(remark_len), "remark")?)
    };
    let ext_len = cur.i32("extFields length")?;
    let mut ext = Cursor {
        bytes: cur.len(i64::from(ext_len), "extFields")?,
    };
    let mut ext_fields = ExtFields::with_capacity(16, ext.bytes.len());
    while !ext.bytes.is_empty() {
        if ext_fields.len() >= ext_fields_max {
            return Err(FrameError::TooLarge {
                what: "extFields count",
                len: ext_fields.len() as u64 + 1,
                max: ext_fields_max as u64,
            });
        }
        let key_len = ext.i16("extFields key length")?;
        let key = ext.str(i64::from(key_len), "extFields key")?;
        let value_len = ext.i32("extFields value length")?;
        let value = ext.str(i64::from(value_len), "extFields value")?;
        let text = ext_fields.text_mut();
        let start = text.len();
        text.push_str(key);
        text.push_str(value);
        ext_fields.push_decoded(start, start + key.len());
    }
    ext_fields.finish_decoded();
    if !cur.bytes.is_empty() {
        return Err(FrameError::corrupt(format!(
            "{} trailing bytes after binary header",
            cur.bytes.len()
        )));
    }
    Ok(RemotingCommand {
        code,
        language: LanguageCode::from_u8(language),
        version,
        opaque,
        flag,
        remark,
        ext_fields,
        body: bytes::Bytes::new(),
        body_chunks: Vec::new(),
        serialize_type: SerializeType::RocketMq,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_matches_the_spec() {
        let mut cmd = RemotingCommand::request(34);
        cmd.language = LanguageCode::Go;
        cmd.version = 401;
        cmd.opaque = 7;
        cmd.ext_fields.insert("k", "vv");
        let mut out = Vec::new();
        encode(&cmd, &mut out).expect("encodable");
        let expected: Vec<u8> = [
            &[0, 34][..],
            &[9],
            &[1, 145],
            &[0, 0, 0, 7],
            &[0, 0, 0, 0],
            &[0, 0, 0, 0],
            &[0, 0, 0, 9],
            &[0, 1, b'k', 0, 0, 0, 2, b'v', b'v'],
        ]
        .concat();
        assert_eq!(out, expected);
        let back = decode(&out, 16).expect("decodable");
        assert_eq!(back.ext_fields, cmd.ext_fields);
        assert_eq!(back.version, 401);
    }

    #[test]
    fn rejects_negative_and_overlong_lengths() {
        let mut bytes = vec![0, 10, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0];
        bytes.extend_from_slice(&(-5i32).to_be_bytes());
        assert!(matches!(decode(&bytes, 8), Err(FrameError::Corrupt(_))));
        bytes.truncate(13);
        bytes.extend_from_slice(&i32::MAX.to_be_bytes());
        assert!(matches!(decode(&bytes, 8), Err(FrameError::Corrupt(_))));
    }

    #[test]
    fn refuses_codes_that_do_not_fit_i16() {
        let cmd = RemotingCommand::request(200_050);
        assert!(encode(&cmd, &mut Vec::new()).is_err());
    }
}
