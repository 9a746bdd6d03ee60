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
