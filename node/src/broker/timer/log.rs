//! The timer log: an append-only chain of fixed-size segment files under
//! `timerlog/` holding one 56-byte [`Unit`] per parked message. Units are
//! appended in timer-topic queue-offset order, so a torn or lost tail is
//! detected by scanning forward to the first unit that fails its checks.
//! Invariant: a unit's `prev_pos` always points to an earlier position.

use std::collections::BTreeMap;
use std::sync::Arc;

use sluice_core::disk::{Disk, Segment};

/// Bytes of one unit on disk.
pub const UNIT_BYTES: u64 = 56;
/// Marks a written unit (an all-zero page is never a unit).
const UNIT_MAGIC: u32 = 0x5449_4D52; // "TIMR"
/// `prev_pos` of the first unit of a slot.
pub const NO_PREV: u64 = u64::MAX;
/// Directory of the log's segment files, relative to the disk root.
pub const TIMER_LOG_DIR: &str = "timerlog";

/// One parked message in the timer log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unit {
    /// When the message is due (wall ms).
    pub due_ms: u64,
    /// The wheel slot the unit was linked into (a slot start, wall ms);
    /// later than the due time's slot only when it was enqueued late.
    pub slot_ms: u64,
    /// The parked record's CommitLog offset.
    pub phys_offset: u64,
    /// The parked record's size in bytes.
    pub size: u32,
    /// The parked record's offset in the timer topic's queue.
    pub queue_offset: u64,
    /// Position of the previous unit of the same slot, or [`NO_PREV`].
    pub prev_pos: u64,
}

impl Unit {
    /// The unit's bytes, big-endian: `magic 4 | due 8 | slot 8 | phys 8 |
    /// size 4 | queue offset 8 | prev 8 | reserved 4 | crc 4`, the CRC32
    /// covering the first 52 bytes.
    pub fn encode(&self) -> [u8; 56] {
        let mut out = [0u8; 56];
        out[0..4].copy_from_slice(&UNIT_MAGIC.to_be_bytes());
        out[4..12].copy_from_slice(&self.due_ms.to_be_bytes());
        out[12..20].copy_from_slice(&self.slot_ms.to_be_bytes());
        out[20..28].copy_from_slice(&self.phys_offset.to_be_bytes());
        out[28..32].copy_from_slice(&self.size.to_be_bytes());
        out[32..40].copy_from_slice(&self.queue_offset.to_be_bytes());
        out[40..48].copy_from_slice(&self.prev_pos.to_be_bytes());
        let crc = crc32fast::hash(&out[..52]);
        out[52..56].copy_from_slice(&crc.to_be_bytes());
        out
    }

    /// Decodes the unit written at `pos`; `None` for anything that is not
    /// an intact unit (zeros, a torn write, garbage, a `prev` that does not
    /// point backwards).
    pub fn decode(pos: u64, raw: &[u8]) -> Option<Self> {
        let raw: &[u8; 56] = raw.get(..56)?.try_into().ok()?;
        let be32 = |r: std::ops::Range<usize>| {
            u32::from_be_bytes(raw[r].try_into().expect("invariant: 4-byte range"))
        };
        let be64 = |r: std::ops::Range<usize>| {
            u64::from_be_bytes(raw[r].try_into().expect("invariant: 8-byte range"))
        };
        if be32(0..4) != UNIT_MAGIC || be32(52..56) != crc32fast::hash(&raw[..52]) {
            return None;
        }
        let prev_pos = be64(40..48);
        if prev_pos != NO_PREV && (prev_pos >= pos || prev_pos % UNIT_BYTES != 0) {
            return None;
        }
        Some(Self {
            due_ms: be64(4..12),
            slot_ms: be64(12..20),
            phys_offset: be64(20..28),
            size: be32(28..32),
            queue_offset: be64(32..40),
            prev_pos,
        })
    }
}

/// The log's segments and its append position.
pub struct TimerLog<D: Disk> {
    disk: D,
    segment_bytes: u64,
    segments: BTreeMap<u64, Arc<D::Seg>>,
    end: u64,
}

