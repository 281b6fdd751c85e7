//! A chain of equal-sized segment files named by their start offset, forming
//! one logical byte space (RocketMQ's `MappedFileQueue`). Used by the CommitLog
//! and by every ConsumeQueue. Invariant: segment starts are multiples of the
//! segment size and a write or read never straddles two segments.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use bytes::Bytes;

use crate::disk::{Disk, Prepare, Segment};
use crate::error::{Error, Result};
use crate::offset::{parse_segment_name, segment_name};

/// Zeroing is done in chunks of this size so truncation never allocates
/// in proportion to the segment size.
const ZERO_CHUNK_BYTES: usize = 64 * 1024;

/// Equal-sized segments under one directory.
pub(crate) struct SegmentChain<D: Disk> {
    disk: D,
    dir: String,
    segment_bytes: u64,
    /// How the segment after the last is readied before each roll
    /// ([`Disk::prepare_segment`]).
    prepare: Prepare,
    segments: RwLock<BTreeMap<u64, Arc<D::Seg>>>,
}

impl<D: Disk> SegmentChain<D> {
    /// Opens every segment found under `dir`. A file whose size or name does
    /// not fit the chain is reported as corruption rather than ignored.
    /// `prepare`: how the segment prepared ahead of each roll is readied
    /// ([`Disk::prepare_segment`]).
    pub(crate) fn open(disk: D, dir: &str, segment_bytes: u64, prepare: Prepare) -> Result<Self> {
        assert!(segment_bytes > 0, "invariant: segment size is positive");
        let mut segments = BTreeMap::new();
        let names = disk.list(dir).map_err(|e| Error::io("list", dir, e))?;
        for name in names {
            let Some(start) = parse_segment_name(&name) else {
                continue;
            };
            let path = join(dir, &name);
            if start % segment_bytes != 0 {
                return Err(Error::Corrupt {
                    path,
                    offset: start,
                    reason: "segment start is not a multiple of the segment size",
                });
            }
            let seg = disk
                .open_segment(&path)
                .map_err(|e| Error::io("open", &path, e))?
                .ok_or_else(|| Error::Corrupt {
                    path: path.clone(),
                    offset: start,
                    reason: "segment listed but missing",
                })?;
            if seg.size_bytes() != segment_bytes {
                return Err(Error::Corrupt {
                    path,
                    offset: start,
                    reason: "segment size differs from the configured size",
                });
            }
            segments.insert(start, Arc::new(seg));
        }
        Ok(Self {
            disk,
            dir: dir.to_owned(),
            segment_bytes,
            prepare,
            segments: RwLock::new(segments),
        })
    }

    /// Asks the disk to warm `[from, to)` ([`Segment::warm`]), clipped to
    /// the segment holding `from`; returns where the request ended (`from`
    /// itself when that segment does not exist yet).
    pub(crate) fn warm(&self, from: u64, to: u64) -> u64 {
        let start = self.segment_start(from);
        let Some(seg) = self.get(from) else {
            return from;
        };
        let end = to.min(start + self.segment_bytes);
        if end > from {
            seg.warm(from - start, end - from);
        }
        end.max(from)
    }

    /// The fixed size of every segment.
    pub(crate) fn segment_bytes(&self) -> u64 {
        self.segment_bytes
    }

    /// Start offset of the segment that holds `offset`.
    pub(crate) fn segment_start(&self, offset: u64) -> u64 {
        offset - offset % self.segment_bytes
    }

    /// Start of the first segment, if any.
    pub(crate) fn first_start(&self) -> Option<u64> {
        self.read_map().keys().next().copied()
    }

    /// Start of the last segment, if any.
    pub(crate) fn last_start(&self) -> Option<u64> {
        self.read_map().keys().next_back().copied()
    }

    /// All segment starts, ascending.
    pub(crate) fn starts(&self) -> Vec<u64> {
        self.read_map().keys().copied().collect()
    }

    /// Every segment by its start, as it is now.
    pub(crate) fn snapshot(&self) -> BTreeMap<u64, Arc<D::Seg>> {
        self.read_map().clone()
    }

    /// The segment holding `offset`, if it exists.
    fn get(&self, offset: u64) -> Option<Arc<D::Seg>> {
        self.read_map().get(&self.segment_start(offset)).cloned()
    }

    /// The segment holding `offset`, created if missing; also hints the disk
    /// to prepare the following segment so rollover stays off the hot path.
    pub(crate) fn get_or_create(&self, offset: u64) -> Result<Arc<D::Seg>> {
        if let Some(seg) = self.get(offset) {
            return Ok(seg);
        }
        let start = self.segment_start(offset);
        let path = join(&self.dir, &segment_name(start));
        let mut map = self.segments.write().expect("invariant: lock not poisoned");
        if let Some(seg) = map.get(&start) {
            return Ok(Arc::clone(seg));
        }
        let seg = Arc::new(
            self.disk
                .create_segment(&path, self.segment_bytes)
                .map_err(|e| Error::io("create", &path, e))?,
        );
        map.insert(start, Arc::clone(&seg));
        drop(map);
        let next = start + self.segment_bytes;
        self.disk.prepare_segment(
            &join(&self.dir, &segment_name(next)),
            self.segment_bytes,
            self.prepare,
        );
        Ok(seg)
    }

