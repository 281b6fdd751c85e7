//! The JSON header (serialize type 0), written the way fastjson writes it:
//! keys in alphabetical order, null fields omitted. Parsing is lenient about
//! key order, missing fields and non-string `extFields` values.

use std::fmt;

use bytes::BufMut;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, Visitor};
use serde::Deserialize;

use super::{ExtFields, LanguageCode, RemotingCommand, SerializeType};
use crate::FrameError;

/// Appends the JSON header of `cmd` to `dst`.
pub fn encode(cmd: &RemotingCommand, dst: &mut impl BufMut) {
    dst.put_slice(b"{\"code\":");
    put_int(dst, cmd.code);
    if !cmd.ext_fields.is_empty() {
        dst.put_slice(b",\"extFields\":{");
        for (i, (key, value)) in cmd.ext_fields.iter().enumerate() {
            if i > 0 {
                dst.put_u8(b',');
            }
            put_string(dst, key);
            dst.put_u8(b':');
            put_string(dst, value);
        }
        dst.put_u8(b'}');
    }
    dst.put_slice(b",\"flag\":");
    put_int(dst, cmd.flag);
    dst.put_slice(b",\"language\":\"");
    dst.put_slice(cmd.language.name().as_bytes());
    dst.put_slice(b"\",\"opaque\":");
    put_int(dst, cmd.opaque);
    if let Some(remark) = &cmd.remark {
        dst.put_slice(b",\"remark\":");
        put_string(dst, remark);
    }
    // Apache's `RemotingCommand` serializes its `serializeTypeCurrentRPC`
    // getter, which is "JSON" in every JSON header; strict clients (the
    // crates.io rocketmq-client-rust) refuse a header without it.
    dst.put_slice(b",\"serializeTypeCurrentRPC\":\"JSON\"");
    dst.put_slice(b",\"version\":");
    put_int(dst, cmd.version);
    dst.put_u8(b'}');
}

fn put_int(dst: &mut impl BufMut, value: i32) {
    let mut buf = [0u8; 11];
    let mut pos = buf.len();
    let negative = value < 0;
    let mut v = value.unsigned_abs();
    loop {
        pos -= 1;
        // `v % 10` is below 10, so the cast cannot truncate.
        buf[pos] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    if negative {
        pos -= 1;
        buf[pos] = b'-';
    }
    dst.put_slice(&buf[pos..]);
}

/// Writes `s` as a JSON string literal, escaping quotes, backslashes and
/// control characters.
pub(crate) fn put_string(dst: &mut impl BufMut, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    dst.put_u8(b'"');
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let escape: Option<&[u8]> = match b {
            b'"' => Some(b"\\\""),
            b'\\' => Some(b"\\\\"),
            b'\n' => Some(b"\\n"),
            b'\r' => Some(b"\\r"),
            b'\t' => Some(b"\\t"),
            0..=0x1f => None,
            _ => continue,
        };
        dst.put_slice(&bytes[start..i]);
        start = i + 1;
        match escape {
            Some(e) => dst.put_slice(e),
            None => dst.put_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(b >> 4)],
                HEX[usize::from(b & 0xf)],
            ]),
        }
    }
    dst.put_slice(&bytes[start..]);
    dst.put_u8(b'"');
}

/// The header as it appears on the wire; every field is optional.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireHeader<'a> {
    #[serde(default)]
    code: i32,
    #[serde(default, borrow)]
    language: Option<std::borrow::Cow<'a, str>>,
    #[serde(default)]
    version: i32,
    #[serde(default)]
    opaque: i32,
    #[serde(default)]
    flag: i32,
    #[serde(default)]
    remark: Option<String>,
    #[serde(default)]
    ext_fields: Option<WireExtFields>,
}

/// `extFields` values are strings in every known client; numbers and
/// booleans are accepted as their decimal text and nulls are dropped. Keys
/// and values are unescaped straight into the map's one text buffer.
struct WireExtFields(ExtFields);

impl<'de> Deserialize<'de> for WireExtFields {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct MapVisitor;
        impl<'de> Visitor<'de> for MapVisitor {
            type Value = WireExtFields;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object of strings")
            }
            fn visit_unit<E: de::Error>(self) -> Result<WireExtFields, E> {
                Ok(WireExtFields(ExtFields::new()))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<WireExtFields, A::Error> {
                let mut out = ExtFields::with_capacity(map.size_hint().unwrap_or(16), 256);
                loop {
                    let start = out.text_mut().len();
                    if map.next_key_seed(AppendText(out.text_mut()))?.is_none() {
                        break;
                    }
                    let value = out.text_mut().len();
                    if map.next_value_seed(AppendText(out.text_mut()))? {
                        out.push_decoded(start, value);
                    } else {
                        // A null value: drop the key.
                        out.text_mut().truncate(start);
                    }
                }
                out.finish_decoded();
                Ok(WireExtFields(out))
            }
        }
        d.deserialize_any(MapVisitor)
    }
}

