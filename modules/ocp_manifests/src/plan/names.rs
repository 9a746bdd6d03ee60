//! The cluster name and base domain, as the installer's `ValidateInstallConfig`
//! (pkg/types/validation/installconfig.go) checks them: `validate.ClusterName` everywhere (a DNS-1123
//! subdomain of at most 54 characters, leaving room for `*.apps.` in DNS names), and on the on-prem
//! platforms (`baremetal` among ours) `validate.OnPremClusterName` on top: no '.'. Platform
//! `external` takes no dots either: the agent registers the cluster with assisted-service, whose
//! `ValidateClusterNameFormat` (assisted-service pkg/validations) allows subdomains in cluster
//! names only with platform none.

use crate::net::{is_dns_label, is_dns_subdomain};

use super::context::{Ctx, Findings, Staged};

/// `validate.ClusterName`'s limit: a DNS label's 63 minus the 9 of `\052.apps.` in DNS records.
const MAX_NAME: usize = 54;

pub(super) fn check(cx: &Ctx) -> Staged<()> {
    let mut f = Findings::default();
    let o = cx.o;
    let name = o.cluster_name.as_str();
    let name_ok = valid_name(name);
    if !name_ok {
        f.err("cluster_name", "cluster-name-dns-subdomain",
              format!("'{name}' must be a DNS subdomain: dot-separated lowercase labels of letters, digits and '-'"));
    } else if name.len() > MAX_NAME {
        f.err(
            "cluster_name",
            "cluster-name-length",
            format!(
                "'{name}' is {} characters; at most {MAX_NAME} leave room for '*.apps.' in DNS names",
                name.len()
            ),
        );
    }
    let base = o.base_domain.trim_end_matches('.');
    if !is_dns_subdomain(&o.base_domain) {
        f.err("base_domain", "base-domain-dns-subdomain",
              format!("'{}' must be a DNS subdomain: dot-separated lowercase labels of letters, digits and '-'", o.base_domain));
    } else if name_ok && !is_dns_subdomain(&format!("x.apps.{name}.{base}")) {
        f.err(
            "base_domain",
            "cluster-domain-length",
            format!("'*.apps.{name}.{base}' exceeds DNS name limits"),
        );
    }
    f.with(())
}

/// A DNS-1123 subdomain without the trailing dot a domain may have.
fn valid_name(name: &str) -> bool {
    !name.ends_with('.') && is_dns_subdomain(name)
}

/// Once the platform is known: `validate.OnPremClusterName` (baremetal) and assisted-service's
/// `ValidateClusterNameFormat` (every platform but none) take a single DNS label only.
pub(super) fn on_platform(cx: &Ctx) -> Staged<()> {
    let mut f = Findings::default();
    let name = cx.o.cluster_name.as_str();
    let platform = cx.topo.platform;
    if platform != "none" && valid_name(name) && !is_dns_label(name) {
        f.err(
            "cluster_name",
            "cluster-name-no-dots",
            format!("'{name}': cluster name must not contain '.' with platform {platform} (subdomains in cluster names are only valid with platform none)"),
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
        for bad in ["Lab", "-lab", "lab.", "lab..one", "under_score"] {
            fails(
                with(compact(), "cluster_name", json!(bad)),
                "cluster_name",
                "cluster-name-dns-subdomain",
            );
        }
        fails(
            with(compact(), "cluster_name", json!("a".repeat(55))),
            "cluster_name",
            "cluster-name-length",
        );
    }

    /// ValidateInstallConfig: `validate.ClusterName` (a subdomain) on platform none,
    /// `validate.OnPremClusterName` (no '.') on baremetal; external: assisted-service's
    /// `ValidateClusterNameFormat` (subdomains only with platform none).
    #[test]
    fn dots_in_the_name_only_on_platform_none() {
        let p = ok_plan(&with(sno(), "cluster_name", json!("lab.east")));
        assert_eq!(
            (p.platform.as_str(), p.cluster_name.as_str()),
            ("none", "lab.east")
        );
        ok_plan(&with(
            with(compact(), "platform", json!("none")),
            "cluster_name",
            json!("lab.east"),
        ));
        fails(
            with(compact(), "cluster_name", json!("lab.east")),
            "cluster_name",
            "cluster-name-no-dots",
        );
        fails(
            with(
                with(sno(), "platform", json!("external")),
                "cluster_name",
                json!("lab.east"),
            ),
            "cluster_name",
            "cluster-name-no-dots",
        );
        // Still at most 54 characters in all, dots included.
        let long = format!("{}.{}", "a".repeat(30), "b".repeat(24));
        fails(
            with(sno(), "cluster_name", json!(long)),
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
