//! The window saved to a file, so a restart reads back only the log
//! written since the save instead of the window's whole span (minutes of
//! log: most of a restart before this file existed — docs/dedupe.md).
//!
//! The file holds the window's stored keys (their identities, hashed with
//! the secret saved beside them), the producer lanes, and `from`: a log
//! position at or below every record the saved state may lack (the lowest
//! of the log's written end when the save began and the positions the
//! claims then in flight were taken at). A restart installs the file and
//! replays the log from `from` through the window's own rebuild step,
//! which keeps the first record of a key, so records read twice change
//! nothing. The file is trusted only when the log still holds what it
//! names: the newest record it points at must be found unchanged, and the
//! log must reach past every position it holds (a torn tail cut below it
//! sends the broker back to the full rebuild).
//!
//! Layout (little-endian): magic, version, the parameters it was saved
//! under, `from`, `covered_end` (the end of the furthest record it points
//! at), the secret, the two generations, the lanes, and a CRC-32 of all
//! that before it.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};

use super::ring::{Id, Saved, Snapshot, Stored};
use super::Original;

/// Where a lone broker keeps its saved window.
pub const WINDOW_FILE: &str = "config/dedupe.window";

const MAGIC: &[u8; 4] = b"SLDW";
const VERSION: u32 = 1;

/// The window parameters a file was saved under; a file saved under others
/// is not used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Params {
    pub(super) window_ms: u64,
    pub(super) keys_max: u64,
    pub(super) lanes_max: u64,
}

/// A saved window, read back.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct File {
    pub(super) params: Params,
    /// The log is replayed from here.
    pub(super) from: u64,
    /// The end of the furthest record the file points at (0: none).
    pub(super) covered_end: u64,
    pub(super) ring: Snapshot,
    /// The lanes, encoded (`Sequences::restore` reads them).
    pub(super) lanes: Vec<u8>,
}

/// The newest record a file points at, to find unchanged in the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Witness {
    /// A stored key: its identity and answer.
    Key(Id, Original),
    /// A lane's answer (the key of its record may have left the window).
    Answer(Original),
}

impl Witness {
    /// The answer the record must carry.
    pub(super) fn original(&self) -> &Original {
        match self {
            Witness::Key(_, o) | Witness::Answer(o) => o,
        }
    }
}

impl File {
    /// The stored key or lane answer with the furthest end; `None` when
    /// the file points at no record.
    pub(super) fn witness(&self, newest_answer: Option<Original>) -> Option<Witness> {
        let newest_key = newest_key(&self.ring).map(|s| Witness::Key(s.id, s.original));
        match (newest_key, newest_answer) {
            (Some(k), Some(a)) if a.end > k.original().end => Some(Witness::Answer(a)),
            (Some(k), _) => Some(k),
            (None, a) => a.map(Witness::Answer),
        }
    }

    /// The end of the furthest stored key (0: none).
    pub(super) fn keys_end(ring: &Snapshot) -> u64 {
        newest_key(ring).map_or(0, |s| s.original.end)
    }

    /// The file's bytes.
    pub(super) fn encode(&self) -> Vec<u8> {
        let items = self.ring.previous.items.len() + self.ring.current.items.len();
        let mut w = Writer(Vec::with_capacity(64 + items * 72 + self.lanes.len()));
        w.0.extend_from_slice(MAGIC);
        w.u32(VERSION);
        w.u64(self.params.window_ms);
        w.u64(self.params.keys_max);
        w.u64(self.params.lanes_max);
        w.u64(self.from);
        w.u64(self.covered_end);
        w.u64(self.ring.secret.0);
        w.u64(self.ring.secret.1);
        for generation in [&self.ring.previous, &self.ring.current] {
            w.i64(generation.newest_ms);
            w.u64(generation.items.len() as u64);
            for s in &generation.items {
                w.u64(s.id.lo);
                w.u64(s.id.hi);
                w.original(&s.original);
                w.i64(s.at_ms);
            }
        }
        w.u64(self.lanes.len() as u64);
        w.0.extend_from_slice(&self.lanes);
        let crc = crc32fast::hash(&w.0);
        w.u32(crc);
        w.0
    }

