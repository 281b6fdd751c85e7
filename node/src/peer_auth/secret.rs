//! `SharedSecret`: the key a group's replicas or a cluster's controllers
//! share, never printed; and the per-process salt that keeps nonces
//! distinct across restarts.

use std::fmt;
use std::hash::BuildHasher;
use std::path::Path;
use std::sync::Arc;

use crate::error::{Error, Result};

/// The shortest secret accepted, in bytes.
pub const SECRET_BYTES_MIN: usize = 16;

/// A shared secret. `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct SharedSecret {
    key: Arc<[u8]>,
    salt: u64,
}

impl SharedSecret {
    /// A secret of `bytes` (at least [`SECRET_BYTES_MIN`]), with salt 0:
    /// deterministic, as tests and simulations need.
    pub fn new(bytes: impl AsRef<[u8]>) -> Result<Self> {
        let bytes = bytes.as_ref();
        if bytes.len() < SECRET_BYTES_MIN {
            return Err(Error::Config(format!(
                "a shared secret needs at least {SECRET_BYTES_MIN} bytes, got {}",
                bytes.len()
            )));
        }
        Ok(Self {
            key: Arc::from(bytes),
            salt: 0,
        })
    }

    /// The secret in the file at `path`, without its trailing line break.
    pub fn from_file(path: &Path) -> Result<Self> {
        let text = std::fs::read(path).map_err(|e| {
            Error::Config(format!("cannot read secret file {}: {e}", path.display()))
        })?;
        let end = text
            .iter()
            .rposition(|b| !b.is_ascii_whitespace())
            .map_or(0, |i| i + 1);
        Self::new(&text[..end])
    }

    /// One of an inline value and a file, or none; both is an error.
    pub fn from_value_or_file(
        what: &str,
        value: Option<&str>,
        file: Option<&Path>,
    ) -> Result<Option<Self>> {
        match (value, file) {
            (Some(_), Some(_)) => Err(Error::Config(format!(
                "{what}: give the secret or a file, not both"
            ))),
            (Some(v), None) => Self::new(v.as_bytes())
                .map(Some)
                .map_err(|e| Error::Config(format!("{what}: {e}"))),
            (None, Some(path)) => Self::from_file(path)
                .map(Some)
                .map_err(|e| Error::Config(format!("{what}: {e}"))),
            (None, None) => Ok(None),
        }
    }

    /// This secret with `salt` mixed into every nonce it draws (production:
    /// [`process_salt`]).
    #[must_use]
    pub fn salted(mut self, salt: u64) -> Self {
        self.salt = salt;
        self
    }

    pub(crate) fn key(&self) -> &[u8] {
        &self.key
    }

    pub(crate) fn salt(&self) -> u64 {
        self.salt
    }
}

impl fmt::Debug for SharedSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SharedSecret(..)")
    }
}

/// A salt that differs between processes (the OS seeds the standard
/// library's hasher keys): the production seam for nonce freshness across
/// restarts. Simulations keep salt 0 and stay deterministic.
pub fn process_salt() -> u64 {
    std::hash::RandomState::new().hash_one("sluice peer auth salt")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_secrets_are_refused_and_debug_hides_the_key() {
        assert!(SharedSecret::new("short").is_err());
        let s = SharedSecret::new("0123456789abcdef-secret").expect("long enough");
        assert_eq!(format!("{s:?}"), "SharedSecret(..)");
    }

    #[test]
    fn a_secret_file_loses_its_trailing_newline() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("secret");
        std::fs::write(&path, "0123456789abcdef-secret\n").expect("write");
        let from_file = SharedSecret::from_file(&path).expect("read");
        assert_eq!(
            from_file,
            SharedSecret::new("0123456789abcdef-secret").expect("new")
        );
        let both = SharedSecret::from_value_or_file("x", Some("0123456789abcdef"), Some(&path));
        assert!(both.is_err(), "both a value and a file");
    }
}
