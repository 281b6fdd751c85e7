//! The POP log: the records POP consumption is rebuilt from, stored in the
//! CommitLog under [`POP_TOPIC`] queue 0 (so they are flushed, replicated
//! and truncated with everything else). A lease record grants offsets of
//! one queue until a time, its own CommitLog offset being the lease's
//! token; an ack record closes one lease. Replaying the topic in order
//! rebuilds every lease still open.

use serde::{Deserialize, Serialize};

/// The system topic of the POP log.
pub const POP_TOPIC: &str = "rmq_sys_sluice_pop";

/// One POP log record (JSON body).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "r")]
pub enum Record {
    /// Offsets `o` of group `g`'s queue `t`/`q` handed out (attempts `a`)
    /// until wall-clock ms `v`; fresh reading reached `n`.
    #[serde(rename = "lease")]
    Lease {
        g: String,
        t: String,
        q: i32,
        o: Vec<i64>,
        a: Vec<u32>,
        v: i64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        n: Option<i64>,
    },
    /// Offset `o` of group `g`'s queue `t`/`q`, leased under token `k`, is
    /// acknowledged (consumed, or moved to the dead-letter queue).
    #[serde(rename = "ack")]
    Ack {
        g: String,
        t: String,
        q: i32,
        o: i64,
        k: i64,
    },
}

impl Record {
    /// The record's body bytes.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("invariant: plain fields serialize")
    }

    /// Parses a body; `None` for anything else (a foreign or torn body is
    /// skipped by the replay, never trusted).
    pub fn decode(body: &[u8]) -> Option<Self> {
        serde_json::from_slice(body).ok()
    }
}

/// What a receipt handle names: one lease of one offset. Ours, opaque to
/// clients: `pop1:<queue>:<offset>:<token>:<visible-at-ms>`. Acking with
/// it checks the token against the lease the *acking group* holds at that
/// offset, so a handle (or a guess) never acknowledges another group's
/// message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Handle {
    /// Queue id.
    pub queue_id: i32,
    /// Queue offset.
    pub offset: i64,
    /// The lease's token.
    pub token: i64,
    /// When the lease expires (wall-clock ms), for the client's display.
    pub visible_at_ms: i64,
}

const HANDLE_PREFIX: &str = "pop1";

impl Handle {
    /// The handle as clients carry it.
    pub fn encode(&self) -> String {
        format!(
            "{HANDLE_PREFIX}:{}:{}:{}:{}",
            self.queue_id, self.offset, self.token, self.visible_at_ms
        )
    }

    /// Parses a handle; `None` if it is not one of ours.
    pub fn parse(text: &str) -> Option<Self> {
        let mut parts = text.split(':');
        if parts.next()? != HANDLE_PREFIX {
            return None;
        }
        let handle = Self {
            queue_id: parts.next()?.parse().ok()?,
            offset: parts.next()?.parse().ok()?,
            token: parts.next()?.parse().ok()?,
            visible_at_ms: parts.next()?.parse().ok()?,
        };
        parts.next().is_none().then_some(handle)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_foreign_bodies_are_skipped() {
        let lease = Record::Lease {
            g: "g".into(),
            t: "t".into(),
            q: 2,
            o: vec![4, 5],
            a: vec![1, 3],
            v: 99,
            n: Some(7),
        };
        assert_eq!(Record::decode(&lease.encode()), Some(lease));
        let ack = Record::Ack {
            g: "g".into(),
            t: "t".into(),
            q: 2,
            o: 4,
            k: 1_234,
        };
        assert_eq!(Record::decode(&ack.encode()), Some(ack));
        assert_eq!(Record::decode(b"{\"r\":\"other\"}"), None);
        assert_eq!(Record::decode(b"\xff\x00"), None);
    }

    #[test]
    fn handles_round_trip_and_anything_else_is_refused() {
        let h = Handle {
            queue_id: 3,
            offset: 41,
            token: 8_192,
            visible_at_ms: 1_700_000_000_000,
        };
        assert_eq!(Handle::parse(&h.encode()), Some(h));
        for bad in [
            "",
            "pop1:3:41:8192",
            "pop1:3:41:8192:1:2",
            "pop2:3:41:8192:1",
            "pop1:x:41:8192:1",
        ] {
            assert_eq!(Handle::parse(bad), None, "{bad:?}");
        }
    }
}
