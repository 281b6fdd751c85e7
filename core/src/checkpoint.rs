//! The checkpoint: a small file, replaced atomically, naming a safe point of
//! the store. Every CommitLog byte below `dispatched` is durable, and every
//! ConsumeQueue entry of those records is durable too, with each queue's
//! length listed; the index is durable for the records below
//! `index_dispatched` (synced less often: see `StoreConfig::index_sync_*`).
//! Recovery trusts exactly that and re-derives everything after it from the
//! CommitLog.

use crate::error::{Error, Result};
use crate::index::IndexMark;

/// File name of the checkpoint under the store root.
pub const CHECKPOINT_FILE: &str = "checkpoint";

const MAGIC: &[u8; 4] = b"SLCP";
const VERSION: u32 = 3;
/// Version 2 lacked `index_dispatched` (the index was synced with the
/// queues: it equals `dispatched`).
const VERSION_WITHOUT_INDEX_CURSOR: u32 = 2;
/// Version 1 lacked each queue's min too.
const VERSION_WITHOUT_MIN: u32 = 1;
/// A checkpoint never lists more queues than this; a larger count is junk.
const QUEUES_MAX: u32 = 1 << 20;

/// One queue's length at the checkpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueMark {
    /// Topic name.
    pub topic: String,
    /// Queue id.
    pub queue_id: i32,
    /// Entries `[0, len)` are durable (those below the queue's min may be
    /// gone by retention).
    pub len: u64,
    /// The queue's min: retention removed the entries below it, so files
    /// starting above it were lost, not retired (`None` in a version-1
    /// checkpoint, which did not record it).
    pub min: Option<u64>,
}

/// The content of the checkpoint file.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Checkpoint {
    /// CommitLog offset below which records and their ConsumeQueue entries
    /// are all durable.
    pub dispatched: u64,
    /// Store timestamp of the last record below `dispatched`.
    pub last_store_ms: i64,
    /// CommitLog offset (at most `dispatched`) below which the records'
    /// index entries are durable: recovery re-indexes from here.
    pub index_dispatched: u64,
    /// Where the index stood when it was synced at `index_dispatched`.
    pub index: IndexMark,
    /// Every queue's length, ordered by topic then id.
    pub queues: Vec<QueueMark>,
}

