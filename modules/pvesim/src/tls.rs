//! TLS: a generated CA + server certificate (like a PVE cluster CA), or given PEM files.

use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::ServerConfig;

/// PEM material for the server.
pub struct Material {
    pub cert_chain_pem: String,
    pub key_pem: String,
    /// The CA to trust (`ca_path`); `None` for user-supplied certificates.
    pub ca_pem: Option<String>,
}

/// A fresh CA ("pvesim Cluster CA") and a leaf for localhost/127.0.0.1 signed by it.
pub fn generate() -> Result<Material, String> {
    let err = |e: rcgen::Error| format!("certificate generation failed: {e}");
    let ca_key = KeyPair::generate().map_err(err)?;
    let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(err)?;
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
    let ca_cert = ca.self_signed(&ca_key).map_err(err)?;
    let issuer = Issuer::new(ca, ca_key);

    let leaf_key = KeyPair::generate().map_err(err)?;
    let mut leaf = CertificateParams::new(vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "::1".to_string(),
    ])
    .map_err(err)?;
    leaf.distinguished_name
        .push(DnType::CommonName, "localhost");
    leaf.distinguished_name
        .push(DnType::OrganizationName, "PVE Cluster Node");
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    leaf.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    let leaf_cert = leaf.signed_by(&leaf_key, &issuer).map_err(err)?;
    Ok(Material {
        cert_chain_pem: format!("{}{}", leaf_cert.pem(), ca_cert.pem()),
        key_pem: leaf_key.serialize_pem(),
        ca_pem: Some(ca_cert.pem()),
    })
}

pub fn from_files(cert: &std::path::Path, key: &std::path::Path) -> Result<Material, String> {
    let read = |p: &std::path::Path| {
        std::fs::read_to_string(p).map_err(|e| format!("cannot read {}: {e}", p.display()))
    };
    Ok(Material {
        cert_chain_pem: read(cert)?,
        key_pem: read(key)?,
        ca_pem: None,
    })
}

pub fn server_config(m: &Material) -> Result<Arc<ServerConfig>, String> {
    let certs: Vec<CertificateDer<'static>> =
        rustls_pemfile::certs(&mut m.cert_chain_pem.as_bytes())
            .collect::<Result<_, _>>()
            .map_err(|e| format!("invalid certificate PEM: {e}"))?;
    if certs.is_empty() {
        return Err("no certificate found in PEM".into());
    }
    let key: PrivateKeyDer<'static> = rustls_pemfile::private_key(&mut m.key_pem.as_bytes())
        .map_err(|e| format!("invalid key PEM: {e}"))?
        .ok_or("no private key found in PEM")?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let cfg = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| format!("invalid certificate/key: {e}"))?;
    Ok(Arc::new(cfg))
}
