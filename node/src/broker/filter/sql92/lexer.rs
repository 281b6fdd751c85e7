//! Tokens of a SQL92 filter expression. Keywords are case-insensitive;
//! string literals are single-quoted with `''` for a quote; numbers are
//! decimal integers (optional `L` suffix) or decimals with an optional
//! exponent. Every token records its byte position for error messages.

use super::ParseError;

/// A keyword (matched case-insensitively).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Keyword {
    And,
    Or,
    Not,
    Between,
    In,
    Is,
    Null,
    True,
    False,
    Contains,
    StartsWith,
    EndsWith,
    Like,
}

/// One token.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Token {
    Ident(String),
    Str(String),
    Int(i64),
    Float(f64),
    Keyword(Keyword),
    LParen,
    RParen,
    Comma,
    Minus,
    Plus,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// A token and where it starts.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Spanned {
    pub token: Token,
    pub at: usize,
}

fn keyword(word: &str) -> Option<Keyword> {
    const WORDS: [(&str, Keyword); 13] = [
        ("AND", Keyword::And),
        ("OR", Keyword::Or),
        ("NOT", Keyword::Not),
        ("BETWEEN", Keyword::Between),
        ("IN", Keyword::In),
        ("IS", Keyword::Is),
        ("NULL", Keyword::Null),
        ("TRUE", Keyword::True),
        ("FALSE", Keyword::False),
        ("CONTAINS", Keyword::Contains),
        ("STARTSWITH", Keyword::StartsWith),
        ("ENDSWITH", Keyword::EndsWith),
        ("LIKE", Keyword::Like),
    ];
    WORDS
        .iter()
        .find(|(w, _)| w.eq_ignore_ascii_case(word))
        .map(|(_, k)| *k)
}

fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == '$'
}

fn is_ident_part(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '$' | '.')
}

/// Splits `text` into tokens.
pub(super) fn tokenize(text: &str) -> Result<Vec<Spanned>, ParseError> {
    let mut tokens = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some(&(at, c)) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
            continue;
        }
        let token = if is_ident_start(c) {
            let mut end = at;
            while let Some(&(i, c)) = chars.peek() {
                if !is_ident_part(c) {
                    break;
                }
                end = i + c.len_utf8();
                chars.next();
            }
            let word = &text[at..end];
            keyword(word).map_or_else(|| Token::Ident(word.to_owned()), Token::Keyword)
        } else if c.is_ascii_digit() || (c == '.' && next_is_digit(text, at + 1)) {
            let end = number_end(text, at);
            for _ in text[at..end].chars() {
                chars.next();
            }
            number(&text[at..end], at)?
        } else if c == '\'' {
            chars.next();
            let mut value = String::new();
            loop {
                match chars.next() {
                    Some((_, '\'')) => {
                        if chars.peek().is_some_and(|&(_, c)| c == '\'') {
                            chars.next();
                            value.push('\'');
                        } else {
                            break;
                        }
                    }
                    Some((_, c)) => value.push(c),
                    None => return Err(ParseError::new(at, "unterminated string literal")),
                }
            }
            Token::Str(value)
        } else {
            chars.next();
            let next = chars.peek().map(|&(_, c)| c);
            let mut two = |t: Token| {
                chars.next();
                t
            };
            match (c, next) {
                ('(', _) => Token::LParen,
                (')', _) => Token::RParen,
                (',', _) => Token::Comma,
                ('-', _) => Token::Minus,
                ('+', _) => Token::Plus,
                ('=', _) => Token::Eq,
                ('<', Some('>')) | ('!', Some('=')) => two(Token::Ne),
                ('<', Some('=')) => two(Token::Le),
                ('>', Some('=')) => two(Token::Ge),
                ('<', _) => Token::Lt,
                ('>', _) => Token::Gt,
                _ => return Err(ParseError::new(at, format!("unexpected character {c:?}"))),
            }
        };
        tokens.push(Spanned { token, at });
    }
    Ok(tokens)
}

fn next_is_digit(text: &str, at: usize) -> bool {
    text.as_bytes().get(at).is_some_and(u8::is_ascii_digit)
}

/// End of the number starting at `start`: digits, an optional fraction,
/// an optional exponent (only when digits follow it) and an optional `L`.
fn number_end(text: &str, start: usize) -> usize {
    let b = text.as_bytes();
    let digits = |mut i: usize| {
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        i
    };
    let mut i = digits(start);
    if b.get(i) == Some(&b'.') {
        i = digits(i + 1);
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        let sign = usize::from(matches!(b.get(i + 1), Some(b'+' | b'-')));
        if next_is_digit(text, i + 1 + sign) {
            i = digits(i + 1 + sign);
        }
    }
    if matches!(b.get(i), Some(b'l' | b'L')) {
        i += 1;
    }
    i
}

fn number(text: &str, at: usize) -> Result<Token, ParseError> {
    if let Some(int) = text.strip_suffix(['l', 'L']) {
        return int
            .parse::<i64>()
            .map(Token::Int)
            .map_err(|_| ParseError::new(at, format!("bad integer literal {text:?}")));
    }
    if text.bytes().all(|b| b.is_ascii_digit()) {
        return text
            .parse::<i64>()
            .map(Token::Int)
            .map_err(|_| ParseError::new(at, format!("integer literal {text} is out of range")));
    }
    match text.parse::<f64>() {
        Ok(f) if f.is_finite() => Ok(Token::Float(f)),
        _ => Err(ParseError::new(at, format!("bad decimal literal {text:?}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<Token> {
        tokenize(text)
            .expect("tokenizes")
            .into_iter()
            .map(|s| s.token)
            .collect()
    }

    #[test]
    fn keywords_are_case_insensitive_and_identifiers_keep_their_case() {
        assert_eq!(
            kinds("a.b_c And nOt $x"),
            vec![
                Token::Ident("a.b_c".into()),
                Token::Keyword(Keyword::And),
                Token::Keyword(Keyword::Not),
                Token::Ident("$x".into()),
            ]
        );
    }

    #[test]
    fn numbers_strings_and_operators() {
        assert_eq!(
            kinds("12 3L 1.5 .5 2e3 7e 'it''s' <> != <= >= < > ="),
            vec![
                Token::Int(12),
                Token::Int(3),
                Token::Float(1.5),
                Token::Float(0.5),
                Token::Float(2000.0),
                Token::Int(7),
                Token::Ident("e".into()),
                Token::Str("it's".into()),
                Token::Ne,
                Token::Ne,
                Token::Le,
                Token::Ge,
                Token::Lt,
                Token::Gt,
                Token::Eq,
            ]
        );
    }

    #[test]
    fn bad_input_is_an_error_with_its_position() {
        let e = tokenize("a = 'open").expect_err("unterminated");
        assert_eq!(e.at, 4);
        assert!(tokenize("a = 99999999999999999999").is_err());
        assert!(tokenize("a # 1").is_err());
        assert!(tokenize("a = 1e999").is_err(), "infinite");
    }
}
