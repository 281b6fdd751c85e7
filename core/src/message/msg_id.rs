//! The offset message id (the broker's `msgId`): uppercase hex of
//! `storeIP(4|16) + storePort(i32) + commitLogOffset(i64)`, 32 characters for
//! IPv4 and 56 for IPv6. Clients decode it to VIEW a message by id.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use super::hex;
use super::record::{corrupt, DecodeError};

/// Length of an offset message id for an IPv4 store host.
pub const OFFSET_MSG_ID_V4_CHARS: usize = 2 * (4 + 4 + 8);
/// Length of an offset message id for an IPv6 store host.
pub const OFFSET_MSG_ID_V6_CHARS: usize = 2 * (16 + 4 + 8);

/// The offset message id of the record at `phys_offset` on `store_host`.
pub fn offset_msg_id(store_host: SocketAddr, phys_offset: i64) -> String {
    let mut id = String::with_capacity(OFFSET_MSG_ID_V6_CHARS);
    push_offset_msg_id(&mut id, store_host, phys_offset);
    id
}

/// Appends [`offset_msg_id`]`(store_host, phys_offset)` to `out`: a batch's
/// answer lists every message's id in one string, with no `String` each.
pub fn push_offset_msg_id(out: &mut String, store_host: SocketAddr, phys_offset: i64) {
    match store_host.ip() {
        IpAddr::V4(ip) => hex::push_upper(out, &ip.octets()),
        IpAddr::V6(ip) => hex::push_upper(out, &ip.octets()),
    }
    hex::push_upper(out, &i32::from(store_host.port()).to_be_bytes());
    hex::push_upper(out, &phys_offset.to_be_bytes());
}

/// Recovers the store host and CommitLog offset from an offset message id.
/// Any malformed id (wrong length, non-hex, port out of range) is Corrupt.
pub fn decode_offset_msg_id(id: &str) -> Result<(SocketAddr, i64), DecodeError> {
    let ip_bytes = match id.len() {
        OFFSET_MSG_ID_V4_CHARS => 4,
        OFFSET_MSG_ID_V6_CHARS => 16,
        _ => return Err(corrupt("offset message id has the wrong length")),
    };
    let raw = hex::decode(id)?;
    let (ip, rest) = raw.split_at(ip_bytes);
    let (port, offset) = rest.split_at(4);
    let ip = match ip_bytes {
        4 => IpAddr::V4(Ipv4Addr::from(
            <[u8; 4]>::try_from(ip).expect("invariant: 4 ip bytes"),
        )),
        _ => IpAddr::V6(Ipv6Addr::from(
            <[u8; 16]>::try_from(ip).expect("invariant: 16 ip bytes"),
        )),
    };
    let port = i32::from_be_bytes(port.try_into().expect("invariant: 4 port bytes"));
    let port = u16::try_from(port).map_err(|_| corrupt("port out of range"))?;
    let offset = i64::from_be_bytes(offset.try_into().expect("invariant: 8 offset bytes"));
    Ok((SocketAddr::new(ip, port), offset))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn offset_msg_id_golden_ipv4() {
        let host: SocketAddr = "127.0.0.1:10911".parse().expect("addr");
        assert_eq!(offset_msg_id(host, 0), "7F00000100002A9F0000000000000000");
        assert_eq!(
            offset_msg_id(host, 0x0123_4567_89AB_CDEF),
            "7F00000100002A9F0123456789ABCDEF"
        );
    }

    #[test]
    fn offset_msg_id_ipv6_is_56_chars() {
        let host: SocketAddr = "[::1]:10911".parse().expect("addr");
        let id = offset_msg_id(host, 5);
        assert_eq!(id.len(), OFFSET_MSG_ID_V6_CHARS);
        assert_eq!(
            id,
            format!(
                "{}{}{}",
                "0".repeat(31) + "1",
                "00002A9F",
                "0000000000000005"
            )
        );
        assert_eq!(decode_offset_msg_id(&id), Ok((host, 5)));
    }

    #[test]
    fn decode_offset_msg_id_accepts_lowercase_and_rejects_bad_ids() {
        let host: SocketAddr = "127.0.0.1:10911".parse().expect("addr");
        assert_eq!(
            decode_offset_msg_id("7f00000100002a9f0000000000000010"),
            Ok((host, 16))
        );
        for bad in [
            "",
            "7F00000100002A9F000000000000000",
            "7F00000100002A9F000000000000000G",
            "7F000001FFFFFFFF0000000000000000",
            "7F00000100002A9F00000000000000é",
        ] {
            assert!(
                matches!(decode_offset_msg_id(bad), Err(DecodeError::Corrupt { .. })),
                "{bad:?}"
            );
        }
    }

    fn socket_addr() -> impl Strategy<Value = SocketAddr> {
        prop_oneof![
            (any::<[u8; 4]>(), any::<u16>())
                .prop_map(|(ip, port)| SocketAddr::new(IpAddr::from(ip), port)),
            (any::<[u8; 16]>(), any::<u16>())
                .prop_map(|(ip, port)| SocketAddr::new(IpAddr::from(ip), port)),
        ]
    }

    proptest! {
        #[test]
        fn offset_msg_id_round_trips(host in socket_addr(), offset in any::<i64>()) {
            let id = offset_msg_id(host, offset);
            prop_assert!(id.bytes().all(|b| b.is_ascii_digit() || (b'A'..=b'F').contains(&b)));
            let expected_len = if host.is_ipv4() { OFFSET_MSG_ID_V4_CHARS } else { OFFSET_MSG_ID_V6_CHARS };
            prop_assert_eq!(id.len(), expected_len);
            prop_assert_eq!(decode_offset_msg_id(&id), Ok((host, offset)));
        }

        #[test]
        fn decode_offset_msg_id_never_panics(
            id in prop_oneof!["\\PC{0,60}", "[0-9A-Fa-fG\u{e9}]{31,33}", "[0-9A-Fa-f\u{e9}]{54,57}"],
        ) {
            if let Err(e) = decode_offset_msg_id(&id) {
                prop_assert!(matches!(e, DecodeError::Corrupt { .. }), "{:?}", e);
            }
        }
    }
}
