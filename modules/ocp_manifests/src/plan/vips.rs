//! API and Ingress VIPs: parsed early (no node may take them from the pool), checked once the
//! platform is known (baremetal needs exactly one of each, in a machine network, on no node).

use std::net::IpAddr;

use crate::model::Topology;

use super::context::{Ctx, Findings, Staged};

#[derive(Default)]
pub(super) struct Vips {
    /// As given, for the plan.
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
        f.warn("api_vips/ingress_vips are ignored with platform none (DNS points at the node or an external load balancer)");
    }
    if platform == "none" && cx.topo.topology != Topology::Sno {
        f.warn("platform none with several nodes: api, api-int and *.apps DNS and their load balancer are your job");
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
    if list.len() > 1 {
        f.err(
            opt,
            "vip-count",
            "give one VIP (two only for dual stack, which this module does not render)",
        );
    }
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
                format!("{vip} is also the IP of nodes[{j}] ({})", o.nodes[j].name),
            );
        }
        if Some(vip) == cx.infra.gateway {
            f.err(&path, "vip-not-node-ip", format!("{vip} is the gateway"));
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::plan::fixtures::*;
    use crate::plan::plan;

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
        fails(
            with(
                compact(),
                "api_vips",
                json!(["192.168.50.5", "192.168.50.7"]),
            ),
            "api_vips",
            "vip-count",
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
