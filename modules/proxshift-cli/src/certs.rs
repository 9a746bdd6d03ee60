//! `proxshift certs CLUSTER`: the kept certificates' report that `playbooks/certs.yaml` writes (the
//! `certificates` return value of `cluster_config`, `cert_check::Kept` entries) shown as a table with
//! each warning below it. Pure but for [`read`].

use std::path::Path;

use cert_check::Kept;

use crate::exit::{CliError, PLAYBOOK_FAILED};
use crate::style::{paint, Style};
use crate::table::{Cell, Table};

/// The report file the playbook wrote.
pub fn read(path: &Path) -> Result<Vec<Kept>, CliError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        CliError::new(
            PLAYBOOK_FAILED,
            format!(
                "the playbook wrote no certificate report ({}: {e})",
                path.display()
            ),
        )
    })?;
    serde_json::from_str(&text).map_err(|e| {
        CliError::new(
            PLAYBOOK_FAILED,
            format!(
                "the certificate report {} is not what cluster_config returns: {e}",
                path.display()
            ),
        )
    })
}

/// One row per certificate (Secret, type, hostname, subject, SANs, serial, expiry, days left), then
/// every warning as `NAMESPACE/NAME: warning`.
pub fn text(kept: &[Kept], colour: bool) -> String {
    if kept.is_empty() {
        return "No kept certificates (inventory kept_certificates is empty).\n".to_string();
    }
    let mut t = Table::new([
        "SECRET", "TYPE", "HOSTNAME", "SOURCE", "SUBJECT", "SANS", "SERIAL", "EXPIRES", "DAYS",
    ])
    .right_align(&[8]);
    let mut warnings = Vec::new();
    for k in kept {
        let id = format!("{}/{}", k.namespace, k.name);
        let w = k.warnings();
        let days = match &k.certificate {
            Some(c) if !w.is_empty() => Cell::styled(c.days_left.to_string(), Style::Yellow),
            Some(c) => Cell::from(c.days_left.to_string()),
            None => Cell::styled("-", Style::Red),
        };
        let c = k.certificate.as_ref();
        t.row(vec![
            Cell::from(id.clone()),
            Cell::from(k.kind.clone()),
            Cell::from(k.hostname.clone().unwrap_or_else(|| "-".into())),
            Cell::from(k.source.clone()),
            Cell::from(c.map_or("-".into(), |c| c.subject.clone())),
            Cell::from(c.map_or("-".into(), |c| c.sans.join(","))),
            Cell::from(c.map_or("-".into(), |c| c.serial.clone())),
            Cell::from(c.map_or("-".into(), |c| c.not_after.clone())),
            days,
        ]);
        warnings.extend(w.into_iter().map(|w| format!("{id}: {w}")));
    }
    let mut out = t.render(colour);
    for w in &warnings {
        out.push_str(&paint(&format!("warning: {w}"), Style::Yellow, colour));
        out.push('\n');
    }
    if warnings.is_empty() {
        out.push_str(&format!("{} certificate(s), no warnings.\n", kept.len()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use cert_check::Report;

    fn kept(name: &str, days_left: i64, warnings: &[&str], problems: &[&str]) -> Kept {
        Kept {
            namespace: "openshift-config".into(),
            name: name.into(),
            kind: "api".into(),
            hostname: Some("api.lab.example.com".into()),
            source: "cluster".into(),
            certificate: Some(Report {
                subject: "CN=api.lab.example.com".into(),
                issuer: "CN=lab CA".into(),
                sans: vec!["api.lab.example.com".into()],
                serial: "0a:91".into(),
                not_before: "2025-01-01T00:00:00Z".into(),
                not_after: "2026-01-01T00:00:00Z".into(),
                days_left,
                chain_length: 2,
                trust_anchor: String::new(),
                hostname: Some("api.lab.example.com".into()),
                covers_hostname: Some(true),
                warnings: warnings.iter().map(|s| s.to_string()).collect(),
            }),
            key_matches: Some(true),
            problems: problems.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn rows_then_warnings_named_by_secret() {
        let out = text(
            &[
                kept("api-cert", 200, &[], &[]),
                kept(
                    "old-cert",
                    5,
                    &["expires in 5 days"],
                    &["tls.key does not belong"],
                ),
            ],
            false,
        );
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines[0].starts_with("SECRET"), "{out}");
        assert!(lines[1].contains("openshift-config/api-cert") && lines[1].contains("0a:91"));
        assert!(lines[1].trim_end().ends_with("200"), "{out}");
        assert_eq!(
            &lines[3..],
            [
                "warning: openshift-config/old-cert: expires in 5 days",
                "warning: openshift-config/old-cert: tls.key does not belong",
            ]
        );
    }

    #[test]
    fn no_warning_and_nothing_kept_are_said() {
        assert!(
            text(&[kept("a", 90, &[], &[])], false).ends_with("1 certificate(s), no warnings.\n")
        );
        assert!(text(&[], false).starts_with("No kept certificates"));
    }
}
