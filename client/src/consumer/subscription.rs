//! Subscriptions: a topic and a tag expression (`*`, `a || b`) or a SQL92
//! property filter, and the client-side re-check of tags (the broker
//! filters by tag hash, which can collide).

use sluice_core::message::java_string_hash;
use sluice_net::body::SubscriptionData;

use crate::message::MessageExt;

/// How a subscription's expression is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExpressionType {
    /// `*` or tags separated by `||`.
    Tag,
    /// A SQL92 expression over message properties (broker-side).
    Sql92,
}

impl ExpressionType {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ExpressionType::Tag => "TAG",
            ExpressionType::Sql92 => "SQL92",
        }
    }
}

/// One topic subscription.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subscription {
    /// Topic.
    pub topic: String,
    /// The expression as given.
    pub expression: String,
    /// How the expression is read.
    pub kind: ExpressionType,
}

impl Subscription {
    /// Every message of `topic`.
    pub fn all(topic: impl Into<String>) -> Self {
        Self::tag(topic, "*")
    }

    /// Messages of `topic` whose tag is one of `expression`'s (`a || b`);
    /// `*` or an empty expression matches all.
    pub fn tag(topic: impl Into<String>, expression: impl Into<String>) -> Self {
        let expression = expression.into();
        let expression = if expression.trim().is_empty() {
            "*".to_owned()
        } else {
            expression.trim().to_owned()
        };
        Self {
            topic: topic.into(),
            expression,
            kind: ExpressionType::Tag,
        }
    }

    /// Messages of `topic` whose properties satisfy the SQL92 `expression`.
    pub fn sql92(topic: impl Into<String>, expression: impl Into<String>) -> Self {
        Self {
            topic: topic.into(),
            expression: expression.into(),
            kind: ExpressionType::Sql92,
        }
    }

    /// Whether this subscription takes every message.
    pub fn is_all(&self) -> bool {
        self.kind == ExpressionType::Tag && self.expression == "*"
    }

    /// The tags of a tag expression.
    pub fn tags(&self) -> Vec<String> {
        if self.kind != ExpressionType::Tag || self.is_all() {
            return Vec::new();
        }
        self.expression
            .split("||")
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(str::to_owned)
            .collect()
    }

    /// The subscription as the broker stores it (heartbeats).
    pub fn data(&self, version: i64) -> SubscriptionData {
        let tags = self.tags();
        SubscriptionData {
            class_filter_mode: false,
            topic: self.topic.clone(),
            sub_string: self.expression.clone(),
            code_set: tags.iter().map(|t| java_string_hash(t)).collect(),
            tags_set: tags,
            sub_version: version,
            expression_type: Some(self.kind.as_str().to_owned()),
        }
    }

    /// The client-side re-check: exact tag membership for tag expressions;
    /// SQL92 was evaluated by the broker.
    pub fn matches(&self, msg: &MessageExt) -> bool {
        if self.kind == ExpressionType::Sql92 || self.is_all() {
            return true;
        }
        msg.tags()
            .is_some_and(|tag| self.tags().iter().any(|t| t == tag))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tag_expressions_split_and_hash_like_java() {
        let s = Subscription::tag("T", " a || b ||");
        assert_eq!(s.tags(), ["a", "b"]);
        let d = s.data(7);
        assert_eq!(d.code_set, [97, 98]);
        assert_eq!(d.expression_type.as_deref(), Some("TAG"));
        assert!(Subscription::tag("T", "  ").is_all());
        assert!(Subscription::sql92("T", "a > 1").tags().is_empty());
    }
}
