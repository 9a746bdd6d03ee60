//! API and Ingress VIPs: parsed early (no node may take them from the pool), checked once the
//! platform is known, as the installer's `validateAPIAndIngressVIPs`
//! (pkg/types/validation/installconfig.go) does for baremetal: one or two of each (two = an IPv4
//! and an IPv6), the first one in the primary family of every network list in dual stack, in a
//! machine network unless the load balancer is user-managed, the API's not among the Ingress VIPs;
//! and on no node or gateway.

use std::net::IpAddr;

use crate::model::Topology;

use super::context::{Ctx, Findings, Staged, STRICTER};
use super::networks::Stack;

#[derive(Default)]
pub(super) struct Vips {
    /// As given, in the canonical form when they parse (IPv6 as `getent` prints it), for the plan.
    pub api_strs: Vec<String>,
    pub ingress_strs: Vec<String>,
    pub api: Vec<Option<IpAddr>>,
    pub ingress: Vec<Option<IpAddr>>,
}

pub(super) fn parse(cx: &Ctx) -> Staged<Vips> {
    let mut f = Findings::default();
    let api_strs = cx.o.api_vips.clone().unwrap_or_default();
    let ingress_strs = cx.o.ingress_vips.clone().unwrap_or_default();
    let mut ips = |opt: &str, list: &[String]| -> Vec<Option<IpAddr>> {
        list.iter()
            .enumerate()
            .map(|(i, s)| f.ip(s, &format!("{opt}[{i}]")))
            .collect()
    };
    let api = ips("api_vips", &api_strs);
    let ingress = ips("ingress_vips", &ingress_strs);
    let canonical = |strs: Vec<String>, ips: &[Option<IpAddr>]| -> Vec<String> {
        strs.into_iter()
            .zip(ips)
            .map(|(s, ip)| ip.map(|x| x.to_string()).unwrap_or(s))
            .collect()
    };
    let api_strs = canonical(api_strs, &api);
    let ingress_strs = canonical(ingress_strs, &ingress);
    f.with(Vips {
        api_strs,
        ingress_strs,
        api,
        ingress,
    })
}

pub(super) fn check(cx: &Ctx) -> Staged<()> {
    let mut f = Findings::default();
    let o = cx.o;
    let platform = cx.topo.platform;
    let (api, ingress) = (&cx.vips.api, &cx.vips.ingress);
    let user_managed = o.load_balancer.as_deref() == Some("UserManaged");
    if platform == "baremetal" {
        for (opt, list) in [("api_vips", api), ("ingress_vips", ingress)] {
            check_list(&mut f, cx, opt, list, user_managed);
        }
        if !user_managed {
            for (i, a) in api.iter().enumerate() {
                if a.is_some() && ingress.contains(a) {
                    f.err(
                        format!("api_vips[{i}]"),
                        "vip-distinct",
                        "the API VIP must differ from the Ingress VIP",
                    );
                }
            }
        }
    } else if !api.is_empty() || !ingress.is_empty() {
        f.warn(format!("api_vips/ingress_vips are ignored with platform {platform} (DNS points at the node or an external load balancer)"));
    }
    if platform != "baremetal" && cx.topo.topology != Topology::Sno {
        f.warn(format!("platform {platform} with several nodes: api, api-int and *.apps DNS and their load balancer are your job"));
    }
    if o.load_balancer.is_some() && platform != "baremetal" {
        f.warn("load_balancer is ignored unless platform is baremetal");
    }
    f.with(())
}

