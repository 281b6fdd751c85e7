//! RocketMQ ACL 1.0 request signatures, as every 4.x client computes them:
//! the values of all `extFields` sorted by key (but `Signature` and the
//! query flag `_UNIQUE_KEY_QUERY`), concatenated, then the body bytes;
//! `Signature = Base64(HmacSHA1(secretKey, that content))`. Signing and
//! verifying read the same content, so a field altered after signing fails
//! verification; verification compares in constant time.

use std::fmt;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha1::Sha1;

use crate::RemotingCommand;

/// `extFields` key of the access key.
pub const ACCESS_KEY: &str = "AccessKey";
/// `extFields` key of the signature (added last, never signed).
pub const SIGNATURE: &str = "Signature";
/// `extFields` key of an STS security token, signed like any field.
pub const SECURITY_TOKEN: &str = "SecurityToken";
/// A field Java's client adds after signing a by-unique-key query; the
/// broker leaves it out of the content, as Apache's does.
pub const UNIQUE_MSG_QUERY_FLAG: &str = "_UNIQUE_KEY_QUERY";

type HmacSha1 = Hmac<Sha1>;

/// An access key and its secret; signs requests. The secret never appears
/// in `Debug` output.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    access_key: String,
    secret_key: String,
    security_token: Option<String>,
}

impl Credentials {
    /// Credentials for `access_key` with `secret_key`.
    pub fn new(access_key: impl Into<String>, secret_key: impl Into<String>) -> Self {
        Self {
            access_key: access_key.into(),
            secret_key: secret_key.into(),
            security_token: None,
        }
    }

    /// Adds an STS security token, sent (and signed) as `SecurityToken`.
    #[must_use]
    pub fn with_security_token(mut self, token: impl Into<String>) -> Self {
        self.security_token = Some(token.into());
        self
    }

    /// The access key.
    pub fn access_key(&self) -> &str {
        &self.access_key
    }

    /// Signs `request` in place: adds `AccessKey` (and `SecurityToken`),
    /// then `Signature` over every other field and the body. Signing twice
    /// gives the same fields.
    pub fn sign(&self, request: &mut RemotingCommand) {
        request.ext_fields.remove(SIGNATURE);
        request.ext_fields.insert(ACCESS_KEY, &self.access_key);
        if let Some(token) = &self.security_token {
            request.ext_fields.insert(SECURITY_TOKEN, token);
        }
        let signature = signature(self.secret_key.as_bytes(), request);
        request.ext_fields.insert(SIGNATURE, signature);
    }
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("access_key", &self.access_key)
            .field("secret_key", &"<redacted>")
            .finish_non_exhaustive()
    }
}

fn mac(secret: &[u8], request: &RemotingCommand) -> HmacSha1 {
    let mut mac =
        HmacSha1::new_from_slice(secret).expect("invariant: HMAC takes keys of any length");
    for (key, value) in request.ext_fields.iter() {
        if key != SIGNATURE && key != UNIQUE_MSG_QUERY_FLAG {
            mac.update(value.as_bytes());
        }
    }
    mac.update(&request.body);
    for chunk in &request.body_chunks {
        mac.update(chunk);
    }
    mac
}

/// The signature a client holding `secret` sends with `request`.
pub fn signature(secret: &[u8], request: &RemotingCommand) -> String {
    STANDARD.encode(mac(secret, request).finalize().into_bytes())
}

/// True when `request` carries a `Signature` made with `secret` over its
/// fields and body as received. Constant time in the signature compared.
pub fn verify(secret: &[u8], request: &RemotingCommand) -> bool {
    let Some(sent) = request.ext_fields.get(SIGNATURE) else {
        return false;
    };
    let Ok(sent) = STANDARD.decode(sent.trim()) else {
        return false;
    };
    mac(secret, request).verify_slice(&sent).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> RemotingCommand {
        let mut r = RemotingCommand::request(10).with_body(&b"hello"[..]);
        r.ext_fields.insert("topic", "T");
        r.ext_fields.insert("producerGroup", "P");
        r
    }

    #[test]
    fn signature_matches_rocketmq_content_order() {
        // Content: values sorted by key (AccessKey, producerGroup, topic)
        // then the body: "ak" + "P" + "T" + "hello". The expected value is
        // Base64(HmacSHA1("secret", "akPThello")), computed independently
        // with Python's hmac module.
        let mut r = request();
        Credentials::new("ak", "secret").sign(&mut r);
        assert_eq!(
            r.ext_fields.get(SIGNATURE),
            Some("5TEWuTQLbZ057hv7Q1INfv6rJt8=")
        );
        assert_eq!(r.ext_fields.get(ACCESS_KEY), Some("ak"));
        assert!(verify(b"secret", &r));
    }

    #[test]
    fn altered_fields_body_or_secret_fail_verification() {
        let mut r = request();
        Credentials::new("ak", "secret").sign(&mut r);
        assert!(!verify(b"wrong", &r));
        let mut altered = r.clone();
        altered.ext_fields.insert("topic", "Other");
        assert!(!verify(b"secret", &altered));
        let mut added = r.clone();
        added.ext_fields.insert("extra", "x");
        assert!(!verify(b"secret", &added));
        let mut body = r.clone();
        body.body = bytes::Bytes::from_static(b"hellO");
        assert!(!verify(b"secret", &body));
        let mut flagged = r.clone();
        flagged.ext_fields.insert(UNIQUE_MSG_QUERY_FLAG, "true");
        assert!(verify(b"secret", &flagged), "the query flag is not signed");
        let mut garbage = r;
        garbage.ext_fields.insert(SIGNATURE, "%%not base64%%");
        assert!(!verify(b"secret", &garbage));
        assert!(!verify(b"secret", &request()), "unsigned");
    }

    #[test]
    fn chunked_and_whole_bodies_sign_alike_and_debug_hides_the_secret() {
        let creds = Credentials::new("ak", "secret").with_security_token("tok");
        let mut whole = request();
        creds.sign(&mut whole);
        let mut chunked = request().with_body_chunks(vec![
            bytes::Bytes::from_static(b"he"),
            bytes::Bytes::from_static(b"llo"),
        ]);
        creds.sign(&mut chunked);
        assert_eq!(
            whole.ext_fields.get(SIGNATURE),
            chunked.ext_fields.get(SIGNATURE)
        );
        assert_eq!(whole.ext_fields.get(SECURITY_TOKEN), Some("tok"));
        assert!(!format!("{creds:?}").contains("secret\""));
    }
}
