//! A PEM bundle's leaf certificate (the first `CERTIFICATE` block, as a Secret's `tls.crt` holds it)
//! and the facts a report shows, parsed by x509-parser.

use std::net::IpAddr;
use x509_parser::extensions::GeneralName;
use x509_parser::pem::Pem;
use x509_parser::prelude::{FromDer, X509Certificate};

/// Why a certificate could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CertError {
    #[error("is not PEM text: {0}")]
    Pem(String),
    #[error("holds no CERTIFICATE block")]
    NoCertificate,
    #[error("certificate {index} of the bundle is not a valid X.509 certificate: {reason}")]
    Der { index: usize, reason: String },
}

/// The leaf's facts; times are seconds since the epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertInfo {
    pub subject: String,
    pub issuer: String,
    /// DNS names and IP addresses of the subjectAltName extension, in its order.
    pub sans: Vec<String>,
    /// Hex bytes separated by ':', as `openssl x509 -serial` groups them.
    pub serial: String,
    pub not_before: i64,
    pub not_after: i64,
    pub chain_length: usize,
    /// DER of the leaf, for the key match.
    pub der: Vec<u8>,
}

/// The certificates (DER) of a PEM bundle, in order; other blocks (a key) are skipped.
pub fn certificates(pem: &str) -> Result<Vec<Vec<u8>>, CertError> {
    let mut out = Vec::new();
    for block in Pem::iter_from_buffer(pem.as_bytes()) {
        let block = block.map_err(|e| CertError::Pem(e.to_string()))?;
        if block.label == "CERTIFICATE" {
            out.push(block.contents);
        }
    }
    Ok(out)
}

/// The certificate a client must trust to verify the bundle, as the bundle's own PEM text: its last
/// certificate. OpenShift's documentation asks that a named API certificate's file hold the leaf, then the
/// intermediates, ending with the root CA ("Adding an API server named certificate"); a bundle of the
/// leaf alone (self-signed, or issued by a CA the user keeps elsewhere) is trusted as itself, as Go's
/// `crypto/x509` and webpki accept any certificate of their root pool as an anchor.
pub fn trust_anchor(pem: &str) -> Result<String, CertError> {
    const BEGIN: &str = "-----BEGIN CERTIFICATE-----";
    const END: &str = "-----END CERTIFICATE-----";
    leaf(pem)?;
    let start = pem.rfind(BEGIN).ok_or(CertError::NoCertificate)?;
    let end = pem[start..]
        .find(END)
        .map(|i| start + i + END.len())
        .ok_or(CertError::NoCertificate)?;
    Ok(format!("{}\n", &pem[start..end]))
}

/// The first certificate of the bundle, checked that every certificate of the bundle parses.
pub fn leaf(pem: &str) -> Result<CertInfo, CertError> {
    let ders = certificates(pem)?;
    for (i, der) in ders.iter().enumerate().skip(1) {
        parse_one(der, i + 1)?;
    }
    let der = ders.first().ok_or(CertError::NoCertificate)?;
    let cert = parse_one(der, 1)?;
    let sans = match cert.subject_alternative_name() {
        Ok(Some(ext)) => ext.value.general_names.iter().filter_map(name).collect(),
        Ok(None) => Vec::new(),
        Err(e) => {
            return Err(CertError::Der {
                index: 1,
                reason: format!("subjectAltName: {e}"),
            })
        }
    };
    Ok(CertInfo {
        subject: cert.subject().to_string(),
        issuer: cert.issuer().to_string(),
        sans,
        serial: cert.raw_serial_as_string(),
        not_before: cert.validity().not_before.timestamp(),
        not_after: cert.validity().not_after.timestamp(),
        chain_length: ders.len(),
        der: der.clone(),
    })
}

fn parse_one(der: &[u8], index: usize) -> Result<X509Certificate<'_>, CertError> {
    match X509Certificate::from_der(der) {
        Ok(([], cert)) => Ok(cert),
        Ok(_) => Err(CertError::Der {
            index,
            reason: "trailing data after the certificate".to_string(),
        }),
        Err(e) => Err(CertError::Der {
            index,
            reason: e.to_string(),
        }),
    }
}

fn name(n: &GeneralName<'_>) -> Option<String> {
    match n {
        GeneralName::DNSName(d) => Some(d.to_string()),
        GeneralName::IPAddress(b) => match b.len() {
            4 => Some(IpAddr::from(<[u8; 4]>::try_from(*b).ok()?).to_string()),
            16 => Some(IpAddr::from(<[u8; 16]>::try_from(*b).ok()?).to_string()),
            _ => None,
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testcert;

    #[test]
    fn leaf_is_the_first_certificate_and_the_chain_is_counted() {
        let (leaf_pem, key) = testcert::make(&["api.lab.example.com", "10.0.0.5"], 2030, 7);
        let (ca_pem, _) = testcert::make(&["ca.example.com"], 2031, 8);
        let info = leaf(&format!("{leaf_pem}{ca_pem}{key}")).unwrap();
        assert_eq!(info.sans, vec!["api.lab.example.com", "10.0.0.5"]);
        assert_eq!(info.serial, "07");
        assert_eq!(info.chain_length, 2);
        assert!(info.subject.contains("rcgen"), "{}", info.subject);
    }

    #[test]
    fn the_trust_anchor_is_the_bundles_last_certificate_or_the_leaf_alone() {
        let (leaf_pem, key) = testcert::make(&["api.lab.example.com"], 2030, 7);
        let (ca_pem, _) = testcert::make(&["ca.example.com"], 2031, 8);
        assert_eq!(
            trust_anchor(&format!("{leaf_pem}{ca_pem}{key}")).unwrap(),
            ca_pem
        );
        assert_eq!(trust_anchor(&leaf_pem).unwrap(), leaf_pem);
        // Windows line ends and no final newline: the block's own text, one newline after it.
        let crlf = ca_pem.trim_end().replace('\n', "\r\n");
        let anchor = trust_anchor(&format!("{leaf_pem}{crlf}")).unwrap();
        assert_eq!(anchor, format!("{crlf}\n"));
        assert_eq!(trust_anchor(&key).unwrap_err(), CertError::NoCertificate);
    }

    #[test]
    fn bad_input_says_what_is_wrong() {
        assert_eq!(leaf("").unwrap_err(), CertError::NoCertificate);
        let (_, key) = testcert::make(&["a.example.com"], 2030, 1);
        assert_eq!(leaf(&key).unwrap_err(), CertError::NoCertificate);
        let bogus = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        assert!(matches!(leaf(bogus), Err(CertError::Der { index: 1, .. })));
        let (good, _) = testcert::make(&["a.example.com"], 2030, 1);
        assert!(matches!(
            leaf(&format!("{good}{bogus}")),
            Err(CertError::Der { index: 2, .. })
        ));
        assert!(matches!(
            leaf("-----BEGIN CERTIFICATE-----\n!!!\n-----END CERTIFICATE-----\n"),
            Err(CertError::Pem(_))
        ));
    }
}
