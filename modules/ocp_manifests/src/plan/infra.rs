//! What every node's network relies on: the gateways (one per address family in dual stack), DNS
//! and NTP servers, the interface name.

use std::net::IpAddr;

use crate::net::is_dns_subdomain;
use crate::nmstate;

use super::context::{Ctx, Findings, Staged};
use super::networks::Stack;

#[derive(Default)]
pub(super) struct Infra {
    pub gateway: Option<IpAddr>,
    /// Dual stack: the default gateway of the other family.
    pub secondary_gateway: Option<IpAddr>,
    pub dns_servers: Vec<String>,
    pub ntp: Vec<String>,
}

pub(super) fn check(cx: &Ctx) -> Staged<Infra> {
    let mut f = Findings::default();
    let o = cx.o;
    let gateway = o.gateway.as_deref().and_then(|g| f.ip(g, "gateway"));
    let secondary_gateway = o
        .secondary_gateway
        .as_deref()
        .and_then(|g| f.ip(g, "secondary_gateway"));
    for (opt, g) in [
        ("gateway", gateway),
        ("secondary_gateway", secondary_gateway),
    ] {
        let Some(g) = g else { continue };
        if cx.net.in_machine(g).is_none() && !cx.net.machine_ok.is_empty() {
            f.err(
                opt,
                "gateway-in-machine-network",
                format!("{g} is not inside any machine network"),
            );
        }
    }
    gateway_families(&mut f, cx, gateway, secondary_gateway);
    let dns_servers = o.dns_servers.clone().unwrap_or_default();
    for (i, d) in dns_servers.iter().enumerate() {
        f.ip(d, &format!("dns_servers[{i}]"));
    }
    let ntp = o.ntp_servers.clone().unwrap_or_default();
    for (i, s) in ntp.iter().enumerate() {
        // agent-config `additionalNTPSources` (installer pkg/asset/agent/agentconfig
        // `validateAdditionalNTPSources`): `validate.DomainName(source, true)` — a DNS-1123
        // subdomain, lower case only, one trailing dot allowed — else `net.ParseIP`.
        if s.parse::<IpAddr>().is_err() && !is_dns_subdomain(s) {
            let why = if is_dns_subdomain(&s.to_ascii_lowercase()) {
                format!("'{s}' is not a valid NTP source: a domain name must be lower case (RFC 1123 subdomain; write '{}')", s.to_ascii_lowercase())
            } else {
                format!("'{s}' is neither an IP address nor a domain name (RFC 1123 subdomain)")
            };
            f.err(format!("ntp_servers[{i}]"), "ntp-source", why);
        }
    }
    if !nmstate::is_ifname(&o.interface_name) {
        f.err(
            "interface_name",
            "interface-name",
            format!("'{}' is not a Linux interface name", o.interface_name),
        );
    }
    f.with(Infra {
        gateway,
        secondary_gateway,
        dns_servers,
        ntp,
    })
}

/// `gateway` is in the primary family (the first machine network's), `secondary_gateway` in the
/// other one and only in dual stack.
fn gateway_families(
    f: &mut Findings,
    cx: &Ctx,
    gateway: Option<IpAddr>,
    secondary: Option<IpAddr>,
) {
    let primary_v4 = cx.net.primary_v4;
    let dual = cx.net.stack == Stack::Dual;
    if let Some(g) = gateway.filter(|g| dual && g.is_ipv4() != primary_v4) {
        f.err(
            "gateway",
            "gateway-family",
            format!("{g}: in dual stack, gateway is in the first machine network's family and secondary_gateway in the other"),
        );
    }
    match secondary {
        Some(g) if !dual => f.err(
            "secondary_gateway",
            "secondary-without-dual-stack",
            format!("{g}: a secondary gateway needs dual-stack networks (an IPv4 and an IPv6 service network)"),
        ),
        Some(g) if g.is_ipv4() == primary_v4 => f.err(
            "secondary_gateway",
            "gateway-family",
            format!("{g} is in the same family as the first machine network; secondary_gateway is the other family's"),
        ),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::plan::fixtures::*;

    #[test]
    fn rule_ntp_dns_gateway_interface() {
        fails(
            with(compact(), "ntp_servers", json!(["ntp .lab"])),
            "ntp_servers[0]",
            "ntp-source",
        );
        ok_plan(&with(
            compact(),
            "ntp_servers",
            json!([
                "192.168.50.2",
                "pool.ntp.org",
                "ntp1",
                "time.lab.",
                "fd00::123"
            ]),
        ));
        // validateAdditionalNTPSources → validate.DomainName: lower case only.
        for (i, upper) in ["NTP.example.com", "Pool.NTP.org", "NTP1"]
            .iter()
            .enumerate()
        {
            let mut list = vec![json!("192.168.50.2"); i];
            list.push(json!(upper));
            fails(
                with(compact(), "ntp_servers", json!(list)),
                &format!("ntp_servers[{i}]"),
                "ntp-source",
            );
        }
        fails(
            with(compact(), "dns_servers", json!(["dns.lab"])),
            "dns_servers[0]",
            "ip-syntax",
        );
        fails(
            with(compact(), "gateway", json!("10.0.0.1")),
            "gateway",
            "gateway-in-machine-network",
        );
        let mut v = compact();
        v.as_object_mut().unwrap().remove("gateway");
        fails(v, "gateway", "gateway-required");
        let mut v = compact();
        v.as_object_mut().unwrap().remove("dns_servers");
        fails(v, "dns_servers", "dns-servers-required");
        fails(
            with(
                compact(),
                "interface_name",
                json!("a-very-long-interface-name"),
            ),
            "interface_name",
            "interface-name",
        );
    }

    #[test]
    fn rule_gateway_families() {
        fails(
            with(dual_stack(), "secondary_gateway", json!("192.168.50.254")),
            "secondary_gateway",
            "gateway-family",
        );
        fails(
            with(dual_stack(), "gateway", json!("fd00:50::1")),
            "gateway",
            "gateway-family",
        );
        fails(
            with(compact(), "secondary_gateway", json!("fd00:50::1")),
            "secondary_gateway",
            "secondary-without-dual-stack",
        );
        fails(
            with(dual_stack(), "secondary_gateway", json!("fd09::1")),
            "secondary_gateway",
            "gateway-in-machine-network",
        );
    }
}