/// Why the log could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// An IO error of the disk seam.
    #[error("timer log {what} {path}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The file.
        path: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A file that cannot belong to the log.
    #[error("timer log file {path}: {reason}")]
    Corrupt {
        /// The file.
        path: String,
        /// What is wrong with it.
        reason: &'static str,
    },
}

fn segment_path(start: u64) -> String {
    format!("{TIMER_LOG_DIR}/{start:020}")
}

impl<D: Disk> TimerLog<D> {
    /// Opens the segments found on disk, positioned at their start; call
    /// [`Self::scan`] and [`Self::truncate`] to find the valid end.
    pub fn open(disk: D, segment_bytes: u64) -> Result<Self, LogError> {
        assert!(
            segment_bytes >= UNIT_BYTES && segment_bytes % UNIT_BYTES == 0,
            "invariant: segments hold whole units"
        );
        let names = disk.list(TIMER_LOG_DIR).map_err(|source| LogError::Io {
            what: "list",
            path: TIMER_LOG_DIR.to_owned(),
            source,
        })?;
        let mut segments = BTreeMap::new();
        for name in names {
            let Ok(start) = name.parse::<u64>() else {
                continue;
            };
            let path = segment_path(start);
            if name.len() != 20 || start % segment_bytes != 0 {
                return Err(LogError::Corrupt {
                    path,
                    reason: "name is not a segment start of the configured size",
                });
            }
            let seg = disk
                .open_segment(&path)
                .map_err(|source| LogError::Io {
                    what: "open",
                    path: path.clone(),
                    source,
                })?
                .ok_or(LogError::Corrupt {
                    path: path.clone(),
                    reason: "listed but missing",
                })?;
            if seg.size_bytes() != segment_bytes {
                return Err(LogError::Corrupt {
                    path,
                    reason: "size differs from timer_log_segment_bytes",
                });
            }
            segments.insert(start, Arc::new(seg));
        }
        let end = segments.keys().next().copied().unwrap_or(0);
        Ok(Self {
            disk,
            segment_bytes,
            segments,
            end,
        })
    }

    /// Position after the last unit.
    pub fn end(&self) -> u64 {
        self.end
    }

    /// Position of the first unit still on disk.
    pub fn start(&self) -> u64 {
        self.segments.keys().next().copied().unwrap_or(self.end)
    }

    /// Segment starts, oldest first.
    pub fn segment_starts(&self) -> Vec<u64> {
        self.segments.keys().copied().collect()
    }

    /// The size of every segment.
    pub fn segment_bytes(&self) -> u64 {
        self.segment_bytes
    }

    /// The unit at `pos`, `None` when it is not an intact unit.
    pub fn read(&self, pos: u64) -> Option<Unit> {
        let start = pos - pos % self.segment_bytes;
        let seg = self.segments.get(&start)?;
        let raw = seg
            .slice(pos - start, usize::try_from(UNIT_BYTES).ok()?)
            .ok()?;
        Unit::decode(pos, &raw)
    }

    /// Calls `visit(pos, unit)` for every intact unit from the log's start
    /// up to the first that is not (a torn or never-written tail), or one
    /// `stop` refuses; returns the position after the last accepted unit.
    pub fn scan(&self, mut visit: impl FnMut(u64, &Unit) -> bool) -> u64 {
        let mut pos = self.start();
        let mut expect_start = pos;
        for (&start, seg) in &self.segments {
            if start != expect_start {
                // A missing file in the middle: nothing after it is trusted.
                return pos;
            }
            let mut off = 0;
            while off < self.segment_bytes {
                let Some(unit) = seg
                    .slice(off, 56)
                    .ok()
                    .and_then(|raw| Unit::decode(start + off, &raw))
                else {
                    return pos;
                };
                if !visit(start + off, &unit) {
                    return pos;
                }
                off += UNIT_BYTES;
                pos = start + off;
            }
            expect_start = start + self.segment_bytes;
        }
        pos
    }