impl Checkpoint {
    /// Serialises with a trailing CRC32 over everything before it.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(64 + self.queues.len() * 32);
        b.extend_from_slice(MAGIC);
        b.extend_from_slice(&VERSION.to_be_bytes());
        b.extend_from_slice(&self.dispatched.to_be_bytes());
        b.extend_from_slice(&self.last_store_ms.to_be_bytes());
        b.extend_from_slice(&self.index.newest_file.unwrap_or(u64::MAX).to_be_bytes());
        b.extend_from_slice(&self.index.count.to_be_bytes());
        b.extend_from_slice(&self.index_dispatched.to_be_bytes());
        let n = u32::try_from(self.queues.len()).expect("invariant: queue count fits u32");
        b.extend_from_slice(&n.to_be_bytes());
        for q in &self.queues {
            let t = q.topic.as_bytes();
            let tl = u16::try_from(t.len()).expect("invariant: topic names are short");
            b.extend_from_slice(&tl.to_be_bytes());
            b.extend_from_slice(t);
            b.extend_from_slice(&q.queue_id.to_be_bytes());
            b.extend_from_slice(&q.len.to_be_bytes());
            b.extend_from_slice(&q.min.unwrap_or(0).to_be_bytes());
        }
        let crc = crc32fast::hash(&b);
        b.extend_from_slice(&crc.to_be_bytes());
        b
    }

    /// Parses and verifies a checkpoint; any damage is `Corrupt`.
    pub fn decode(raw: &[u8]) -> Result<Self> {
        let corrupt = |reason| Error::Corrupt {
            path: CHECKPOINT_FILE.to_owned(),
            offset: 0,
            reason,
        };
        let body_len = raw
            .len()
            .checked_sub(4)
            .ok_or_else(|| corrupt("too short"))?;
        let (body, crc) = raw.split_at(body_len);
        if crc32fast::hash(body).to_be_bytes() != crc {
            return Err(corrupt("checksum mismatch"));
        }
        let mut r = Reader { b: body, at: 0 };
        if r.take(4).ok_or_else(|| corrupt("too short"))? != MAGIC {
            return Err(corrupt("bad magic"));
        }
        let short = || corrupt("truncated");
        let version = r.u32().ok_or_else(short)?;
        if !(VERSION_WITHOUT_MIN..=VERSION).contains(&version) {
            return Err(corrupt("unknown version"));
        }
        let dispatched = r.u64().ok_or_else(short)?;
        let last_store_ms = i64::from_be_bytes(r.u64().ok_or_else(short)?.to_be_bytes());
        let newest = r.u64().ok_or_else(short)?;
        let count = r.u32().ok_or_else(short)?;
        let index_dispatched = if version > VERSION_WITHOUT_INDEX_CURSOR {
            r.u64().ok_or_else(short)?
        } else {
            dispatched
        };
        if index_dispatched > dispatched {
            return Err(corrupt("index cursor past the safe point"));
        }
        let n = r.u32().ok_or_else(short)?;
        if n > QUEUES_MAX {
            return Err(corrupt("implausible queue count"));
        }
        let mut queues = Vec::new();
        for _ in 0..n {
            queues.push(r.queue_mark(version).map_err(corrupt)?);
        }
        if r.at != body.len() {
            return Err(corrupt("trailing bytes"));
        }
        Ok(Self {
            dispatched,
            last_store_ms,
            index_dispatched,
            index: IndexMark {
                newest_file: (newest != u64::MAX).then_some(newest),
                count,
            },
            queues,
        })
    }
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    /// One queue's mark, as `version` lays it out.
    fn queue_mark(&mut self, version: u32) -> std::result::Result<QueueMark, &'static str> {
        let tl = usize::from(self.u16().ok_or("truncated")?);
        let topic = std::str::from_utf8(self.take(tl).ok_or("truncated")?)
            .map_err(|_| "topic is not utf-8")?
            .to_owned();
        let queue_id = i32::from_be_bytes(self.u32().ok_or("truncated")?.to_be_bytes());
        let len = self.u64().ok_or("truncated")?;
        let min = if version == VERSION_WITHOUT_MIN {
            None
        } else {
            Some(self.u64().ok_or("truncated")?)
        };
        Ok(QueueMark {
            topic,
            queue_id,
            len,
            min,
        })
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.at.checked_add(n)?;
        let s = self.b.get(self.at..end)?;
        self.at = end;
        Some(s)
    }
    fn u16(&mut self) -> Option<u16> {
        Some(u16::from_be_bytes(self.take(2)?.try_into().ok()?))
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_be_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_be_bytes(self.take(8)?.try_into().ok()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Checkpoint {
        Checkpoint {
            dispatched: 4096,
            last_store_ms: 1_700_000_000_000,
            index_dispatched: 1024,
            index: IndexMark {
                newest_file: Some(0),
                count: 7,
            },
            queues: vec![
                QueueMark {
                    topic: "A".into(),
                    queue_id: 0,
                    len: 3,
                    min: Some(2),
                },
                QueueMark {
                    topic: "%RETRY%g".into(),
                    queue_id: 0,
                    len: 1,
                    min: Some(0),
                },
            ],
        }
    }

    #[test]
    fn checkpoint_round_trips() {
        let cp = sample();
        assert_eq!(Checkpoint::decode(&cp.encode()).expect("decodes"), cp);
    }

    #[test]
    fn a_version_1_checkpoint_reads_without_queue_mins() {
        let cp = sample();
        let mut b = Vec::new();
        b.extend_from_slice(MAGIC);
        b.extend_from_slice(&VERSION_WITHOUT_MIN.to_be_bytes());
        b.extend_from_slice(&cp.dispatched.to_be_bytes());
        b.extend_from_slice(&cp.last_store_ms.to_be_bytes());
        b.extend_from_slice(&0u64.to_be_bytes());
        b.extend_from_slice(&cp.index.count.to_be_bytes());
        b.extend_from_slice(&2u32.to_be_bytes());
        for q in &cp.queues {
            let t = q.topic.as_bytes();
            b.extend_from_slice(&u16::try_from(t.len()).expect("short").to_be_bytes());
            b.extend_from_slice(t);
            b.extend_from_slice(&q.queue_id.to_be_bytes());
            b.extend_from_slice(&q.len.to_be_bytes());
        }
        let crc = crc32fast::hash(&b);
        b.extend_from_slice(&crc.to_be_bytes());
        let old = Checkpoint::decode(&b).expect("decodes");
        assert_eq!(old.queues[0].len, 3);
        assert!(old.queues.iter().all(|q| q.min.is_none()));
        assert_eq!(old.index_dispatched, old.dispatched);
    }

    /// A version-2 checkpoint (before the index had its own cursor) says
    /// the index was synced with the queues.
    #[test]
    fn a_version_2_checkpoint_reads_with_the_index_at_the_safe_point() {
        let cp = sample();
        let mut b = cp.encode();
        b.truncate(b.len() - 4);
        b[4..8].copy_from_slice(&VERSION_WITHOUT_INDEX_CURSOR.to_be_bytes());
        // Drop the index cursor: after magic, version, dispatched, last
        // store time, newest file and count.
        let at = 4 + 4 + 8 + 8 + 8 + 4;
        b.drain(at..at + 8);
        let crc = crc32fast::hash(&b);
        b.extend_from_slice(&crc.to_be_bytes());
        let old = Checkpoint::decode(&b).expect("decodes");
        assert_eq!(old.index_dispatched, cp.dispatched);
        assert_eq!(old.queues, cp.queues);
        assert_eq!(old.index, cp.index);
    }

    #[test]
    fn an_index_cursor_past_the_safe_point_is_refused() {
        let mut cp = sample();
        cp.index_dispatched = cp.dispatched + 1;
        assert!(Checkpoint::decode(&cp.encode()).is_err());
    }

    #[test]
    fn damaged_checkpoint_is_reported_not_trusted() {
        let raw = sample().encode();
        for i in 0..raw.len() {
            let mut bad = raw.clone();
            bad[i] ^= 0x40;
            assert!(Checkpoint::decode(&bad).is_err(), "flip at {i} accepted");
        }
        for n in 0..raw.len() {
            assert!(
                Checkpoint::decode(&raw[..n]).is_err(),
                "prefix {n} accepted"
            );
        }
    }
}
