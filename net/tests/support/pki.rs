//! A throwaway PKI minted at test time with rcgen (no key is ever
//! committed): one CA, a server certificate for `localhost` and 127.0.0.1,
//! a client certificate, and a second CA nobody trusts. Shared by the net,
//! node and client TLS tests through `#[path]`.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair,
};

/// PEM files written into one directory.
pub struct Pki {
    /// The CA every certificate below chains to.
    pub ca: PathBuf,
    /// Server certificate (SANs `localhost`, 127.0.0.1) and its key.
    pub server_cert: PathBuf,
    /// The server certificate's private key.
    pub server_key: PathBuf,
    /// A client certificate (for mutual TLS) and its key.
    pub client_cert: PathBuf,
    /// The client certificate's private key.
    pub client_key: PathBuf,
    /// A CA that signed nothing here: trusting it alone must fail.
    pub other_ca: PathBuf,
}

fn ca(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("ca params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    CertifiedIssuer::self_signed(params, KeyPair::generate().expect("ca key")).expect("ca cert")
}

fn leaf(
    issuer: &CertifiedIssuer<'static, KeyPair>,
    names: &[&str],
    usage: ExtendedKeyUsagePurpose,
) -> (String, String) {
    let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
    let mut params = CertificateParams::new(names).expect("leaf params");
    params.extended_key_usages = vec![usage];
    params
        .distinguished_name
        .push(DnType::CommonName, "sluice test");
    let key = KeyPair::generate().expect("leaf key");
    let cert = params.signed_by(&key, issuer).expect("leaf cert");
    (cert.pem(), key.serialize_pem())
}

fn write(dir: &Path, name: &str, pem: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, pem).expect("write pem");
    path
}

impl Pki {
    /// Mints the PKI into `dir`.
    pub fn mint(dir: &Path) -> Self {
        let root = ca("sluice test CA");
        let (server_cert, server_key) = leaf(
            &root,
            &["localhost", "127.0.0.1"],
            ExtendedKeyUsagePurpose::ServerAuth,
        );
        let (client_cert, client_key) =
            leaf(&root, &["client.test"], ExtendedKeyUsagePurpose::ClientAuth);
        Self {
            ca: write(dir, "ca.pem", &root.pem()),
            server_cert: write(dir, "server.pem", &server_cert),
            server_key: write(dir, "server-key.pem", &server_key),
            client_cert: write(dir, "client.pem", &client_cert),
            client_key: write(dir, "client-key.pem", &client_key),
            other_ca: write(dir, "other-ca.pem", &ca("stranger CA").pem()),
        }
    }
}
