//! Server-certificate trust: the CAs the user named (`ca_path`, inline PEM) plus the platform trust store,
//! with the platform store loaded only when the named CAs do not vouch for the server.
//!
//! Why not one root store built up front: reading and parsing the OS store (hundreds of PEM files under
//! /etc/ssl/certs) costs a module run about as much CPU as all its API calls against a nearby Proxmox. Most
//! runs either name the server's CA or talk to a server signed by one, so they never need the OS store; a
//! server signed by a public or corporate CA still verifies, because the OS store is consulted on a miss.
//! Accepting a certificate when either store vouches for it is exactly what a merged root store accepts.

use std::fmt;
use std::sync::{Arc, OnceLock};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{self, CryptoProvider};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};

/// Why a set of certificates, a key or a verifier could not be had.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    #[error(
        "the system trust store has no CA certificates{}; give the server's CA with ca_path",
        .first.as_ref().map(|e| format!(" ({e})")).unwrap_or_default()
    )]
    NoSystemCerts {
        /// The first error met while reading the store, the likeliest reason it came up empty.
        #[source]
        first: Option<rustls_native_certs::Error>,
    },
    #[error("{0}")]
    File(#[source] std::io::Error),
    #[error("{0}")]
    Pem(#[source] std::io::Error),
    #[error("no PEM certificate found")]
    NoCertificate,
    #[error("no PEM private key found")]
    NoPrivateKey,
    #[error("none of the CA certificates could be parsed")]
    NoParsableCa,
    #[error("{0}")]
    Verifier(#[source] rustls::client::VerifierBuilderError),
    #[cfg(test)]
    #[error("{0}")]
    Test(&'static str),
}

/// Loads the platform's CA certificates; injectable so tests need not touch the real OS store.
pub(crate) type PlatformLoader = fn() -> Result<Vec<CertificateDer<'static>>, TrustError>;

/// The OS trust store, honouring `SSL_CERT_FILE` / `SSL_CERT_DIR` like OpenSSL-based tools do.
pub(crate) fn load_platform_roots() -> Result<Vec<CertificateDer<'static>>, TrustError> {
    let mut found = rustls_native_certs::load_native_certs();
    if found.certs.is_empty() {
        let first = (!found.errors.is_empty()).then(|| found.errors.swap_remove(0));
        return Err(TrustError::NoSystemCerts { first });
    }
    Ok(found.certs)
}

pub(crate) fn provider() -> Arc<CryptoProvider> {
    Arc::new(crypto::ring::default_provider())
}

/// Parses every certificate in a PEM bundle; an input with none is an error.
pub(crate) fn parse_pem_certs(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, TrustError> {
    let certs: Vec<_> = rustls_pemfile::certs(&mut &pem[..])
        .collect::<Result<_, _>>()
        .map_err(TrustError::Pem)?;
    if certs.is_empty() {
        return Err(TrustError::NoCertificate);
    }
    Ok(certs)
}

/// A client identity (certificate chain and private key) from one PEM blob.
pub(crate) fn parse_identity(
    pem: &[u8],
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), TrustError> {
    let certs = parse_pem_certs(pem)?;
    let key = rustls_pemfile::private_key(&mut &pem[..])
        .map_err(TrustError::Pem)?
        .ok_or(TrustError::NoPrivateKey)?;
    Ok((certs, key))
}

fn webpki(
    certs: Vec<CertificateDer<'static>>,
    provider: &Arc<CryptoProvider>,
) -> Result<Arc<WebPkiServerVerifier>, TrustError> {
    let mut roots = RootCertStore::empty();
    let (added, _ignored) = roots.add_parsable_certificates(certs);
    if added == 0 {
        return Err(TrustError::NoParsableCa);
    }
    WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(TrustError::Verifier)
}

/// Verifies against the named CAs first and falls back to the platform store, loaded on first need.
/// With `accept_any` (`validate_certs: false`) any server certificate is accepted; the handshake
/// signatures are still checked, so the session is at least bound to the certificate the server showed.
pub(crate) struct ServerTrust {
    accept_any: bool,
    named: Option<Arc<WebPkiServerVerifier>>,
    platform: OnceLock<Result<Arc<WebPkiServerVerifier>, TrustError>>,
    load_platform: PlatformLoader,
    provider: Arc<CryptoProvider>,
}

impl ServerTrust {
    pub(crate) fn new(
        named: Vec<CertificateDer<'static>>,
        load_platform: PlatformLoader,
        provider: Arc<CryptoProvider>,
    ) -> Result<Self, TrustError> {
        let named = if named.is_empty() {
            None
        } else {
            Some(webpki(named, &provider)?)
        };
        Ok(ServerTrust {
            accept_any: false,
            named,
            platform: OnceLock::new(),
            load_platform,
            provider,
        })
    }

    pub(crate) fn accept_any(provider: Arc<CryptoProvider>) -> Self {
        ServerTrust {
            accept_any: true,
            named: None,
            platform: OnceLock::new(),
            load_platform: load_platform_roots,
            provider,
        }
    }

    fn platform(&self) -> Result<&Arc<WebPkiServerVerifier>, rustls::Error> {
        self.platform
            .get_or_init(|| (self.load_platform)().and_then(|c| webpki(c, &self.provider)))
            .as_ref()
            .map_err(|e| rustls::Error::General(e.to_string()))
    }

    #[cfg(test)]
    pub(crate) fn platform_loaded(&self) -> bool {
        self.platform.get().is_some()
    }
}

impl fmt::Debug for ServerTrust {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerTrust")
            .field("accept_any", &self.accept_any)
            .field("named_cas", &self.named.is_some())
            .field("platform_loaded", &self.platform.get().is_some())
            .finish()
    }
}

impl ServerCertVerifier for ServerTrust {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if self.accept_any {
            return Ok(ServerCertVerified::assertion());
        }
        let Some(named) = &self.named else {
            return self.platform()?.verify_server_cert(
                end_entity,
                intermediates,
                server_name,
                ocsp,
                now,
            );
        };
        match named.verify_server_cert(end_entity, intermediates, server_name, ocsp, now) {
            Ok(ok) => Ok(ok),
            // The named CA's verdict is the one to report when the OS store cannot help either: it
            // is about the CA the user pointed at.
            Err(named_err) => match self.platform() {
                Ok(platform) => platform
                    .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
                    .map_err(|_| named_err),
                Err(_) => Err(named_err),
            },
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Pki {
        ca_pem: String,
        leaf: CertificateDer<'static>,
    }

    /// A CA and a leaf for `localhost` signed by it.
    fn pki(name: &str) -> Pki {
        use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
        let ca_key = KeyPair::generate().unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        let ca = ca_params.self_signed(&ca_key).unwrap();
        let issuer = rcgen::Issuer::new(ca_params, ca_key);
        let leaf_key = KeyPair::generate().unwrap();
        let leaf = CertificateParams::new(vec!["localhost".to_string()])
            .unwrap()
            .signed_by(&leaf_key, &issuer)
            .unwrap();
        Pki {
            ca_pem: ca.pem(),
            leaf: leaf.der().clone(),
        }
    }

    fn verify(v: &ServerTrust, leaf: &CertificateDer<'_>) -> Result<(), String> {
        let name = ServerName::try_from("localhost").unwrap();
        v.verify_server_cert(leaf, &[], &name, &[], UnixTime::now())
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    fn no_platform_store() -> Result<Vec<CertificateDer<'static>>, TrustError> {
        Err(TrustError::Test("no platform store in this test"))
    }

    thread_local! {
        static PLATFORM_PEM: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
    }

    fn platform_from_test() -> Result<Vec<CertificateDer<'static>>, TrustError> {
        PLATFORM_PEM.with(|p| parse_pem_certs(p.borrow().as_bytes()))
    }

    #[test]
    fn a_server_signed_by_the_named_ca_never_loads_the_platform_store() {
        let a = pki("ca-a");
        let v = ServerTrust::new(
            parse_pem_certs(a.ca_pem.as_bytes()).unwrap(),
            no_platform_store,
            provider(),
        )
        .unwrap();
        verify(&v, &a.leaf).unwrap();
        assert!(!v.platform_loaded());
    }

    #[test]
    fn a_server_signed_by_another_ca_falls_back_to_the_platform_store() {
        let (a, b) = (pki("ca-a"), pki("ca-b"));
        PLATFORM_PEM.with(|p| *p.borrow_mut() = b.ca_pem.clone());
        let v = ServerTrust::new(
            parse_pem_certs(a.ca_pem.as_bytes()).unwrap(),
            platform_from_test,
            provider(),
        )
        .unwrap();
        verify(&v, &b.leaf).unwrap();
        assert!(v.platform_loaded());
    }

    #[test]
    fn a_server_neither_store_knows_is_refused_as_unknown_issuer() {
        let (a, b, c) = (pki("ca-a"), pki("ca-b"), pki("ca-c"));
        PLATFORM_PEM.with(|p| *p.borrow_mut() = b.ca_pem.clone());
        let v = ServerTrust::new(
            parse_pem_certs(a.ca_pem.as_bytes()).unwrap(),
            platform_from_test,
            provider(),
        )
        .unwrap();
        let e = verify(&v, &c.leaf).unwrap_err();
        assert!(e.contains("UnknownIssuer"), "{e}");
        // An unreadable platform store still reports the certificate problem, not the store.
        let v = ServerTrust::new(
            parse_pem_certs(a.ca_pem.as_bytes()).unwrap(),
            no_platform_store,
            provider(),
        )
        .unwrap();
        let e = verify(&v, &c.leaf).unwrap_err();
        assert!(e.contains("UnknownIssuer"), "{e}");
    }

    #[test]
    fn without_named_cas_the_platform_store_decides_and_its_absence_is_explained() {
        let b = pki("ca-b");
        PLATFORM_PEM.with(|p| *p.borrow_mut() = b.ca_pem.clone());
        let v = ServerTrust::new(vec![], platform_from_test, provider()).unwrap();
        verify(&v, &b.leaf).unwrap();
        let v = ServerTrust::new(vec![], no_platform_store, provider()).unwrap();
        let e = verify(&v, &b.leaf).unwrap_err();
        assert!(e.contains("no platform store"), "{e}");
    }

    #[test]
    fn accept_any_takes_a_certificate_nobody_vouches_for() {
        let c = pki("ca-c");
        let v = ServerTrust::accept_any(provider());
        verify(&v, &c.leaf).unwrap();
        assert!(!v.platform_loaded());
    }

    #[test]
    fn identity_needs_both_certificate_and_key() {
        let a = pki("ca-a");
        let e = parse_identity(a.ca_pem.as_bytes()).unwrap_err().to_string();
        assert!(e.contains("private key"), "{e}");
        assert!(parse_identity(b"junk")
            .unwrap_err()
            .to_string()
            .contains("no PEM certificate"));
    }
}
