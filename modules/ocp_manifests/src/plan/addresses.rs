//! Node IPs: fill the missing ones from `ip_pool` (never a reserved address), then check every
//! IP (and every dual-stack `secondary_ip`) is unique, inside a machine network, a host address,
//! not a gateway, and in its family: `ip` in the first machine network's, `secondary_ip` in the
//! other.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use crate::model::{IpPool, NodeOpt};
use crate::net::{next_ip, to_u128, Cidr};

use super::context::{Ctx, Findings, Staged, STRICTER};
use super::networks::Stack;

#[derive(Default)]
pub(super) struct Addresses {
    /// Each node's IP, given or allocated (`None` when neither worked).
    pub ips: Vec<Option<IpAddr>>,
}

pub(super) fn check(cx: &Ctx) -> Staged<Addresses> {
    let mut f = Findings::default();
    let o = cx.o;
    let static_ips = &cx.nodes.static_ips;
    let mut ips = static_ips.clone();
    if static_ips.iter().any(Option::is_none) {
        match &o.ip_pool {
            None => {
                for (i, ip) in static_ips.iter().enumerate() {
                    if ip.is_none() && o.nodes[i].ip.is_none() && !cx.nodes.dhcp[i] {
                        f.err(
                            format!("nodes[{i}].ip"),
                            "node-ip-required",
                            "no ip given and no ip_pool to allocate one from",
                        );
                    }
                }
            }
            Some(pool) => {
                let reserved = reserved(cx);
                allocate(
                    &mut f,
                    pool,
                    &cx.net.machine_ok,
                    &reserved,
                    &o.nodes,
                    &cx.nodes.dhcp,
                    &mut ips,
                );
            }
        }
    }
    check_ips(&mut f, cx, &ips);
    f.with(Addresses { ips })
}

/// Addresses the pool must skip: static node IPs, VIPs, the gateway and DNS servers.
fn reserved(cx: &Ctx) -> BTreeSet<IpAddr> {
    let mut reserved: BTreeSet<IpAddr> = cx.nodes.static_ips.iter().flatten().copied().collect();
    reserved.extend(cx.nodes.secondary_ips.iter().flatten());
    reserved.extend(cx.infra.secondary_gateway);
    reserved.extend(cx.vips.api.iter().flatten());
    reserved.extend(cx.vips.ingress.iter().flatten());
    reserved.extend(cx.infra.gateway);
    reserved.extend(
        cx.infra
            .dns_servers
            .iter()
            .filter_map(|d| d.parse::<IpAddr>().ok()),
    );
    reserved
}

fn check_ips(f: &mut Findings, cx: &Ctx, ips: &[Option<IpAddr>]) {
    let mut seen_ips: BTreeMap<IpAddr, usize> = BTreeMap::new();
    let gateways = [cx.infra.gateway, cx.infra.secondary_gateway];
    let all = ips
        .iter()
        .enumerate()
        .map(|(i, ip)| (i, format!("nodes[{i}].ip"), *ip))
        .chain(
            cx.nodes
                .secondary_ips
                .iter()
                .enumerate()
                .map(|(i, ip)| (i, format!("nodes[{i}].secondary_ip"), *ip)),
        );
    for (i, path, ip) in all {
        let Some(ip) = ip else { continue };
        if let Some(j) = seen_ips.insert(ip, i) {
            f.err(
                &path,
                "node-ip-unique",
                format!("{ip} is also an IP of nodes[{j}]"),
            );
        }
        match cx.net.in_machine(ip) {
            None if !cx.net.machine_ok.is_empty() => f.err(
                &path,
                "node-ip-in-machine-network",
                format!(
                    "{ip} is not inside any machine network ({}). {STRICTER} assisted-service's host validation belongs-to-machine-cidr fails for this host, and the install waits on it until it times out",
                    cx.o.machine_networks.join(", ")
                ),
            ),
            Some(m) if ip.is_ipv4() && m.prefix < 31 && (ip == m.network() || ip == m.last()) => f
                .err(
                    &path,
                    "node-ip-host-address",
                    format!("{ip} is the network or broadcast address of {m}"),
                ),
            _ => {}
        }
        if gateways.contains(&Some(ip)) {
            f.err(&path, "node-ip-not-gateway", format!("{ip} is a gateway. {STRICTER} the node and the gateway would answer for one address, and the node loses its route out"));
        }
    }
    for (i, ip) in ips.iter().enumerate() {
        secondary(f, cx, i, *ip);
    }
}

