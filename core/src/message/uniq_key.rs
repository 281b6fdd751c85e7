//! `UNIQ_KEY`, the client-side message id: uppercase hex of `clientIP(4|16) +
//! pid(u16) + classloaderHash(i32) + ms since the start of the current UTC
//! month (low 32 bits, wrapping like Java's int cast) + counter(u16)`.
//! Time comes from the caller; nothing here reads a clock.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::hex;
use super::record::{corrupt, DecodeError};
use crate::civil::{civil_from_days, days_from_civil};

/// Length of a `UNIQ_KEY` made from an IPv4 address.
pub const UNIQ_KEY_V4_CHARS: usize = 2 * (4 + 2 + 4 + 4 + 2);
/// Length of a `UNIQ_KEY` made from an IPv6 address.
pub const UNIQ_KEY_V6_CHARS: usize = 2 * (16 + 2 + 4 + 4 + 2);

const DAY_MS: u64 = 86_400_000;

/// Start of the UTC month holding `wall_ms`, and start of the next month.
fn month_bounds_ms(wall_ms: u64) -> (u64, u64) {
    let days = i64::try_from(wall_ms / DAY_MS).expect("invariant: u64::MAX / DAY_MS fits i64");
    let (year, month, _) = civil_from_days(days);
    let (next_year, next_month) = if month == 12 {
        (year + 1, 1)
    } else {
        (year, month + 1)
    };
    let to_ms = |d: i64| {
        u64::try_from(d)
            .expect("invariant: months after 1970 start at non-negative days")
            .saturating_mul(DAY_MS)
    };
    (
        to_ms(days_from_civil(year, month, 1)),
        to_ms(days_from_civil(next_year, next_month, 1)),
    )
}

fn ip_octets(ip: IpAddr) -> Vec<u8> {
    match ip {
        IpAddr::V4(v4) => v4.octets().to_vec(),
        IpAddr::V6(v6) => v6.octets().to_vec(),
    }
}

/// Makes `UNIQ_KEY`s for one client process.
#[derive(Clone, Debug)]
pub struct UniqKeyGenerator {
    /// Hex of ip + pid + classloader hash.
    prefix: String,
    month_start_ms: u64,
    next_month_start_ms: u64,
    counter: u16,
}

impl UniqKeyGenerator {
    /// A generator for the client at `ip`; `pid` is truncated to 16 bits like Java's `(short)`.
    pub fn new(ip: IpAddr, pid: u32, classloader_hash: i32) -> Self {
        let pid16 = u16::try_from(pid & 0xFFFF).expect("invariant: masked to 16 bits");
        let mut prefix = String::with_capacity(UNIQ_KEY_V6_CHARS);
        hex::push_upper(&mut prefix, &ip_octets(ip));
        hex::push_upper(&mut prefix, &pid16.to_be_bytes());
        hex::push_upper(&mut prefix, &classloader_hash.to_be_bytes());
        Self {
            prefix,
            month_start_ms: 0,
            next_month_start_ms: 0,
            counter: 0,
        }
    }

    /// The next key at wall-clock time `wall_ms` (ms since the Unix epoch, UTC).
    pub fn next(&mut self, wall_ms: u64) -> String {
        if wall_ms < self.month_start_ms || wall_ms >= self.next_month_start_ms {
            (self.month_start_ms, self.next_month_start_ms) = month_bounds_ms(wall_ms);
        }
        // A month is at most 31 days (2.68e9 ms), more than an i32 holds:
        // keep the low 32 bits, as Java's `(int)` cast does.
        let diff_ms = u32::try_from((wall_ms - self.month_start_ms) & 0xFFFF_FFFF)
            .expect("invariant: masked to 32 bits");
        let mut key = String::with_capacity(self.prefix.len() + 12);
        key.push_str(&self.prefix);
        hex::push_upper(&mut key, &diff_ms.to_be_bytes());
        hex::push_upper(&mut key, &self.counter.to_be_bytes());
        self.counter = self.counter.wrapping_add(1);
        key
    }
}

