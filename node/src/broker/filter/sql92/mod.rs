//! RocketMQ's SQL92 message selector (`MessageSelector.bySql`), compiled
//! once and evaluated over a message's properties (user properties by
//! name, and `TAGS`). Property values are strings; they compare as numbers
//! against numeric literals (and with `<`, `<=`, `>`, `>=`, `BETWEEN`)
//! when they parse as numbers. Logic is SQL's three-valued logic: a
//! comparison involving a missing property is unknown, and a message
//! matches only when the whole expression is true — so a missing property
//! never matches, not even under `NOT` or `<>`. Parsing never panics, and
//! nesting is bounded (see [`parser`]).

mod eval;
mod lexer;
mod parser;

use std::fmt;

/// Longest expression accepted, in bytes.
pub const EXPRESSION_BYTES_MAX: usize = 64 * 1024;

/// Why an expression does not compile.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("at byte {at}: {reason}")]
pub struct ParseError {
    /// Byte position in the expression.
    pub at: usize,
    /// What is wrong there.
    pub reason: String,
}

impl ParseError {
    fn new(at: usize, reason: impl Into<String>) -> Self {
        Self {
            at,
            reason: reason.into(),
        }
    }
}

/// A compiled expression.
#[derive(Clone, Debug, PartialEq)]
pub struct Sql92 {
    expr: Expr,
}

impl Sql92 {
    /// Compiles `text`.
    pub fn compile(text: &str) -> Result<Self, ParseError> {
        if text.len() > EXPRESSION_BYTES_MAX {
            return Err(ParseError::new(
                EXPRESSION_BYTES_MAX,
                format!(
                    "the expression is {} bytes, more than {EXPRESSION_BYTES_MAX}",
                    text.len()
                ),
            ));
        }
        let tokens = lexer::tokenize(text)?;
        let expr = parser::Parser::new(tokens, text.len()).parse()?;
        Ok(Self { expr })
    }

    /// True when the expression is true for a message whose properties
    /// `lookup` answers.
    pub fn matches<'a>(&'a self, lookup: impl Fn(&str) -> Option<&'a str>) -> bool {
        eval::evaluate(&self.expr, &lookup) == Some(true)
    }

    /// True when the expression is true for a stored properties string
    /// (`k 0x01 v 0x02` pairs; the last of repeated keys wins, as in
    /// RocketMQ's decoded map). Properties that are not UTF-8 never match.
    pub fn matches_properties(&self, properties: &[u8]) -> bool {
        let Ok(text) = std::str::from_utf8(properties) else {
            return false;
        };
        self.matches(|key| property(text, key))
    }
}

/// The value of `key` in a properties string.
fn property<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.split('\u{2}')
        .rev()
        .filter_map(|pair| pair.split_once('\u{1}'))
        .find(|(k, v)| *k == key && !v.is_empty())
        .map(|(_, v)| v)
}

