//! Recursive-descent parser from tokens to [`Expr`]. Precedence, loosest
//! first: `OR`, `AND`, `NOT`, then one predicate (a comparison, `BETWEEN`,
//! `IN`, `IS [NOT] NULL`, `CONTAINS`/`STARTSWITH`/`ENDSWITH`, `TRUE`,
//! `FALSE` or a parenthesised expression). Nesting is limited so hostile
//! input cannot exhaust the stack, here or when evaluating.

use super::lexer::{Keyword, Spanned, Token};
use super::{CmpOp, Expr, Literal, Operand, ParseError, TextOp};

/// Deepest nesting of parentheses and `NOT`s accepted.
pub(super) const NESTING_DEPTH_MAX: usize = 64;

pub(super) struct Parser {
    tokens: Vec<Spanned>,
    pos: usize,
    depth: usize,
    end: usize,
}

impl Parser {
    pub(super) fn new(tokens: Vec<Spanned>, text_len: usize) -> Self {
        Self {
            tokens,
            pos: 0,
            depth: 0,
            end: text_len,
        }
    }

    /// The whole expression; every token must be used.
    pub(super) fn parse(mut self) -> Result<Expr, ParseError> {
        if self.tokens.is_empty() {
            return Err(ParseError::new(0, "the expression is empty"));
        }
        let expr = self.or()?;
        match self.peek() {
            None => Ok(expr),
            Some(t) => Err(self.error_here(format!("unexpected {}", describe(t)))),
        }
    }

    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.pos).map(|s| &s.token)
    }

    fn at(&self) -> usize {
        self.tokens.get(self.pos).map_or(self.end, |s| s.at)
    }

    fn error_here(&self, reason: impl Into<String>) -> ParseError {
        ParseError::new(self.at(), reason)
    }

    fn bump(&mut self) -> Option<Token> {
        let t = self.tokens.get(self.pos).map(|s| s.token.clone());
        if t.is_some() {
            self.pos += 1;
        }
        t
    }

    fn eat(&mut self, token: &Token) -> bool {
        if self.peek() == Some(token) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn eat_keyword(&mut self, k: Keyword) -> bool {
        self.eat(&Token::Keyword(k))
    }

    fn expect(&mut self, token: &Token, what: &str) -> Result<(), ParseError> {
        if self.eat(token) {
            Ok(())
        } else {
            Err(self.error_here(format!("expected {what}, found {}", self.found())))
        }
    }

    fn found(&self) -> String {
        self.peek()
            .map_or_else(|| "the end of the expression".to_owned(), describe)
    }

    fn nest(&mut self) -> Result<(), ParseError> {
        self.depth += 1;
        if self.depth > NESTING_DEPTH_MAX {
            return Err(self.error_here(format!("nested deeper than {NESTING_DEPTH_MAX} levels")));
        }
        Ok(())
    }

    fn or(&mut self) -> Result<Expr, ParseError> {
        let mut terms = vec![self.and()?];
        while self.eat_keyword(Keyword::Or) {
            terms.push(self.and()?);
        }
        Ok(if terms.len() == 1 {
            terms.remove(0)
        } else {
            Expr::Or(terms)
        })
    }

    fn and(&mut self) -> Result<Expr, ParseError> {
        let mut terms = vec![self.not()?];
        while self.eat_keyword(Keyword::And) {
            terms.push(self.not()?);
        }
        Ok(if terms.len() == 1 {
            terms.remove(0)
        } else {
            Expr::And(terms)
        })
    }

    fn not(&mut self) -> Result<Expr, ParseError> {
        if self.eat_keyword(Keyword::Not) {
            self.nest()?;
            let inner = self.not()?;
            self.depth -= 1;
            return Ok(Expr::Not(Box::new(inner)));
        }
        self.predicate()
    }

    fn predicate(&mut self) -> Result<Expr, ParseError> {
        if self.eat(&Token::LParen) {
            self.nest()?;
            let inner = self.or()?;
            self.expect(&Token::RParen, "`)`")?;
            self.depth -= 1;
            return Ok(inner);
        }
        let start = self.at();
        let left = self.operand()?;
        if let Some(expr) = self.predicate_tail(&left)? {
            return Ok(expr);
        }
        match left {
            Operand::Literal(Literal::Bool(b)) => Ok(Expr::Const(b)),
            Operand::Property(name) => Err(ParseError::new(
                start,
                format!(
                    "property {name} must be compared (e.g. `{name} = 'x'` or `{name} IS NOT NULL`), found {}",
                    self.found()
                ),
            )),
            Operand::Literal(_) => Err(ParseError::new(
                start,
                format!("a literal must be compared, found {}", self.found()),
            )),
        }
    }

    /// What follows an operand, or `None` when nothing does.
    fn predicate_tail(&mut self, left: &Operand) -> Result<Option<Expr>, ParseError> {
        let op = match self.peek() {
            Some(Token::Eq) => Some(CmpOp::Eq),
            Some(Token::Ne) => Some(CmpOp::Ne),
            Some(Token::Lt) => Some(CmpOp::Lt),
            Some(Token::Le) => Some(CmpOp::Le),
            Some(Token::Gt) => Some(CmpOp::Gt),
            Some(Token::Ge) => Some(CmpOp::Ge),
            _ => None,
        };
        if let Some(op) = op {
            self.pos += 1;
            let right = self.operand()?;
            if op.is_ordering() {
                self.check_orderable(left)?;
                self.check_orderable(&right)?;
            }
            return Ok(Some(Expr::Compare {
                op,
                left: left.clone(),
                right,
            }));
        }
        if self.eat_keyword(Keyword::Is) {
            let negated = self.eat_keyword(Keyword::Not);
            self.expect(&Token::Keyword(Keyword::Null), "NULL after IS")?;
            return Ok(Some(Expr::IsNull {
                value: left.clone(),
                negated,
            }));
        }
        let negated = self.peek() == Some(&Token::Keyword(Keyword::Not));
        if negated {
            self.pos += 1;
        }
        let tail = match self.bump() {
            Some(Token::Keyword(Keyword::Between)) => {
                let low = self.operand()?;
                self.expect(&Token::Keyword(Keyword::And), "AND in BETWEEN … AND …")?;
                let high = self.operand()?;
                for o in [left, &low, &high] {
                    self.check_orderable(o)?;
                }
                Expr::Between {
                    value: left.clone(),
                    low,
                    high,
                    negated,
                }
            }
            Some(Token::Keyword(Keyword::In)) => Expr::In {
                value: left.clone(),
                list: self.in_list()?,
                negated,
            },
            Some(Token::Keyword(Keyword::Contains)) => {
                self.text(TextOp::Contains, left, negated)?
            }
            Some(Token::Keyword(Keyword::StartsWith)) => {
                self.text(TextOp::StartsWith, left, negated)?
            }
            Some(Token::Keyword(Keyword::EndsWith)) => {
                self.text(TextOp::EndsWith, left, negated)?
            }
            Some(Token::Keyword(Keyword::Like)) => {
                self.pos -= 1;
                return Err(
                    self.error_here("LIKE is not supported; use CONTAINS, STARTSWITH or ENDSWITH")
                );
            }
            Some(_) if negated => {
                self.pos -= 1;
                return Err(self.error_here(format!(
                    "expected BETWEEN, IN, CONTAINS, STARTSWITH or ENDSWITH after NOT, found {}",
                    self.found()
                )));
            }
            Some(_) => {
                self.pos -= 1;
                return Ok(None);
            }
            None if negated => {
                return Err(self.error_here(
                    "expected BETWEEN, IN, CONTAINS, STARTSWITH or ENDSWITH after NOT",
                ));
            }
            None => return Ok(None),
        };
        Ok(Some(tail))
    }

    /// The `'pattern'` of `CONTAINS`, `STARTSWITH` or `ENDSWITH`.
    fn text(&mut self, op: TextOp, left: &Operand, negated: bool) -> Result<Expr, ParseError> {
        let Some(Token::Str(pattern)) = self.peek().cloned() else {
            return Err(self.error_here(format!(
                "expected a 'string' literal, found {}",
                self.found()
            )));
        };
        self.pos += 1;
        Ok(Expr::Text {
            op,
            value: left.clone(),
            pattern,
            negated,
        })
    }

    fn in_list(&mut self) -> Result<Vec<Literal>, ParseError> {
        self.expect(&Token::LParen, "`(` after IN")?;
        let mut list = Vec::new();
        loop {
            match self.operand()? {
                Operand::Literal(l) => list.push(l),
                Operand::Property(_) => {
                    self.pos -= 1;
                    return Err(self.error_here("IN lists hold literals only"));
                }
            }
            if self.eat(&Token::Comma) {
                continue;
            }
            self.expect(&Token::RParen, "`,` or `)` in the IN list")?;
            return Ok(list);
        }
    }

    /// `<`, `<=`, `>`, `>=` and `BETWEEN` take numbers and properties only
    /// (RocketMQ rejects string and boolean literals there).
    fn check_orderable(&self, o: &Operand) -> Result<(), ParseError> {
        match o {
            Operand::Literal(Literal::Str(_) | Literal::Bool(_)) => Err(ParseError::new(
                self.at(),
                "only numbers can be compared with <, <=, >, >= or BETWEEN",
            )),
            _ => Ok(()),
        }
    }

    fn operand(&mut self) -> Result<Operand, ParseError> {
        let negative = if self.eat(&Token::Minus) {
            true
        } else {
            self.eat(&Token::Plus);
            false
        };
        let at = self.at();
        let operand = match self.bump() {
            Some(Token::Ident(name)) if !negative => Operand::Property(name),
            Some(Token::Str(s)) if !negative => Operand::Literal(Literal::Str(s)),
            Some(Token::Keyword(Keyword::True)) if !negative => {
                Operand::Literal(Literal::Bool(true))
            }
            Some(Token::Keyword(Keyword::False)) if !negative => {
                Operand::Literal(Literal::Bool(false))
            }
            Some(Token::Int(i)) => Operand::Literal(Literal::Int(if negative { -i } else { i })),
            Some(Token::Float(f)) => {
                Operand::Literal(Literal::Float(if negative { -f } else { f }))
            }
            Some(t) => {
                self.pos -= 1;
                let want = if negative {
                    "a number after the sign"
                } else {
                    "a property or a literal"
                };
                return Err(ParseError::new(
                    at,
                    format!("expected {want}, found {}", describe(&t)),
                ));
            }
            None => {
                return Err(ParseError::new(
                    at,
                    "expected a property or a literal, found the end of the expression",
                ))
            }
        };
        Ok(operand)
    }
}

fn describe(t: &Token) -> String {
    match t {
        Token::Ident(name) => format!("property {name}"),
        Token::Str(s) => format!("string '{s}'"),
        Token::Int(i) => format!("number {i}"),
        Token::Float(f) => format!("number {f}"),
        Token::Keyword(k) => format!("{k:?}").to_ascii_uppercase(),
        Token::LParen => "`(`".to_owned(),
        Token::RParen => "`)`".to_owned(),
        Token::Comma => "`,`".to_owned(),
        Token::Minus => "`-`".to_owned(),
        Token::Plus => "`+`".to_owned(),
        Token::Eq => "`=`".to_owned(),
        Token::Ne => "`<>`".to_owned(),
        Token::Lt => "`<`".to_owned(),
        Token::Le => "`<=`".to_owned(),
        Token::Gt => "`>`".to_owned(),
        Token::Ge => "`>=`".to_owned(),
    }
}