/// A node's `secondary_ip`: required in dual stack (unless the node brings its own networkConfig),
/// of the other family than its `ip`, which is in the first machine network's family; refused
/// outside dual stack.
fn secondary(f: &mut Findings, cx: &Ctx, i: usize, ip: Option<IpAddr>) {
    let dual = cx.net.stack == Stack::Dual;
    let second = cx.nodes.secondary_ips[i];
    let path = format!("nodes[{i}].secondary_ip");
    match second {
        None if dual
            && cx.o.nodes[i].secondary_ip.is_none()
            && cx.o.nodes[i].network_config.is_none()
            && !cx.nodes.dhcp[i] => f.err(
            &path,
            "node-secondary-ip-required",
            "dual-stack networks need each node's address in the second family too",
        ),
        Some(s) if !dual => f.err(
            &path,
            "secondary-without-dual-stack",
            format!("{s}: a secondary IP needs dual-stack networks (an IPv4 and an IPv6 service network)"),
        ),
        Some(s) if s.is_ipv4() == cx.net.primary_v4 => f.err(
            &path,
            "node-ip-family",
            format!("{s} is in the first machine network's family; secondary_ip is the other family's"),
        ),
        _ => {}
    }
    if let Some(ip) = ip.filter(|ip| dual && ip.is_ipv4() != cx.net.primary_v4) {
        f.err(
            format!("nodes[{i}].ip"),
            "node-ip-family",
            format!("{ip}: in dual stack, ip is in the first machine network's family and secondary_ip in the other"),
        );
    }
}

/// The pool as (its machine network, first, last address); `end` defaults to the network's last.
fn pool_range(f: &mut Findings, pool: &IpPool, machine: &[Cidr]) -> Option<(Cidr, IpAddr, IpAddr)> {
    let start = f.ip(&pool.start, "ip_pool.start")?;
    let Some(net) = machine.iter().find(|m| m.contains(start)).copied() else {
        f.err(
            "ip_pool.start",
            "ip-pool-in-machine-network",
            format!("{start} is not inside any machine network"),
        );
        return None;
    };
    let Some(e) = &pool.end else {
        return Some((net, start, net.last()));
    };
    match f.ip(e, "ip_pool.end") {
        Some(e) if !net.contains(e) => {
            f.err(
                "ip_pool.end",
                "ip-pool-in-machine-network",
                format!("{e} is not inside {net}, the network of ip_pool.start"),
            );
            None
        }
        Some(e) if to_u128(e) < to_u128(start) => {
            f.err(
                "ip_pool.end",
                "ip-pool-range",
                format!("{e} is before ip_pool.start {start}"),
            );
            None
        }
        Some(e) => Some((net, start, e)),
        None => None,
    }
}