/// The fields of a decoded `UNIQ_KEY`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UniqKeyParts {
    /// The client's address.
    pub ip: IpAddr,
    /// Low 16 bits of the client's process id.
    pub pid: u16,
    /// The client's classloader hash.
    pub classloader_hash: i32,
    /// Low 32 bits of ms since the start of the month the key was made in.
    pub month_offset_ms: u32,
    /// The per-process counter.
    pub counter: u16,
}

impl UniqKeyParts {
    /// When the key was probably made: the latest month start (at or before
    /// `reference_wall_ms`) plus the offset, stepping back a month if that
    /// lands at or after the reference (the rule of Java's `getNearlyTimeFromID`).
    pub fn approx_timestamp_ms(&self, reference_wall_ms: u64) -> u64 {
        let offset = u64::from(self.month_offset_ms);
        let (start, _) = month_bounds_ms(reference_wall_ms);
        let candidate = start.saturating_add(offset);
        if candidate < reference_wall_ms || start == 0 {
            return candidate;
        }
        let (previous_start, _) = month_bounds_ms(start - 1);
        previous_start + offset
    }
}

/// Decodes a `UNIQ_KEY` of 32 (IPv4) or 56 (IPv6) hex characters; anything else is Corrupt.
pub fn decode_uniq_key(key: &str) -> Result<UniqKeyParts, DecodeError> {
    let ip_bytes = match key.len() {
        UNIQ_KEY_V4_CHARS => 4,
        UNIQ_KEY_V6_CHARS => 16,
        _ => return Err(corrupt("uniq key has the wrong length")),
    };
    let raw = hex::decode(key)?;
    let (ip, rest) = raw.split_at(ip_bytes);
    let ip = if ip_bytes == 4 {
        IpAddr::V4(Ipv4Addr::from(
            <[u8; 4]>::try_from(ip).expect("invariant: 4 bytes"),
        ))
    } else {
        IpAddr::V6(Ipv6Addr::from(
            <[u8; 16]>::try_from(ip).expect("invariant: 16 bytes"),
        ))
    };
    let (pid, rest) = rest.split_at(2);
    let (hash, rest) = rest.split_at(4);
    let (offset, counter) = rest.split_at(4);
    Ok(UniqKeyParts {
        ip,
        pid: u16::from_be_bytes(pid.try_into().expect("invariant: 2 bytes")),
        classloader_hash: i32::from_be_bytes(hash.try_into().expect("invariant: 4 bytes")),
        month_offset_ms: u32::from_be_bytes(offset.try_into().expect("invariant: 4 bytes")),
        counter: u16::from_be_bytes(counter.try_into().expect("invariant: 2 bytes")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    // Epoch milliseconds below were computed independently with Python's datetime (UTC).
    #[test]
    fn month_bounds_follow_the_utc_calendar() {
        assert_eq!(
            month_bounds_ms(1_795_999_083_000),
            (1_793_491_200_000, 1_796_083_200_000)
        );
        // 2024-02-29 12:00 (leap year) → Feb 1 .. Mar 1.
        assert_eq!(
            month_bounds_ms(1_709_208_000_000),
            (1_706_745_600_000, 1_709_251_200_000)
        );
        // 2023-12-31 23:59:59 → Dec 1 .. Jan 1 2024.
        assert_eq!(
            month_bounds_ms(1_704_067_199_000),
            (1_701_388_800_000, 1_704_067_200_000)
        );
        assert_eq!(month_bounds_ms(1_704_067_200_000).0, 1_704_067_200_000);
        assert_eq!(month_bounds_ms(0), (0, 31 * DAY_MS));
    }

    #[test]
    fn uniq_key_golden_layout() {
        let mut generator =
            UniqKeyGenerator::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)), 0x0001_2345, -2);
        // 2026-11-30T00:38:03Z is 0x957B41F8 ms into November: above i32::MAX, kept as 32 bits.
        let key = generator.next(1_795_999_083_000);
        assert_eq!(key, "0A0000012345FFFFFFFE957B41F80000");
        assert_eq!(
            generator.next(1_795_999_083_000),
            "0A0000012345FFFFFFFE957B41F80001"
        );
        // A new month restarts the offset.
        assert_eq!(&generator.next(1_796_083_200_005)[20..], "000000050002");
    }

    #[test]
    fn uniq_key_counter_wraps_at_16_bits() {
        let mut generator = UniqKeyGenerator::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 1, 1);
        let keys: Vec<String> = (0..=u32::from(u16::MAX) + 1)
            .map(|_| generator.next(0))
            .collect();
        assert!(keys[0].ends_with("0000"));
        assert!(keys[usize::from(u16::MAX)].ends_with("FFFF"));
        assert_eq!(keys[0], keys[usize::from(u16::MAX) + 1]);
    }

    #[test]
    fn decode_uniq_key_rejects_bad_keys() {
        for bad in [
            "",
            "0A0000012345FFFFFFFE957B41F8000",
            "0A0000012345FFFFFFFE957B41F8000Z",
        ] {
            assert!(
                matches!(decode_uniq_key(bad), Err(DecodeError::Corrupt { .. })),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn approx_timestamp_steps_back_a_month_when_needed() {
        let parts = UniqKeyParts {
            ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
            pid: 0,
            classloader_hash: 0,
            month_offset_ms: 10,
            counter: 0,
        };
        // Reference a minute into December 2023: offset 10 ms is this month.
        assert_eq!(
            parts.approx_timestamp_ms(1_701_388_860_000),
            1_701_388_800_010
        );
        // Reference 5 ms into January 2024: 10 ms into January is in the future → December.
        assert_eq!(
            parts.approx_timestamp_ms(1_704_067_200_005),
            1_701_388_800_010
        );
    }

    fn ip() -> impl Strategy<Value = IpAddr> {
        prop_oneof![
            any::<[u8; 4]>().prop_map(IpAddr::from),
            any::<[u8; 16]>().prop_map(IpAddr::from)
        ]
    }

    proptest! {
        #[test]
        fn uniq_key_round_trips(
            ip in ip(),
            pid in any::<u32>(),
            hash in any::<i32>(),
            wall_ms in 0_u64..4_102_444_800_000,
            skip in 0_u16..5,
        ) {
            let mut generator = UniqKeyGenerator::new(ip, pid, hash);
            for _ in 0..skip {
                generator.next(wall_ms);
            }
            let key = generator.next(wall_ms);
            let expected_len = if ip.is_ipv4() { UNIQ_KEY_V4_CHARS } else { UNIQ_KEY_V6_CHARS };
            prop_assert_eq!(key.len(), expected_len);
            prop_assert!(key.bytes().all(|b| b.is_ascii_digit() || (b'A'..=b'F').contains(&b)));
            let parts = decode_uniq_key(&key).expect("own key decodes");
            prop_assert_eq!(parts.ip, ip);
            prop_assert_eq!(u32::from(parts.pid), pid & 0xFFFF);
            prop_assert_eq!(parts.classloader_hash, hash);
            prop_assert_eq!(parts.counter, skip);
            // The key was made at wall_ms, so decoding just after recovers it exactly.
            prop_assert_eq!(parts.approx_timestamp_ms(wall_ms + 1), wall_ms);
        }

        #[test]
        fn decode_uniq_key_never_panics(key in "[0-9A-Fa-fG\u{e9}]{0,60}") {
            if let Err(e) = decode_uniq_key(&key) {
                prop_assert!(matches!(e, DecodeError::Corrupt { .. }), "{:?}", e);
            }
        }
    }
}
