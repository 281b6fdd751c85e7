//! Builds rustls server and client configurations from PEM files, always on
//! the ring provider with rustls' safe default protocol versions (TLS 1.2
//! and 1.3). The only unverified path is the explicit `insecure` dial.

use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig, SignatureScheme};

use crate::{Error, Result};

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn tls_error(what: String, source: impl std::error::Error + Send + Sync + 'static) -> Error {
    Error::Tls {
        what,
        source: Box::new(source),
    }
}

/// Every certificate in the PEM file at `path` (at least one).
fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>> {
    let what = || format!("certificates {}", path.display());
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| tls_error(what(), e))?
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| tls_error(what(), e))?;
    if certs.is_empty() {
        return Err(Error::Tls {
            what: what(),
            source: "no CERTIFICATE block in the file".into(),
        });
    }
    Ok(certs)
}

/// The first private key in the PEM file at `path`.
fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>> {
    PrivateKeyDer::from_pem_file(path)
        .map_err(|e| tls_error(format!("private key {}", path.display()), e))
}

/// A trust store holding every certificate of the PEM file at `path`.
fn roots(path: &Path) -> Result<Arc<RootCertStore>> {
    let mut store = RootCertStore::empty();
    for cert in certificates(path)? {
        store
            .add(cert)
            .map_err(|e| tls_error(format!("CA certificate {}", path.display()), e))?;
    }
    Ok(Arc::new(store))
}

/// A server configuration presenting `cert` with `key`; with `client_ca`,
/// clients must present a certificate chaining to it.
pub(super) fn server(
    cert: &Path,
    key: &Path,
    client_ca: Option<&Path>,
) -> Result<Arc<ServerConfig>> {
    let builder = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| tls_error("server protocol versions".to_owned(), e))?;
    let builder = match client_ca {
        Some(ca) => {
            let verifier = WebPkiClientVerifier::builder_with_provider(roots(ca)?, provider())
                .build()
                .map_err(|e| tls_error(format!("client_ca {}", ca.display()), e))?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let config = builder
        .with_single_cert(certificates(cert)?, private_key(key)?)
        .map_err(|e| tls_error(format!("server certificate {}", cert.display()), e))?;
    Ok(Arc::new(config))
}

/// A client configuration trusting `ca` (none: trusting any certificate),
/// presenting `identity` (certificate, key) when given.
pub(super) fn client(
    ca: Option<&Path>,
    identity: Option<(&Path, &Path)>,
) -> Result<Arc<ClientConfig>> {
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| tls_error("client protocol versions".to_owned(), e))?;
    let builder = match ca {
        Some(ca) => builder.with_root_certificates(roots(ca)?),
        None => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(TrustAnyServer(provider()))),
    };
    let config = match identity {
        Some((cert, key)) => builder
            .with_client_auth_cert(certificates(cert)?, private_key(key)?)
            .map_err(|e| tls_error(format!("client certificate {}", cert.display()), e))?,
        None => builder.with_no_client_auth(),
    };
    Ok(Arc::new(config))
}

/// Accepts any server certificate (the `insecure` setting), still checking
/// that the handshake is signed by the key the certificate carries.
#[derive(Debug)]
struct TrustAnyServer(Arc<CryptoProvider>);

impl ServerCertVerifier for TrustAnyServer {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
