//! The cluster-wide proxy (URLs, noProxy entries) and the image digest mirrors.

use std::net::IpAddr;

use crate::formats::{check_repository, parse_url};
use crate::model::{MirrorOpt, PlanMirror, PlanProxy, ProxyOpt};
use crate::net::{is_dns_subdomain, Cidr};

use super::context::{Ctx, Findings, Staged};

pub(super) fn check(cx: &Ctx) -> Staged<Option<PlanProxy>> {
    let mut f = Findings::default();
    let proxy = cx.o.proxy.as_ref().map(|p| check_proxy(&mut f, cx, p));
    f.with(proxy)
}

pub(super) fn mirrors(cx: &Ctx) -> Staged<Vec<PlanMirror>> {
    let mut f = Findings::default();
    let mirrors =
        cx.o.image_digest_sources
            .clone()
            .unwrap_or_default()
            .into_iter()
            .enumerate()
            .map(|(i, m)| check_mirror(&mut f, i, m))
            .collect();
    f.with(mirrors)
}

fn check_proxy(f: &mut Findings, cx: &Ctx, p: &ProxyOpt) -> PlanProxy {
    if p.http_proxy.is_none() && p.https_proxy.is_none() {
        f.err(
            "proxy",
            "proxy-url",
            "give http_proxy or https_proxy (or both)",
        );
    }
    for (opt, value, schemes) in [
        ("http_proxy", &p.http_proxy, &["http"][..]),
        ("https_proxy", &p.https_proxy, &["http", "https"][..]),
    ] {
        if let Some(v) = value {
            check_url(f, cx, opt, v, schemes);
        }
    }
    let entries = p.no_proxy.clone().unwrap_or_default();
    for (i, e) in entries.iter().enumerate() {
        if let Err(why) = no_proxy_entry(e, entries.len()) {
            f.err(
                format!("proxy.no_proxy[{i}]"),
                "no-proxy-entry",
                format!("'{e}' {why}"),
            );
        }
    }
    PlanProxy {
        http_proxy: p.http_proxy.clone(),
        https_proxy: p.https_proxy.clone(),
        no_proxy: (!entries.is_empty()).then(|| entries.join(",")),
    }
}

/// One `noProxy` entry as installer pkg/types/validation `validateProxy` takes it: `*` only as the
/// whole list; no spaces; otherwise an IP, a CIDR (Go's `net.ParseCIDR`: host bits may be set) or
/// a domain that `validate.NoProxyDomainName` accepts — one leading and one trailing '.' dropped,
/// the rest a DNS-1123 subdomain, so lowercase only and no wildcard.
fn no_proxy_entry(e: &str, count: usize) -> Result<(), &'static str> {
    if e == "*" {
        return if count == 1 {
            Ok(())
        } else {
            Err("'*' (every host) must be the only entry")
        };
    }
    if e.contains(' ') {
        return Err("must not contain spaces");
    }
    let domain = e.strip_prefix('.').unwrap_or(e);
    let domain = domain.strip_suffix('.').unwrap_or(domain);
    if e.parse::<IpAddr>().is_ok() || Cidr::parse(e).is_ok() || is_dns_subdomain(domain) {
        return Ok(());
    }
    Err("must be an IP, a CIDR or a lowercase domain (optionally with a leading '.'), without wildcards")
}

/// A proxy URL: parses, uses an allowed scheme, and (as an IP) is outside the cluster networks.
fn check_url(f: &mut Findings, cx: &Ctx, opt: &str, v: &str, schemes: &[&str]) {
    let (scheme, host) = match parse_url(v) {
        Ok(x) => x,
        Err(e) => return f.err(format!("proxy.{opt}"), "proxy-url", e.to_string()),
    };
    if !schemes.contains(&scheme.as_str()) {
        f.err(
            format!("proxy.{opt}"),
            "proxy-url",
            format!(
                "scheme '{scheme}' is not allowed (use {})",
                schemes.join(" or ")
            ),
        );
    }
    if let Ok(ip) = host.parse::<IpAddr>() {
        let inside = cx
            .net
            .cluster
            .iter()
            .chain(&cx.net.service)
            .flatten()
            .any(|n| n.contains(ip));
        if inside {
            f.err(
                format!("proxy.{opt}"),
                "proxy-url",
                format!("proxy IP {ip} is inside the cluster or service network"),
            );
        }
    }
}

