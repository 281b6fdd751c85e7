//! Peer authentication on Sluice's internal ports — the replication (HA)
//! port and the controller port: before any other request on a connection
//! is served, the dialling side and the serving side prove to each other,
//! with a mutual HMAC-SHA256 challenge-response, that both hold the same
//! shared secret. Without a configured secret nothing changes.
//!
//! The exchange, on one connection (`realm` names the port and, for
//! replication, the broker group; `identity` names the dialler):
//!
//! 1. `AUTH_CHALLENGE {identity, nonce: Nc}` → the server draws `Ns` and
//!    answers `{nonce: Ns, proof: HMAC(K, "server" ‖ realm ‖ identity ‖ Nc ‖ Ns)}`;
//!    the dialler checks that proof (a peer without the secret cannot make it).
//! 2. `AUTH_PROVE {proof: HMAC(K, "client" ‖ realm ‖ identity ‖ Nc ‖ Ns)}`;
//!    the server checks it in constant time and only then marks the
//!    connection proven, for `identity`. Every other request on an
//!    unproven connection is refused `NO_PERMISSION` and logged (at most a
//!    line a second) with the peer's address.
//!
//! Replay: `Ns` is fresh per challenge (an HMAC under the secret of a
//! per-process salt, a counter, the connection id and the clock), is bound
//! to the connection it was issued on and is used once, so a recorded
//! proof is worthless on any other connection or challenge; the same holds
//! for the server's proof through `Nc`. A proof made for one realm,
//! identity or side never verifies for another. What it does not give: an
//! on-path attacker who can inject into an established, proven TCP stream
//! is not stopped (the proof covers the connection, not each frame), and
//! nothing is encrypted — use TLS for confidentiality and integrity.
//!
//! The identity is bound into both proofs; the HA port checks that a
//! replica's handshakes and fetches speak for the replica id it proved,
//! the controller port only logs it (any holder of the cluster secret is a
//! member). The server keeps per-connection state for at most
//! `guard::CONNECTIONS_MAX` connections, evicting unproven ones first.

mod guard;
mod proof;
mod prover;
mod secret;

pub use guard::{Gate, Guard};
pub use proof::{prove, verify, Nonce, Side, NONCE_BYTES};
pub use prover::{AuthError, Prover};
pub use secret::{process_salt, SharedSecret, SECRET_BYTES_MIN};

/// Request code: the dialler's nonce and identity; answered with the
/// server's nonce and proof.
pub const AUTH_CHALLENGE: i32 = 3_310;
/// Request code: the dialler's proof; answered `SUCCESS` once verified.
pub const AUTH_PROVE: i32 = 3_311;

/// `extFields` keys of the exchange.
pub(crate) const FIELD_IDENTITY: &str = "identity";
pub(crate) const FIELD_NONCE: &str = "nonce";
pub(crate) const FIELD_PROOF: &str = "proof";
