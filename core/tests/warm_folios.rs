//! Warming builds the page cache of a segment out of single pages, and
//! leaves them cached but no longer mapped: a page mapped writable costs a
//! TLB shootdown each time writeback cleans it (docs/benchmarks.md, issue
//! 20, "index sync and unmapped warming"). A store
//! through a shared mapping dirties a whole folio, so on a kernel that
//! gives file mappings large folios (ext4 on Linux ≥ 6.16, through the
//! fault path's readahead) a sync of one 1 KiB message wrote back up to
//! 2 MiB: 19× the data at 64 KiB batches on this project's test VM, and
//! faulting 1 GiB in took ~9 s instead of 0.5 s (docs/benchmarks.md,
//! issue 20). Read through `/proc/self/pagemap` and `/proc/kpageflags`
//! (root only); where those say nothing, or where this kernel builds no
//! large folios even without the advice, the test says so and skips.
#![allow(unsafe_code)]

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

use memmap2::{Advice, MmapOptions};
use sluice_core::disk::{Disk, MmapDisk, Segment};

const PAGE: usize = 4096;
/// Large enough for the fault path's readahead to ramp up to large folios
/// (the first few MiB of a file get single pages either way).
const RANGE: usize = 32 << 20;
/// `KPF_COMPOUND_HEAD` and `KPF_COMPOUND_TAIL` (linux/kernel-page-flags.h).
const COMPOUND: u64 = (1 << 15) | (1 << 16);

/// For each page of `[addr, addr + len)`: `None` when not present,
/// `Some(true)` when it is part of a large folio. `None` overall when this
/// process cannot read page frame numbers.
fn large_pages(addr: usize, len: usize) -> Option<Vec<Option<bool>>> {
    let pagemap = File::open("/proc/self/pagemap").ok()?;
    let flags = File::open("/proc/kpageflags").ok()?;
    let mut pages = Vec::with_capacity(len / PAGE);
    for page in (addr..addr + len).step_by(PAGE) {
        let mut entry = [0; 8];
        pagemap
            .read_exact_at(&mut entry, (page / PAGE * 8) as u64)
            .ok()?;
        let entry = u64::from_le_bytes(entry);
        if entry >> 63 == 0 {
            pages.push(None);
            continue;
        }
        let pfn = entry & ((1 << 55) - 1);
        if pfn == 0 {
            return None; // unprivileged: the kernel hides frame numbers
        }
        let mut word = [0; 8];
        flags.read_exact_at(&mut word, pfn * 8).ok()?;
        pages.push(Some(u64::from_le_bytes(word) & COMPOUND != 0));
    }
    Some(pages)
}

