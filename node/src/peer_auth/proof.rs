//! The proofs of the exchange: HMAC-SHA256 under the shared secret over a
//! side label, the realm, the dialler's identity and both nonces, each
//! length-prefixed so no two different inputs share an encoding. Checked
//! with `verify_slice` (constant time).

use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::SharedSecret;

type HmacSha256 = Hmac<Sha256>;

/// Bytes in a nonce (and in a proof).
pub const NONCE_BYTES: usize = 32;

/// A challenge nonce.
pub type Nonce = [u8; NONCE_BYTES];

/// Which side of the exchange a proof comes from: a proof never verifies
/// for the other side, so neither can reflect the other's proof back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// The side that answered the challenge (the master, the controller).
    Server,
    /// The side that dialled (the replica, the broker, the peer controller).
    Client,
}

impl Side {
    fn label(self) -> &'static [u8] {
        match self {
            Self::Server => b"sluice-auth-v1 server",
            Self::Client => b"sluice-auth-v1 client",
        }
    }
}

/// An HMAC under `secret` over length-prefixed `parts`.
fn mac(secret: &SharedSecret, parts: &[&[u8]]) -> HmacSha256 {
    let mut m = HmacSha256::new_from_slice(secret.key())
        .expect("invariant: HMAC accepts keys of any length");
    for part in parts {
        m.update(&(part.len() as u64).to_be_bytes());
        m.update(part);
    }
    m
}

/// The MAC both [`prove`] and [`verify`] compute: `side`'s label, the
/// realm, the identity and both nonces, under `secret`.
fn transcript(
    secret: &SharedSecret,
    side: Side,
    realm: &str,
    identity: &str,
    client_nonce: &Nonce,
    server_nonce: &Nonce,
) -> HmacSha256 {
    mac(
        secret,
        &[
            side.label(),
            realm.as_bytes(),
            identity.as_bytes(),
            client_nonce,
            server_nonce,
        ],
    )
}

/// The proof `side` gives for `identity` in `realm` over both nonces.
pub fn prove(
    secret: &SharedSecret,
    side: Side,
    realm: &str,
    identity: &str,
    client_nonce: &Nonce,
    server_nonce: &Nonce,
) -> Nonce {
    transcript(secret, side, realm, identity, client_nonce, server_nonce)
        .finalize()
        .into_bytes()
        .into()
}

/// Whether `proof` is the one `side` gives for these inputs (constant time).
pub fn verify(
    secret: &SharedSecret,
    side: Side,
    realm: &str,
    identity: &str,
    client_nonce: &Nonce,
    server_nonce: &Nonce,
    proof: &[u8],
) -> bool {
    transcript(secret, side, realm, identity, client_nonce, server_nonce)
        .verify_slice(proof)
        .is_ok()
}

/// A fresh nonce: unpredictable without the secret, distinct for distinct
/// `(salt, what, counter, context)`.
pub(crate) fn draw_nonce(
    secret: &SharedSecret,
    what: &str,
    counter: u64,
    context: &[u64],
) -> Nonce {
    let context: Vec<u8> = context.iter().flat_map(|v| v.to_be_bytes()).collect();
    mac(
        secret,
        &[
            b"sluice-auth-v1 nonce",
            what.as_bytes(),
            &secret.salt().to_be_bytes(),
            &counter.to_be_bytes(),
            &context,
        ],
    )
    .finalize()
    .into_bytes()
    .into()
}

/// A nonce or proof as it travels in `extFields`.
pub(crate) fn encode(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A nonce from `extFields`; `None` unless it is exactly [`NONCE_BYTES`].
pub(crate) fn decode(text: Option<&str>) -> Option<Nonce> {
    use base64::Engine as _;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text?)
        .ok()?;
    Nonce::try_from(bytes.as_slice()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(s: &str) -> SharedSecret {
        SharedSecret::new(s).expect("long enough")
    }

    const NC: Nonce = [1; NONCE_BYTES];
    const NS: Nonce = [2; NONCE_BYTES];

    #[test]
    fn the_right_secret_is_accepted() {
        let k = secret("group-secret-0123456789");
        let p = prove(&k, Side::Client, "ha/broker-a", "1", &NC, &NS);
        assert!(verify(&k, Side::Client, "ha/broker-a", "1", &NC, &NS, &p));
    }

    #[test]
    fn a_wrong_secret_is_refused() {
        let k = secret("group-secret-0123456789");
        let p = prove(
            &secret("another-secret-987654321"),
            Side::Client,
            "ha/broker-a",
            "1",
            &NC,
            &NS,
        );
        assert!(!verify(&k, Side::Client, "ha/broker-a", "1", &NC, &NS, &p));
    }

    #[test]
    fn a_proof_for_another_group_identity_or_side_is_refused() {
        let k = secret("group-secret-0123456789");
        let p = prove(&k, Side::Client, "ha/broker-a", "1", &NC, &NS);
        assert!(
            !verify(&k, Side::Client, "ha/broker-b", "1", &NC, &NS, &p),
            "group"
        );
        assert!(
            !verify(&k, Side::Client, "ha/broker-a", "2", &NC, &NS, &p),
            "replica id"
        );
        assert!(
            !verify(&k, Side::Server, "ha/broker-a", "1", &NC, &NS, &p),
            "side"
        );
    }

    #[test]
    fn a_replayed_proof_for_another_nonce_is_refused() {
        let k = secret("group-secret-0123456789");
        let p = prove(&k, Side::Client, "controller", "broker/a/1", &NC, &NS);
        let fresh: Nonce = [3; NONCE_BYTES];
        assert!(!verify(
            &k,
            Side::Client,
            "controller",
            "broker/a/1",
            &NC,
            &fresh,
            &p
        ));
        assert!(!verify(
            &k,
            Side::Client,
            "controller",
            "broker/a/1",
            &fresh,
            &NS,
            &p
        ));
        assert!(!verify(
            &k,
            Side::Client,
            "controller",
            "broker/a/1",
            &NC,
            &NS,
            &p[..31]
        ));
    }

    #[test]
    fn length_prefixes_keep_shifted_fields_apart() {
        let k = secret("group-secret-0123456789");
        let p = prove(&k, Side::Client, "ha/a", "b1", &NC, &NS);
        assert!(!verify(&k, Side::Client, "ha/ab", "1", &NC, &NS, &p));
    }

    #[test]
    fn nonces_differ_by_counter_salt_and_context_and_round_trip() {
        let k = secret("group-secret-0123456789");
        let a = draw_nonce(&k, "server", 1, &[7]);
        assert_ne!(a, draw_nonce(&k, "server", 2, &[7]));
        assert_ne!(a, draw_nonce(&k, "server", 1, &[8]));
        assert_ne!(a, draw_nonce(&k.clone().salted(9), "server", 1, &[7]));
        assert_eq!(a, draw_nonce(&k, "server", 1, &[7]), "deterministic");
        assert_eq!(decode(Some(&encode(&a))), Some(a));
        assert_eq!(decode(Some(&encode(&a[..31]))), None);
        assert_eq!(decode(Some("not base64!")), None);
    }
}
