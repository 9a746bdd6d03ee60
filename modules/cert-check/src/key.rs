//! Does a private key (a Secret's `tls.key`) belong to a certificate: ring reads the key — RSA as
//! PKCS#1 or PKCS#8, ECDSA P-256/P-384 as PKCS#8 or SEC1, Ed25519 as PKCS#8 — checks it is consistent
//! and derives its public half, which must equal the certificate's subjectPublicKey. The key type to
//! read it as is the certificate's.

use ring::rand::SystemRandom;
use ring::signature::{self, EcdsaKeyPair, Ed25519KeyPair, KeyPair, RsaKeyPair};
use x509_parser::oid_registry::{
    OID_EC_P256, OID_KEY_TYPE_EC_PUBLIC_KEY, OID_NIST_EC_P384, OID_PKCS1_RSAENCRYPTION,
    OID_SIG_ED25519,
};
use x509_parser::pem::Pem;
use x509_parser::prelude::{FromDer, X509Certificate};

/// Why a key was not shown to belong to the certificate.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum KeyError {
    #[error("holds no private key block")]
    NoKey,
    #[error("is encrypted (a Secret's tls.key must not be)")]
    Encrypted,
    #[error("is not PEM text: {0}")]
    Pem(String),
    #[error("is not a valid {kind} private key for this certificate ({reason})")]
    Rejected { kind: &'static str, reason: String },
    #[error("does not belong to the certificate (its public key differs)")]
    Mismatch,
    #[error("cannot be checked: the certificate's key type ({0}) is not RSA, ECDSA P-256/P-384 or Ed25519")]
    UnsupportedCertKey(String),
    #[error("cannot be checked: the certificate does not parse")]
    BadCertificate,
}

enum Kind {
    Rsa,
    Ec(&'static signature::EcdsaSigningAlgorithm, &'static [u8]),
    Ed25519,
}

/// Ok when the first private key block of `key_pem` belongs to the certificate `cert_der`.
pub fn key_matches(cert_der: &[u8], key_pem: &str) -> Result<(), KeyError> {
    let (_, cert) = X509Certificate::from_der(cert_der).map_err(|_| KeyError::BadCertificate)?;
    let spki = cert.public_key();
    let kind = kind_of(spki)?;
    let (label, der) = private_block(key_pem)?;
    let public = public_half(&kind, &label, &der)?;
    if public == spki.subject_public_key.data.as_ref() {
        Ok(())
    } else {
        Err(KeyError::Mismatch)
    }
}

fn kind_of(spki: &x509_parser::x509::SubjectPublicKeyInfo<'_>) -> Result<Kind, KeyError> {
    let alg = &spki.algorithm.algorithm;
    if *alg == OID_PKCS1_RSAENCRYPTION {
        return Ok(Kind::Rsa);
    }
    if *alg == OID_SIG_ED25519 {
        return Ok(Kind::Ed25519);
    }
    if *alg == OID_KEY_TYPE_EC_PUBLIC_KEY {
        let curve = spki
            .algorithm
            .parameters
            .as_ref()
            .and_then(|p| p.as_oid().ok());
        return match curve {
            Some(c) if c == OID_EC_P256 => Ok(Kind::Ec(
                &signature::ECDSA_P256_SHA256_ASN1_SIGNING,
                P256_OID,
            )),
            Some(c) if c == OID_NIST_EC_P384 => Ok(Kind::Ec(
                &signature::ECDSA_P384_SHA384_ASN1_SIGNING,
                P384_OID,
            )),
            Some(c) => Err(KeyError::UnsupportedCertKey(format!("EC curve {c}"))),
            None => Err(KeyError::UnsupportedCertKey(
                "EC without a named curve".into(),
            )),
        };
    }
    Err(KeyError::UnsupportedCertKey(alg.to_id_string()))
}

fn private_block(key_pem: &str) -> Result<(String, Vec<u8>), KeyError> {
    for block in Pem::iter_from_buffer(key_pem.as_bytes()) {
        let block = block.map_err(|e| KeyError::Pem(e.to_string()))?;
        match block.label.as_str() {
            "ENCRYPTED PRIVATE KEY" => return Err(KeyError::Encrypted),
            "PRIVATE KEY" | "RSA PRIVATE KEY" | "EC PRIVATE KEY" => {
                return Ok((block.label, block.contents))
            }
            _ => {}
        }
    }
    Err(KeyError::NoKey)
}

fn public_half(kind: &Kind, label: &str, der: &[u8]) -> Result<Vec<u8>, KeyError> {
    let rejected = |kind: &'static str| {
        move |e: ring::error::KeyRejected| KeyError::Rejected {
            kind,
            reason: e.to_string(),
        }
    };
    match kind {
        Kind::Rsa => {
            let pair = if label == "RSA PRIVATE KEY" {
                RsaKeyPair::from_der(der)
            } else {
                RsaKeyPair::from_pkcs8(der)
            };
            Ok(pair
                .map_err(rejected("RSA"))?
                .public_key()
                .as_ref()
                .to_vec())
        }
        Kind::Ec(alg, curve) => {
            let pkcs8 = if label == "EC PRIVATE KEY" {
                sec1_as_pkcs8(der, curve)
            } else {
                der.to_vec()
            };
            let pair = EcdsaKeyPair::from_pkcs8(alg, &pkcs8, &SystemRandom::new());
            Ok(pair
                .map_err(rejected("ECDSA"))?
                .public_key()
                .as_ref()
                .to_vec())
        }
        Kind::Ed25519 => {
            let pair = Ed25519KeyPair::from_pkcs8_maybe_unchecked(der);
            Ok(pair
                .map_err(rejected("Ed25519"))?
                .public_key()
                .as_ref()
                .to_vec())
        }
    }
}

