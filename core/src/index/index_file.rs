//! One IndexFile: a 40-byte header, a table of hash slots and an array of
//! 20-byte entries `i32 keyHash | i64 physOffset | i32 timeDiffSec | i32
//! prevIndex` chained newest-first per slot. Invariant: an entry's `prev`
//! is always a smaller index, so a chain walk terminates even on damage.

use std::sync::Mutex;

use crate::disk::Segment;
use crate::error::{Error, Result};
use crate::offset::CommitLogOffset;

const HEADER_BYTES: u64 = 40;
const SLOT_BYTES: u64 = 4;
const ENTRY_BYTES: u64 = 20;

/// The header fields kept in memory and mirrored to the file on each put.
#[derive(Clone, Copy, Debug, Default)]
struct Header {
    begin_ts_ms: i64,
    end_ts_ms: i64,
    begin_phys: i64,
    end_phys: i64,
    /// Next entry index; entries are numbered from 1 (0 = empty slot).
    count: u32,
}

/// An index file on one segment.
pub(crate) struct IndexFile<S: Segment> {
    seg: S,
    path: String,
    slots: u32,
    entries_max: u32,
    header: Mutex<Header>,
}

/// Size of an index file with `slots` slots and `entries` entries.
pub(crate) fn index_file_bytes(slots: u32, entries: u32) -> u64 {
    HEADER_BYTES + u64::from(slots) * SLOT_BYTES + (u64::from(entries) + 1) * ENTRY_BYTES
}

impl<S: Segment> IndexFile<S> {
    /// A fresh, empty index file on a zeroed segment.
    pub(crate) fn create(seg: S, path: String, slots: u32, entries_max: u32) -> Result<Self> {
        let f = Self {
            seg,
            path,
            slots,
            entries_max,
            header: Mutex::new(Header {
                count: 1,
                ..Header::default()
            }),
        };
        f.write_header(&Header {
            count: 1,
            ..Header::default()
        })?;
        Ok(f)
    }

    /// Opens an existing file, trusting at most `count_max` entries (the
    /// count recorded at the last checkpoint), and rebuilds the slot table
    /// from those entries so no slot points at an untrusted entry.
    pub(crate) fn open(
        seg: S,
        path: String,
        slots: u32,
        entries_max: u32,
        count_max: u32,
    ) -> Result<Self> {
        let raw = seg.slice(0, 40).map_err(|e| Error::io("read", &path, e))?;
        let get8 = |at: usize| i64::from_be_bytes(raw[at..at + 8].try_into().expect("8 bytes"));
        let slot_count = u32::from_be_bytes(raw[32..36].try_into().expect("4 bytes"));
        let count = u32::from_be_bytes(raw[36..40].try_into().expect("4 bytes"));
        if slot_count != slots || seg.size_bytes() != index_file_bytes(slots, entries_max) {
            return Err(Error::Corrupt {
                path,
                offset: 0,
                reason: "index file geometry differs from the configuration",
            });
        }
        let header = Header {
            begin_ts_ms: get8(0),
            end_ts_ms: get8(8),
            begin_phys: get8(16),
            end_phys: get8(24),
            count: count.clamp(1, count_max.max(1)),
        };
        let f = Self {
            seg,
            path,
            slots,
            entries_max,
            header: Mutex::new(header),
        };
        f.rebuild_slots(header.count)?;
        f.write_header(&header)?;
        Ok(f)
    }

    fn rebuild_slots(&self, count: u32) -> Result<()> {
        let zeros = vec![0u8; 64 * 1024];
        let table_bytes = u64::from(self.slots) * SLOT_BYTES;
        let mut at = 0u64;
        while at < table_bytes {
            let n = (table_bytes - at).min(zeros.len() as u64);
            self.write(
                HEADER_BYTES + at,
                &zeros[..usize::try_from(n).expect("<= 64 KiB")],
            )?;
            at += n;
        }
        for idx in 1..count {
            let Some((hash, phys, diff, _)) = self.read_entry(idx)? else {
                continue;
            };
            let slot = self.slot_of(hash);
            let prev = self.read_slot(slot)?;
            self.write_entry(idx, hash, phys, diff, prev)?;
            self.write_slot(slot, idx)?;
        }
        Ok(())
    }

    /// True when no more entries fit.
    pub(crate) fn is_full(&self) -> bool {
        self.lock().count > self.entries_max
    }

    /// Entries written so far, plus one (the header's count).
    pub(crate) fn count(&self) -> u32 {
        self.lock().count
    }

    /// Store-time range covered, `(begin, end)`.
    pub(crate) fn time_range(&self) -> (i64, i64) {
        let h = self.lock();
        (h.begin_ts_ms, h.end_ts_ms)
    }

    /// Highest physical offset indexed.
    pub(crate) fn end_phys(&self) -> i64 {
        self.lock().end_phys
    }

