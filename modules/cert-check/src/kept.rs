//! One kept certificate as a report shows it and a restore judges it: the leaf's [`Report`], whether
//! the key belongs to it, and the problems that refuse wiring it in (unreadable, key mismatch, a
//! hostname it does not cover). Shared by `cluster_config` (which builds it) and `proxshift certs`
//! (which reads it back from the module's result).

use serde::{Deserialize, Serialize};

use crate::{check, key_matches, leaf, uncovered, Report};

/// The Secret's identity, its role and where its contents came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Kept {
    pub namespace: String,
    pub name: String,
    /// `ingress`, `api` or `other`.
    #[serde(rename = "type")]
    pub kind: String,
    pub hostname: Option<String>,
    /// `cluster` (read from it), `backup` (the record's copy) or `missing`.
    pub source: String,
    pub certificate: Option<Report>,
    pub key_matches: Option<bool>,
    /// What refuses wiring it in.
    pub problems: Vec<String>,
}

impl Kept {
    /// Expiry and coverage warnings, then the problems.
    pub fn warnings(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .certificate
            .iter()
            .flat_map(|c| c.warnings.iter().cloned())
            .collect();
        for p in &self.problems {
            if !out.contains(p) {
                out.push(p.clone());
            }
        }
        out
    }
}

/// The inputs of [`assess`]: the Secret's `tls.crt` and `tls.key` as text (None: the key is absent).
pub struct Contents<'a> {
    pub crt: Option<&'a str>,
    pub key: Option<&'a str>,
}

/// Judge one kept Secret at `now` (seconds since the epoch), warning `warn_days` before expiry.
pub fn assess(mut kept: Kept, contents: Contents<'_>, now: i64, warn_days: i64) -> Kept {
    let Some(crt) = contents.crt else {
        kept.problems.push("has no tls.crt".to_string());
        return kept;
    };
    match check(crt, kept.hostname.as_deref(), now, warn_days) {
        Ok(report) => {
            if report.covers_hostname == Some(false) {
                let h = kept.hostname.as_deref().unwrap_or_default();
                kept.problems.push(uncovered(h, &report.sans));
            }
            kept.certificate = Some(report);
        }
        Err(e) => {
            kept.problems.push(format!("tls.crt {e}"));
            return kept;
        }
    }
    match contents.key {
        None => kept.problems.push("has no tls.key".to_string()),
        Some(key) => {
            // The leaf parsed above, so it parses again.
            let der = leaf(crt).map(|l| l.der).unwrap_or_default();
            match key_matches(&der, key) {
                Ok(()) => kept.key_matches = Some(true),
                Err(e) => {
                    kept.key_matches = Some(false);
                    kept.problems.push(format!("tls.key {e}"));
                }
            }
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testcert;

    const JAN_2025: i64 = 1_735_689_600;

    fn kept(hostname: Option<&str>) -> Kept {
        Kept {
            namespace: "openshift-config".into(),
            name: "api-cert".into(),
            kind: "api".into(),
            hostname: hostname.map(str::to_string),
            source: "cluster".into(),
            certificate: None,
            key_matches: None,
            problems: Vec::new(),
        }
    }

    #[test]
    fn a_good_pair_has_no_problem_and_round_trips() {
        let (crt, key) = testcert::make(&["api.lab.example.com"], 2030, 9);
        let k = assess(
            kept(Some("api.lab.example.com")),
            Contents {
                crt: Some(&crt),
                key: Some(&key),
            },
            JAN_2025,
            30,
        );
        assert_eq!(k.problems, Vec::<String>::new());
        assert_eq!(k.key_matches, Some(true));
        assert_eq!(k.certificate.as_ref().unwrap().serial, "09");
        let back: Kept = serde_json_round_trip(&k);
        assert_eq!(back, k);
    }

    #[test]
    fn problems_name_the_key_mismatch_and_the_uncovered_hostname() {
        let (crt, _) = testcert::make(&["*.apps.lab.example.com"], 2025, 9);
        let (_, other) = testcert::make(&["x"], 2030, 1);
        let k = assess(
            kept(Some("api.lab.example.com")),
            Contents {
                crt: Some(&crt),
                key: Some(&other),
            },
            JAN_2025 - 86_400,
            30,
        );
        assert_eq!(k.key_matches, Some(false));
        assert_eq!(
            k.problems,
            vec![
                "does not cover api.lab.example.com (SANs: *.apps.lab.example.com)",
                "tls.key does not belong to the certificate (its public key differs)",
            ]
        );
        // The expiry warning first, the coverage once, the key problem after.
        let w = k.warnings();
        assert_eq!(w.len(), 3, "{w:?}");
        assert!(w[0].starts_with("expires in 1 days"));
    }

    #[test]
    fn missing_parts_are_problems() {
        let k = assess(
            kept(None),
            Contents {
                crt: None,
                key: None,
            },
            0,
            30,
        );
        assert_eq!(k.problems, vec!["has no tls.crt"]);
        let (crt, _) = testcert::make(&["a"], 2030, 1);
        let k = assess(
            kept(None),
            Contents {
                crt: Some(&crt),
                key: None,
            },
            JAN_2025,
            30,
        );
        assert_eq!(k.problems, vec!["has no tls.key"]);
        let k = assess(
            kept(None),
            Contents {
                crt: Some("junk"),
                key: None,
            },
            JAN_2025,
            30,
        );
        assert_eq!(k.problems, vec!["tls.crt holds no CERTIFICATE block"]);
    }

    fn serde_json_round_trip(k: &Kept) -> Kept {
        serde_json::from_value(serde_json::to_value(k).unwrap()).unwrap()
    }
}