    /// Reads a file's bytes; `None` when they are not a whole, intact file
    /// of this version.
    pub(super) fn decode(bytes: &[u8]) -> Option<Self> {
        let (body, crc) = bytes.split_at_checked(bytes.len().checked_sub(4)?)?;
        if crc32fast::hash(body) != u32::from_le_bytes(crc.try_into().ok()?) {
            return None;
        }
        let mut r = Reader(body);
        if r.take(4)? != MAGIC || r.u32()? != VERSION {
            return None;
        }
        let params = Params {
            window_ms: r.u64()?,
            keys_max: r.u64()?,
            lanes_max: r.u64()?,
        };
        let (from, covered_end) = (r.u64()?, r.u64()?);
        let secret = (r.u64()?, r.u64()?);
        let mut generation = || -> Option<Saved> {
            let newest_ms = r.i64()?;
            let n = r.len(STORED_BYTES)?;
            let mut items = Vec::with_capacity(n);
            for _ in 0..n {
                let id = Id {
                    lo: r.u64()?,
                    hi: r.u64()?,
                };
                items.push(Stored {
                    id,
                    original: r.original()?,
                    at_ms: r.i64()?,
                });
            }
            Some(Saved { newest_ms, items })
        };
        let previous = generation()?;
        let current = generation()?;
        let lanes_len = r.len(1)?;
        let lanes = r.take(lanes_len)?.to_vec();
        if !r.0.is_empty() {
            return None;
        }
        Some(Self {
            params,
            from,
            covered_end,
            ring: Snapshot {
                secret,
                previous,
                current,
                claims_from: None,
            },
            lanes,
        })
    }
}

/// The stored key with the furthest end, in either generation.
fn newest_key(ring: &Snapshot) -> Option<&Stored> {
    ring.previous
        .items
        .iter()
        .chain(&ring.current.items)
        .max_by_key(|s| s.original.end)
}

/// Bytes of one stored key in the file.
const STORED_BYTES: usize = 16 + ORIGINAL_BYTES + 8;
/// Bytes of one answer: family, address, port, offsets, queue, end.
pub(super) const ORIGINAL_BYTES: usize = 1 + 16 + 2 + 8 + 4 + 8 + 8;

/// Appends little-endian fields.
pub(super) struct Writer(pub(super) Vec<u8>);

impl Writer {
    pub(super) fn u16(&mut self, v: u16) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }

    pub(super) fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }

    pub(super) fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }

    pub(super) fn i64(&mut self, v: i64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }

    /// A string of at most `u16::MAX` bytes (longer ones are cut at a
    /// character boundary; the lanes' names are at most 128 bytes).
    pub(super) fn str(&mut self, s: &str) {
        let mut len = s.len().min(usize::from(u16::MAX));
        while !s.is_char_boundary(len) {
            len -= 1;
        }
        self.u16(u16::try_from(len).unwrap_or(u16::MAX));
        self.0.extend_from_slice(&s.as_bytes()[..len]);
    }

    pub(super) fn original(&mut self, o: &Original) {
        let (family, ip) = match o.store_host.ip() {
            IpAddr::V4(v4) => (4_u8, v4.to_ipv6_mapped().octets()),
            IpAddr::V6(v6) => (6_u8, v6.octets()),
        };
        self.0.push(family);
        self.0.extend_from_slice(&ip);
        self.u16(o.store_host.port());
        self.i64(o.phys_offset);
        self.0.extend_from_slice(&o.queue_id.to_le_bytes());
        self.i64(o.queue_offset);
        self.u64(o.end);
    }
}

/// Reads little-endian fields; `None` past the end.
pub(super) struct Reader<'a>(pub(super) &'a [u8]);

impl<'a> Reader<'a> {
    pub(super) fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = self.0.split_at_checked(n)?;
        self.0 = rest;
        Some(head)
    }

    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N)?.try_into().ok()
    }

    pub(super) fn u8(&mut self) -> Option<u8> {
        Some(self.array::<1>()?[0])
    }

    pub(super) fn u16(&mut self) -> Option<u16> {
        self.array().map(u16::from_le_bytes)
    }

    pub(super) fn u32(&mut self) -> Option<u32> {
        self.array().map(u32::from_le_bytes)
    }

    pub(super) fn u64(&mut self) -> Option<u64> {
        self.array().map(u64::from_le_bytes)
    }

    pub(super) fn i64(&mut self) -> Option<i64> {
        self.array().map(i64::from_le_bytes)
    }

    /// A count of things of at least `each` bytes that the rest can hold
    /// (so a corrupt count allocates nothing large).
    pub(super) fn len(&mut self, each: usize) -> Option<usize> {
        let n = usize::try_from(self.u64()?).ok()?;
        (n <= self.0.len() / each.max(1)).then_some(n)
    }

    pub(super) fn str(&mut self) -> Option<&'a str> {
        let len = self.u16()?;
        std::str::from_utf8(self.take(usize::from(len))?).ok()
    }

    pub(super) fn original(&mut self) -> Option<Original> {
        let family = self.u8()?;
        let octets: [u8; 16] = self.array()?;
        let port = self.u16()?;
        let ip = match family {
            4 => IpAddr::V4(Ipv6Addr::from(octets).to_ipv4_mapped()?),
            6 => IpAddr::V6(Ipv6Addr::from(octets)),
            _ => return None,
        };
        Some(Original {
            store_host: SocketAddr::new(ip, port),
            phys_offset: self.i64()?,
            queue_id: i32::from_le_bytes(self.array()?),
            queue_offset: self.i64()?,
            end: self.u64()?,
        })
    }
}