    /// Drops everything from `end` on: zeroes the rest of its segment and
    /// removes later segments, so a rescan stops exactly there.
    pub fn truncate(&mut self, end: u64) -> Result<(), LogError> {
        assert!(end % UNIT_BYTES == 0, "invariant: truncation at a unit");
        let later: Vec<u64> = self
            .segments
            .keys()
            .copied()
            .filter(|&s| s >= end)
            .collect();
        for start in later {
            self.segments.remove(&start);
            let path = segment_path(start);
            self.disk.remove(&path).map_err(|source| LogError::Io {
                what: "remove",
                path,
                source,
            })?;
        }
        let start = end - end % self.segment_bytes;
        if let Some(seg) = self.segments.get(&start) {
            let zeros = vec![0u8; 64 * 1024];
            let mut off = end - start;
            while off < self.segment_bytes {
                let n = (self.segment_bytes - off).min(zeros.len() as u64);
                let n_usize = usize::try_from(n).expect("invariant: n <= 64 KiB");
                seg.write_at(off, &zeros[..n_usize])
                    .map_err(|source| LogError::Io {
                        what: "zero",
                        path: segment_path(start),
                        source,
                    })?;
                off += n;
            }
        }
        self.end = end;
        Ok(())
    }

    /// Appends `unit` at the end; returns its position.
    pub fn append(&mut self, unit: Unit) -> Result<u64, LogError> {
        let pos = self.end;
        let start = pos - pos % self.segment_bytes;
        if !self.segments.contains_key(&start) {
            let path = segment_path(start);
            let seg = self
                .disk
                .create_segment(&path, self.segment_bytes)
                .map_err(|source| LogError::Io {
                    what: "create",
                    path,
                    source,
                })?;
            self.segments.insert(start, Arc::new(seg));
        }
        assert!(
            unit.prev_pos == NO_PREV || unit.prev_pos < pos,
            "invariant: a slot links backwards"
        );
        let seg = self.segments.get(&start).expect("invariant: just ensured");
        let raw = unit.encode();
        seg.write_at(pos - start, &raw)
            .map_err(|source| LogError::Io {
                what: "write",
                path: segment_path(start),
                source,
            })?;
        self.end = pos + UNIT_BYTES;
        Ok(pos)
    }

    /// The segments holding `[from, end)`, for a sync outside any lock.
    pub fn dirty_segments(&self, from: u64) -> Vec<(Arc<D::Seg>, u64, u64)> {
        self.segments
            .iter()
            .filter(|(&s, _)| s + self.segment_bytes > from && s < self.end)
            .map(|(&s, seg)| {
                let lo = from.max(s) - s;
                let hi = self.end.min(s + self.segment_bytes) - s;
                (Arc::clone(seg), lo, hi - lo)
            })
            .collect()
    }