    /// Writes `buf` at `offset`, creating the segment if needed.
    pub(crate) fn write(&self, offset: u64, buf: &[u8]) -> Result<()> {
        let rel = self.check_within(offset, buf.len() as u64)?;
        let seg = self.get_or_create(offset)?;
        seg.write_at(rel, buf)
            .map_err(|e| Error::io("write", &self.path_of(offset), e))
    }

    /// Fills `len` bytes at `offset` in place (see `Segment::write_with`),
    /// creating the segment if needed.
    pub(crate) fn write_with(
        &self,
        offset: u64,
        len: usize,
        fill: &mut dyn FnMut(&mut [u8]),
    ) -> Result<()> {
        let rel = self.check_within(offset, len as u64)?;
        let seg = self.get_or_create(offset)?;
        seg.write_with(rel, len, fill)
            .map_err(|e| Error::io("write", &self.path_of(offset), e))
    }

    /// Copies the `N` bytes at `offset` out (a record head): cheaper than
    /// a [`read`](Self::read) view for a few bytes.
    pub(crate) fn read_array<const N: usize>(&self, offset: u64) -> Result<[u8; N]> {
        let rel = self.check_within(offset, N as u64)?;
        let seg = self.get(offset).ok_or_else(|| Error::Corrupt {
            path: self.path_of(offset),
            offset,
            reason: "read from a missing segment",
        })?;
        let mut out = [0; N];
        seg.read_at(rel, &mut out)
            .map_err(|e| Error::io("read", &self.path_of(offset), e))?;
        Ok(out)
    }

    /// Reads `len` bytes at `offset` (zero-copy on a mapped disk).
    pub(crate) fn read(&self, offset: u64, len: usize) -> Result<Bytes> {
        let rel = self.check_within(offset, len as u64)?;
        let seg = self.get(offset).ok_or_else(|| Error::Corrupt {
            path: self.path_of(offset),
            offset,
            reason: "read from a missing segment",
        })?;
        seg.slice(rel, len)
            .map_err(|e| Error::io("read", &self.path_of(offset), e))
    }

    /// Makes `[from, to)` durable, segment by segment, in offset order.
    pub(crate) async fn sync(&self, from: u64, to: u64) -> Result<()> {
        if from >= to {
            return Ok(());
        }
        let segs: Vec<(u64, Arc<D::Seg>)> = self
            .read_map()
            .range(self.segment_start(from)..to)
            .map(|(s, seg)| (*s, Arc::clone(seg)))
            .collect();
        for (start, seg) in segs {
            let lo = from.max(start) - start;
            let hi = to.min(start + self.segment_bytes) - start;
            seg.sync(lo, hi - lo)
                .await
                .map_err(|e| Error::io("sync", &self.path_of(start), e))?;
        }
        Ok(())
    }

    /// Writes `[from, to)` again with its own contents, so every page of
    /// the range is dirty and the next sync persists it whatever the
    /// kernel thought of it before.
    pub(crate) fn rewrite(&self, from: u64, to: u64) -> Result<()> {
        let mut at = from;
        while at < to {
            let seg_end = self.segment_start(at) + self.segment_bytes;
            let n = (to.min(seg_end) - at).min(ZERO_CHUNK_BYTES as u64);
            let len = usize::try_from(n).expect("invariant: n <= ZERO_CHUNK_BYTES");
            // Copy out first: never write to memory a live slice views.
            let bytes = self.read(at, len)?.to_vec();
            self.write(at, &bytes)?;
            at += n;
        }
        Ok(())
    }

    /// Zeroes `[offset, end of its segment)`, removes every later segment and
    /// syncs the zeroed range, so stale bytes can never be read back as data.
    pub(crate) async fn truncate(&self, offset: u64) -> Result<()> {
        if let Some((seg, lo)) = self.zero_after(offset)? {
            seg.sync(lo, self.segment_bytes - lo)
                .await
                .map_err(|e| Error::io("sync", &self.path_of(offset), e))?;
        }
        Ok(())
    }

    /// [`truncate`](Self::truncate) without the sync: for derived data a
    /// crash rebuilds anyway (the ConsumeQueues of a start with no
    /// checkpoint).
    pub(crate) fn truncate_unsynced(&self, offset: u64) -> Result<()> {
        self.zero_after(offset).map(|_| ())
    }

