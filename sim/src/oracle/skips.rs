//! A long-polling consumer reads its queue from offset 0 and moves on only
//! past what it received, so what it received is gap-free: an offset below
//! the highest it got that it never got was skipped (a pull answered past
//! a message it did not return). Pure function over timed history entries.

use std::collections::{BTreeMap, BTreeSet};

use crate::history::{Entry, Event};

/// `(queue, offset)` pairs a long-polling consumer skipped: below the
/// highest offset delivered on that queue, yet never delivered.
pub fn skipped_deliveries(entries: &[Entry]) -> Vec<(i32, u64)> {
    let mut delivered: BTreeMap<i32, BTreeSet<u64>> = BTreeMap::new();
    for e in entries {
        if let Event::Delivered { queue, records } = &e.event {
            delivered
                .entry(*queue)
                .or_default()
                .extend(records.iter().map(|(offset, _)| *offset));
        }
    }
    let mut skipped = Vec::new();
    for (queue, offsets) in delivered {
        let Some(&last) = offsets.last() else {
            continue;
        };
        skipped.extend(
            (0..last)
                .filter(|o| !offsets.contains(o))
                .map(|o| (queue, o)),
        );
    }
    skipped
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delivered(queue: i32, offsets: &[u64]) -> Entry {
        Entry {
            at_ms: 1,
            event: Event::Delivered {
                queue,
                records: offsets.iter().map(|o| (*o, format!("m{o}"))).collect(),
            },
        }
    }

    #[test]
    fn a_gap_below_the_last_delivery_is_a_skip() {
        let ok = [
            delivered(0, &[0, 1]),
            delivered(0, &[2]),
            delivered(1, &[0]),
        ];
        assert!(skipped_deliveries(&ok).is_empty());
        let skip = [
            delivered(0, &[0, 1]),
            delivered(0, &[3]),
            delivered(1, &[1]),
        ];
        assert_eq!(skipped_deliveries(&skip), vec![(0, 2), (1, 0)]);
    }
}
