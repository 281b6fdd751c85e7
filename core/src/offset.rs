//! The two offsets of the store, kept apart by type: `CommitLogOffset` is a
//! byte position in the CommitLog, `QueueOffset` an entry index in one
//! ConsumeQueue. Mixing them up is a compile error.

use std::fmt;

/// A byte position in the CommitLog (RocketMQ's "physical offset").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CommitLogOffset(pub u64);

/// An entry index in one ConsumeQueue (RocketMQ's "queue offset").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct QueueOffset(pub u64);

impl CommitLogOffset {
    /// The offset `bytes` further on.
    #[must_use]
    pub fn plus(self, bytes: u64) -> Self {
        Self(self.0 + bytes)
    }
}

impl QueueOffset {
    /// The offset `entries` further on.
    #[must_use]
    pub fn plus(self, entries: u64) -> Self {
        Self(self.0 + entries)
    }
}

impl fmt::Display for CommitLogOffset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "@{}", self.0)
    }
}

impl fmt::Display for QueueOffset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// File name of the segment starting at `start`: 20 zero-padded digits, as
/// RocketMQ names CommitLog and ConsumeQueue files.
pub fn segment_name(start: u64) -> String {
    format!("{start:020}")
}

/// Parses a segment file name; `None` for anything that is not 20 digits.
pub fn parse_segment_name(name: &str) -> Option<u64> {
    if name.len() != 20 || !name.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    name.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segment_names_are_twenty_digits_and_parse_back() {
        assert_eq!(segment_name(1_073_741_824), "00000000001073741824");
        assert_eq!(
            parse_segment_name("00000000001073741824"),
            Some(1_073_741_824)
        );
        assert_eq!(parse_segment_name("0000000000107374182"), None);
        assert_eq!(parse_segment_name("0000000000107374182x"), None);
        assert_eq!(parse_segment_name(".prep-00000000000000000000"), None);
    }
}