    /// Removes every segment after the one holding `offset` and zeroes that
    /// one from `offset`; returns it with `offset`'s place in it.
    fn zero_after(&self, offset: u64) -> Result<Option<(Arc<D::Seg>, u64)>> {
        let start = self.segment_start(offset);
        let later: Vec<u64> = self
            .read_map()
            .range(start + 1..)
            .map(|(s, _)| *s)
            .collect();
        for s in later.into_iter().rev() {
            self.remove_segment(s)?;
        }
        if let Some(seg) = self.get(offset) {
            let zeros = vec![0u8; ZERO_CHUNK_BYTES];
            // Only what may hold data is read: the rest of a segment past
            // the end is mostly blocks reserved and never written, and
            // reading them made the kernel zero a page per 4 KiB — 1.4 s
            // of CPU for the rest of a 1 GiB segment on a first start after
            // a crash (docs/benchmarks.md, issue 20).
            for (from, to) in self.data_runs(offset, start + self.segment_bytes)? {
                let mut rel = from - start;
                while rel < to - start {
                    let n = (to - start - rel).min(ZERO_CHUNK_BYTES as u64);
                    let n_usize = usize::try_from(n).expect("invariant: n <= ZERO_CHUNK_BYTES");
                    // Most of it is zeros already (a clean stop, a zero-
                    // filled segment): reading them dirties nothing, where
                    // writing made the sync below write the whole rest of
                    // the segment to the device on every start.
                    let zeroed = seg.slice(rel, n_usize).is_ok_and(|b| is_zeroed(&b));
                    if !zeroed {
                        seg.write_at(rel, &zeros[..n_usize])
                            .map_err(|e| Error::io("zero", &self.path_of(start), e))?;
                    }
                    rel += n;
                }
            }
            return Ok(Some((seg, offset - start)));
        }
        Ok(None)
    }

    /// The runs of `[from, to)` (inside one segment) that may hold non-zero
    /// bytes, in order; the rest reads as zeros without being read (see
    /// [`Segment::data_run`]). None when the segment is missing.
    pub(crate) fn data_runs(&self, from: u64, to: u64) -> Result<Vec<(u64, u64)>> {
        let start = self.segment_start(from);
        let Some(seg) = self.get(from) else {
            return Ok(Vec::new());
        };
        let end = to.min(start + self.segment_bytes) - start;
        let mut rel = from - start;
        let mut runs = Vec::new();
        while rel < end {
            let run = seg
                .data_run(rel)
                .map_err(|e| Error::io("seek", &self.path_of(start), e))?;
            let Some((a, b)) = run else {
                break;
            };
            let a = a.max(rel);
            if a >= end {
                break;
            }
            // A run that does not advance is the disk's mistake: treat
            // the rest as data rather than loop.
            let b = if b > a { b.min(end) } else { end };
            runs.push((start + a, start + b));
            rel = b;
        }
        Ok(runs)
    }

    /// Removes one whole segment from the chain and the disk.
    pub(crate) fn remove_segment(&self, start: u64) -> Result<()> {
        let path = join(&self.dir, &segment_name(start));
        self.segments
            .write()
            .expect("invariant: lock not poisoned")
            .remove(&start);
        self.disk
            .remove(&path)
            .map_err(|e| Error::io("remove", &path, e))
    }

    fn check_within(&self, offset: u64, len: u64) -> Result<u64> {
        let rel = offset % self.segment_bytes;
        if rel + len > self.segment_bytes {
            return Err(Error::Corrupt {
                path: self.path_of(offset),
                offset,
                reason: "access straddles a segment boundary",
            });
        }
        Ok(rel)
    }

    fn path_of(&self, offset: u64) -> String {
        join(&self.dir, &segment_name(self.segment_start(offset)))
    }

    fn read_map(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<u64, Arc<D::Seg>>> {
        self.segments.read().expect("invariant: lock not poisoned")
    }
}

/// Joins a directory and a name with `/`; an empty directory is the root.
pub(crate) fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_owned()
    } else {
        format!("{dir}/{name}")
    }
}

/// True when every byte of `bytes` is zero, for scanning long zeroed runs
/// of a segment.
pub(crate) fn is_zeroed(bytes: &[u8]) -> bool {
    // Slice equality is a memcmp, which the C library vectorises.
    bytes
        .chunks(ZEROED_BLOCK_BYTES)
        .all(|block| block == &ZEROED_BLOCK[..block.len()])
}

/// How many bytes [`is_zeroed`] compares at a time.
pub(crate) const ZEROED_BLOCK_BYTES: usize = 4096;
static ZEROED_BLOCK: [u8; ZEROED_BLOCK_BYTES] = [0; ZEROED_BLOCK_BYTES];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn is_zeroed_sees_one_non_zero_byte_anywhere() {
        assert!(is_zeroed(&[]));
        let mut bytes = vec![0u8; 3 * ZEROED_BLOCK_BYTES + 17];
        assert!(is_zeroed(&bytes));
        for at in [
            0,
            ZEROED_BLOCK_BYTES - 1,
            ZEROED_BLOCK_BYTES,
            bytes.len() - 1,
        ] {
            bytes[at] = 0x80;
            assert!(!is_zeroed(&bytes), "byte {at}");
            bytes[at] = 0;
        }
    }
}
