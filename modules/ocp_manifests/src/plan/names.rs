//! The cluster name and base domain: DNS-valid, and short enough for `*.apps.NAME.DOMAIN`.

use crate::net::{is_dns_label, is_dns_subdomain};

use super::context::{Ctx, Findings, Staged};

pub(super) fn check(cx: &Ctx) -> Staged<()> {
    let mut f = Findings::default();
    let o = cx.o;
    let name = o.cluster_name.as_str();
    if !is_dns_label(name) {
        f.err("cluster_name", "cluster-name-dns-label",
              format!("'{name}' must be a DNS label: lowercase letters, digits and '-', starting and ending with a letter or digit"));
    } else if name.len() > 54 {
        f.err(
            "cluster_name",
            "cluster-name-length",
            format!(
                "'{name}' is {} characters; at most 54 leave room for '*.apps.' in DNS names",
                name.len()
            ),
        );
    }
    let base = o.base_domain.trim_end_matches('.');
    if !is_dns_subdomain(&o.base_domain) {
        f.err("base_domain", "base-domain-dns-subdomain",
              format!("'{}' must be a DNS subdomain: dot-separated lowercase labels of letters, digits and '-'", o.base_domain));
    } else if is_dns_label(name) && !is_dns_subdomain(&format!("x.apps.{name}.{base}")) {
        f.err(
            "base_domain",
            "cluster-domain-length",
            format!("'*.apps.{name}.{base}' exceeds DNS name limits"),
        );
    }
    f.with(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::plan::fixtures::*;

    #[test]
    fn names_openshift_accepts_are_accepted() {
        // The original forced names to start with "ocp"; any DNS label up to 54 characters is fine.
        ok_plan(&with(compact(), "cluster_name", json!("prod-east-1")));
        ok_plan(&with(compact(), "cluster_name", json!("a".repeat(54))));
        ok_plan(&with(compact(), "cluster_name", json!("1cluster")));
    }

    #[test]
    fn rule_cluster_name() {
        fails(
            with(compact(), "cluster_name", json!("Lab")),
            "cluster_name",
            "cluster-name-dns-label",
        );
        fails(
            with(compact(), "cluster_name", json!("lab.one")),
            "cluster_name",
            "cluster-name-dns-label",
        );
        fails(
            with(compact(), "cluster_name", json!("-lab")),
            "cluster_name",
            "cluster-name-dns-label",
        );
        fails(
            with(compact(), "cluster_name", json!("a".repeat(55))),
            "cluster_name",
            "cluster-name-length",
        );
    }

    #[test]
    fn rule_base_domain() {
        fails(
            with(compact(), "base_domain", json!("Example..com")),
            "base_domain",
            "base-domain-dns-subdomain",
        );
        fails(
            with(compact(), "base_domain", json!("under_score.com")),
            "base_domain",
            "base-domain-dns-subdomain",
        );
        ok_plan(&with(compact(), "base_domain", json!("example.com.")));
        let long = (0..4).map(|_| "a".repeat(60)).collect::<Vec<_>>().join(".");
        fails(
            with(compact(), "base_domain", json!(long)),
            "base_domain",
            "cluster-domain-length",
        );
    }
}
