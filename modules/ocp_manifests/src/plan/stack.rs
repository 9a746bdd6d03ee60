//! The cluster's address families, with the rules of the installer's
//! `validateNetworkingIPVersion` (openshift/installer pkg/types/validation/installconfig.go): the
//! stack is read from the service networks; dual stack needs exactly two service networks and both
//! families in every network list, and lists IPv4 first unless the platform allows IPv6 as the
//! primary family (baremetal does, none does not); IPv4 alone allows one service network.
//! Single-stack IPv6 and dual stack are both allowed on the two platforms this module renders.

use crate::net::Cidr;

use super::context::{Ctx, Findings, Staged};
use super::networks::Stack;

pub(super) fn check(cx: &Ctx) -> Staged<()> {
    let mut f = Findings::default();
    let o = cx.o;
    match cx.net.stack {
        Stack::V4 if o.service_networks.len() > 1 => f.err(
            "service_networks",
            "service-network-count",
            "only one service network can be specified (two only for dual-stack IPv4/IPv6)",
        ),
        Stack::Dual => {
            if o.service_networks.len() != 2 {
                f.err(
                    "service_networks",
                    "dual-stack-service-count",
                    "when installing dual-stack IPv4/IPv6 you must provide two service networks, one for each IP address type",
                );
            }
            let machine: Vec<Option<Cidr>> = cx.net.machine_ok.iter().copied().map(Some).collect();
            let allow_v6_primary = cx.topo.platform == "baremetal";
            for (opt, list) in [
                ("machine_networks", &machine),
                ("service_networks", &cx.net.service),
                ("cluster_networks", &cx.net.cluster),
            ] {
                both_families(&mut f, opt, list, allow_v6_primary);
            }
        }
        _ => {}
    }
    f.with(())
}

/// One network list of a dual-stack cluster: both families, IPv4 first unless IPv6 may lead.
fn both_families(f: &mut Findings, opt: &str, list: &[Option<Cidr>], allow_v6_primary: bool) {
    let parsed: Vec<Cidr> = list.iter().flatten().copied().collect();
    let shown = parsed
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    let has_v4 = parsed.iter().any(|c| c.addr.is_ipv4());
    let has_v6 = parsed.iter().any(|c| !c.addr.is_ipv4());
    if has_v4 != has_v6 {
        let (want, but) = if has_v4 {
            ("IPv6", "IPv4")
        } else {
            ("IPv4", "IPv6")
        };
        f.err(
            opt,
            "dual-stack-families",
            format!("{shown}: dual-stack IPv4/IPv6 requires an {want} network in this list (it holds only {but})"),
        );
    }
    let v6_first = parsed.first().is_some_and(|c| !c.addr.is_ipv4());
    if has_v4 && has_v6 && v6_first && !allow_v6_primary {
        f.err(
            opt,
            "dual-stack-ipv4-first",
            format!("{shown}: IPv4 addresses must be listed before IPv6 addresses (IPv6-primary dual stack needs platform baremetal)"),
        );
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use crate::plan::fixtures::*;

    #[test]
    fn dual_stack_compact_cluster_plans() {
        let p = ok_plan(&dual_stack());
        assert_eq!(p.machine_networks, ["192.168.50.0/24", "fd00:50::/64"]);
        assert_eq!(p.service_networks, ["172.30.0.0/16", "fd02::/112"]);
        assert_eq!(p.api_vips, ["192.168.50.5", "fd00:50::5"]);
        assert_eq!(p.hosts[0].secondary_ip.as_deref(), Some("fd00:50::10"));
    }

    /// validateNetworkingIPVersion: "when installing dual-stack IPv4/IPv6 you must provide two
    /// service networks"; in the IPv4-only case "only one service network can be specified".
    #[test]
    fn rule_service_network_count_per_stack() {
        fails(
            with(
                dual_stack(),
                "service_networks",
                json!(["172.30.0.0/16", "fd02::/112", "fd03::/112"]),
            ),
            "service_networks",
            "dual-stack-service-count",
        );
        fails(
            with(
                compact(),
                "service_networks",
                json!(["172.30.0.0/16", "172.31.0.0/16"]),
            ),
            "service_networks",
            "service-network-count",
        );
    }

    /// validateNetworkingIPVersion: each of machineNetwork, serviceNetwork and clusterNetwork of a
    /// dual-stack cluster "requires an IPv6 (IPv4) network in this list".
    #[test]
    fn rule_dual_stack_needs_both_families_in_every_list() {
        fails(
            with(dual_stack(), "machine_networks", json!(["192.168.50.0/24"])),
            "machine_networks",
            "dual-stack-families",
        );
        fails(
            with(
                dual_stack(),
                "cluster_networks",
                json!([{"cidr": "fd01::/48", "host_prefix": 64}]),
            ),
            "cluster_networks",
            "dual-stack-families",
        );
        // Mixed order inside a list ("IPv4, IPv6, IPv4") is fine.
        ok_plan(&with(
            dual_stack(),
            "cluster_networks",
            json!([{"cidr": "10.128.0.0/14", "host_prefix": 23},
                   {"cidr": "fd01::/48", "host_prefix": 64},
                   {"cidr": "10.132.0.0/14", "host_prefix": 23}]),
        ));
    }

    /// validateNetworkingIPVersion: IPv6 first ("IPv6 primary") only where `allowV6Primary`:
    /// baremetal yes, none no ("IPv4 addresses must be listed before IPv6 addresses").
    #[test]
    fn rule_ipv6_primary_only_on_baremetal() {
        let v6_primary = v6_primary(dual_stack());
        let p = ok_plan(&v6_primary);
        assert_eq!(p.platform, "baremetal");
        assert_eq!(p.rendezvous_ip, "fd00:50::10");
        let none = with(v6_primary, "platform", json!("none"));
        for opt in ["machine_networks", "service_networks", "cluster_networks"] {
            fails(none.clone(), opt, "dual-stack-ipv4-first");
        }
    }

    /// validateNetworkingIPVersion: single-stack IPv6 is allowed on baremetal and none.
    #[test]
    fn single_stack_ipv6_on_both_platforms() {
        let p = ok_plan(&ipv6_only(compact()));
        assert_eq!(p.platform, "baremetal");
        assert_eq!(p.hosts[0].ip, "fd00:50::10");
        let doc = &p.hosts[0].network_config;
        assert_eq!(doc["interfaces"][0]["ipv4"]["enabled"], false);
        assert_eq!(doc["routes"]["config"][0]["destination"], "::/0");
        let p = ok_plan(&ipv6_only(sno()));
        assert_eq!(p.platform, "none");
        assert_eq!(p.rendezvous_ip, "fd00:50::20");
    }

    /// The dual-stack fixture with every list, VIP pair, gateway and node IP turned IPv6-first.
    fn v6_primary(mut v: Value) -> Value {
        for k in [
            "machine_networks",
            "service_networks",
            "cluster_networks",
            "api_vips",
            "ingress_vips",
        ] {
            v[k].as_array_mut().unwrap().reverse();
        }
        let (g, g2) = (v["gateway"].clone(), v["secondary_gateway"].clone());
        v["gateway"] = g2;
        v["secondary_gateway"] = g;
        for n in v["nodes"].as_array_mut().unwrap() {
            let (a, b) = (n["ip"].clone(), n["secondary_ip"].clone());
            n["ip"] = b;
            n["secondary_ip"] = a;
        }
        v
    }
}