/// DER of the curve OIDs (prime256v1, secp384r1) and of id-ecPublicKey.
const P256_OID: &[u8] = &[0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];
const P384_OID: &[u8] = &[0x06, 0x05, 0x2b, 0x81, 0x04, 0x00, 0x22];
const EC_PUBLIC_KEY_OID: &[u8] = &[0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];

/// A SEC1 ECPrivateKey wrapped as the PKCS#8 PrivateKeyInfo ring reads (RFC 5915 section 3):
/// version 0, the id-ecPublicKey algorithm with the certificate's curve, the SEC1 key as an OCTET STRING.
fn sec1_as_pkcs8(sec1: &[u8], curve: &[u8]) -> Vec<u8> {
    let alg = tlv(0x30, &[EC_PUBLIC_KEY_OID, curve].concat());
    tlv(
        0x30,
        &[&[0x02, 0x01, 0x00][..], &alg, &tlv(0x04, sec1)].concat(),
    )
}

fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let n = content.len();
    if n < 0x80 {
        out.push(n as u8);
    } else {
        let bytes: Vec<u8> = n
            .to_be_bytes()
            .into_iter()
            .skip_while(|b| *b == 0)
            .collect();
        out.push(0x80 | bytes.len() as u8);
        out.extend(bytes);
    }
    out.extend_from_slice(content);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::leaf;
    use crate::testcert;
    use rcgen::{KeyPair, PKCS_ECDSA_P384_SHA384, PKCS_ED25519};

    fn der(pem: &str) -> Vec<u8> {
        leaf(pem).unwrap().der
    }

    #[test]
    fn own_key_matches_for_each_key_type() {
        for key in [
            KeyPair::generate().unwrap(),
            KeyPair::generate_for(&PKCS_ECDSA_P384_SHA384).unwrap(),
            KeyPair::generate_for(&PKCS_ED25519).unwrap(),
        ] {
            let (cert, key) = testcert::make_with(&["a.example.com"], 2030, 1, key);
            assert_eq!(key_matches(&der(&cert), &key), Ok(()));
            // The key found among other blocks (a bundle with the certificate first).
            assert_eq!(key_matches(&der(&cert), &format!("{cert}{key}")), Ok(()));
        }
    }

    #[test]
    fn another_key_of_the_same_type_does_not_match() {
        let (cert, _) = testcert::make(&["a.example.com"], 2030, 1);
        let (_, other) = testcert::make(&["a.example.com"], 2030, 1);
        assert_eq!(key_matches(&der(&cert), &other), Err(KeyError::Mismatch));
    }

    #[test]
    fn a_key_of_another_type_is_rejected() {
        let (cert, _) = testcert::make(&["a.example.com"], 2030, 1);
        let ed = KeyPair::generate_for(&PKCS_ED25519)
            .unwrap()
            .serialize_pem();
        assert!(matches!(
            key_matches(&der(&cert), &ed),
            Err(KeyError::Rejected { kind: "ECDSA", .. })
        ));
    }

    #[test]
    fn sec1_keys_are_read_too() {
        let key = KeyPair::generate().unwrap();
        let (cert, pkcs8_pem) = testcert::make_with(&["a.example.com"], 2030, 1, key);
        // PKCS#8 → SEC1: the OCTET STRING at the end of the PrivateKeyInfo is the ECPrivateKey.
        let pkcs8 = Pem::iter_from_buffer(pkcs8_pem.as_bytes())
            .next()
            .unwrap()
            .unwrap()
            .contents;
        let (_, info) = x509_parser::der_parser::parse_der(&pkcs8).unwrap();
        let seq = info.as_sequence().unwrap();
        let sec1 = seq[2].as_slice().unwrap();
        let sec1_pem = pem_block("EC PRIVATE KEY", sec1);
        assert_eq!(key_matches(&der(&cert), &sec1_pem), Ok(()));
    }

    #[test]
    fn missing_and_encrypted_keys_are_named() {
        let (cert, _) = testcert::make(&["a.example.com"], 2030, 1);
        assert_eq!(key_matches(&der(&cert), &cert), Err(KeyError::NoKey));
        let enc = pem_block("ENCRYPTED PRIVATE KEY", &[1, 2, 3]);
        assert_eq!(key_matches(&der(&cert), &enc), Err(KeyError::Encrypted));
        assert_eq!(key_matches(&[1, 2], &enc), Err(KeyError::BadCertificate));
    }

    #[test]
    fn long_lengths_are_encoded_in_long_form() {
        assert_eq!(tlv(0x04, &[0; 3])[..2], [0x04, 3]);
        assert_eq!(tlv(0x04, &[0; 200])[..3], [0x04, 0x81, 200]);
        assert_eq!(tlv(0x04, &[0; 300])[..4], [0x04, 0x82, 1, 44]);
    }

    fn pem_block(label: &str, der: &[u8]) -> String {
        use base64::Engine;
        let b64 = base64::engine::general_purpose::STANDARD.encode(der);
        let lines: Vec<&str> = b64
            .as_bytes()
            .chunks(64)
            .map(|c| std::str::from_utf8(c).unwrap())
            .collect();
        format!(
            "-----BEGIN {label}-----\n{}\n-----END {label}-----\n",
            lines.join("\n")
        )
    }
}
