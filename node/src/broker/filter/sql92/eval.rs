//! Evaluation in SQL's three-valued logic: `None` is "unknown" (a missing
//! property, or values that cannot be ordered); `AND`/`OR`/`NOT` follow
//! the SQL truth tables.

use std::cmp::Ordering;

use super::{CmpOp, Expr, Literal, Operand, TextOp};

/// A value during evaluation.
#[derive(Clone, Copy, Debug)]
enum Value<'a> {
    Null,
    Str(&'a str),
    Int(i64),
    Float(f64),
    Bool(bool),
}

#[derive(Clone, Copy, Debug)]
enum Num {
    Int(i64),
    Float(f64),
}

/// The expression's truth value; `lookup` answers property values. Both
/// borrow for `'a` so literals and property values mix in one [`Value`].
pub(super) fn evaluate<'a, F>(expr: &'a Expr, lookup: &F) -> Option<bool>
where
    F: Fn(&str) -> Option<&'a str>,
{
    let value = |o: &'a Operand| -> Value<'a> {
        match o {
            Operand::Property(name) => lookup(name).map_or(Value::Null, Value::Str),
            Operand::Literal(l) => literal(l),
        }
    };
    match expr {
        Expr::And(terms) => {
            let mut unknown = false;
            for t in terms {
                match evaluate(t, lookup) {
                    Some(false) => return Some(false),
                    None => unknown = true,
                    Some(true) => {}
                }
            }
            (!unknown).then_some(true)
        }
        Expr::Or(terms) => {
            let mut unknown = false;
            for t in terms {
                match evaluate(t, lookup) {
                    Some(true) => return Some(true),
                    None => unknown = true,
                    Some(false) => {}
                }
            }
            (!unknown).then_some(false)
        }
        Expr::Not(inner) => evaluate(inner, lookup).map(|b| !b),
        Expr::Const(b) => Some(*b),
        Expr::Compare { op, left, right } => compare(*op, value(left), value(right)),
        Expr::Between {
            value: v,
            low,
            high,
            negated,
        } => {
            let v = value(v);
            let ge = order(v, value(low)).map(Ordering::is_ge);
            let le = order(v, value(high)).map(Ordering::is_le);
            let within = match (ge, le) {
                (Some(false), _) | (_, Some(false)) => Some(false),
                (Some(true), Some(true)) => Some(true),
                _ => None,
            };
            within.map(|w| w != *negated)
        }
        Expr::In {
            value: v,
            list,
            negated,
        } => {
            let v = value(v);
            if matches!(v, Value::Null) {
                return None;
            }
            let found = list.iter().any(|l| equal(v, literal(l)) == Some(true));
            Some(found != *negated)
        }
        Expr::IsNull { value: v, negated } => Some(matches!(value(v), Value::Null) != *negated),
        Expr::Text {
            op,
            value: v,
            pattern,
            negated,
        } => match value(v) {
            Value::Str(s) => {
                let hit = match op {
                    TextOp::Contains => s.contains(pattern.as_str()),
                    TextOp::StartsWith => s.starts_with(pattern.as_str()),
                    TextOp::EndsWith => s.ends_with(pattern.as_str()),
                };
                Some(hit != *negated)
            }
            _ => None,
        },
    }
}

fn literal(l: &Literal) -> Value<'_> {
    match l {
        Literal::Str(s) => Value::Str(s),
        Literal::Int(i) => Value::Int(*i),
        Literal::Float(f) => Value::Float(*f),
        Literal::Bool(b) => Value::Bool(*b),
    }
}

fn compare(op: CmpOp, l: Value<'_>, r: Value<'_>) -> Option<bool> {
    match op {
        CmpOp::Eq => equal(l, r),
        CmpOp::Ne => equal(l, r).map(|e| !e),
        CmpOp::Lt => order(l, r).map(Ordering::is_lt),
        CmpOp::Le => order(l, r).map(Ordering::is_le),
        CmpOp::Gt => order(l, r).map(Ordering::is_gt),
        CmpOp::Ge => order(l, r).map(Ordering::is_ge),
    }
}

/// Equality: strings compare as text with strings, as numbers with
/// numbers (a string that is not a number equals no number), and as
/// `"true"` (any case) with booleans, like RocketMQ's conversions.
fn equal(l: Value<'_>, r: Value<'_>) -> Option<bool> {
    match (l, r) {
        (Value::Null, _) | (_, Value::Null) => None,
        (Value::Str(a), Value::Str(b)) => Some(a == b),
        (Value::Bool(a), Value::Bool(b)) => Some(a == b),
        (Value::Bool(b), Value::Str(s)) | (Value::Str(s), Value::Bool(b)) => {
            Some(s.eq_ignore_ascii_case("true") == b)
        }
        (Value::Bool(_), _) | (_, Value::Bool(_)) => Some(false),
        _ => match (number(l), number(r)) {
            (Some(a), Some(b)) => Some(numeric_order(a, b) == Some(Ordering::Equal)),
            _ => Some(false),
        },
    }
}

/// Ordering, defined only between values that are (or parse as) numbers.
fn order(l: Value<'_>, r: Value<'_>) -> Option<Ordering> {
    numeric_order(number(l)?, number(r)?)
}

fn number(v: Value<'_>) -> Option<Num> {
    match v {
        Value::Int(i) => Some(Num::Int(i)),
        Value::Float(f) => Some(Num::Float(f)),
        Value::Str(s) => {
            let s = s.trim();
            s.parse::<i64>().map(Num::Int).ok().or_else(|| {
                s.parse::<f64>()
                    .ok()
                    .filter(|f| !f.is_nan())
                    .map(Num::Float)
            })
        }
        Value::Null | Value::Bool(_) => None,
    }
}

fn numeric_order(a: Num, b: Num) -> Option<Ordering> {
    match (a, b) {
        (Num::Int(x), Num::Int(y)) => Some(x.cmp(&y)),
        _ => as_f64(a).partial_cmp(&as_f64(b)),
    }
}

#[expect(
    clippy::cast_precision_loss,
    reason = "mixed integer/decimal comparisons are done in f64, as Java widens to double"
)]
fn as_f64(n: Num) -> f64 {
    match n {
        Num::Int(i) => i as f64,
        Num::Float(f) => f,
    }
}