fn allocate(
    f: &mut Findings,
    pool: &IpPool,
    machine: &[Cidr],
    reserved: &BTreeSet<IpAddr>,
    nodes: &[NodeOpt],
    dhcp: &[bool],
    ips: &mut [Option<IpAddr>],
) {
    let Some((net, start, end)) = pool_range(f, pool, machine) else {
        return;
    };
    let mut next = Some(start);
    for (i, slot) in ips.iter_mut().enumerate() {
        // A DHCP node's address is the DHCP server's to give.
        if slot.is_some() || nodes[i].ip.is_some() || dhcp[i] {
            continue;
        }
        // Skip reserved addresses and the network/broadcast addresses.
        while let Some(ip) = next {
            let edge = ip.is_ipv4() && net.prefix < 31 && (ip == net.network() || ip == net.last());
            if to_u128(ip) > to_u128(end) || (!reserved.contains(&ip) && !edge) {
                break;
            }
            next = next_ip(ip);
        }
        match next {
            Some(ip) if to_u128(ip) <= to_u128(end) => {
                *slot = Some(ip);
                next = next_ip(ip);
            }
            _ => {
                f.err(
                    format!("nodes[{i}].ip"),
                    "ip-pool-exhausted",
                    format!("ip_pool {start}–{end} has no free address left for this node"),
                );
                next = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::plan::fixtures::*;

    #[test]
    fn ip_pool_allocation_skips_reserved_addresses() {
        let mut v = ha();
        for n in v["nodes"].as_array_mut().unwrap() {
            n.as_object_mut().unwrap().remove("ip");
        }
        v["nodes"][2]["ip"] = json!("192.168.50.4");
        v["ip_pool"] = json!({"start": "192.168.50.2", "end": "192.168.50.9"});
        let p = ok_plan(&v);
        // .2 is DNS, .4 static, .5/.6 VIPs: free are .3, .7, .8, .9.
        let ips: Vec<&str> = p.hosts.iter().map(|h| h.ip.as_str()).collect();
        assert_eq!(
            ips,
            [
                "192.168.50.3",
                "192.168.50.7",
                "192.168.50.4",
                "192.168.50.8",
                "192.168.50.9"
            ]
        );
        // One node more than the pool holds.
        v["nodes"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "worker-2", "mac": "bc:24:11:00:00:06"}));
        fails(v.clone(), "nodes[5].ip", "ip-pool-exhausted");
        fails(
            set(v.clone(), "/ip_pool/start", json!("10.0.0.1")),
            "ip_pool.start",
            "ip-pool-in-machine-network",
        );
        fails(
            set(v, "/ip_pool/end", json!("192.168.50.1")),
            "ip_pool.end",
            "ip-pool-range",
        );
        // Without a pool an IP is required.
        let mut v = compact();
        v["nodes"][1].as_object_mut().unwrap().remove("ip");
        fails(v, "nodes[1].ip", "node-ip-required");
    }

    #[test]
    fn rule_node_ips() {
        fails(
            set(compact(), "/nodes/1/ip", json!("10.0.0.1")),
            "nodes[1].ip",
            "node-ip-in-machine-network",
        );
        fails(
            set(compact(), "/nodes/2/ip", json!("192.168.50.10")),
            "nodes[2].ip",
            "node-ip-unique",
        );
        fails(
            set(compact(), "/nodes/2/ip", json!("192.168.50.255")),
            "nodes[2].ip",
            "node-ip-host-address",
        );
        fails(
            set(compact(), "/nodes/2/ip", json!("192.168.50.1")),
            "nodes[2].ip",
            "node-ip-not-gateway",
        );
        fails(
            set(compact(), "/nodes/2/ip", json!("fe80::1")),
            "nodes[2].ip",
            "node-ip-in-machine-network",
        );
    }

    #[test]
    fn rule_secondary_ips() {
        let mut v = dual_stack();
        v["nodes"][1]
            .as_object_mut()
            .unwrap()
            .remove("secondary_ip");
        fails(v, "nodes[1].secondary_ip", "node-secondary-ip-required");
        fails(
            set(
                dual_stack(),
                "/nodes/1/secondary_ip",
                json!("192.168.50.99"),
            ),
            "nodes[1].secondary_ip",
            "node-ip-family",
        );
        fails(
            set(dual_stack(), "/nodes/1/ip", json!("fd00:50::99")),
            "nodes[1].ip",
            "node-ip-family",
        );
        fails(
            set(dual_stack(), "/nodes/2/secondary_ip", json!("fd00:50::10")),
            "nodes[2].secondary_ip",
            "node-ip-unique",
        );
        fails(
            set(dual_stack(), "/nodes/2/secondary_ip", json!("fd00:51::10")),
            "nodes[2].secondary_ip",
            "node-ip-in-machine-network",
        );
        fails(
            set(dual_stack(), "/nodes/2/secondary_ip", json!("fd00:50::1")),
            "nodes[2].secondary_ip",
            "node-ip-not-gateway",
        );
        fails(
            set(compact(), "/nodes/0/secondary_ip", json!("fd00:50::10")),
            "nodes[0].secondary_ip",
            "secondary-without-dual-stack",
        );
    }
}
