//! Dashboard sessions: a random id in an `HttpOnly`, `SameSite=Strict`
//! cookie, a CSRF token per session, and — with ACL on — the admin client
//! signed with the keys the user logged in with (kept here, server-side;
//! never in a cookie or a page).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Read;
use std::sync::Arc;

use sluice_client::Admin;
use sluice_core::SystemClock;
use sluice_net::TlsTransport;

/// The admin client a session's wire calls go through.
pub type WireAdmin = Admin<TlsTransport, SystemClock>;

/// The session cookie's name.
pub const COOKIE: &str = "sluice_session";

/// Sessions idle this long are forgotten.
const IDLE_MS: u64 = 8 * 3600 * 1000;

/// Most sessions kept; past it the least recently seen is dropped.
const SESSIONS_MAX: usize = 4096;

/// One browser session.
#[derive(Clone)]
pub struct Session {
    /// The token every POST of this session must carry.
    pub csrf: String,
    /// The logged-in access key (ACL on), shown in the header.
    pub user: Option<String>,
    /// The client signed with the session's keys (ACL on, logged in).
    pub admin: Option<Arc<WireAdmin>>,
    seen_ms: u64,
}

/// Every live session by id.
#[derive(Default)]
pub struct Sessions {
    map: BTreeMap<String, Session>,
}

impl Sessions {
    /// The session `id`, marked as seen at `now_ms`, unless unknown or idle
    /// too long.
    pub fn get(&mut self, id: &str, now_ms: u64) -> Option<Session> {
        let s = self.map.get_mut(id)?;
        if now_ms.saturating_sub(s.seen_ms) > IDLE_MS {
            self.map.remove(id);
            return None;
        }
        s.seen_ms = now_ms;
        Some(s.clone())
    }

    /// Starts a session (not logged in) and returns its id and CSRF token.
    pub fn create(&mut self, now_ms: u64) -> std::io::Result<(String, Session)> {
        let id = random_hex()?;
        let session = Session {
            csrf: random_hex()?,
            user: None,
            admin: None,
            seen_ms: now_ms,
        };
        self.map
            .retain(|_, s| now_ms.saturating_sub(s.seen_ms) <= IDLE_MS);
        while self.map.len() >= SESSIONS_MAX {
            // Anonymous sessions go first: a flood of page views must not
            // log people out.
            let oldest = self
                .map
                .iter()
                .min_by_key(|(_, s)| (s.user.is_some(), s.seen_ms))
                .map(|(k, _)| k.clone());
            match oldest {
                Some(k) => self.map.remove(&k),
                None => break,
            };
        }
        self.map.insert(id.clone(), session.clone());
        Ok((id, session))
    }

    /// Replaces session `old` by a fresh id logged in as `user` with
    /// `admin` (a new id at login: a fixed session id cannot be hijacked).
    pub fn login(
        &mut self,
        old: &str,
        user: String,
        admin: Arc<WireAdmin>,
        now_ms: u64,
    ) -> std::io::Result<(String, Session)> {
        self.map.remove(old);
        let (id, mut session) = self.create(now_ms)?;
        session.user = Some(user);
        session.admin = Some(admin);
        self.map.insert(id.clone(), session.clone());
        Ok((id, session))
    }

    /// Ends session `id`; returns its client to shut down.
    pub fn remove(&mut self, id: &str) -> Option<Session> {
        self.map.remove(id)
    }
}

/// 32 bytes from the kernel's random source, hex-encoded.
fn random_hex() -> std::io::Result<String> {
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().fold(String::with_capacity(64), |mut out, b| {
        let _ = write!(out, "{b:02x}");
        out
    }))
}

/// The session id in a `Cookie` header value, if any.
pub fn cookie_id(header: &str) -> Option<&str> {
    header
        .split(';')
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == COOKIE)
        .map(|(_, v)| v)
}

/// The `Set-Cookie` value for session `id`.
pub fn set_cookie(id: &str) -> String {
    format!("{COOKIE}={id}; Path=/; HttpOnly; SameSite=Strict")
}

/// Whether `given` is `expected`, in time independent of where they differ.
pub fn token_eq(given: &str, expected: &str) -> bool {
    given.len() == expected.len()
        && given
            .bytes()
            .zip(expected.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_ids_are_random_and_expire_when_idle() {
        let mut s = Sessions::default();
        let (id, session) = s.create(1_000).expect("urandom");
        assert_eq!(id.len(), 64);
        assert_ne!(id, session.csrf);
        assert!(s.get(&id, 2_000).is_some());
        assert!(s.get(&id, 2_000 + IDLE_MS + 1).is_none());
        assert!(s.get("nope", 0).is_none());
    }

    #[test]
    fn a_full_store_drops_anonymous_sessions_before_logged_in_ones() {
        let mut s = Sessions::default();
        let (user, _) = s.create(1).expect("urandom");
        if let Some(session) = s.map.get_mut(&user) {
            session.user = Some("root".to_owned());
        }
        let (first_anon, _) = s.create(2).expect("urandom");
        for now in 3..=u64::try_from(SESSIONS_MAX).expect("small") + 1 {
            s.create(now).expect("urandom");
        }
        assert_eq!(s.map.len(), SESSIONS_MAX);
        assert!(
            s.get(&user, 10_000).is_some(),
            "the logged-in session stays"
        );
        assert!(
            s.get(&first_anon, 10_000).is_none(),
            "the oldest anonymous one went"
        );
    }

    #[test]
    fn cookies_and_tokens() {
        assert_eq!(cookie_id("a=b; sluice_session=xyz; c=d"), Some("xyz"));
        assert_eq!(cookie_id("sluice_sessionx=1"), None);
        assert!(token_eq("abc", "abc"));
        assert!(!token_eq("abd", "abc"));
        assert!(!token_eq("", "abc"));
        assert!(set_cookie("x").contains("HttpOnly; SameSite=Strict"));
    }
}
