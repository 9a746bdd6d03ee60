//! TLS: a generated CA + server certificate (like a PVE cluster CA), or given PEM files.

use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::ServerConfig;

/// Why the server's TLS material cannot be made or used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("certificate generation failed: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("cannot read {path}: {source}")]
    Read {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("invalid certificate PEM: {0}")]
    CertPem(#[source] std::io::Error),
    #[error("no certificate found in PEM")]
    NoCert,
    #[error("invalid key PEM: {0}")]
    KeyPem(#[source] std::io::Error),
    #[error("no private key found in PEM")]
    NoKey,
    #[error("{0}")]
    Protocols(#[source] rustls::Error),
    #[error("invalid certificate/key: {0}")]
    CertKey(#[source] rustls::Error),
}

/// PEM material for the server.
pub struct Material {
    pub cert_chain_pem: String,
    pub key_pem: String,
    /// The CA to trust (`ca_path`); `None` for user-supplied certificates.
    pub ca_pem: Option<String>,
}

/// A fresh CA ("pvesim Cluster CA") and a leaf for localhost/127.0.0.1 signed by it.
pub fn generate() -> Result<Material, TlsError> {
    let ca_key = KeyPair::generate()?;
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "pvesim Cluster CA");
    ca.distinguished_name
        .push(DnType::OrganizationName, "PVE Cluster Manager CA");
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca, ca_key);

    let leaf_key = KeyPair::generate()?;
    let mut leaf = CertificateParams::new(vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "::1".to_string(),
    ])?;
    leaf.distinguished_name
        .push(DnType::CommonName, "localhost");
    leaf.distinguished_name
        .push(DnType::OrganizationName, "PVE Cluster Node");
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    leaf.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    let leaf_cert = leaf.signed_by(&leaf_key, &issuer)?;
    Ok(Material {
        cert_chain_pem: format!("{}{}", leaf_cert.pem(), ca_cert.pem()),
        key_pem: leaf_key.serialize_pem(),
        ca_pem: Some(ca_cert.pem()),
    })
}

pub fn from_files(cert: &std::path::Path, key: &std::path::Path) -> Result<Material, TlsError> {
    let read = |p: &std::path::Path| {
        std::fs::read_to_string(p).map_err(|source| TlsError::Read {
            path: p.to_path_buf(),
            source,
        })
    };
    Ok(Material {
        cert_chain_pem: read(cert)?,
        key_pem: read(key)?,
        ca_pem: None,
    })
}

pub fn server_config(m: &Material) -> Result<Arc<ServerConfig>, TlsError> {
    let certs: Vec<CertificateDer<'static>> =
        rustls_pemfile::certs(&mut m.cert_chain_pem.as_bytes())
            .collect::<Result<_, _>>()
            .map_err(TlsError::CertPem)?;
    if certs.is_empty() {
        return Err(TlsError::NoCert);
    }
    let key: PrivateKeyDer<'static> = rustls_pemfile::private_key(&mut m.key_pem.as_bytes())
        .map_err(TlsError::KeyPem)?
        .ok_or(TlsError::NoKey)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let cfg = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Protocols)?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(TlsError::CertKey)?;
    Ok(Arc::new(cfg))
}
