//! The rendezvous IP: given, it must be a control-plane node's (either of a dual-stack node's
//! addresses); otherwise the first master's `ip`. With DHCP masters whose address is not given,
//! agent-config holds no networkConfig to take it from, so the installer's `RetrieveRendezvousIP`
//! (pkg/asset/agent/image/ignition.go) needs it set: `rendezvous_ip` is then required, and it
//! cannot be checked against those masters (only against the workers' known addresses).

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
    // A DHCP master without a given address: the DHCP server's choice, unknown here.
    let unknown_master = cx.topo.roles.iter().enumerate().any(|(i, r)| {
        r == "master" && cx.nodes.dhcp.get(i) == Some(&true) && cx.addresses.ips[i].is_none()
    });
    let worker_ips: Vec<IpAddr> = (cx.addresses.ips.iter().chain(&cx.nodes.secondary_ips))
        .zip(cx.topo.roles.iter().chain(&cx.topo.roles))
        .filter(|(_, r)| *r != "master")
        .filter_map(|(ip, _)| *ip)
        .collect();
    let rendezvous = match &cx.o.rendezvous_ip {
        Some(s) => match f.ip(s, "rendezvous_ip") {
            Some(ip) if master_ips.contains(&ip) || master_secondary.contains(&ip) => Some(ip),
            Some(ip) if unknown_master && !worker_ips.contains(&ip) => Some(ip),
            Some(ip) => {
                f.err("rendezvous_ip", "rendezvous-on-master",
                      format!("{ip} is not the IP of a control-plane node; the rendezvousIP must be assigned to a control plane host"));
                None
            }
            None => None,
        },
        None => {
            let first = master_ips.first().copied();
            if first.is_none() && unknown_master {
                f.err("rendezvous_ip", "rendezvous-ip-required",
                      "the control-plane nodes take their addresses from DHCP: set rendezvous_ip to the address the DHCP server gives one of them (or give that node's ip)");
            }
            first
        }
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

    /// DHCP hosts: agent-config has no networkConfig for them, so `RetrieveRendezvousIP` needs
    /// `rendezvousIP` set (its TestRetrieveRendezvousIP: "valid-agent-config-provided-with-
    /// RendezvousIP" takes it from agent-config alone, with hosts that have no networkConfig); a
    /// given node ip (the DHCP reservation) still serves as the default.
    #[test]
    fn dhcp_hosts_need_a_rendezvous_ip() {
        let mut v = with(compact(), "dhcp", json!(true));
        for n in v["nodes"].as_array_mut().unwrap() {
            n.as_object_mut().unwrap().remove("ip");
        }
        fails(v.clone(), "rendezvous_ip", "rendezvous-ip-required");
        let p = ok_plan(&with(v.clone(), "rendezvous_ip", json!("192.168.50.30")));
        assert_eq!(p.rendezvous_ip, "192.168.50.30");
        assert!(p
            .hosts
            .iter()
            .all(|h| h.network_config.is_null() && h.ip.is_empty()));
        let (ic, ac) = crate::render::render(&p, None).unwrap();
        assert!(!ac.contains("networkConfig"), "{ac}");
        assert_eq!(crate::verify::verify(&p, &ic, &ac), vec![]);
        assert!(ac.contains("rendezvousIP: \"192.168.50.30\""), "{ac}");
        assert!(ac.contains("macAddress: \"bc:24:11:00:00:01\""), "{ac}");
        // A reserved address given for a master is the default.
        let with_ip = set(v.clone(), "/nodes/1/ip", json!("192.168.50.11"));
        assert_eq!(ok_plan(&with_ip).rendezvous_ip, "192.168.50.11");
        // Never a worker's known address.
        let mut ha = with(ha(), "dhcp", json!(true));
        for i in 0..3 {
            ha["nodes"][i].as_object_mut().unwrap().remove("ip");
        }
        fails(
            with(ha, "rendezvous_ip", json!("192.168.50.13")),
            "rendezvous_ip",
            "rendezvous-on-master",
        );
    }

    /// One DHCP node among static ones; a node's own switch wins over the cluster's.
    #[test]
    fn dhcp_per_node() {
        let v = set(compact(), "/nodes/2/dhcp", json!(true));
        let p = ok_plan(&v);
        assert!(p.hosts[2].network_config.is_null() && !p.hosts[0].network_config.is_null());
        assert_eq!(
            p.hosts[2].ip, "192.168.50.12",
            "the reserved address is kept for the checks"
        );
        let v = set(
            with(compact(), "dhcp", json!(true)),
            "/nodes/0/dhcp",
            json!(false),
        );
        let p = ok_plan(&v);
        assert!(!p.hosts[0].network_config.is_null() && p.hosts[1].network_config.is_null());
        let (ic, ac) = crate::render::render(&p, None).unwrap();
        assert_eq!(ac.matches("networkConfig").count(), 1, "{ac}");
        assert_eq!(crate::verify::verify(&p, &ic, &ac), vec![]);
        // DHCP and a static networkConfig contradict each other.
        let nc = json!({"interfaces": [{"name": "ens18", "type": "ethernet", "state": "up", "mac-address": "bc:24:11:00:00:01"}]});
        fails(
            set(
                set(compact(), "/nodes/0/dhcp", json!(true)),
                "/nodes/0/network_config",
                nc,
            ),
            "nodes[0].network_config",
            "dhcp-network-config",
        );
    }
}