/// Appends a string, number or boolean to the buffer as its text; `false`
/// for a null (nothing appended).
struct AppendText<'a>(&'a mut String);

impl<'de> DeserializeSeed<'de> for AppendText<'_> {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_any(self)
    }
}

impl Visitor<'_> for AppendText<'_> {
    type Value = bool;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string, number, boolean or null")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<bool, E> {
        self.0.push_str(v);
        Ok(true)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<bool, E> {
        Ok(self.append(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<bool, E> {
        Ok(self.append(v))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<bool, E> {
        Ok(self.append(v))
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<bool, E> {
        Ok(self.append(v))
    }
    fn visit_unit<E: de::Error>(self) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_none<E: de::Error>(self) -> Result<bool, E> {
        Ok(false)
    }
}

impl AppendText<'_> {
    fn append(self, v: impl fmt::Display) -> bool {
        use std::fmt::Write;
        // Writing to a String cannot fail.
        let _ = write!(self.0, "{v}");
        true
    }
}

/// Parses a JSON header; the caller has already bounded `bytes` in size.
pub fn decode(bytes: &[u8], ext_fields_max: usize) -> Result<RemotingCommand, FrameError> {
    let wire: WireHeader = serde_json::from_slice(bytes)
        .map_err(|e| FrameError::corrupt(format!("json header: {e}")))?;
    let ext_fields = wire.ext_fields.map(|e| e.0).unwrap_or_default();
    if ext_fields.len() > ext_fields_max {
        return Err(FrameError::TooLarge {
            what: "extFields count",
            len: ext_fields.len() as u64,
            max: ext_fields_max as u64,
        });
    }
    Ok(RemotingCommand {
        code: wire.code,
        language: wire
            .language
            .as_deref()
            .map_or(LanguageCode::Other, LanguageCode::from_name),
        version: wire.version,
        opaque: wire.opaque,
        flag: wire.flag,
        remark: wire.remark,
        ext_fields,
        body: bytes::Bytes::new(),
        body_chunks: Vec::new(),
        serialize_type: SerializeType::Json,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_quotes_backslashes_and_controls() {
        let mut out = Vec::new();
        put_string(&mut out, "a\"b\\c\n\u{1}é");
        assert_eq!(out, b"\"a\\\"b\\\\c\\n\\u0001\xc3\xa9\"".to_vec());
        let back: String = serde_json::from_slice(&out).expect("valid json");
        assert_eq!(back, "a\"b\\c\n\u{1}é");
    }

    #[test]
    fn writes_integers_including_extremes() {
        for v in [0, 7, -1, 105, i32::MAX, i32::MIN] {
            let mut out = Vec::new();
            put_int(&mut out, v);
            assert_eq!(out, v.to_string().into_bytes());
        }
    }

    #[test]
    fn ext_fields_in_any_order_decode_sorted_and_a_repeated_key_keeps_its_last_value() {
        use std::fmt::Write;
        let mut json = String::from(r#"{"code":1,"extFields":{"#);
        for i in (0..2000).rev() {
            write!(json, r#""k{i:04}":"v{i}","#).expect("writes to a String");
        }
        json.push_str(r#""k0007":"again"}}"#);
        let cmd = decode(json.as_bytes(), 4096).expect("valid header");
        assert_eq!(cmd.ext_fields.len(), 2000);
        let keys: Vec<&str> = cmd.ext_fields.keys().collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]), "sorted, no repeats");
        assert_eq!(cmd.ext_fields.get("k0007"), Some("again"));
        assert_eq!(cmd.ext_fields.get("k1999"), Some("v1999"));
        assert!(
            decode(json.as_bytes(), 1999).is_err(),
            "over the count limit"
        );
    }

    #[test]
    fn accepts_numeric_ext_field_values_and_drops_nulls() {
        let cmd = decode(
            br#"{"code":34,"extFields":{"a":1,"b":true,"c":null,"d":"x"},"serializeTypeCurrentRPC":"JSON"}"#,
            64,
        )
        .expect("valid header");
        assert_eq!(cmd.ext_fields.get("a"), Some("1"));
        assert_eq!(cmd.ext_fields.get("b"), Some("true"));
        assert!(!cmd.ext_fields.contains_key("c"));
        assert_eq!(cmd.language, LanguageCode::Other);
    }
}