    /// Adds `entries` (`(hash, phys, store_ts_ms)`: one record's keys, or
    /// the keys of a run of records in log order) under one lock and with
    /// one header write; returns how many fit (fewer than `entries.len()`
    /// when the file filled up).
    pub(crate) fn put_entries(&self, entries: &[(i32, CommitLogOffset, i64)]) -> Result<usize> {
        let mut h = self.lock();
        let mut put = 0;
        let mut outcome = Ok(());
        for &(hash, phys, store_ts_ms) in entries {
            if h.count > self.entries_max {
                break;
            }
            let phys = i64::try_from(phys.0).unwrap_or(i64::MAX);
            if h.count == 1 {
                h.begin_ts_ms = store_ts_ms;
                h.begin_phys = phys;
            }
            let diff_s =
                i32::try_from((store_ts_ms - h.begin_ts_ms).max(0) / 1000).unwrap_or(i32::MAX);
            let slot = self.slot_of(hash);
            let idx = h.count;
            outcome = self.read_slot(slot).and_then(|prev| {
                self.write_entry(idx, hash, phys, diff_s, prev)?;
                self.write_slot(slot, idx)
            });
            if outcome.is_err() {
                break;
            }
            h.count += 1;
            h.end_ts_ms = h.end_ts_ms.max(store_ts_ms);
            h.end_phys = h.end_phys.max(phys);
            put += 1;
        }
        // The header covers every entry put, before a failure too.
        if put > 0 {
            self.write_header(&h)?;
        }
        outcome.map(|()| put)
    }

    /// Physical offsets of entries with `hash` stored within
    /// `[begin_ms, end_ms]`, newest first, at most `max`.
    pub(crate) fn query(
        &self,
        hash: i32,
        begin_ms: i64,
        end_ms: i64,
        max: usize,
    ) -> Result<Vec<u64>> {
        let h = *self.lock();
        let mut out = Vec::new();
        let mut idx = self.read_slot(self.slot_of(hash))?;
        while idx != 0 && idx < h.count && out.len() < max {
            let Some((eh, phys, diff, prev)) = self.read_entry(idx)? else {
                break;
            };
            let ts = h.begin_ts_ms + i64::from(diff) * 1000;
            // Times are stored at second precision: widen the window by one.
            if eh == hash && ts + 1000 > begin_ms && ts <= end_ms {
                if let Ok(p) = u64::try_from(phys) {
                    out.push(p);
                }
            }
            if prev >= idx {
                break;
            }
            idx = prev;
        }
        Ok(out)
    }

    /// Makes the whole file durable.
    pub(crate) async fn sync(&self) -> Result<()> {
        self.seg
            .sync(0, self.seg.size_bytes())
            .await
            .map_err(|e| Error::io("sync", &self.path, e))
    }

    fn slot_of(&self, hash: i32) -> u32 {
        hash.unsigned_abs() % self.slots
    }

    fn read_slot(&self, slot: u32) -> Result<u32> {
        let mut raw = [0; 4];
        self.seg
            .read_at(HEADER_BYTES + u64::from(slot) * SLOT_BYTES, &mut raw)
            .map_err(|e| Error::io("read", &self.path, e))?;
        Ok(u32::from_be_bytes(raw))
    }

    fn write_slot(&self, slot: u32, idx: u32) -> Result<()> {
        self.write(
            HEADER_BYTES + u64::from(slot) * SLOT_BYTES,
            &idx.to_be_bytes(),
        )
    }

    fn entry_at(&self, idx: u32) -> u64 {
        HEADER_BYTES + u64::from(self.slots) * SLOT_BYTES + u64::from(idx) * ENTRY_BYTES
    }

    fn read_entry(&self, idx: u32) -> Result<Option<(i32, i64, i32, u32)>> {
        if idx == 0 || idx > self.entries_max {
            return Ok(None);
        }
        let raw = self.read(self.entry_at(idx), 20)?;
        let hash = i32::from_be_bytes(raw[0..4].try_into().expect("4 bytes"));
        let phys = i64::from_be_bytes(raw[4..12].try_into().expect("8 bytes"));
        let diff = i32::from_be_bytes(raw[12..16].try_into().expect("4 bytes"));
        let prev = u32::from_be_bytes(raw[16..20].try_into().expect("4 bytes"));
        Ok(Some((hash, phys, diff, prev)))
    }

    fn write_entry(&self, idx: u32, hash: i32, phys: i64, diff: i32, prev: u32) -> Result<()> {
        let mut b = [0u8; 20];
        b[0..4].copy_from_slice(&hash.to_be_bytes());
        b[4..12].copy_from_slice(&phys.to_be_bytes());
        b[12..16].copy_from_slice(&diff.to_be_bytes());
        b[16..20].copy_from_slice(&prev.to_be_bytes());
        self.write(self.entry_at(idx), &b)
    }

    fn write_header(&self, h: &Header) -> Result<()> {
        let mut b = [0u8; 40];
        b[0..8].copy_from_slice(&h.begin_ts_ms.to_be_bytes());
        b[8..16].copy_from_slice(&h.end_ts_ms.to_be_bytes());
        b[16..24].copy_from_slice(&h.begin_phys.to_be_bytes());
        b[24..32].copy_from_slice(&h.end_phys.to_be_bytes());
        b[32..36].copy_from_slice(&self.slots.to_be_bytes());
        b[36..40].copy_from_slice(&h.count.to_be_bytes());
        self.write(0, &b)
    }

    fn read(&self, at: u64, len: usize) -> Result<bytes::Bytes> {
        self.seg
            .slice(at, len)
            .map_err(|e| Error::io("read", &self.path, e))
    }

    fn write(&self, at: u64, buf: &[u8]) -> Result<()> {
        self.seg
            .write_at(at, buf)
            .map_err(|e| Error::io("write", &self.path, e))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Header> {
        self.header
            .lock()
            .expect("invariant: index lock not poisoned")
    }
}