/// A boolean expression.
#[derive(Clone, Debug, PartialEq)]
enum Expr {
    And(Vec<Expr>),
    Or(Vec<Expr>),
    Not(Box<Expr>),
    Const(bool),
    Compare {
        op: CmpOp,
        left: Operand,
        right: Operand,
    },
    Between {
        value: Operand,
        low: Operand,
        high: Operand,
        negated: bool,
    },
    In {
        value: Operand,
        list: Vec<Literal>,
        negated: bool,
    },
    IsNull {
        value: Operand,
        negated: bool,
    },
    Text {
        op: TextOp,
        value: Operand,
        pattern: String,
        negated: bool,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl CmpOp {
    fn is_ordering(self) -> bool {
        !matches!(self, Self::Eq | Self::Ne)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TextOp {
    Contains,
    StartsWith,
    EndsWith,
}

#[derive(Clone, Debug, PartialEq)]
enum Operand {
    Property(String),
    Literal(Literal),
}

#[derive(Clone, Debug, PartialEq)]
enum Literal {
    Str(String),
    Int(i64),
    Float(f64),
    Bool(bool),
}

impl fmt::Display for Sql92 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.expr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn props(pairs: &[(&str, &str)]) -> Vec<u8> {
        let mut out = Vec::new();
        for (k, v) in pairs {
            out.extend_from_slice(k.as_bytes());
            out.push(1);
            out.extend_from_slice(v.as_bytes());
            out.push(2);
        }
        out
    }

    fn check(expr: &str, pairs: &[(&str, &str)]) -> bool {
        Sql92::compile(expr)
            .unwrap_or_else(|e| panic!("{expr:?} does not compile: {e}"))
            .matches_properties(&props(pairs))
    }

    const ORDER: &[(&str, &str)] = &[
        ("a", "10"),
        ("price", "19.5"),
        ("region", "eu-west"),
        ("TAGS", "TagA"),
        ("flag", "TRUE"),
    ];

    #[test]
    fn comparisons_are_numeric_when_both_sides_are_numbers() {
        for (expr, want) in [
            ("a = 10", true),
            ("a = 10.0", true),
            ("a <> 10", false),
            ("a != 9", true),
            ("a > 9", true),
            ("a > 9.99", true),
            ("a >= 10", true),
            ("a < 10", false),
            ("a <= 10", true),
            ("price > 19", true),
            ("price < 20", true),
            ("a > -5", true),
            ("region = 'eu-west'", true),
            ("region <> 'eu-east'", true),
            ("region = 10", false),
            ("region > 1", false),
            ("region <> 1", true),
            ("TAGS = 'TagA'", true),
            ("flag = TRUE", true),
            ("a = '10'", true),
            ("a = '10.0'", false),
        ] {
            assert_eq!(check(expr, ORDER), want, "{expr}");
        }
    }

    #[test]
    fn missing_properties_never_match_even_negated() {
        for expr in [
            "missing = 1",
            "missing <> 1",
            "NOT (missing = 1)",
            "missing > 1",
            "missing BETWEEN 1 AND 5",
            "missing NOT BETWEEN 1 AND 5",
            "missing IN ('a')",
            "missing NOT IN ('a')",
            "missing CONTAINS 'x'",
            "missing NOT CONTAINS 'x'",
            "missing = 1 AND a = 10",
        ] {
            assert!(!check(expr, ORDER), "{expr}");
        }
        assert!(check("missing IS NULL", ORDER));
        assert!(!check("missing IS NOT NULL", ORDER));
        assert!(check("a IS NOT NULL", ORDER));
        assert!(
            check("missing = 1 OR a = 10", ORDER),
            "unknown OR true is true"
        );
    }

    #[test]
    fn between_in_and_text_operators() {
        for (expr, want) in [
            ("a BETWEEN 1 AND 10", true),
            ("a BETWEEN 11 AND 20", false),
            ("a NOT BETWEEN 11 AND 20", true),
            ("price between 19.5 and 19.5", true),
            ("region IN ('us', 'eu-west')", true),
            ("region NOT IN ('us', 'eu-west')", false),
            ("TAGS in ('TagB')", false),
            ("region CONTAINS 'west'", true),
            ("region NOT CONTAINS 'west'", false),
            ("region STARTSWITH 'eu'", true),
            ("region ENDSWITH 'east'", false),
            ("region NOT ENDSWITH 'east'", true),
        ] {
            assert_eq!(check(expr, ORDER), want, "{expr}");
        }
    }

    #[test]
    fn precedence_is_not_then_and_then_or() {
        for (expr, want) in [
            ("TRUE OR FALSE AND FALSE", true),
            ("(TRUE OR FALSE) AND FALSE", false),
            ("NOT FALSE AND FALSE", false),
            ("NOT (FALSE AND FALSE)", true),
            ("NOT a = 10 OR region = 'eu-west'", true),
            ("NOT a = 10", false),
            ("NOT NOT a = 10", true),
            ("a = 1 OR a = 2 OR (a > 5 AND region STARTSWITH 'eu')", true),
            ("a BETWEEN 1 AND 20 AND region = 'x'", false),
            ("TRUE", true),
            ("false", false),
        ] {
            assert_eq!(check(expr, ORDER), want, "{expr}");
        }
    }

    #[test]
    fn repeated_keys_use_the_last_value_and_bad_utf8_never_matches() {
        assert!(check("k = 'b'", &[("k", "a"), ("k", "b")]));
        let e = Sql92::compile("k IS NULL").expect("compiles");
        assert!(!e.matches_properties(b"k\x01\xff\x02"));
    }

    #[test]
    fn malformed_expressions_are_errors_with_a_position() {
        for (expr, at) in [
            ("", 0),
            ("a =", 3),
            ("a = 'x", 4),
            ("a > 'x'", 7),
            ("a BETWEEN 'a' AND 'b'", 21),
            ("(a = 1", 6),
            ("a = 1)", 5),
            ("a", 0),
            ("a LIKE 'x%'", 2),
            ("a IN ()", 6),
            ("a IN (b)", 6),
            ("a IS 1", 5),
            ("a NOT = 1", 6),
            ("a CONTAINS 1", 11),
            ("a = 1 AND", 9),
            ("a = @", 4),
        ] {
            let e = Sql92::compile(expr).expect_err(expr);
            assert_eq!(e.at, at, "{expr}: {e}");
        }
        let deep = format!("{}a = 1{}", "(".repeat(100), ")".repeat(100));
        assert!(Sql92::compile(&deep)
            .expect_err("too deep")
            .reason
            .contains("nested"));
        let nots = format!("{}a = 1", "NOT ".repeat(100));
        assert!(Sql92::compile(&nots).is_err());
        let long = format!("a IN ({})", vec!["'x'"; 20_000].join(","));
        assert!(Sql92::compile(&long).is_err(), "too long");
    }

    #[test]
    fn long_flat_chains_compile_and_evaluate() {
        let chain = vec!["a = 10"; 5_000].join(" AND ");
        assert!(check(&chain, ORDER));
    }

    fn token() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("a".to_owned()),
            Just("TAGS".to_owned()),
            Just("=".to_owned()),
            Just("<>".to_owned()),
            Just(">=".to_owned()),
            Just("<".to_owned()),
            Just("(".to_owned()),
            Just(")".to_owned()),
            Just(",".to_owned()),
            Just("-".to_owned()),
            Just("AND".to_owned()),
            Just("OR".to_owned()),
            Just("NOT".to_owned()),
            Just("BETWEEN".to_owned()),
            Just("IN".to_owned()),
            Just("IS".to_owned()),
            Just("NULL".to_owned()),
            Just("TRUE".to_owned()),
            Just("CONTAINS".to_owned()),
            Just("'x'".to_owned()),
            Just("10".to_owned()),
            Just("1.5".to_owned()),
        ]
    }

    proptest! {
        #[test]
        fn arbitrary_text_never_panics(text in "\\PC{0,64}") {
            if let Ok(e) = Sql92::compile(&text) {
                let _ = e.matches_properties(&props(ORDER));
            }
        }

        #[test]
        fn arbitrary_token_soup_never_panics(tokens in proptest::collection::vec(token(), 0..40)) {
            let text = tokens.join(" ");
            if let Ok(e) = Sql92::compile(&text) {
                let _ = e.matches_properties(&props(ORDER));
                let _ = e.matches_properties(b"");
            }
        }

        #[test]
        fn arbitrary_property_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..128)) {
            let e = Sql92::compile("a > 1 OR TAGS IN ('x') OR a CONTAINS 'y'").expect("compiles");
            let _ = e.matches_properties(&bytes);
        }

        #[test]
        fn integer_comparisons_agree_with_rust(x in any::<i32>(), y in any::<i32>()) {
            let value = x.to_string();
            let pairs = [("v", value.as_str())];
            prop_assert_eq!(check(&format!("v < {y}"), &pairs), x < y);
            prop_assert_eq!(check(&format!("v = {y}"), &pairs), x == y);
            prop_assert_eq!(check(&format!("NOT v >= {y}"), &pairs), x < y);
        }
    }
}
