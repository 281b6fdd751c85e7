//! The two offsets of the store, kept apart by type: `CommitLogOffset` is a
//! byte position in the CommitLog, `QueueOffset` an entry index in one
//! ConsumeQueue. Mixing them up is a compile error.

use std::fmt;

/// A byte position in the CommitLog (RocketMQ's "physical offset").
///
/// Outside this crate it is built with [`CommitLogOffset::new`] or
/// [`CommitLogOffset::from_wire`] and read with [`CommitLogOffset::get`] or
/// [`CommitLogOffset::to_wire`]: the wire's signed `i64` never meets the
/// store's `u64` unchecked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CommitLogOffset(pub(crate) u64);

/// An entry index in one ConsumeQueue (RocketMQ's "queue offset"); built
/// and read as [`CommitLogOffset`] is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct QueueOffset(pub(crate) u64);

/// A wire offset (a Java `long`) that no store position can be: negative.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{what} {value} is negative")]
pub struct NegativeOffset {
    /// The field's name, as the wire calls it.
    pub what: &'static str,
    /// The value received.
    pub value: i64,
}

macro_rules! offset_conversions {
    ($name:ident) => {
        impl $name {
            /// The offset at `value`.
            pub const fn new(value: u64) -> Self {
                Self(value)
            }

            /// The offset as a number.
            pub const fn get(self) -> u64 {
                self.0
            }

            /// The offset as the wire writes it (a Java `long`); a value
            /// past `i64::MAX` (2^63 bytes or entries: never reached)
            /// saturates.
            pub fn to_wire(self) -> i64 {
                i64::try_from(self.0).unwrap_or(i64::MAX)
            }

            /// The offset a wire field named `what` carries, or the error
            /// naming the field when it is negative.
            pub fn from_wire(what: &'static str, value: i64) -> Result<Self, NegativeOffset> {
                u64::try_from(value)
                    .map(Self)
                    .map_err(|_| NegativeOffset { what, value })
            }
        }
    };
}
offset_conversions!(CommitLogOffset);
offset_conversions!(QueueOffset);

impl CommitLogOffset {
    /// Past any log position: as a visibility gate, no gate at all.
    pub const UNGATED: Self = Self(u64::MAX);

    /// The offset `bytes` further on.
    #[must_use]
    pub fn plus(self, bytes: u64) -> Self {
        Self(self.0 + bytes)
    }

    /// Bytes from `earlier` to here (0 when `earlier` is past it).
    pub fn bytes_since(self, earlier: Self) -> u64 {
        self.0.saturating_sub(earlier.0)
    }
}

impl QueueOffset {
    /// The offset `entries` further on.
    #[must_use]
    pub fn plus(self, entries: u64) -> Self {
        Self(self.0 + entries)
    }

    /// Entries from `earlier` to here (0 when `earlier` is past it).
    pub fn entries_since(self, earlier: Self) -> u64 {
        self.0.saturating_sub(earlier.0)
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
    fn wire_offsets_convert_both_ways_and_negative_ones_are_named() {
        assert_eq!(
            CommitLogOffset::from_wire("offset", 42),
            Ok(CommitLogOffset(42))
        );
        assert_eq!(QueueOffset::new(7).to_wire(), 7);
        assert_eq!(QueueOffset::new(u64::MAX).to_wire(), i64::MAX);
        let err = QueueOffset::from_wire("queueOffset", -1).expect_err("negative");
        assert_eq!(err.to_string(), "queueOffset -1 is negative");
    }

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