/// Pages in large folios, once every page of the range is present.
#[expect(
    clippy::disallowed_methods,
    reason = "waits for the production disk's allocator thread in real time"
)]
fn large_once_present(addr: usize, len: usize) -> Option<usize> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let pages = large_pages(addr, len)?;
        if pages.iter().all(Option::is_some) || Instant::now() > deadline {
            return Some(pages.iter().filter(|p| **p == Some(true)).count());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `(pages in the page cache, pages mapped)` of `[addr, addr + len)`;
/// `None` when this process cannot read its own page map.
fn cached_and_mapped(addr: usize, len: usize) -> Option<(usize, usize)> {
    let mut vec = vec![0u8; len / PAGE];
    // SAFETY: `addr` is page-aligned and `[addr, addr + len)` lies in one
    // live mapping; `vec` has one byte per page.
    let rc = unsafe { libc::mincore(addr as *mut libc::c_void, len, vec.as_mut_ptr()) };
    assert_eq!(rc, 0, "mincore");
    let cached = vec.iter().filter(|b| **b & 1 != 0).count();
    let pagemap = File::open("/proc/self/pagemap").ok()?;
    let mut mapped = 0;
    for page in (addr..addr + len).step_by(PAGE) {
        let mut entry = [0; 8];
        pagemap
            .read_exact_at(&mut entry, (page / PAGE * 8) as u64)
            .ok()?;
        mapped += usize::from(u64::from_le_bytes(entry) >> 63 == 1);
    }
    Some((cached, mapped))
}

/// At least this share of a warmed range must stay cached: the kernel may
/// reclaim a few clean pages at once on a busy machine (CI saw 7,990 of
/// 8,192), while a warm that did nothing leaves none.
const CACHED_SHARE: (usize, usize) = (7, 8);

fn warmed_enough((cached, mapped): (usize, usize), len: usize) -> bool {
    mapped == 0 && cached * CACHED_SHARE.1 >= len / PAGE * CACHED_SHARE.0
}

/// Waits (up to 30 s) for warming to leave every page of the range cached
/// and none mapped, or enough of them cached (see [`CACHED_SHARE`]) with no
/// change over half a second; the last state seen.
#[expect(
    clippy::disallowed_methods,
    reason = "waits for the production disk's allocator thread in real time"
)]
fn settled(addr: usize, len: usize) -> Option<(usize, usize)> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut last = None;
    let mut since = Instant::now();
    loop {
        let state = cached_and_mapped(addr, len)?;
        if last != Some(state) {
            last = Some(state);
            since = Instant::now();
        }
        let steady = since.elapsed() > Duration::from_millis(500) && warmed_enough(state, len);
        if state == (len / PAGE, 0) || steady || Instant::now() > deadline {
            return Some(state);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn warmed_pages_stay_in_the_page_cache_but_leave_the_mapping() {
    let dir = tempfile::tempdir().expect("tempdir");
    let disk = MmapDisk::new(dir.path()).expect("disk");
    let seg = disk.create_segment("seg", RANGE as u64).expect("create");
    seg.warm(0, RANGE as u64);
    let view = seg.slice(0, RANGE).expect("view");
    let Some(state) = settled(view.as_ptr() as usize, RANGE) else {
        eprintln!("skipped: /proc/self/pagemap is unreadable here");
        return;
    };
    assert!(
        warmed_enough(state, RANGE),
        "(cached, mapped) pages after warming: {state:?} of {}",
        RANGE / PAGE
    );
    // The bytes read back as zeros through the mapping.
    assert!(view.iter().all(|b| *b == 0));
}

/// Whether the mapping holding `addr` is still advised `MADV_RANDOM`
/// (`rr` in its smaps `VmFlags`).
fn random_advice(addr: usize) -> bool {
    let smaps = std::fs::read_to_string("/proc/self/smaps").expect("smaps");
    let mut inside = false;
    for line in smaps.lines() {
        if let Some((range, _)) = line.split_once(' ') {
            if let Some((lo, hi)) = range.split_once('-') {
                if let (Ok(lo), Ok(hi)) =
                    (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
                {
                    inside = (lo..hi).contains(&addr);
                    continue;
                }
            }
        }
        if inside {
            if let Some(flags) = line.strip_prefix("VmFlags:") {
                return flags.split_whitespace().any(|f| f == "rr");
            }
        }
    }
    panic!("no mapping holds {addr:#x}");
}

/// The same fallocated file faulted in without the advice: how many of its
/// pages land in large folios on this kernel and filesystem.
fn large_without_advice(dir: &std::path::Path) -> Option<usize> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(dir.join("control"))
        .expect("control file");
    // As `MmapDisk` allocates a segment: unwritten extents, no holes.
    let len = libc::off_t::try_from(RANGE).expect("fits");
    // SAFETY: a valid descriptor owned by `file` for the whole call.
    let rc = unsafe { libc::posix_fallocate(std::os::fd::AsRawFd::as_raw_fd(&file), 0, len) };
    assert_eq!(rc, 0, "posix_fallocate");
    let map = MmapOptions::new().len(RANGE).map_raw(&file).expect("map");
    map.advise(Advice::PopulateWrite).ok()?;
    large_once_present(map.as_ptr() as usize, RANGE)
}

#[test]
#[expect(
    clippy::disallowed_methods,
    reason = "waits for the production disk's allocator thread in real time"
)]
fn a_warmed_range_is_single_pages_with_normal_readahead_after() {
    let dir = tempfile::tempdir().expect("tempdir");
    let Some(control) = large_without_advice(dir.path()) else {
        eprintln!(
            "skipped: page frame numbers are hidden (not root) or MADV_POPULATE_WRITE is missing"
        );
        return;
    };
    if control == 0 {
        eprintln!("skipped: this kernel builds no large folios for a file mapping here");
        return;
    }
    let disk = MmapDisk::new(dir.path()).expect("disk");
    let seg = disk.create_segment("seg", RANGE as u64).expect("create");
    seg.warm(0, RANGE as u64);
    let view = seg.slice(0, RANGE).expect("view");
    let addr = view.as_ptr() as usize;
    // Warming leaves its pages unmapped: read them back in (mapping
    // the folios warming built) to see their sizes.
    settled(addr, RANGE);
    let sum = view.iter().step_by(PAGE).fold(0u8, |a, b| a ^ *b);
    assert_eq!(std::hint::black_box(sum), 0);
    assert_eq!(
        large_once_present(addr, RANGE),
        Some(0),
        "pages warmed in large folios (without the advice: {control} of {})",
        RANGE / PAGE
    );
    // Readers of the segment keep their readahead once warming is done.
    let deadline = Instant::now() + Duration::from_secs(30);
    while random_advice(addr) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!random_advice(addr), "the mapping stays advised random");
}
