//! What every node's network relies on: the gateway, DNS and NTP servers, the interface name.

use std::net::IpAddr;

use crate::net::is_dns_subdomain;
use crate::nmstate;

use super::context::{Ctx, Findings, Staged};

#[derive(Default)]
pub(super) struct Infra {
    pub gateway: Option<IpAddr>,
    pub dns_servers: Vec<String>,
    pub ntp: Vec<String>,
}

pub(super) fn check(cx: &Ctx) -> Staged<Infra> {
    let mut f = Findings::default();
    let o = cx.o;
    let gateway = o.gateway.as_deref().and_then(|g| f.ip(g, "gateway"));
    if let Some(g) = gateway {
        if cx.net.in_machine(g).is_none() && !cx.net.machine_ok.is_empty() {
            f.err(
                "gateway",
                "gateway-in-machine-network",
                format!("{g} is not inside any machine network"),
            );
        }
    }
    let dns_servers = o.dns_servers.clone().unwrap_or_default();
    for (i, d) in dns_servers.iter().enumerate() {
        f.ip(d, &format!("dns_servers[{i}]"));
    }
    let ntp = o.ntp_servers.clone().unwrap_or_default();
    for (i, s) in ntp.iter().enumerate() {
        if s.parse::<IpAddr>().is_err() && !is_dns_subdomain(&s.to_ascii_lowercase()) {
            f.err(
                format!("ntp_servers[{i}]"),
                "ntp-source",
                format!("'{s}' is neither an IP address nor a domain name"),
            );
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
        dns_servers,
        ntp,
    })
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
            json!(["192.168.50.2", "Pool.NTP.org"]),
        ));
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
}
