//! A single-pass parser for the usual shape of a JSON header, the fast path
//! of [`super::json_header::decode`]. It declines (`None`) whatever it is not
//! sure of, and then serde decides, so it can only ever return what serde would.

use std::borrow::Cow;

use super::json_header::{WireExtFields, WireHeader};
use super::ExtFields;

/// Deepest nesting of an unknown value the parser skips (serde allows 128).
const SKIP_DEPTH_MAX: u32 = 32;
/// Most text bytes reserved up front for `extFields` (it grows past this).
const EXT_TEXT_RESERVE_BYTES_MAX: usize = 4096;
/// Most digits of an `extFields` number copied as text: any such integer
/// fits an `i64` and is written back by serde as the same digits.
const EXT_NUMBER_DIGITS_MAX: usize = 18;

/// Parses `bytes` as serde would, or returns `None` when it cannot be sure
/// to: invalid UTF-8 or JSON, escaped top-level keys, repeated known keys,
/// numbers serde reads as floats, lone surrogates and deep nesting.
pub(super) fn parse(bytes: &[u8]) -> Option<WireHeader<'_>> {
    let text = std::str::from_utf8(bytes).ok()?;
    let mut p = Parser {
        text,
        bytes,
        pos: 0,
    };
    let mut header = WireHeader::default();
    let mut seen = 0u8;
    p.skip_whitespace();
    p.expect(b'{')?;
    p.skip_whitespace();
    if !p.eat(b'}') {
        loop {
            let key = p.plain_string()?;
            p.skip_whitespace();
            p.expect(b':')?;
            p.skip_whitespace();
            let bit = p.field(key, &mut header)?;
            // Serde rejects a repeated known field; declining keeps its error.
            if seen & bit != 0 {
                return None;
            }
            seen |= bit;
            p.skip_whitespace();
            if !p.eat(b',') {
                p.expect(b'}')?;
                break;
            }
            p.skip_whitespace();
        }
    }
    p.skip_whitespace();
    (p.pos == bytes.len()).then_some(header)
}

/// Index of the first `"`, `\` or control byte (below 0x20) in `bytes` at
/// or after `from` (`bytes.len()` if none): the end of a run JSON keeps as
/// is, in a string read or written. Eight bytes at a time.
pub(super) fn plain_run_end(bytes: &[u8], from: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let mut pos = from;
    while let Some(chunk) = bytes.get(pos..pos + 8) {
        let Ok(chunk) = <[u8; 8]>::try_from(chunk) else {
            break;
        };
        let x = u64::from_le_bytes(chunk);
        let quote = x ^ (ONES * u64::from(b'"'));
        let backslash = x ^ (ONES * u64::from(b'\\'));
        // Each term flags its bytes (a zero byte, a byte below 0x20); only
        // bits above a true flag can be false, so the lowest set bit marks
        // the first special byte.
        let flags = (quote.wrapping_sub(ONES) & !quote)
            | (backslash.wrapping_sub(ONES) & !backslash)
            | (x.wrapping_sub(ONES * 0x20) & !x);
        let flags = flags & HIGHS;
        if flags != 0 {
            return pos + (flags.trailing_zeros() / 8) as usize;
        }
        pos += 8;
    }
    while let Some(&b) = bytes.get(pos) {
        if b == b'"' || b == b'\\' || b < 0x20 {
            return pos;
        }
        pos += 1;
    }
    pos
}