    /// Removes the whole segment starting at `start` — never the one
    /// holding the last unit, which recovery needs to know where the
    /// enqueue stopped.
    pub fn remove_segment(&mut self, start: u64) -> Result<bool, LogError> {
        if start + self.segment_bytes >= self.end || !self.segments.contains_key(&start) {
            return Ok(false);
        }
        self.segments.remove(&start);
        let path = segment_path(start);
        self.disk.remove(&path).map_err(|source| LogError::Io {
            what: "remove",
            path,
            source,
        })?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use sluice_core::testing::SimDisk;

    use super::*;

    fn unit(q: u64, prev: u64) -> Unit {
        Unit {
            due_ms: 10_000 + q,
            slot_ms: 10_000,
            phys_offset: q * 100,
            size: 77,
            queue_offset: q,
            prev_pos: prev,
        }
    }

    #[test]
    fn unit_round_trips_and_rejects_damage() {
        let u = unit(5, 3 * UNIT_BYTES);
        let raw = u.encode();
        assert_eq!(Unit::decode(9 * UNIT_BYTES, &raw), Some(u));
        let first = unit(1, NO_PREV);
        assert_eq!(
            Unit::decode(0, &first.encode()),
            Some(first),
            "no previous unit survives the round trip"
        );
        for i in 0..56 {
            let mut bad = raw;
            bad[i] ^= 0x40;
            assert_eq!(Unit::decode(9 * UNIT_BYTES, &bad), None, "flip at {i}");
        }
        assert_eq!(Unit::decode(0, &[0u8; 56]), None, "zeros are no unit");
        assert_eq!(Unit::decode(0, &raw[..55]), None, "short input");
    }

    #[test]
    fn appends_across_segments_and_reads_back() {
        let disk = SimDisk::new(1);
        let mut log = TimerLog::open(disk.clone(), 4 * UNIT_BYTES).expect("open");
        let mut prev = NO_PREV;
        for q in 0..10 {
            prev = log.append(unit(q, prev)).expect("append");
        }
        assert_eq!(log.end(), 10 * UNIT_BYTES);
        assert_eq!(log.segment_starts().len(), 3);
        assert_eq!(log.read(9 * UNIT_BYTES), Some(unit(9, 8 * UNIT_BYTES)));
        let reopened = TimerLog::open(disk, 4 * UNIT_BYTES).expect("reopen");
        let mut seen = Vec::new();
        let end = reopened.scan(|_, u| {
            seen.push(u.queue_offset);
            true
        });
        assert_eq!(end, 10 * UNIT_BYTES);
        assert_eq!(seen, (0..10).collect::<Vec<_>>());
    }

    #[test]
    fn recovers_after_torn_tail_write() {
        let disk = SimDisk::new(7);
        let mut log = TimerLog::open(disk.clone(), 8 * UNIT_BYTES).expect("open");
        for q in 0..6 {
            log.append(unit(q, NO_PREV)).expect("append");
        }
        // Tear unit 4: half of it overwritten with garbage.
        let seg = disk
            .open_segment(&segment_path(0))
            .expect("io")
            .expect("exists");
        seg.write_at(4 * UNIT_BYTES + 10, &[0xAB; 20])
            .expect("tear");
        let mut log = TimerLog::open(disk.clone(), 8 * UNIT_BYTES).expect("reopen");
        let mut last_q = None;
        let end = log.scan(|_, u| {
            last_q = Some(u.queue_offset);
            true
        });
        assert_eq!(end, 4 * UNIT_BYTES, "stops before the torn unit");
        assert_eq!(last_q, Some(3), "enqueue resumes at queue offset 4");
        log.truncate(end).expect("truncate");
        // Unit 5 was intact but follows the tear: it must be gone too.
        assert_eq!(log.read(5 * UNIT_BYTES), None);
        let pos = log.append(unit(4, NO_PREV)).expect("append after truncate");
        assert_eq!(pos, 4 * UNIT_BYTES);
        let reopened = TimerLog::open(disk, 8 * UNIT_BYTES).expect("reopen");
        assert_eq!(reopened.scan(|_, _| true), 5 * UNIT_BYTES);
    }

    #[test]
    fn the_segment_holding_the_last_unit_is_never_removed() {
        let disk = SimDisk::new(5);
        let mut log = TimerLog::open(disk.clone(), 2 * UNIT_BYTES).expect("open");
        for q in 0..4 {
            log.append(unit(q, NO_PREV)).expect("append");
        }
        // The end sits exactly on a segment boundary.
        assert!(!log.remove_segment(2 * UNIT_BYTES).expect("io"));
        assert!(log.remove_segment(0).expect("io"));
        let reopened = TimerLog::open(disk, 2 * UNIT_BYTES).expect("reopen");
        let mut last = None;
        let end = reopened.scan(|_, u| {
            last = Some(u.queue_offset);
            true
        });
        assert_eq!((end, last), (4 * UNIT_BYTES, Some(3)));
    }

    #[test]
    fn truncation_into_an_earlier_segment_removes_later_files() {
        let disk = SimDisk::new(3);
        let mut log = TimerLog::open(disk.clone(), 2 * UNIT_BYTES).expect("open");
        for q in 0..5 {
            log.append(unit(q, NO_PREV)).expect("append");
        }
        log.truncate(UNIT_BYTES).expect("truncate");
        assert_eq!(log.segment_starts(), vec![0]);
        let reopened = TimerLog::open(disk, 2 * UNIT_BYTES).expect("reopen");
        assert_eq!(reopened.scan(|_, _| true), UNIT_BYTES);
    }
}
