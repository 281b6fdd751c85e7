//! Send timestamps carried in message bodies: a magic tag, the scheduled
//! send time and the time the send call started, both as wall-clock
//! nanoseconds. Within one process both ends read the same monotonic clock
//! through one anchor, so an end-to-end difference is exact; across
//! processes it is off by the anchors' millisecond truncation.

use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use sluice_core::{Clock, SystemClock};

/// Marks a body written by `sluice bench`.
const MAGIC: &[u8; 4] = b"SLB1";
/// Magic plus two big-endian `u64` timestamps.
pub const STAMP_BYTES: usize = 4 + 8 + 8;

/// Reads the clock and turns monotonic readings into wall-clock
/// nanoseconds. Cheap to clone; clones share the anchor.
#[derive(Clone, Debug)]
pub struct Stamper {
    clock: SystemClock,
    anchor_wall_ns: u64,
    anchor_mono: Duration,
}

impl Stamper {
    /// Anchors the monotonic clock to the wall clock now.
    pub fn new() -> Self {
        let clock = SystemClock::new();
        let anchor_mono = clock.monotonic();
        let anchor_wall_ns = clock.wall_ms().saturating_mul(1_000_000);
        Self {
            clock,
            anchor_wall_ns,
            anchor_mono,
        }
    }

    /// Time since an arbitrary origin shared by every clone.
    pub fn now(&self) -> Duration {
        self.clock.monotonic()
    }

    /// A monotonic reading as wall-clock nanoseconds.
    pub fn wall_ns(&self, at: Duration) -> u64 {
        let since = u64::try_from(at.saturating_sub(self.anchor_mono).as_nanos()).unwrap_or(0);
        self.anchor_wall_ns.saturating_add(since)
    }

    /// A wall-clock nanosecond stamp back on the monotonic scale.
    pub fn mono(&self, wall_ns: u64) -> Duration {
        self.anchor_mono + Duration::from_nanos(wall_ns.saturating_sub(self.anchor_wall_ns))
    }
}

/// A body template: `size` bytes of a fixed, poorly compressible pattern.
pub fn template(size: usize) -> Bytes {
    let mut x: u32 = 0x9e37_79b9;
    let mut out = Vec::with_capacity(size);
    for _ in 0..size {
        // xorshift: bodies that zlib cannot shrink to nothing.
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        out.push(x.to_le_bytes()[0]);
    }
    Bytes::from(out)
}

/// `template` with the stamps written over its head when it is long
/// enough to hold them (shorter bodies go out unstamped).
pub fn body(template: &Bytes, scheduled_ns: u64, issued_ns: u64) -> Bytes {
    if template.len() < STAMP_BYTES {
        return template.clone();
    }
    let mut b = BytesMut::with_capacity(template.len());
    b.put_slice(MAGIC);
    b.put_u64(scheduled_ns);
    b.put_u64(issued_ns);
    b.put_slice(&template[STAMP_BYTES..]);
    b.freeze()
}

/// The stamps of a body: `(scheduled_ns, issued_ns)`, or `None` for a body
/// the bench did not write.
pub fn read(body: &[u8]) -> Option<(u64, u64)> {
    let head = body.get(..STAMP_BYTES)?;
    if &head[..4] != MAGIC {
        return None;
    }
    let scheduled = u64::from_be_bytes(head[4..12].try_into().ok()?);
    let issued = u64::from_be_bytes(head[12..20].try_into().ok()?);
    Some((scheduled, issued))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_round_trip_and_keep_the_size() {
        let t = template(1024);
        let b = body(&t, 11, 22);
        assert_eq!(b.len(), 1024);
        assert_eq!(read(&b), Some((11, 22)));
        assert_eq!(&b[STAMP_BYTES..], &t[STAMP_BYTES..]);
    }

    #[test]
    fn foreign_and_short_bodies_carry_no_stamp() {
        assert_eq!(read(&template(1024)), None);
        assert_eq!(read(b"SLB1"), None);
        let short = template(8);
        assert_eq!(body(&short, 1, 2), short);
    }

    #[test]
    fn wall_and_monotonic_scales_convert_both_ways() {
        let s = Stamper::new();
        let at = s.now() + Duration::from_micros(1500);
        let wall = s.wall_ns(at);
        assert_eq!(s.mono(wall), at);
    }
}
