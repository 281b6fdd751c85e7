//! The dedupe check: with the broker's dedupe window of retried sends on,
//! a producer's retries of one message (one `UNIQ_KEY`, kept across its
//! attempts) are stored once, whatever became of the attempts' answers —
//! across broker restarts and failovers too, since the window is rebuilt
//! from the log. Delayed messages (a crash may repeat a delivery) and
//! transactional ones (their commit is not a send) are judged elsewhere.

use super::{reads, sends, Kind, Violation};
use crate::history::Event;

/// Every plain message read at more than one position.
pub fn stored_twice(events: &[Event]) -> Vec<Violation> {
    let (sends, _) = sends(events);
    let (_, reads, _) = reads(events);
    reads
        .into_iter()
        .filter(|(id, at)| at.len() > 1 && sends.get(id).is_some_and(|s| s.kind == Kind::Plain))
        .map(|(id, at)| Violation::StoredTwice {
            id,
            at: at.into_iter().collect(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn invoke(id: &str) -> Event {
        Event::SendInvoke {
            producer: 0,
            id: id.to_owned(),
            queue: 0,
        }
    }

    fn info(id: &str) -> Event {
        Event::SendInfo {
            id: id.to_owned(),
            reason: "timeout".to_owned(),
        }
    }

    #[test]
    fn a_retry_stored_again_is_flagged_and_one_copy_is_not() {
        let poll = |records: &[(u64, &str)]| Event::Poll {
            queue: 0,
            records: records
                .iter()
                .map(|(o, id)| (*o, (*id).to_owned()))
                .collect(),
        };
        let twice = [
            invoke("a"),
            info("a"),
            invoke("a"),
            info("a"),
            poll(&[(0, "a"), (1, "a")]),
        ];
        assert_eq!(
            stored_twice(&twice),
            vec![Violation::StoredTwice {
                id: "a".to_owned(),
                at: vec![(0, 0), (0, 1)],
            }]
        );
        let once = [
            invoke("a"),
            info("a"),
            invoke("a"),
            info("a"),
            poll(&[(0, "a")]),
        ];
        assert!(stored_twice(&once).is_empty());
        let delayed = [
            Event::Deferred {
                id: "a".to_owned(),
                delay_ms: 1_000,
            },
            invoke("a"),
            info("a"),
            poll(&[(0, "a"), (1, "a")]),
        ];
        assert!(
            stored_twice(&delayed).is_empty(),
            "delayed: judged elsewhere"
        );
    }
}
