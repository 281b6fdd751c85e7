//! The JSON header (serialize type 0), written the way fastjson writes it:
//! keys in alphabetical order, null fields omitted. Parsing is lenient about
//! key order, missing fields and non-string `extFields` values. A hand-written
//! parser takes the usual headers and declines the rest to serde, which
//! therefore decides every error and edge case.

use std::fmt;

use bytes::BufMut;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, Visitor};
use serde::Deserialize;

use super::{json_fast, ExtFields, LanguageCode, RemotingCommand, SerializeType};
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
    dst.put_slice(itoa::Buffer::new().format(value).as_bytes());
}

/// Writes `s` as a JSON string literal, escaping quotes, backslashes and
/// control characters; the runs between them are found eight bytes at a
/// time and copied whole.
pub(crate) fn put_string(dst: &mut impl BufMut, s: &str) {
    let bytes = s.as_bytes();
    dst.put_u8(b'"');
    let mut start = 0;
    loop {
        let end = json_fast::plain_run_end(bytes, start);
        dst.put_slice(&bytes[start..end]);
        let Some(&b) = bytes.get(end) else {
            break;
        };
        put_escape(dst, b);
        start = end + 1;
    }
    dst.put_u8(b'"');
}

/// The escape of a quote, a backslash or a control byte.
fn put_escape(dst: &mut impl BufMut, b: u8) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    match b {
        b'"' => dst.put_slice(b"\\\""),
        b'\\' => dst.put_slice(b"\\\\"),
        b'\n' => dst.put_slice(b"\\n"),
        b'\r' => dst.put_slice(b"\\r"),
        b'\t' => dst.put_slice(b"\\t"),
        _ => dst.put_slice(&[
            b'\\',
            b'u',
            b'0',
            b'0',
            HEX[usize::from(b >> 4)],
            HEX[usize::from(b & 0xf)],
        ]),
    }
}

/// The header as it appears on the wire; every field is optional.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub(super) struct WireHeader<'a> {
    #[serde(default)]
    pub(super) code: i32,
    #[serde(default, borrow)]
    pub(super) language: Option<std::borrow::Cow<'a, str>>,
    #[serde(default)]
    pub(super) version: i32,
    #[serde(default)]
    pub(super) opaque: i32,
    #[serde(default)]
    pub(super) flag: i32,
    #[serde(default)]
    pub(super) remark: Option<String>,
    #[serde(default)]
    pub(super) ext_fields: Option<WireExtFields>,
}

/// `extFields` values are strings in every known client; numbers and
/// booleans are accepted as their decimal text and nulls are dropped. Keys
/// and values are unescaped straight into the map's one text buffer.
pub(super) struct WireExtFields(pub(super) ExtFields);

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
    let wire = match json_fast::parse(bytes) {
        Some(wire) => wire,
        None => parse_serde(bytes)?,
    };
    command_from(wire, ext_fields_max)
}

/// The serde path: slower, and the reference for every input.
fn parse_serde(bytes: &[u8]) -> Result<WireHeader<'_>, FrameError> {
    serde_json::from_slice(bytes).map_err(|e| FrameError::corrupt(format!("json header: {e}")))
}

