//! fastjson compatibility: fastjson writes `Long`-keyed maps with unquoted
//! keys (`{0:"addr"}`), which standard JSON parsers reject. These rewrites
//! quote such keys before parsing and unquote them where old clients expect.

/// How integer map keys are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonStyle {
    /// fastjson style: integer keys unquoted (`{0:"..."}`), for old clients.
    Fastjson,
    /// Standard JSON: every key quoted.
    Standard,
}

/// First client version (`V4_9_4`) that gets standard JSON routes.
pub const STANDARD_JSON_MIN_VERSION: i32 = 401;

impl JsonStyle {
    /// The style a client expects: standard JSON from version 401 (`V4_9_4`)
    /// or when it set `acceptStandardJsonOnly`, fastjson style otherwise.
    pub fn for_client(version: i32, accept_standard_json_only: bool) -> Self {
        if accept_standard_json_only || version >= STANDARD_JSON_MIN_VERSION {
            Self::Standard
        } else {
            Self::Fastjson
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Rewrite<'a> {
    /// Quote every bare numeric key.
    Quote,
    /// Unquote integer keys of objects stored under this key.
    UnquoteUnder(&'a [u8]),
}

struct Frame {
    is_object: bool,
    expecting_key: bool,
    unquote: bool,
}

/// Quotes bare numeric object keys so a standard parser accepts the text.
/// A no-op on standard JSON. Invalid input yields invalid output, which the
/// parser then rejects; nothing panics.
pub fn quote_integer_keys(json: &[u8]) -> Vec<u8> {
    rewrite(json, Rewrite::Quote)
}

/// Unquotes the integer keys of every object stored under `key`
/// (`"brokerAddrs":{"0":"a"}` becomes `"brokerAddrs":{0:"a"}`).
pub fn unquote_integer_keys_under(json: &[u8], key: &str) -> Vec<u8> {
    rewrite(json, Rewrite::UnquoteUnder(key.as_bytes()))
}

fn is_integer(text: &[u8]) -> bool {
    let digits = text.strip_prefix(b"-").unwrap_or(text);
    !digits.is_empty() && digits.iter().all(u8::is_ascii_digit)
}

/// Returns the index just past the string literal starting at `start`.
fn string_end(json: &[u8], start: usize) -> usize {
    let mut i = start + 1;
    while i < json.len() {
        match json[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    json.len()
}

fn rewrite(json: &[u8], mode: Rewrite<'_>) -> Vec<u8> {
    let mut out = Vec::with_capacity(json.len() + 16);
    let mut stack: Vec<Frame> = Vec::new();
    let mut last_key: &[u8] = &[];
    let mut i = 0;
    while i < json.len() {
        let b = json[i];
        let in_key_position = stack.last().is_some_and(|f| f.is_object && f.expecting_key);
        match b {
            b'"' => {
                let end = string_end(json, i);
                let literal = &json[i..end];
                if in_key_position {
                    let content = literal
                        .get(1..literal.len().saturating_sub(1))
                        .unwrap_or_default();
                    let unquote = stack.last().is_some_and(|f| f.unquote);
                    if unquote && is_integer(content) {
                        out.extend_from_slice(content);
                    } else {
                        out.extend_from_slice(literal);
                    }
                    last_key = content;
                    if let Some(f) = stack.last_mut() {
                        f.expecting_key = false;
                    }
                } else {
                    out.extend_from_slice(literal);
                }
                i = end;
                continue;
            }
            b'{' | b'[' => {
                let unquote =
                    b == b'{' && matches!(mode, Rewrite::UnquoteUnder(k) if k == last_key);
                stack.push(Frame {
                    is_object: b == b'{',
                    expecting_key: b == b'{',
                    unquote,
                });
                last_key = &[];
            }
            b'}' | b']' => {
                stack.pop();
            }
            b',' => {
                if let Some(f) = stack.last_mut() {
                    f.expecting_key = f.is_object;
                }
            }
            b'-' | b'0'..=b'9' if in_key_position && mode == Rewrite::Quote => {
                let end = json[i..]
                    .iter()
                    .position(|c| {
                        !(c.is_ascii_digit() || matches!(c, b'-' | b'+' | b'.' | b'e' | b'E'))
                    })
                    .map_or(json.len(), |p| i + p);
                out.push(b'"');
                out.extend_from_slice(&json[i..end]);
                out.push(b'"');
                if let Some(f) = stack.last_mut() {
                    f.expecting_key = false;
                }
                i = end;
                continue;
            }
            _ => {}
        }
        out.push(b);
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_bare_integer_keys_only_in_key_position() {
        let src = br#"{"a":[1, 2],"brokerAddrs":{0:"x:1", 12 :"y,{3:4}"},"n":-1}"#;
        let out = quote_integer_keys(src);
        assert_eq!(
            String::from_utf8(out).expect("utf8"),
            r#"{"a":[1, 2],"brokerAddrs":{"0":"x:1", "12" :"y,{3:4}"},"n":-1}"#
        );
    }

    #[test]
    fn unquotes_keys_only_under_the_named_key() {
        let src = br#"{"brokerAddrs":{"0":"a","1":"b"},"other":{"0":"c"}}"#;
        let out = unquote_integer_keys_under(src, "brokerAddrs");
        assert_eq!(
            String::from_utf8(out).expect("utf8"),
            r#"{"brokerAddrs":{0:"a",1:"b"},"other":{"0":"c"}}"#
        );
    }

    #[test]
    fn style_follows_client_version() {
        assert_eq!(JsonStyle::for_client(63, false), JsonStyle::Fastjson);
        assert_eq!(JsonStyle::for_client(400, true), JsonStyle::Standard);
        assert_eq!(JsonStyle::for_client(401, false), JsonStyle::Standard);
    }
}
