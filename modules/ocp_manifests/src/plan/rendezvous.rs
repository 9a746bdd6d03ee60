//! The rendezvous IP: given, it must be a control-plane node's (either of a dual-stack node's
//! addresses); otherwise the first master's `ip`.

use std::net::IpAddr;

use super::context::{Ctx, Findings, Staged};

pub(super) fn check(cx: &Ctx) -> Staged<Option<IpAddr>> {
    let mut f = Findings::default();
    let masters = |ips: &[Option<IpAddr>]| -> Vec<IpAddr> {
        ips.iter()
            .zip(&cx.topo.roles)
            .filter(|(_, r)| *r == "master")
            .filter_map(|(ip, _)| *ip)
            .collect()
    };
    let master_ips = masters(&cx.addresses.ips);
    let master_secondary = masters(&cx.nodes.secondary_ips);
    let rendezvous = match &cx.o.rendezvous_ip {
        Some(s) => match f.ip(s, "rendezvous_ip") {
            Some(ip) if master_ips.contains(&ip) || master_secondary.contains(&ip) => Some(ip),
            Some(ip) => {
                f.err("rendezvous_ip", "rendezvous-on-master",
                      format!("{ip} is not the IP of a control-plane node; the rendezvousIP must be assigned to a control plane host"));
                None
            }
            None => None,
        },
        None => master_ips.first().copied(),
    };
    f.with(rendezvous)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::plan::fixtures::*;

    #[test]
    fn rule_rendezvous_ip() {
        fails(
            with(ha(), "rendezvous_ip", json!("192.168.50.13")),
            "rendezvous_ip",
            "rendezvous-on-master",
        );
        assert_eq!(
            ok_plan(&with(ha(), "rendezvous_ip", json!("192.168.50.12"))).rendezvous_ip,
            "192.168.50.12"
        );
    }

    #[test]
    fn rendezvous_ip_in_either_family_of_a_dual_stack_master() {
        assert_eq!(
            ok_plan(&with(dual_stack(), "rendezvous_ip", json!("fd00:50::11"))).rendezvous_ip,
            "fd00:50::11"
        );
        assert_eq!(ok_plan(&dual_stack()).rendezvous_ip, "192.168.50.10");
    }
}