/// The command a parsed header describes, checking the `extFields` count.
fn command_from(
    wire: WireHeader<'_>,
    ext_fields_max: usize,
) -> Result<RemotingCommand, FrameError> {
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

    /// The byte-at-a-time encoder `put_string` replaced: the wire bytes
    /// must not change.
    fn put_string_bytewise(dst: &mut Vec<u8>, s: &str) {
        dst.push(b'"');
        for &b in s.as_bytes() {
            if b == b'"' || b == b'\\' || b < 0x20 {
                put_escape(dst, b);
            } else {
                dst.push(b);
            }
        }
        dst.push(b'"');
    }

    proptest::proptest! {
        #[test]
        fn put_string_writes_what_the_bytewise_encoder_wrote_and_serde_reads_it_back(
            s in "[a-z\"\\\\\\x00-\\x1f\\x7fé😀]{0,40}",
        ) {
            let (mut fast, mut slow) = (Vec::new(), Vec::new());
            put_string(&mut fast, &s);
            put_string_bytewise(&mut slow, &s);
            proptest::prop_assert_eq!(&fast, &slow);
            let back: String = serde_json::from_slice(&fast).expect("valid json");
            proptest::prop_assert_eq!(back, s);
        }
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

    /// The equivalence suite: the public decode (fast path first) agrees
    /// with the serde path on every input, valid or not.
    mod fast_path_agrees_with_serde {
        use proptest::collection::{btree_map, vec};
        use proptest::prelude::*;
        use serde_json::Value;

        use super::*;

        const FIELDS_MAX: usize = 1024;

        fn serde_decode(bytes: &[u8]) -> Result<RemotingCommand, FrameError> {
            parse_serde(bytes).and_then(|wire| command_from(wire, FIELDS_MAX))
        }

        /// Checks `decode` against serde; returns whether the fast path took it.
        fn agrees(bytes: &[u8]) -> Result<bool, TestCaseError> {
            let reference = serde_decode(bytes);
            prop_assert_eq!(decode(bytes, FIELDS_MAX), reference.clone());
            let fast = json_fast::parse(bytes).map(|wire| command_from(wire, FIELDS_MAX));
            if let Some(fast) = &fast {
                prop_assert!(reference.is_ok(), "fast path accepted what serde rejects");
                prop_assert_eq!(fast, &reference);
            }
            Ok(fast.is_some())
        }

        /// Text of any characters, weighted to the ones JSON escapes.
        fn text() -> impl Strategy<Value = String> {
            let special = "\"\\/\n\r\t\u{0}\u{1}\u{1f}\u{7f}é\u{2028}\u{ffff}😀\u{10ffff}";
            let special = prop::sample::select(special.chars().collect::<Vec<_>>());
            vec(
                prop_oneof![any::<char>(), special, proptest::char::range('a', 'z')],
                0..12,
            )
            .prop_map(|chars| chars.into_iter().collect())
        }

        fn command() -> impl Strategy<Value = RemotingCommand> {
            (
                (any::<i32>(), any::<i32>(), any::<i32>(), any::<i32>()),
                prop::sample::select(LanguageCode::ALL.to_vec()),
                prop::option::of(text()),
                btree_map(text(), text(), 0..8),
            )
                .prop_map(|((code, version, opaque, flag), language, remark, ext)| {
                    RemotingCommand {
                        code,
                        language,
                        version,
                        opaque,
                        flag,
                        remark,
                        ext_fields: ext.into(),
                        ..RemotingCommand::default()
                    }
                })
        }

        fn leaf() -> impl Strategy<Value = Value> {
            prop_oneof![
                Just(Value::Null),
                any::<bool>().prop_map(Value::Bool),
                any::<i32>().prop_map(Value::from),
                any::<i64>().prop_map(Value::from),
                any::<u64>().prop_map(Value::from),
                (-2i64..=2).prop_map(Value::from),
                any::<f64>().prop_map(Value::from),
                text().prop_map(Value::String),
            ]
        }

        fn any_value() -> impl Strategy<Value = Value> {
            leaf().prop_recursive(3, 24, 4, |inner| {
                prop_oneof![
                    vec(inner.clone(), 0..4).prop_map(Value::Array),
                    btree_map(text(), inner, 0..4)
                        .prop_map(|m| Value::Object(m.into_iter().collect())),
                ]
            })
        }

        /// A header object: the known keys, mostly of their usual types,
        /// and unknown keys of any value.
        fn header_value() -> impl Strategy<Value = Value> {
            let int = || prop_oneof![3 => any::<i32>().prop_map(Value::from), 1 => any_value()];
            let string = || prop_oneof![3 => text().prop_map(Value::String), 1 => any_value()];
            let ext = btree_map(text(), leaf(), 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect()));
            let known = (
                (prop::option::of(int()), prop::option::of(int())),
                (prop::option::of(int()), prop::option::of(int())),
                prop::option::of(string()),
                prop::option::of(string()),
                prop::option::of(prop_oneof![3 => ext, 1 => any_value()]),
            );
            (known, btree_map(text(), any_value(), 0..3)).prop_map(|(known, unknown)| {
                let ((code, version), (opaque, flag), language, remark, ext) = known;
                let mut object: serde_json::Map<String, Value> = unknown.into_iter().collect();
                let fields = [
                    ("code", code),
                    ("version", version),
                    ("opaque", opaque),
                    ("flag", flag),
                    ("language", language),
                    ("remark", remark),
                    ("extFields", ext),
                ];
                for (key, value) in fields {
                    if let Some(value) = value {
                        object.insert(key.to_owned(), value);
                    }
                }
                Value::Object(object)
            })
        }

        /// `json` with whitespace from `spaces` (cycled) after each
        /// structural character outside strings, and around the whole.
        fn spaced(json: &str, spaces: &[&str]) -> String {
            let mut spaces = spaces.iter().copied().cycle();
            let mut out = String::from(spaces.next().unwrap_or_default());
            let (mut in_string, mut escaped) = (false, false);
            for c in json.chars() {
                out.push(c);
                if in_string {
                    (in_string, escaped) = (escaped || c != '"', !escaped && c == '\\');
                } else if c == '"' {
                    in_string = true;
                } else if matches!(c, '{' | '}' | '[' | ']' | ',' | ':') {
                    out.push_str(spaces.next().unwrap_or_default());
                }
            }
            out.push_str(spaces.next().unwrap_or_default());
            out
        }

        /// Raw values, one space apart, that serde reads in its own way:
        /// floats, `-0`, big and bad numbers, lone surrogates, bad syntax.
        const TRICKY: &str = concat!(
            r#"-0 0 -1 01 1.0 1e2 1E+2 - 2147483647 2147483648 -2147483648 -2147483649 "#,
            r#"18446744073709551615 18446744073709551616 123456789012345678 "#,
            r#"1234567890123456789 "\ud83d\ude00" "\ud83d" "\udc00" "\ud83d\u0041" "#,
            r#""\u00e9\/\b\f" "\x" "\u12" null nul true tru false [] [1,] {} {"a":1,} "#,
            r#"{"a":"b"} {"a":[{"b":null}]} {"a":1.5} {"a":-0}"#,
        );
        /// Keys, one space apart: known, escaped, unknown and (last) empty.
        const KEYS: &str = r"code version opaque flag language remark extFields \u0063ode other ";

        fn words(list: &'static str) -> impl Strategy<Value = &'static str> {
            prop::sample::select(list.split(' ').collect::<Vec<_>>())
        }

        #[test]
        fn explicit_edge_cases_agree() {
            let cases: &[&[u8]] = &[
                br#"{"code":1,"code":2}"#,
                br#"{"extFields":{"a":"1"},"extFields":null}"#,
                br#"{"x":1,"x":2,"code":3}"#,
                br#"{"code":1}x"#,
                br#"{"code":1},"#,
                br#"[1,"JAVA",2]"#,
                b"",
                b" ",
                b"{",
                b"{}",
                b" \t\r\n{ \"code\" : 7 } \n",
                b"{\"code\":1}\0",
                b"{\"remark\":\"\xff\"}",
                b"{\"other\":\"\xff\"}",
                b"{\"remark\":\"\t\"}",
                br#"{"language":null,"remark":null,"extFields":null}"#,
            ];
            for case in cases {
                agrees(case)
                    .map_err(|e| format!("{:?}: {e}", String::from_utf8_lossy(case)))
                    .expect("agrees");
            }
            let duplicate = decode(br#"{"code":1,"code":2}"#, FIELDS_MAX).expect_err("a repeat");
            assert!(
                duplicate.to_string().contains("duplicate field"),
                "{duplicate}"
            );
        }

        proptest! {
            #[test]
            fn encoded_headers_decode_the_same_on_both_paths(cmd in command()) {
                let mut bytes = Vec::new();
                encode(&cmd, &mut bytes);
                let wire = json_fast::parse(&bytes);
                prop_assert!(wire.is_some(), "the fast path declined {:?}", cmd);
                let fast = wire.map(|wire| command_from(wire, FIELDS_MAX));
                prop_assert_eq!(fast, Some(Ok(cmd.clone())));
                prop_assert_eq!(serde_decode(&bytes), Ok(cmd));
            }

            #[test]
            fn json_objects_decode_as_serde_does(
                value in header_value(),
                spaces in vec(prop::sample::select(vec!["", " ", "\n", "\t\r\n "]), 1..8),
            ) {
                let json = serde_json::to_string(&value).expect("a value serializes");
                agrees(spaced(&json, &spaces).as_bytes())?;
            }

            #[test]
            fn tricky_tokens_decode_as_serde_does(
                pairs in vec((words(KEYS), words(TRICKY)), 0..4),
                ext in vec((words(KEYS), words(TRICKY)), 0..4),
            ) {
                let member = |(k, v): &(&str, &str)| format!("\"{k}\":{v}");
                let ext: Vec<String> = ext.iter().map(member).collect();
                let mut members: Vec<String> = pairs.iter().map(member).collect();
                members.push(format!("\"extFields\":{{{}}}", ext.join(",")));
                let json = format!("{{{}}}", members.join(","));
                agrees(json.as_bytes())?;
            }

            #[test]
            fn arbitrary_bytes_decode_as_serde_does(bytes in vec(any::<u8>(), 0..64)) {
                agrees(&bytes)?;
            }

            #[test]
            fn mutated_headers_decode_as_serde_does(
                cmd in command(),
                edits in vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 1..4),
            ) {
                let mut bytes = Vec::new();
                encode(&cmd, &mut bytes);
                for (at, byte, kind) in edits {
                    let i = at.index(bytes.len());
                    match kind {
                        0 => bytes[i] = byte,
                        1 => bytes.insert(i, byte),
                        _ => {
                            bytes.remove(i);
                        }
                    }
                }
                agrees(&bytes)?;
            }
        }
    }
}
