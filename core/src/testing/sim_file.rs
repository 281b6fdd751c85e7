//! One simulated file: its current pages (what a read sees), its durable
//! pages (what a power loss leaves) and which pages are dirty.

use std::collections::{BTreeMap, BTreeSet};

use super::sim_disk::PAGE_BYTES;

pub(super) const PAGE: usize = 4096;

pub(super) type Page = Box<[u8; PAGE]>;

/// One file. Pages absent from a map are zeros; pages past `size_bytes`
/// are never written, so they stay zero.
pub(super) struct SimFile {
    pub(super) id: u64,
    pub(super) size_bytes: u64,
    pub(super) cur: BTreeMap<u64, Page>,
    pub(super) durable: BTreeMap<u64, Page>,
    pub(super) dirty: BTreeSet<u64>,
}

impl SimFile {
    pub(super) fn new(id: u64, size_bytes: u64) -> Self {
        Self {
            id,
            size_bytes,
            cur: BTreeMap::new(),
            durable: BTreeMap::new(),
            dirty: BTreeSet::new(),
        }
    }

    pub(super) fn with_contents(id: u64, data: &[u8]) -> Self {
        let mut file = Self::new(id, data.len() as u64);
        file.write(0, data);
        file.durable = file.cur.clone();
        file.dirty.clear();
        file
    }

    pub(super) fn write(&mut self, off: u64, buf: &[u8]) {
        let mut pos = off;
        let mut rest = buf;
        while !rest.is_empty() {
            let index = pos / PAGE_BYTES;
            let in_page = to_usize(pos % PAGE_BYTES);
            let n = rest.len().min(PAGE - in_page);
            let page = self.cur.entry(index).or_insert_with(zero_page);
            page[in_page..in_page + n].copy_from_slice(&rest[..n]);
            self.dirty.insert(index);
            rest = &rest[n..];
            pos += n as u64;
        }
    }

    pub(super) fn read(&self, off: u64, out: &mut [u8]) {
        let mut pos = off;
        let mut done = 0;
        while done < out.len() {
            let index = pos / PAGE_BYTES;
            let in_page = to_usize(pos % PAGE_BYTES);
            let n = (out.len() - done).min(PAGE - in_page);
            match self.cur.get(&index) {
                Some(page) => out[done..done + n].copy_from_slice(&page[in_page..in_page + n]),
                None => out[done..done + n].fill(0),
            }
            done += n;
            pos += n as u64;
        }
    }

    /// The first run of written pages at or after `off` (pages never
    /// written read as zeros: the simulated file's holes).
    pub(super) fn data_run(&self, off: u64) -> Option<(u64, u64)> {
        let (&first, _) = self.cur.range(off / PAGE_BYTES..).next()?;
        let pages = self.cur.range(first..).map(|(i, _)| *i);
        let last = pages.zip(first..).take_while(|(i, want)| i == want).count() as u64;
        let start = (first * PAGE_BYTES).max(off);
        let end = ((first + last) * PAGE_BYTES).min(self.size_bytes);
        (start < end).then_some((start, end))
    }

    pub(super) fn contents(&self) -> Vec<u8> {
        let mut out = vec![0; to_usize(self.size_bytes)];
        self.read(0, &mut out);
        out
    }

    /// Dirty page indices overlapping `[off, off + len)`.
    pub(super) fn dirty_in(&self, off: u64, len: u64) -> Vec<u64> {
        if len == 0 {
            return Vec::new();
        }
        let first = off / PAGE_BYTES;
        let last = (off + len - 1) / PAGE_BYTES;
        self.dirty.range(first..=last).copied().collect()
    }
}

pub(super) fn zero_page() -> Page {
    Box::new([0; PAGE])
}

/// Offsets here are bounded by `SEGMENT_BYTES_MAX` or a page, which fit in
/// `usize` on every supported (64-bit) target.
pub(super) fn to_usize(n: u64) -> usize {
    usize::try_from(n).expect("invariant: offsets are bounded by SEGMENT_BYTES_MAX")
}
