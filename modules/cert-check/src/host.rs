//! Does a certificate cover a hostname: its subjectAltName DNS names (and IP addresses) only — the
//! subject's CN is not looked at, as Go's crypto/tls (the API server, the router) no longer does.
//! A SAN wildcard is a whole leftmost label (`*.apps.example.com`): it covers exactly one label in its
//! place, never the bare domain or deeper names. A wildcard hostname (the ingress default certificate
//! serves `*.apps.<cluster>.<domain>`) is covered only by the same wildcard.

/// True when one of `sans` covers `hostname` (compared case-insensitively, a trailing dot ignored).
pub fn covers(sans: &[String], hostname: &str) -> bool {
    let host = normal(hostname);
    if host.is_empty() {
        return false;
    }
    sans.iter().any(|san| matches(&normal(san), &host))
}

fn normal(s: &str) -> String {
    s.trim().trim_end_matches('.').to_ascii_lowercase()
}

fn matches(san: &str, host: &str) -> bool {
    if san == host {
        return true;
    }
    // An IP address is only ever matched exactly.
    if host.parse::<std::net::IpAddr>().is_ok() {
        return false;
    }
    let (Some(san_rest), false) = (san.strip_prefix("*."), host.starts_with("*.")) else {
        return false;
    };
    // A wildcard over a single label (`*.com`) is not honoured.
    if !san_rest.contains('.') || san_rest.contains('*') {
        return false;
    }
    match host.split_once('.') {
        Some((first, rest)) => !first.is_empty() && rest == san_rest,
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::covers;

    fn sans(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn exact_names_case_and_trailing_dot() {
        let s = sans(&["API.lab.example.com."]);
        assert!(covers(&s, "api.lab.example.com"));
        assert!(covers(&s, "api.lab.example.com."));
        assert!(!covers(&s, "api-int.lab.example.com"));
        assert!(!covers(&s, ""));
        assert!(!covers(&[], "api.lab.example.com"));
    }

    #[test]
    fn wildcards_cover_one_label_only() {
        let s = sans(&["*.apps.lab.example.com"]);
        assert!(covers(&s, "console-openshift-console.apps.lab.example.com"));
        assert!(!covers(&s, "apps.lab.example.com"));
        assert!(!covers(&s, "a.b.apps.lab.example.com"));
        assert!(!covers(&s, "api.lab.example.com"));
        // The ingress wildcard itself needs the same wildcard.
        assert!(covers(&s, "*.apps.lab.example.com"));
        assert!(!covers(
            &sans(&["x.apps.lab.example.com"]),
            "*.apps.lab.example.com"
        ));
        assert!(!covers(
            &sans(&["*.lab.example.com"]),
            "*.apps.lab.example.com"
        ));
        // Single-label and partial wildcards are not honoured.
        assert!(!covers(&sans(&["*.com"]), "example.com"));
        assert!(!covers(&sans(&["a*.example.com"]), "ab.example.com"));
        assert!(!covers(&sans(&["*.*.example.com"]), "a.b.example.com"));
    }

    #[test]
    fn ip_addresses_compare_as_text() {
        assert!(covers(&sans(&["10.0.0.5"]), "10.0.0.5"));
        assert!(!covers(&sans(&["*.0.0.5"]), "10.0.0.5"));
        assert!(!covers(&sans(&["10.0.0.5"]), "10.0.0.6"));
    }
}