fn check_list(f: &mut Findings, cx: &Ctx, opt: &str, list: &[Option<IpAddr>], user_managed: bool) {
    let o = cx.o;
    if list.is_empty() {
        f.err(
            opt,
            "vip-required",
            format!("platform baremetal needs at least one VIP in {opt}"),
        );
    }
    families(f, cx, opt, list);
    for (i, vip) in list.iter().enumerate() {
        let Some(vip) = *vip else { continue };
        let path = format!("{opt}[{i}]");
        if !user_managed && cx.net.in_machine(vip).is_none() && !cx.net.machine_ok.is_empty() {
            f.err(
                &path,
                "vip-in-machine-network",
                format!(
                    "{vip}: IP expected to be in one of the machine networks: {}",
                    o.machine_networks.join(",")
                ),
            );
        }
        if let Some(j) = cx.addresses.ips.iter().position(|x| *x == Some(vip)) {
            f.err(
                &path,
                "vip-not-node-ip",
                format!("{vip} is also the IP of nodes[{j}] ({}). {STRICTER} keepalived would move the VIP onto a node that already holds it as its own address, so API or ingress traffic reaches whichever answers ARP first", o.nodes[j].name),
            );
        }
        if [cx.infra.gateway, cx.infra.secondary_gateway].contains(&Some(vip)) {
            f.err(&path, "vip-not-node-ip", format!("{vip} is a gateway. {STRICTER} keepalived would take the gateway's address, cutting the nodes off from their route out"));
        }
    }
}