fn check_mirror(f: &mut Findings, i: usize, m: MirrorOpt) -> PlanMirror {
    if let Err(e) = check_repository(&m.source) {
        f.err(
            format!("image_digest_sources[{i}].source"),
            "mirror-repository",
            e.to_string(),
        );
    }
    // installer `validateImageDigestSources` checks each mirror there is and accepts a source
    // without any (TestValidateInstallConfig "valid release image source ImageDigstSourrce").
    if m.mirrors.is_empty() {
        f.warn(format!(
            "image_digest_sources[{i}] ({}) lists no mirror, so it redirects nothing",
            m.source
        ));
    }
    for (j, r) in m.mirrors.iter().enumerate() {
        if let Err(e) = check_repository(r) {
            f.err(
                format!("image_digest_sources[{i}].mirrors[{j}]"),
                "mirror-repository",
                e.to_string(),
            );
        }
    }
    PlanMirror {
        source: m.source,
        mirrors: m.mirrors,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::plan::fixtures::*;

    #[test]
    fn rule_proxy() {
        fails(
            with(compact(), "proxy", json!({"no_proxy": ["lab"]})),
            "proxy",
            "proxy-url",
        );
        fails(
            with(
                compact(),
                "proxy",
                json!({"http_proxy": "https://p.lab:3128"}),
            ),
            "proxy.http_proxy",
            "proxy-url",
        );
        fails(
            with(compact(), "proxy", json!({"https_proxy": "p.lab:3128"})),
            "proxy.https_proxy",
            "proxy-url",
        );
        fails(
            with(
                compact(),
                "proxy",
                json!({"http_proxy": "http://10.128.0.9:3128"}),
            ),
            "proxy.http_proxy",
            "proxy-url",
        );
        fails(
            with(
                compact(),
                "proxy",
                json!({"http_proxy": "http://p.lab:3128", "no_proxy": ["*.lab"]}),
            ),
            "proxy.no_proxy[0]",
            "no-proxy-entry",
        );
        fails(
            with(
                compact(),
                "proxy",
                json!({"http_proxy": "http://p.lab:3128", "no_proxy": ["*", ".lab"]}),
            ),
            "proxy.no_proxy[0]",
            "no-proxy-entry",
        );
    }

    #[test]
    fn rule_no_proxy_entries_as_the_installer() {
        let proxy = |np: serde_json::Value| {
            with(
                compact(),
                "proxy",
                json!({"http_proxy": "http://p.lab:3128", "no_proxy": np}),
            )
        };
        // validateProxy: IPs, CIDRs (host bits allowed), domains with a leading or trailing dot.
        ok_plan(&proxy(json!([
            ".example.com",
            "lab.",
            "10.0.0.1",
            "10.0.0.1/8",
            "fd00::/64"
        ])));
        ok_plan(&proxy(json!(["*"])));
        // NoProxyDomainName is a DNS-1123 subdomain: lowercase only.
        fails(
            proxy(json!(["Lab.Example.com"])),
            "proxy.no_proxy[0]",
            "no-proxy-entry",
        );
        fails(
            proxy(json!(["lab", "a b"])),
            "proxy.no_proxy[1]",
            "no-proxy-entry",
        );
        fails(
            proxy(json!(["lab", ""])),
            "proxy.no_proxy[1]",
            "no-proxy-entry",
        );
        fails(
            proxy(json!(["..lab"])),
            "proxy.no_proxy[0]",
            "no-proxy-entry",
        );
    }

    #[test]
    fn rule_mirrors() {
        let sources = |v: serde_json::Value| with(compact(), "image_digest_sources", v);
        // validateNamedRepository: no tag, no digest, and a path only behind a registry host.
        for (source, mirror, path) in [
            (
                "quay.io/ocp:4.16",
                "m.lab/ocp",
                "image_digest_sources[0].source",
            ),
            (
                "quay.io/ocp",
                "m.lab/ocp@sha256:ab",
                "image_digest_sources[0].mirrors[0]",
            ),
            (
                "ocp/release-x.y",
                "mirror.example.com:5000",
                "image_digest_sources[0].source",
            ),
            (
                "q.io/ocp/release-x.y",
                "ocp/openshift-x.y",
                "image_digest_sources[0].mirrors[0]",
            ),
        ] {
            fails(
                sources(json!([{"source": source, "mirrors": [mirror]}])),
                path,
                "mirror-repository",
            );
        }
        // validateImageDigestSources accepts a source without mirrors.
        ok_plan(&sources(json!([{"source": "quay.io/ocp", "mirrors": []}])));
    }
}
