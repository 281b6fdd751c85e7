//! Walking the CommitLog record by record from a known record boundary:
//! used by dispatch (ConsumeQueue/Index) and by crash recovery. Every record
//! is checked (magic, size, CRC, stored physical offset) before it is
//! trusted; anything else ends the walk with the reason.

use bytes::Bytes;

use crate::disk::Disk;
use crate::error::{Error, Result};
use crate::message::{
    body_crc, peek_head, seal_matches, stored_phys_offset, RecordHead, RecordView, StoredRecord,
};
use crate::segment_chain::{is_zeroed, SegmentChain, ZEROED_BLOCK_BYTES};

use super::{BLANK_RECORD_BYTES, PAD_BYTES_MAX};

/// What sits at one position of the log; `R` is what a valid record is
/// read as (decoded, or nothing more than its checked bytes).
#[derive(Debug)]
pub(crate) enum Step<R = Box<StoredRecord>> {
    /// A valid record and its raw bytes.
    Record(R, Bytes),
    /// A blank record: the log continues at `next`, the next segment.
    Blank { next: u64 },
    /// A sector pad: the log continues at `next`.
    Pad { next: u64 },
    /// No valid record here: the end of the log, or damage.
    End(&'static str),
}

/// Reads what is at `pos`, a position believed to be a record boundary,
/// verifying everything (seal, body CRC, stored offset).
pub(crate) fn step<D: Disk>(chain: &SegmentChain<D>, pos: u64) -> Step {
    step_checked(chain, pos, true)
}

/// Like [`step`] but skips the body CRC: for dispatching records this
/// process has just written (the seal still guards the header). A read the
/// disk fails (EIO) is an error rather than the end of the log: the bytes
/// are there, only unreadable now, so dispatch retries later instead of
/// fencing the store over them.
pub(crate) fn step_fresh_or_io<D: Disk>(chain: &SegmentChain<D>, pos: u64) -> Result<Step> {
    failing_on_io(|note| {
        step_from(
            |at| chain.read_array(at).map_err(note).ok(),
            |at, len| chain.read(at, len).map_err(note).ok(),
            chain.segment_bytes(),
            pos,
            false,
        )
    })
}

/// Runs `step` with a `note` for its failed reads: an I/O error noted (a
/// read the disk failed, EIO) is the answer instead of the step, which took
/// the missing bytes for the end of the log. The bytes are there, only
/// unreadable now: recovery must stop rather than cut the log there, and
/// dispatch must wait rather than fence the store.
fn failing_on_io<T>(step: impl FnOnce(&dyn Fn(Error)) -> Step<T>) -> Result<Step<T>> {
    let failed = std::cell::RefCell::new(None);
    let note = |e| {
        failed.borrow_mut().get_or_insert(e);
    };
    let step = step(&note);
    match failed.into_inner() {
        Some(e @ Error::Io { .. }) => Err(e),
        _ => Ok(step),
    }
}

pub(crate) fn step_checked<D: Disk>(chain: &SegmentChain<D>, pos: u64, check_body: bool) -> Step {
    step_from(
        |at| chain.read_array(at).ok(),
        |at, len| chain.read(at, len).ok(),
        chain.segment_bytes(),
        pos,
        check_body,
    )
}

/// Like [`step`] (everything verified, the body CRC included) without
/// decoding: a valid record is read in place by `read`, and is what it
/// returns — for recovery's scan, which reads every record of the log
/// when there is no checkpoint, so each is parsed once and nothing is
/// allocated for it. A read the disk fails is an error, not the end of the
/// log (see [`failing_on_io`]).
pub(crate) fn step_viewed<D: Disk, T>(
    chain: &SegmentChain<D>,
    pos: u64,
    read: impl FnOnce(&RecordView<'_>) -> T,
) -> Result<Step<T>> {
    failing_on_io(|note| viewed(sealed_noting(chain, pos, note), read))
}

/// What [`step_viewed`] reads at `pos` through `read_head` and `read` (as
/// in [`step_in`]), without reading the record: for a walk verifying the
/// log ahead of another (see `verify_ahead`).
pub(crate) fn step_verified_in<H, R>(read_head: H, read: R, seg: u64, pos: u64) -> Step<()>
where
    H: Fn(u64) -> Option<[u8; 8]>,
    R: Fn(u64, usize) -> Option<Bytes>,
{
    viewed(unit_from(read_head, read, seg, pos, |_| Some(())), |_| ())
}

/// A sealed unit read by `read` once it parses and its body CRC holds.
fn viewed<T>(sealed: Step<()>, read: impl FnOnce(&RecordView<'_>) -> T) -> Step<T> {
    match sealed {
        Step::Record((), raw) => match RecordView::parse(&raw) {
            Ok(view) if body_crc(view.body) == view.body_crc => {
                let got = read(&view);
                Step::Record(got, raw)
            }
            _ => Step::End("record fails decoding or its CRC"),
        },
        Step::Blank { next } => Step::Blank { next },
        Step::Pad { next } => Step::Pad { next },
        Step::End(reason) => Step::End(reason),
    }
}

/// Like [`step_viewed`] at a position a walk verifying ahead has already
/// passed (see `verify_ahead`): the unit is read in place without its
/// checks (seal, body CRC, stored offset), which were made there. A read
/// the disk fails is an error, as there.
pub(crate) fn step_trusted<D: Disk, T>(
    chain: &SegmentChain<D>,
    pos: u64,
    read: impl FnOnce(&RecordView<'_>) -> T,
) -> Result<Step<T>> {
    let seg = chain.segment_bytes();
    let Some(head) = unless_io(chain.read_array::<8>(pos))? else {
        return Ok(Step::End("no segment at this offset"));
    };
    Ok(match peek_head(&head) {
        Ok(RecordHead::Blank { .. }) => Step::Blank {
            next: chain.segment_start(pos) + seg,
        },
        Ok(RecordHead::Pad { size }) => Step::Pad {
            next: pos + u64::from(size),
        },
        Ok(RecordHead::Message { total_size }) => {
            let Some(raw) = unless_io(chain.read(pos, total_size as usize))? else {
                return Ok(Step::End("record unreadable"));
            };
            match RecordView::parse(&raw) {
                Ok(view) => {
                    let got = read(&view);
                    Step::Record(got, raw)
                }
                Err(_) => Step::End("record fails decoding or its CRC"),
            }
        }
        Err(_) => Step::End("unknown magic code"),
    })
}

/// A read's bytes; `None` when they are not there (past the log's
/// segments), an error when the disk failed the read (see
/// [`failing_on_io`]).
fn unless_io<T>(read: Result<T>) -> Result<Option<T>> {
    match read {
        Ok(got) => Ok(Some(got)),
        Err(e @ Error::Io { .. }) => Err(e),
        Err(_) => Ok(None),
    }
}

/// Like [`step_checked`] without the body CRC and without decoding: a
/// record is its sealed bytes (seal, size and stored offset checked), for
/// a walk that reads each one in place ([`RecordView`]).
///
/// [`RecordView`]: crate::message::RecordView
pub(crate) fn step_sealed<D: Disk>(chain: &SegmentChain<D>, pos: u64) -> Step<()> {
    sealed_noting(chain, pos, &|_| ())
}

/// [`step_sealed`], telling `note` of each read that fails.
fn sealed_noting<D: Disk>(chain: &SegmentChain<D>, pos: u64, note: &dyn Fn(Error)) -> Step<()> {
    unit_from(
        |at| chain.read_array(at).map_err(note).ok(),
        |at, len| chain.read(at, len).map_err(note).ok(),
        chain.segment_bytes(),
        pos,
        |_| Some(()),
    )
}

/// Reads what is at `pos` through `read(offset, len)` (`None` when the
/// bytes are not there), in a log of `seg`-byte segments. The one
/// definition of a valid log unit, for the stored log and for bytes a
/// replica receives before it writes them.
pub(crate) fn step_in<R>(read: R, seg: u64, pos: u64, check_body: bool) -> Step
where
    R: Fn(u64, usize) -> Option<Bytes>,
{
    let head = |at| read(at, 8).and_then(|b| <[u8; 8]>::try_from(&b[..]).ok());
    step_from(head, &read, seg, pos, check_body)
}

/// [`step_in`] with the 8-byte head read apart (`read_head(offset)`), so a
/// store reading its own log copies the head out instead of making a view
/// for it: one view per record, not two.
fn step_from<H, R>(read_head: H, read: R, seg: u64, pos: u64, check_body: bool) -> Step
where
    H: Fn(u64) -> Option<[u8; 8]>,
    R: Fn(u64, usize) -> Option<Bytes>,
{
    unit_from(read_head, read, seg, pos, |raw| {
        let decoded = if check_body {
            StoredRecord::decode(raw)
        } else {
            StoredRecord::decode_unchecked_crc(raw)
        };
        decoded.ok().map(Box::new)
    })
}

/// The one definition of a valid log unit: what is at `pos`, a record read
/// by `decode` (`None`: it fails decoding) once its size and seal hold.
fn unit_from<H, R, T>(
    read_head: H,
    read: R,
    seg: u64,
    pos: u64,
    decode: impl FnOnce(&Bytes) -> Option<T>,
) -> Step<T>
where
    H: Fn(u64) -> Option<[u8; 8]>,
    R: Fn(u64, usize) -> Option<Bytes>,
{
    let rel = pos % seg;
    if rel + BLANK_RECORD_BYTES > seg {
        return Step::End("no room for a record header");
    }
    let Some(head) = read_head(pos) else {
        return Step::End("no segment at this offset");
    };
    if head.iter().all(|b| *b == 0) {
        return Step::End("zeroed bytes");
    }
    match peek_head(&head) {
        Ok(RecordHead::Blank { remaining }) => {
            if u64::from(remaining) == seg - rel {
                Step::Blank {
                    next: pos - rel + seg,
                }
            } else {
                Step::End("blank record with a wrong length")
            }
        }
        Ok(RecordHead::Pad { size }) => {
            let size = u64::from(size);
            // A pad never crosses a segment and is never longer than a
            // sector plus a head.
            if size <= PAD_BYTES_MAX && rel + size + BLANK_RECORD_BYTES <= seg {
                Step::Pad { next: pos + size }
            } else {
                Step::End("pad record with a wrong length")
            }
        }
        Ok(RecordHead::Message { total_size }) => {
            let size = u64::from(total_size);
            if size < BLANK_RECORD_BYTES || rel + size + BLANK_RECORD_BYTES > seg {
                return Step::End("record size does not fit the segment");
            }
            let Some(raw) = read(pos, total_size as usize) else {
                return Step::End("record unreadable");
            };
            if !seal_matches(&raw) {
                return Step::End("record seal (whole-record checksum) does not match");
            }
            let Some(rec) = decode(&raw) else {
                return Step::End("record fails decoding or its CRC");
            };
            if stored_phys_offset(&raw)
                .ok()
                .and_then(|o| u64::try_from(o).ok())
                == Some(pos)
            {
                Step::Record(rec, raw)
            } else {
                Step::End("stored physical offset differs from the position")
            }
        }
        Err(_) => Step::End("unknown magic code"),
    }
}

/// Searches `[from, limit)` for any valid record (a record whose CRC holds
/// and whose stored physical offset equals its position). Used to tell a
/// torn tail (nothing valid follows) from mid-log corruption.
pub(crate) fn find_valid_record_after<D: Disk>(
    chain: &SegmentChain<D>,
    from: u64,
    limit: u64,
) -> Option<u64> {
    let seg = chain.segment_bytes();
    let mut pos = from;
    while pos < limit {
        let seg_end = (chain.segment_start(pos) + seg).min(limit);
        // A record's magic sits 4 bytes after its start, and is not zero:
        // only runs that may hold data can hold it (the rest of a segment
        // is mostly blocks never written, costly to read).
        let magic_from = from + 4;
        let runs = chain
            .data_runs(pos, seg_end)
            .unwrap_or_else(|_| vec![(pos, seg_end)]);
        for (a, b) in runs {
            let a = a.max(magic_from);
            if a < b {
                if let Some(found) = find_magic_in(chain, a, b, seg_end) {
                    return Some(found);
                }
            }
        }
        pos = seg_end;
    }
    None
}

/// The first valid record whose magic starts in `[a, b)` (its 4 bytes may
/// reach up to `seg_end`).
fn find_magic_in<D: Disk>(chain: &SegmentChain<D>, a: u64, b: u64, seg_end: u64) -> Option<u64> {
    let readable = (b + 3).min(seg_end);
    let bytes = chain
        .read(a, usize::try_from(readable - a).unwrap_or(0))
        .ok()?;
    let magic = crate::message::MAGIC_V1.to_be_bytes();
    let starts = usize::try_from(b - a).unwrap_or(0);
    let mut i = 0usize;
    while i < starts {
        // Skip to each byte that could begin the magic.
        let skip = position_of_byte(&bytes[i..starts], magic[0])?;
        i += skip;
        if bytes.get(i..i + 4) == Some(&magic[..]) {
            let cand = a + i as u64 - 4;
            if let Step::Record(..) = step(chain, cand) {
                return Some(cand);
            }
        }
        i += 1;
    }
    None
}

/// The first position of the non-zero byte `byte` in `bytes`, skipping
/// zeroed blocks a whole block at a time (past the end of the log a segment
/// is mostly zeros).
fn position_of_byte(bytes: &[u8], byte: u8) -> Option<usize> {
    debug_assert_ne!(byte, 0, "zeroed blocks are skipped");
    let mut at = 0;
    for block in bytes.chunks(ZEROED_BLOCK_BYTES) {
        if !is_zeroed(block) {
            if let Some(i) = block.iter().position(|b| *b == byte) {
                return Some(at + i);
            }
        }
        at += block.len();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::disk::Prepare;
    use crate::testing::SimDisk;

    /// A read the disk fails is an error from every read recovery makes,
    /// with or without the checks, never a step saying the log ends.
    #[test]
    fn recovery_steps_fail_on_a_read_error_and_end_only_past_the_log() {
        let disk = SimDisk::new(5);
        let chain = SegmentChain::open(disk.clone(), "log", 1 << 16, Prepare::Cold).expect("open");
        chain.write(0, &[0x11; 64]).expect("write");
        for trusted in [false, true] {
            let step = |pos| {
                if trusted {
                    step_trusted(&chain, pos, |_| ())
                } else {
                    step_viewed(&chain, pos, |_| ())
                }
            };
            assert!(matches!(step(0), Ok(Step::End(_))), "garbage ends the log");
            assert!(
                matches!(step(1 << 16), Ok(Step::End(_))),
                "past the last segment the log ends"
            );
            disk.fail_next_read();
            assert!(
                matches!(step(0), Err(Error::Io { .. })),
                "trusted {trusted}: a failed read is an error"
            );
        }
    }

    #[test]
    fn position_of_byte_skips_zeroed_blocks_and_finds_the_first_match() {
        let mut bytes = vec![0u8; 3 * ZEROED_BLOCK_BYTES + 5];
        assert_eq!(position_of_byte(&bytes, 0xDA), None);
        bytes[ZEROED_BLOCK_BYTES + 3] = 0x11; // a non-zero block without it
        bytes[2 * ZEROED_BLOCK_BYTES + 7] = 0xDA;
        bytes[3 * ZEROED_BLOCK_BYTES + 1] = 0xDA;
        assert_eq!(
            position_of_byte(&bytes, 0xDA),
            Some(2 * ZEROED_BLOCK_BYTES + 7)
        );
        assert_eq!(
            position_of_byte(&bytes[..2 * ZEROED_BLOCK_BYTES], 0xDA),
            None
        );
        assert_eq!(position_of_byte(&[0xDA], 0xDA), Some(0));
    }
}
