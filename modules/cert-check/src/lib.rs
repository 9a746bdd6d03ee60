//! Pure TLS certificate checks, shared by `cluster_config`'s certificate keeping and `proxshift certs`:
//! [`parse`] (a PEM chain's leaf: subject, SANs, serial, validity — x509-parser), [`key`] (does a private
//! key belong to the certificate — ring derives its public half), [`host`] (does the certificate cover a
//! hostname, wildcards as RFC 6125 and Go's crypto/tls allow them), [`check`] (the report of a certificate
//! with its warnings) and [`kept`] (a kept Secret judged: report, key match, what refuses wiring it in). No I/O; the current time is an argument.

pub mod host;
pub mod kept;
pub mod key;
pub mod parse;

use serde::{Deserialize, Serialize};
use std::time::{Duration, UNIX_EPOCH};

pub use host::covers;
pub use kept::{assess, Contents, Kept};
pub use key::{key_matches, KeyError};
pub use parse::{leaf, trust_anchor, CertError, CertInfo};

/// What is known about one kept certificate: its leaf's facts, whether it covers the hostname it is
/// wired to, how long it is valid, and the warnings a report shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    pub subject: String,
    pub issuer: String,
    pub sans: Vec<String>,
    pub serial: String,
    pub not_before: String,
    pub not_after: String,
    /// Whole days until `not_after` (negative once expired).
    pub days_left: i64,
    /// Certificates in the PEM bundle, the leaf included.
    pub chain_length: usize,
    /// The PEM of the certificate a client trusts to verify the bundle ([`trust_anchor`]): what a
    /// kubeconfig and Vault's Kubernetes auth need once the certificate serves the API. Public.
    #[serde(default)]
    pub trust_anchor: String,
    /// The hostname it is wired to, when it is wired to one.
    pub hostname: Option<String>,
    pub covers_hostname: Option<bool>,
    pub warnings: Vec<String>,
}

/// The report of a PEM bundle (leaf first) wired to `hostname`, at `now` (seconds since the epoch),
/// warning when it expires within `warn_days`.
pub fn check(
    pem: &str,
    hostname: Option<&str>,
    now: i64,
    warn_days: i64,
) -> Result<Report, CertError> {
    let info = leaf(pem)?;
    let days_left = (info.not_after - now).div_euclid(86_400);
    let covered = hostname.map(|h| covers(&info.sans, h));
    let mut warnings = Vec::new();
    if info.not_after <= now {
        warnings.push(format!("expired on {}", rfc3339(info.not_after)));
    } else if days_left < warn_days {
        warnings.push(format!(
            "expires in {days_left} days ({}), within the {warn_days}-day warning",
            rfc3339(info.not_after)
        ));
    }
    if info.not_before > now {
        warnings.push(format!("not valid before {}", rfc3339(info.not_before)));
    }
    if let (Some(h), Some(false)) = (hostname, covered) {
        warnings.push(uncovered(h, &info.sans));
    }
    Ok(Report {
        subject: info.subject,
        issuer: info.issuer,
        sans: info.sans,
        serial: info.serial,
        not_before: rfc3339(info.not_before),
        not_after: rfc3339(info.not_after),
        days_left,
        chain_length: info.chain_length,
        trust_anchor: trust_anchor(pem)?,
        hostname: hostname.map(str::to_string),
        covers_hostname: covered,
        warnings,
    })
}

/// Seconds since the epoch as RFC 3339 (UTC); times before 1970 show as the epoch.
pub fn rfc3339(secs: i64) -> String {
    let t = UNIX_EPOCH + Duration::from_secs(u64::try_from(secs).unwrap_or(0));
    humantime::format_rfc3339_seconds(t).to_string()
}

/// The warning (and, for a wired certificate, the problem) of a hostname the SANs do not cover.
pub fn uncovered(hostname: &str, sans: &[String]) -> String {
    let sans = if sans.is_empty() {
        "none".to_string()
    } else {
        sans.join(", ")
    };
    format!("does not cover {hostname} (SANs: {sans})")
}

#[cfg(test)]
pub(crate) mod testcert {
    use rcgen::{date_time_ymd, CertificateParams, KeyPair};

    /// A self-signed certificate for `names`, valid 2020-01-01 .. `until` (year), with `serial`:
    /// (certificate PEM, PKCS#8 key PEM).
    pub fn make(names: &[&str], until: i32, serial: u64) -> (String, String) {
        make_with(names, until, serial, KeyPair::generate().expect("key pair"))
    }

    pub fn make_with(names: &[&str], until: i32, serial: u64, key: KeyPair) -> (String, String) {
        let mut p = CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>())
            .expect("params");
        p.not_before = date_time_ymd(2020, 1, 1);
        p.not_after = date_time_ymd(until, 1, 1);
        p.serial_number = Some(serial.into());
        let cert = p.self_signed(&key).expect("self-signed");
        (cert.pem(), key.serialize_pem())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const JAN_2025: i64 = 1_735_689_600;

    #[test]
    fn report_lists_facts_and_no_warning_when_fine() {
        let (pem, _) = testcert::make(&["api.lab.example.com"], 2030, 0x1234);
        let r = check(&pem, Some("api.lab.example.com"), JAN_2025, 30).unwrap();
        assert_eq!(r.sans, vec!["api.lab.example.com"]);
        assert_eq!(r.serial, "12:34");
        assert_eq!(r.not_after, "2030-01-01T00:00:00Z");
        assert_eq!(r.not_before, "2020-01-01T00:00:00Z");
        assert_eq!(r.covers_hostname, Some(true));
        assert_eq!(r.chain_length, 1);
        assert!(r.warnings.is_empty(), "{:?}", r.warnings);
        assert_eq!(r.days_left, 1826);
    }

    #[test]
    fn warns_about_expiry_soon_expired_and_hostname() {
        let (pem, _) = testcert::make(&["*.apps.lab.example.com"], 2025, 1);
        // 2024-12-20: 12 days left.
        let r = check(
            &pem,
            Some("api.lab.example.com"),
            JAN_2025 - 12 * 86_400,
            30,
        )
        .unwrap();
        assert_eq!(r.days_left, 12);
        assert_eq!(r.covers_hostname, Some(false));
        assert_eq!(r.warnings.len(), 2, "{:?}", r.warnings);
        assert!(r.warnings[0].contains("expires in 12 days"));
        assert!(r.warnings[1].contains("does not cover api.lab.example.com"));
        assert!(r.warnings[1].contains("*.apps.lab.example.com"));
        // The same day it expires and later: expired.
        let r = check(&pem, None, JAN_2025 + 86_400, 30).unwrap();
        assert_eq!(r.warnings, vec!["expired on 2025-01-01T00:00:00Z"]);
        assert_eq!(r.days_left, -1);
        assert_eq!(r.covers_hostname, None);
        // Not yet warned with a shorter window.
        let r = check(&pem, None, JAN_2025 - 12 * 86_400, 7).unwrap();
        assert!(r.warnings.is_empty());
    }

    #[test]
    fn not_yet_valid_is_warned() {
        let (pem, _) = testcert::make(&["a.example.com"], 2030, 1);
        let r = check(&pem, None, 0, 30).unwrap();
        assert_eq!(r.warnings, vec!["not valid before 2020-01-01T00:00:00Z"]);
    }
}