/// A cursor over a header already checked to be UTF-8.
struct Parser<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Parser<'a> {
    /// Reads the value of top-level `key` into `header`; returns the key's
    /// own bit, or 0 for an unknown key (skipped, as serde ignores it).
    fn field(&mut self, key: &str, header: &mut WireHeader<'a>) -> Option<u8> {
        let bit = match key {
            "code" => {
                header.code = self.int()?;
                1
            }
            "version" => {
                header.version = self.int()?;
                2
            }
            "opaque" => {
                header.opaque = self.int()?;
                4
            }
            "flag" => {
                header.flag = self.int()?;
                8
            }
            "language" => {
                header.language = if self.null() {
                    None
                } else {
                    Some(self.cow_string()?)
                };
                16
            }
            "remark" => {
                header.remark = if self.null() {
                    None
                } else {
                    let mut remark = String::new();
                    self.string_into(&mut remark)?;
                    Some(remark)
                };
                32
            }
            "extFields" => {
                header.ext_fields = if self.null() {
                    None
                } else {
                    Some(WireExtFields(self.ext_fields()?))
                };
                64
            }
            _ => {
                self.skip_value(1)?;
                0
            }
        };
        Some(bit)
    }

    /// An `extFields` object, unescaped into the map's one text buffer.
    fn ext_fields(&mut self) -> Option<ExtFields> {
        self.expect(b'{')?;
        let remaining = self.bytes.len().saturating_sub(self.pos);
        let mut out = ExtFields::with_capacity(16, remaining.min(EXT_TEXT_RESERVE_BYTES_MAX));
        self.skip_whitespace();
        if !self.eat(b'}') {
            loop {
                let start = out.text_mut().len();
                self.string_into(out.text_mut())?;
                let value = out.text_mut().len();
                self.skip_whitespace();
                self.expect(b':')?;
                self.skip_whitespace();
                if self.ext_value(out.text_mut())? {
                    out.push_decoded(start, value);
                } else {
                    // A null value: drop the key, as the serde path does.
                    out.text_mut().truncate(start);
                }
                self.skip_whitespace();
                if !self.eat(b',') {
                    self.expect(b'}')?;
                    break;
                }
                self.skip_whitespace();
            }
        }
        out.finish_decoded();
        Some(out)
    }

    /// Appends a string, integer or boolean value as its text; `false` for
    /// a null. Declines floats and big integers, which serde rewrites.
    fn ext_value(&mut self, out: &mut String) -> Option<bool> {
        match *self.bytes.get(self.pos)? {
            b'"' => self.string_into(out)?,
            b'n' => {
                self.literal("null")?;
                return Some(false);
            }
            b't' => out.push_str(self.literal("true")?),
            b'f' => out.push_str(self.literal("false")?),
            _ => {
                let start = self.pos;
                let digits = self.integer()?;
                if digits > EXT_NUMBER_DIGITS_MAX {
                    return None;
                }
                out.push_str(self.text.get(start..self.pos)?);
            }
        }
        Some(true)
    }

    /// An integer field: serde's `i32` rules, declining the floats and
    /// out-of-range values it rejects.
    fn int(&mut self) -> Option<i32> {
        let start = self.pos;
        let digits = self.integer()?;
        // Ten digits fit an i64, so the parse below cannot overflow.
        if digits > 10 {
            return None;
        }
        let value: i64 = self.text.get(start..self.pos)?.parse().ok()?;
        i32::try_from(value).ok()
    }

    /// Skips a JSON integer and returns its digit count. Declines what
    /// serde reads as a float: a fraction, an exponent, and `-0`.
    fn integer(&mut self) -> Option<usize> {
        let negative = self.eat(b'-');
        let start = self.pos;
        while matches!(self.bytes.get(self.pos), Some(b'0'..=b'9')) {
            self.pos += 1;
        }
        let digits = self.pos - start;
        let first = *self.bytes.get(start)?;
        let leading_zero = first == b'0' && digits > 1;
        let negative_zero = negative && first == b'0';
        let float = matches!(self.bytes.get(self.pos), Some(b'.' | b'e' | b'E'));
        if digits == 0 || leading_zero || negative_zero || float {
            return None;
        }
        Some(digits)
    }

    /// Reads `word` (`true`, `false` or `null`) and returns it.
    fn literal(&mut self, word: &'static str) -> Option<&'static str> {
        let end = self.pos + word.len();
        if self.bytes.get(self.pos..end)? != word.as_bytes() {
            return None;
        }
        self.pos = end;
        Some(word)
    }

    /// Consumes a `null` if one is next.
    fn null(&mut self) -> bool {
        self.literal("null").is_some()
    }

    /// A string without escapes, borrowed from the input.
    fn plain_string(&mut self) -> Option<&'a str> {
        self.expect(b'"')?;
        let start = self.pos;
        self.skip_plain();
        let end = self.pos;
        self.expect(b'"')?;
        self.text.get(start..end)
    }

    /// A string, borrowed when it has no escapes.
    fn cow_string(&mut self) -> Option<Cow<'a, str>> {
        let start = self.pos;
        if let Some(plain) = self.plain_string() {
            return Some(Cow::Borrowed(plain));
        }
        self.pos = start;
        let mut owned = String::new();
        self.string_into(&mut owned)?;
        Some(Cow::Owned(owned))
    }

    /// Appends the unescaped contents of the string starting here to `out`.
    fn string_into(&mut self, out: &mut String) -> Option<()> {
        self.expect(b'"')?;
        loop {
            let start = self.pos;
            self.skip_plain();
            out.push_str(self.text.get(start..self.pos)?);
            match *self.bytes.get(self.pos)? {
                b'"' => {
                    self.pos += 1;
                    return Some(());
                }
                b'\\' => {
                    self.pos += 1;
                    out.push(self.escape()?);
                }
                // A raw control character, which JSON forbids.
                _ => return None,
            }
        }
    }

    /// The character of the escape after a backslash.
    fn escape(&mut self) -> Option<char> {
        let c = *self.bytes.get(self.pos)?;
        self.pos += 1;
        Some(match c {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => return self.unicode_escape(),
            _ => return None,
        })
    }

    /// The character of a `\u` escape (the `\u` consumed), pairing
    /// surrogates; declines a lone surrogate, which serde rejects.
    fn unicode_escape(&mut self) -> Option<char> {
        let high = self.hex4()?;
        if !(0xD800..=0xDBFF).contains(&high) {
            // `from_u32` refuses a lone low surrogate.
            return char::from_u32(high);
        }
        if self.bytes.get(self.pos..self.pos + 2)? != b"\\u" {
            return None;
        }
        self.pos += 2;
        let low = self.hex4()?;
        if !(0xDC00..=0xDFFF).contains(&low) {
            return None;
        }
        char::from_u32(0x1_0000 + ((high - 0xD800) << 10) + (low - 0xDC00))
    }

    /// Four hex digits.
    fn hex4(&mut self) -> Option<u32> {
        let digits = self.bytes.get(self.pos..self.pos + 4)?;
        let mut n = 0;
        for &d in digits {
            n = n * 16 + char::from(d).to_digit(16)?;
        }
        self.pos += 4;
        Some(n)
    }

    /// Skips any JSON value, `depth` levels deep, checking its syntax.
    fn skip_value(&mut self, depth: u32) -> Option<()> {
        match *self.bytes.get(self.pos)? {
            b'"' => self.skip_string(),
            b'{' => self.skip_container(depth, b'}'),
            b'[' => self.skip_container(depth, b']'),
            b't' => self.literal("true").map(drop),
            b'f' => self.literal("false").map(drop),
            b'n' => self.literal("null").map(drop),
            _ => self.skip_number(),
        }
    }

    /// Skips an object (`close` is `}`) or an array (`]`).
    fn skip_container(&mut self, depth: u32, close: u8) -> Option<()> {
        if depth >= SKIP_DEPTH_MAX {
            return None;
        }
        self.pos += 1;
        self.skip_whitespace();
        if self.eat(close) {
            return Some(());
        }
        loop {
            if close == b'}' {
                self.skip_string()?;
                self.skip_whitespace();
                self.expect(b':')?;
                self.skip_whitespace();
            }
            self.skip_value(depth + 1)?;
            self.skip_whitespace();
            if !self.eat(b',') {
                return self.expect(close);
            }
            self.skip_whitespace();
        }
    }

    /// Skips a string, checking its escapes as serde does when it ignores
    /// one (any four hex digits after `\u`).
    fn skip_string(&mut self) -> Option<()> {
        self.expect(b'"')?;
        loop {
            self.skip_plain();
            match *self.bytes.get(self.pos)? {
                b'"' => {
                    self.pos += 1;
                    return Some(());
                }
                b'\\' => {
                    self.pos += 1;
                    if self.eat(b'u') {
                        self.hex4()?;
                    } else {
                        self.escape()?;
                    }
                }
                _ => return None,
            }
        }
    }

    /// Skips a number in the JSON grammar (fraction and exponent allowed).
    fn skip_number(&mut self) -> Option<()> {
        self.eat(b'-');
        match *self.bytes.get(self.pos)? {
            b'0' => self.pos += 1,
            b'1'..=b'9' => self.skip_digits(),
            _ => return None,
        }
        if self.eat(b'.') {
            self.require_digits()?;
        }
        if self.eat(b'e') || self.eat(b'E') {
            if !self.eat(b'+') {
                self.eat(b'-');
            }
            self.require_digits()?;
        }
        Some(())
    }

    fn require_digits(&mut self) -> Option<()> {
        let start = self.pos;
        self.skip_digits();
        (self.pos > start).then_some(())
    }

    fn skip_digits(&mut self) {
        while matches!(self.bytes.get(self.pos), Some(b'0'..=b'9')) {
            self.pos += 1;
        }
    }

    /// Advances to the next `"`, `\` or control byte (or the end).
    fn skip_plain(&mut self) {
        self.pos = plain_run_end(self.bytes, self.pos);
    }

    fn skip_whitespace(&mut self) {
        while matches!(self.bytes.get(self.pos), Some(b' ' | b'\n' | b'\r' | b'\t')) {
            self.pos += 1;
        }
    }

    /// Consumes `byte` if it is next.
    fn eat(&mut self, byte: u8) -> bool {
        let next = self.bytes.get(self.pos) == Some(&byte);
        if next {
            self.pos += 1;
        }
        next
    }

    /// Consumes `byte`, which must be next.
    fn expect(&mut self, byte: u8) -> Option<()> {
        self.eat(byte).then_some(())
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn ext(header: &WireHeader<'_>) -> Vec<(String, String)> {
        let fields = header.ext_fields.as_ref().map(|e| e.0.iter());
        let fields = fields.into_iter().flatten();
        fields.map(|(k, v)| (k.to_owned(), v.to_owned())).collect()
    }

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|&(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    }

    #[test]
    fn unescapes_every_escape_including_a_surrogate_pair() {
        let json = br#"{"extFields":{"k\"\\\/":"\b\f\n\r\t\u00e9\u20AC\ud83d\ude00!"}}"#;
        let header = parse(json).expect("the fast path takes escapes");
        let want = [("k\"\\/", "\u{8}\u{c}\n\r\té€😀!")];
        assert_eq!(ext(&header), pairs(&want));
    }

    #[test]
    fn skips_unknown_values_of_every_kind() {
        let json = br#"{"a":{"b":[1,-2.5e3,{"c":"\ud800"}],"d":{}},"e":[],"code":5,
            "f":true,"g":false,"h":null,"i":0.0,"serializeTypeCurrentRPC":"JSON"}"#;
        let header = parse(json).expect("the fast path skips unknown values");
        assert_eq!(header.code, 5);
        assert!(ext(&header).is_empty());
    }

    #[test]
    fn ext_field_numbers_and_booleans_are_text_and_nulls_are_dropped() {
        let json = br#"{"extFields":{"n":-12,"z":0,"t":true,"f":false,"x":null,"s":"v"}}"#;
        let header = parse(json).expect("the fast path takes scalar values");
        let want = [
            ("f", "false"),
            ("n", "-12"),
            ("s", "v"),
            ("t", "true"),
            ("z", "0"),
        ];
        assert_eq!(ext(&header), pairs(&want));
    }

    #[test]
    fn takes_whitespace_everywhere_json_allows_it() {
        let json = b" \r\n{ \"code\" :\t-7 , \"language\" : \"GO\" ,\n\"extFields\" : {\
            \"a\" : \"b\" , \"c\":\"d\" } , \"remark\" : null , \"flag\" : 2 }\t\n";
        let header = parse(json).expect("the fast path takes whitespace");
        assert_eq!((header.code, header.flag), (-7, 2));
        assert_eq!(header.language.as_deref(), Some("GO"));
        assert_eq!(header.remark, None);
        assert_eq!(ext(&header), pairs(&[("a", "b"), ("c", "d")]));
    }

    #[test]
    fn declines_what_serde_must_judge() {
        let declined: &[&[u8]] = &[
            br#"{"code":1} x"#,
            br#"{"code":1}}"#,
            br#"{"code":1,}"#,
            br#"{"code":1,"code":1}"#,
            br#"{"code":-0}"#,
            br#"{"code":1.0}"#,
            br#"{"code":2147483648}"#,
            br#"{"code":"1"}"#,
            br#"{"\u0063ode":1}"#,
            br#"{"remark":"\ud83d"}"#,
            br#"{"remark":"\udc00x"}"#,
            br#"{"extFields":{"a":1.5}}"#,
            br#"{"extFields":{"a":1234567890123456789}}"#,
            br#"{"extFields":{"a":[]}}"#,
            b"{\"remark\":\"\xc3\"}",
            b"{\"remark\":\"\t\"}",
            b"[1]",
        ];
        for json in declined {
            let text = String::from_utf8_lossy(json);
            assert!(parse(json).is_none(), "took {text}");
        }
    }

    #[test]
    fn declines_nesting_deeper_than_its_limit() {
        let depth = usize::try_from(SKIP_DEPTH_MAX).expect("small");
        let nested = |n: usize| format!(r#"{{"x":{}1{}}}"#, "[".repeat(n), "]".repeat(n));
        assert!(parse(nested(depth - 1).as_bytes()).is_some());
        assert!(parse(nested(depth).as_bytes()).is_none());
    }

    proptest! {
        /// The eight-at-a-time scan stops where a byte-at-a-time one does.
        #[test]
        fn skip_plain_stops_at_the_first_special_byte(
            bytes in proptest::collection::vec(
                prop_oneof![any::<u8>(), Just(b'"'), Just(b'\\'), 0x1eu8..0x22, 0x7fu8..0x81],
                0..40,
            ),
            start in 0usize..8,
        ) {
            let text = String::from_utf8_lossy(&bytes).into_owned();
            let start = start.min(text.len());
            let mut p = Parser { text: &text, bytes: text.as_bytes(), pos: start };
            p.skip_plain();
            let special = |b: &u8| *b == b'"' || *b == b'\\' || *b < 0x20;
            let tail = text.as_bytes().get(start..).unwrap_or_default();
            let want = start + tail.iter().position(special).unwrap_or(tail.len());
            prop_assert_eq!(p.pos, want);
        }
    }
}