/// validateAPIAndIngressVIPs: at most two, and two are one IPv4 and one IPv6 address. In dual stack
/// the first VIP is the primary one: its family must be the primary (first) family of the machine,
/// service and cluster networks alike (the installer names each list that differs: "<list> primary
/// IP Family and primary IP family for the API VIP should match"). Checked against
/// TestValidateInstallConfig at 5c29e905 ("baremetal API VIP set to an incorrect IP Family", "… with
/// invalid primary IPv6 network" — only the service network's primary differs there — and the
/// Ingress pair; corpus networking.yaml). Releases before IPv6-primary dual stack compared a single
/// VIP with the machine network's primary family only ("VIP for the API must be of the same IP family
/// with machine network's primary IP Family") and a pair only for one address of each family; here
/// a pair's first VIP must be of the primary family in every release (an IPv6-first pair on IPv4-first
/// networks, which those releases took, is refused: list the IPv4 VIP first).
fn families(f: &mut Findings, cx: &Ctx, opt: &str, list: &[Option<IpAddr>]) {
    let parsed: Vec<IpAddr> = list.iter().flatten().copied().collect();
    match list.len() {
        0 | 1 => {}
        2 => {
            if parsed.len() == 2 && parsed[0].is_ipv4() == parsed[1].is_ipv4() {
                f.err(
                    opt,
                    "vip-dual-stack-pair",
                    "if two VIPs are given, one must be an IPv4 address, the other an IPv6",
                );
            }
        }
        n => f.err(
            opt,
            "vip-count",
            format!("{n} VIPs: must have at most 2 items (one per address family)"),
        ),
    }
    let Some(Some(first)) = list.first() else {
        return;
    };
    if cx.net.stack != Stack::Dual {
        return;
    }
    let primaries = [
        ("machine_networks", cx.net.machine_ok.first().copied()),
        (
            "service_networks",
            cx.net.service.iter().flatten().next().copied(),
        ),
        (
            "cluster_networks",
            cx.net.cluster.iter().flatten().next().copied(),
        ),
    ];
    for (list_opt, primary) in primaries {
        if primary.is_some_and(|p| p.addr.is_ipv4() != first.is_ipv4()) {
            f.err(
                format!("{opt}[0]"),
                "vip-primary-family",
                format!("{first}: {list_opt} primary IP family and the primary (first) VIP's family should match"),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::plan::fixtures::*;
    use crate::plan::plan;

    /// Rules stricter than the installer's offline checks say so, and why the install would fail.
    #[test]
    fn stricter_rules_say_the_installer_does_not_check_them() {
        let ha = with(
            with(compact(), "platform", json!("baremetal")),
            "api_vips",
            json!(["192.168.50.10"]),
        );
        let ha = with(ha, "ingress_vips", json!(["192.168.50.6"]));
        for (v, rule) in [
            (ha, "vip-not-node-ip"),
            (
                set(compact(), "/nodes/1/ip", json!("10.9.9.9")),
                "node-ip-in-machine-network",
            ),
            (
                set(compact(), "/nodes/1/mac", json!("bc:24:11:00:00:01")),
                "mac-unique",
            ),
        ] {
            let p = problems(&v);
            let found = p
                .iter()
                .find(|x| x.rule == rule)
                .unwrap_or_else(|| panic!("{rule}: {p:#?}"));
            assert!(
                found.msg.contains(
                    "The installer does not check this offline; the install would fail because"
                ),
                "{rule}: {}",
                found.msg
            );
        }
    }

    #[test]
    fn rule_vips() {
        let mut v = compact();
        v.as_object_mut().unwrap().remove("api_vips");
        fails(v, "api_vips", "vip-required");
        fails(
            with(compact(), "ingress_vips", json!(["10.9.9.9"])),
            "ingress_vips[0]",
            "vip-in-machine-network",
        );
        fails(
            with(compact(), "ingress_vips", json!(["192.168.50.5"])),
            "api_vips[0]",
            "vip-distinct",
        );
        fails(
            with(compact(), "api_vips", json!(["192.168.50.11"])),
            "api_vips[0]",
            "vip-not-node-ip",
        );
        // validateAPIAndIngressVIPs: "If two API VIPs are given, one must be an IPv4 address,
        // the other an IPv6", and at most two.
        fails(
            with(
                compact(),
                "api_vips",
                json!(["192.168.50.5", "192.168.50.7"]),
            ),
            "api_vips",
            "vip-dual-stack-pair",
        );
        fails(
            with(
                dual_stack(),
                "api_vips",
                json!(["192.168.50.5", "fd00:50::5", "192.168.50.7"]),
            ),
            "api_vips",
            "vip-count",
        );
        // "clusterNetwork/machineNetwork/serviceNetwork primary IP Family and primary IP family
        // for the API VIP should match" (TestValidateInstallConfig, "baremetal API VIP set to an
        // incorrect IP Family"); one VIP of the primary family is fine.
        let p = problems(&with(dual_stack(), "ingress_vips", json!(["fd00:50::6"])));
        let at: Vec<&str> = p
            .iter()
            .filter(|x| x.rule == "vip-primary-family")
            .map(|x| x.path.as_str())
            .collect();
        assert_eq!(at, ["ingress_vips[0]"; 3], "{p:#?}");
        ok_plan(&with(dual_stack(), "api_vips", json!(["192.168.50.5"])));
        // A pair leads with the primary family.
        fails(
            with(
                dual_stack(),
                "api_vips",
                json!(["fd00:50::5", "192.168.50.5"]),
            ),
            "api_vips[0]",
            "vip-primary-family",
        );
        fails(
            with(
                dual_stack(),
                "api_vips",
                json!(["192.168.50.5", "fd00:99::5"]),
            ),
            "api_vips[1]",
            "vip-in-machine-network",
        );
        assert_eq!(
            ok_plan(&with(
                dual_stack(),
                "api_vips",
                json!(["192.168.50.5", "FD00:50:0::5"])
            ))
            .api_vips,
            ["192.168.50.5", "fd00:50::5"]
        );
        fails(
            with(compact(), "api_vips", json!(["192.168.50.300"])),
            "api_vips[0]",
            "ip-syntax",
        );
        // UserManaged load balancers may sit outside the machine network.
        ok_plan(&with(
            with(compact(), "load_balancer", json!("UserManaged")),
            "api_vips",
            json!(["10.9.9.9"]),
        ));
    }

    #[test]
    fn rule_platform_none_multi_node_needs_no_vips() {
        let mut v = with(compact(), "platform", json!("none"));
        v.as_object_mut().unwrap().remove("api_vips");
        let planned = plan(&options(&v));
        assert!(planned.problems.is_empty());
        assert!(
            planned.warnings.iter().any(|w| w.contains("load balancer")),
            "{:?}",
            planned.warnings
        );
    }
}
