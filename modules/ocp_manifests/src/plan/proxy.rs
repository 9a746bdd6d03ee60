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
        let ok = if e == "*" {
            entries.len() == 1
        } else {
            let d = e.strip_prefix('.').unwrap_or(e).to_ascii_lowercase();
            e.parse::<IpAddr>().is_ok() || Cidr::parse(e).is_ok() || is_dns_subdomain(&d)
        };
        if !ok {
            f.err(format!("proxy.no_proxy[{i}]"), "no-proxy-entry",
                  format!("'{e}' must be a domain (optionally with a leading '.'), an IP, a CIDR, or '*' alone; no spaces or wildcards"));
        }
    }
    PlanProxy {
        http_proxy: p.http_proxy.clone(),
        https_proxy: p.https_proxy.clone(),
        no_proxy: (!entries.is_empty()).then(|| entries.join(",")),
    }
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
    if m.mirrors.is_empty() {
        f.err(
            format!("image_digest_sources[{i}].mirrors"),
            "mirror-repository",
            "at least one mirror is required",
        );
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
    fn rule_mirrors() {
        fails(
            with(
                compact(),
                "image_digest_sources",
                json!([{"source": "quay.io/ocp:4.16", "mirrors": ["m.lab/ocp"]}]),
            ),
            "image_digest_sources[0].source",
            "mirror-repository",
        );
        fails(
            with(
                compact(),
                "image_digest_sources",
                json!([{"source": "quay.io/ocp", "mirrors": ["m.lab/ocp@sha256:ab"]}]),
            ),
            "image_digest_sources[0].mirrors[0]",
            "mirror-repository",
        );
        fails(
            with(
                compact(),
                "image_digest_sources",
                json!([{"source": "quay.io/ocp", "mirrors": []}]),
            ),
            "image_digest_sources[0].mirrors",
            "mirror-repository",
        );
    }
}
