//! Topic names: validation (RocketMQ's `TopicValidator` rules) and the
//! well-known system topics, including per-group retry and dead-letter topics.

/// Longest ordinary topic name.
pub const TOPIC_CHARS_MAX: usize = 127;
/// Longest retry (`%RETRY%group`) or dead-letter (`%DLQ%group`) topic name.
pub const GROUP_TOPIC_CHARS_MAX: usize = 255;
/// Prefix of a consumer group's retry topic.
pub const RETRY_GROUP_TOPIC_PREFIX: &str = "%RETRY%";
/// Prefix of a consumer group's dead-letter topic.
pub const DLQ_GROUP_TOPIC_PREFIX: &str = "%DLQ%";
/// The template topic used for auto-creation.
pub const DEFAULT_TOPIC: &str = "TBW102";
/// Where delayed messages wait for their level (4.x delay).
pub const SCHEDULE_TOPIC: &str = "SCHEDULE_TOPIC_XXXX";
/// Where prepared (half) transactional messages are stored.
pub const HALF_TOPIC: &str = "RMQ_SYS_TRANS_HALF_TOPIC";
/// Where transaction resolutions (op records) are stored.
pub const OP_HALF_TOPIC: &str = "RMQ_SYS_TRANS_OP_HALF_TOPIC";

/// Which topic-name rule was broken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopicError {
    /// The name is empty.
    #[error("topic is empty")]
    Empty,
    /// The name is longer than allowed.
    #[error("topic is {len} characters, more than {max}")]
    TooLong {
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The name contains a character outside `[%|a-zA-Z0-9_-]`.
    #[error("topic has illegal character {ch:?} at {index}")]
    IllegalChar {
        /// The offending character.
        ch: char,
        /// Its byte index.
        index: usize,
    },
}

const fn is_topic_char(c: char) -> bool {
    matches!(c, '%' | '|' | '_' | '-') || c.is_ascii_alphanumeric()
}

/// Checks a topic name: non-empty, only `[%|a-zA-Z0-9_-]`, at most
/// [`TOPIC_CHARS_MAX`] characters ([`GROUP_TOPIC_CHARS_MAX`] for retry and
/// dead-letter topics). Characters are checked first, so the length in the
/// error is both bytes and characters.
pub fn validate_topic(name: &str) -> Result<(), TopicError> {
    if name.is_empty() {
        return Err(TopicError::Empty);
    }
    if let Some((index, ch)) = name.char_indices().find(|&(_, c)| !is_topic_char(c)) {
        return Err(TopicError::IllegalChar { ch, index });
    }
    let max = if is_retry_topic(name) || is_dlq_topic(name) {
        GROUP_TOPIC_CHARS_MAX
    } else {
        TOPIC_CHARS_MAX
    };
    if name.len() > max {
        return Err(TopicError::TooLong {
            len: name.len(),
            max,
        });
    }
    Ok(())
}

/// The retry topic of consumer group `group`.
pub fn retry_topic(group: &str) -> String {
    format!("{RETRY_GROUP_TOPIC_PREFIX}{group}")
}

/// The dead-letter topic of consumer group `group`.
pub fn dlq_topic(group: &str) -> String {
    format!("{DLQ_GROUP_TOPIC_PREFIX}{group}")
}

/// True for a `%RETRY%group` topic.
pub fn is_retry_topic(name: &str) -> bool {
    name.starts_with(RETRY_GROUP_TOPIC_PREFIX)
}

/// True for a `%DLQ%group` topic.
pub fn is_dlq_topic(name: &str) -> bool {
    name.starts_with(DLQ_GROUP_TOPIC_PREFIX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validate_topic_accepts_legal_names() {
        for name in [
            "TopicTest",
            "a",
            "a-b_c|d%e",
            "0123",
            DEFAULT_TOPIC,
            SCHEDULE_TOPIC,
        ] {
            assert_eq!(validate_topic(name), Ok(()), "{name}");
        }
        assert_eq!(validate_topic(&"t".repeat(TOPIC_CHARS_MAX)), Ok(()));
    }

    #[test]
    fn validate_topic_rejects_empty() {
        assert_eq!(validate_topic(""), Err(TopicError::Empty));
    }

    #[test]
    fn validate_topic_rejects_illegal_chars_with_position() {
        assert_eq!(
            validate_topic("ab c"),
            Err(TopicError::IllegalChar { ch: ' ', index: 2 })
        );
        assert_eq!(
            validate_topic("a.b"),
            Err(TopicError::IllegalChar { ch: '.', index: 1 })
        );
        assert_eq!(
            validate_topic("主题"),
            Err(TopicError::IllegalChar {
                ch: '主', index: 0
            })
        );
        assert!(matches!(
            validate_topic("a#b"),
            Err(TopicError::IllegalChar { .. })
        ));
        assert!(matches!(
            validate_topic("a/b"),
            Err(TopicError::IllegalChar { .. })
        ));
    }

    #[test]
    fn validate_topic_rejects_long_names() {
        assert_eq!(
            validate_topic(&"t".repeat(TOPIC_CHARS_MAX + 1)),
            Err(TopicError::TooLong { len: 128, max: 127 })
        );
    }

    #[test]
    fn retry_and_dlq_topics_may_be_up_to_255() {
        let group = "g".repeat(GROUP_TOPIC_CHARS_MAX - RETRY_GROUP_TOPIC_PREFIX.len());
        assert_eq!(validate_topic(&retry_topic(&group)), Ok(()));
        assert_eq!(validate_topic(&dlq_topic(&group)), Ok(()));
        assert_eq!(
            validate_topic(&retry_topic(&format!("{group}gg"))),
            Err(TopicError::TooLong { len: 257, max: 255 })
        );
    }

    #[test]
    fn retry_and_dlq_topic_names() {
        assert_eq!(retry_topic("cg"), "%RETRY%cg");
        assert_eq!(dlq_topic("cg"), "%DLQ%cg");
        assert!(is_retry_topic("%RETRY%cg"));
        assert!(!is_retry_topic("%DLQ%cg"));
        assert!(is_dlq_topic("%DLQ%cg"));
    }
}
