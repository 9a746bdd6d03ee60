//! Each host of agent-config: root-device hints and its networkConfig, either the user's own
//! nmstate (which must carry the node's MAC and IP) or one generated for the static IP; both go
//! through the structural check and the nmstate library.

use std::collections::BTreeMap;
use std::net::IpAddr;

use serde_json::Value;

use crate::model::{NodeOpt, PlanHost, PlanInterface};
use crate::nmstate;

use super::context::{Ctx, Findings, Staged};
use super::networks::Stack;
use super::root_hints;

/// What the hosts share while they are checked one after the other.
struct Seen {
    /// Every MAC of every host's interfaces (the installer requires them unique across hosts).
    all_macs: BTreeMap<String, usize>,
    /// Missing gateway / DNS servers are reported once, not once per host.
    reported_gateway: bool,
    reported_secondary_gateway: bool,
    reported_dns: bool,
}

/// One node with what earlier stages derived for it.
struct Host<'a> {
    i: usize,
    n: &'a NodeOpt,
    ip: Option<IpAddr>,
    /// Dual stack: the address in the other family.
    secondary: Option<IpAddr>,
    mac: String,
    interface: String,
    prefix_length: u8,
}

/// A host's networkConfig, the interface that carries the node IP, and all its interfaces.
type NetworkConfig = (Value, String, Vec<PlanInterface>);

pub(super) fn check(cx: &Ctx) -> Staged<Vec<PlanHost>> {
    let mut f = Findings::default();
    let mut seen = Seen {
        all_macs: cx.nodes.macs.clone(),
        reported_gateway: false,
        reported_secondary_gateway: false,
        reported_dns: false,
    };
    let hosts =
        cx.o.nodes
            .iter()
            .enumerate()
            .map(|(i, n)| check_host(&mut f, cx, &mut seen, i, n))
            .collect();
    f.with(hosts)
}

fn check_host(f: &mut Findings, cx: &Ctx, seen: &mut Seen, i: usize, n: &NodeOpt) -> PlanHost {
    let hints = n
        .root_device_hints
        .as_ref()
        .and_then(|h| root_hints::check(f, h, i));
    let ip = cx.addresses.ips[i];
    let secondary = cx.nodes.secondary_ips[i];
    let h = Host {
        i,
        n,
        ip,
        secondary,
        mac: cx.nodes.node_macs.get(i).cloned().unwrap_or_default(),
        interface: n
            .interface
            .clone()
            .unwrap_or_else(|| cx.o.interface_name.clone()),
        prefix_length: ip
            .and_then(|ip| cx.net.in_machine(ip))
            .map(|m| m.prefix)
            .unwrap_or(0),
    };
    let (network_config, interface, interfaces) = match &n.network_config {
        Some(doc) => user_config(f, seen, &h, doc),
        // DHCP: only the interface that identifies the host (agent-config `interfaces`).
        None if cx.nodes.dhcp[i] => (
            Value::Null,
            h.interface.clone(),
            vec![PlanInterface {
                name: h.interface.clone(),
                mac: h.mac.clone(),
            }],
        ),
        None => generated_config(f, cx, seen, &h),
    };
    if !network_config.is_null() {
        check_nmstate(f, i, &network_config);
    }
    PlanHost {
        name: n.name.clone(),
        role: cx.topo.roles[i].clone(),
        ip: ip.map(|x| x.to_string()).unwrap_or_default(),
        secondary_ip: secondary.map(|x| x.to_string()),
        mac: h.mac,
        interface,
        interfaces,
        prefix_length: h.prefix_length,
        root_device_hints: hints,
        network_config,
    }
}

/// The user's own nmstate: it must carry this node's MAC and IP, and no other host's MAC.
fn user_config(f: &mut Findings, seen: &mut Seen, h: &Host, doc: &Value) -> NetworkConfig {
    let i = h.i;
    let ifaces = nmstate::mac_interfaces(doc);
    for (name, m) in &ifaces {
        match seen.all_macs.get(m) {
            Some(j) if *j != i => f.err(
                format!("nodes[{i}].network_config"),
                "mac-unique",
                format!("interface {name} has MAC {m}, which nodes[{j}] also uses"),
            ),
            _ => {
                seen.all_macs.insert(m.clone(), i);
            }
        }
    }
    let mut interfaces: Vec<PlanInterface> = ifaces
        .iter()
        .map(|(name, mac)| PlanInterface {
            name: name.clone(),
            mac: mac.clone(),
        })
        .collect();
    let name = match ifaces.iter().find(|(_, m)| *m == h.mac) {
        Some((name, _)) => name.clone(),
        // The host's agent-config `interfaces` entry maps the node's interface name to its MAC,
        // so the document may name that interface without a `mac-address`: the agent binds the
        // name through that map (assisted-service pkg/staticnetworkconfig
        // `validateInterfaceNamesExistenceYAML` accepts an ethernet interface or bond port the
        // mac-interface map names; `injectNMPolicyCaptures` captures it by the MAC).
        None if names_without_mac(doc, &ifaces, &h.interface) => {
            interfaces.insert(
                0,
                PlanInterface {
                    name: h.interface.clone(),
                    mac: h.mac.clone(),
                },
            );
            h.interface.clone()
        }
        None => {
            f.err(
                format!("nodes[{i}].network_config"),
                "network-config-mac",
                format!(
                    "no interface has mac-address {} (nodes[{i}].mac) and none is named {} (the node's interface) without a mac-address",
                    h.n.mac, h.interface
                ),
            );
            h.interface.clone()
        }
    };
    let assigned = nmstate::addresses(doc);
    for ip in [h.ip, h.secondary].into_iter().flatten() {
        if !assigned.contains(&ip) {
            f.err(
                format!("nodes[{i}].network_config"),
                "network-config-ip",
                format!("does not assign the node IP {ip}"),
            );
        }
    }
    (doc.clone(), name, interfaces)
}

/// The document configures `name` (the node's interface) and gives it no other MAC.
fn names_without_mac(doc: &Value, ifaces: &[(String, String)], name: &str) -> bool {
    nmstate::mentions_interface(doc, name) && !ifaces.iter().any(|(n, _)| n == name)
}

/// nmstate for the node's static IPs on its one interface (null when the node has no IP).
fn generated_config(f: &mut Findings, cx: &Ctx, seen: &mut Seen, h: &Host) -> NetworkConfig {
    let gateway = cx.infra.gateway;
    let dns_servers = &cx.infra.dns_servers;
    let dual = cx.net.stack == Stack::Dual;
    if dual && cx.infra.secondary_gateway.is_none() && !seen.reported_secondary_gateway {
        seen.reported_secondary_gateway = true;
        f.err(
            "secondary_gateway",
            "gateway-required",
            "static dual-stack node networking needs a gateway for each family's default route",
        );
    }
    if gateway.is_none() && !seen.reported_gateway {
        seen.reported_gateway = true;
        f.err(
            "gateway",
            "gateway-required",
            "static node networking needs a gateway for the default route",
        );
    }
    if dns_servers.is_empty() && !seen.reported_dns {
        seen.reported_dns = true;
        f.err(
            "dns_servers",
            "dns-servers-required",
            "static node networking needs at least one DNS server",
        );
    }
    let prefix = |ip: IpAddr| cx.net.in_machine(ip).map(|m| m.prefix).unwrap_or(0);
    let doc = match h.ip {
        Some(ip) => {
            let mut addresses = vec![(ip, h.prefix_length)];
            addresses.extend(h.secondary.map(|s| (s, prefix(s))));
            let gateways: Vec<IpAddr> = [gateway, cx.infra.secondary_gateway]
                .into_iter()
                .flatten()
                .collect();
            nmstate::generate(&nmstate::HostNet {
                interface: &h.interface,
                mac: &h.mac,
                addresses: &addresses,
                gateways: &gateways,
                dns_servers,
            })
        }
        None => Value::Null,
    };
    let interfaces = vec![PlanInterface {
        name: h.interface.clone(),
        mac: h.mac.clone(),
    }];
    (doc, h.interface.clone(), interfaces)
}

fn check_nmstate(f: &mut Findings, i: usize, network_config: &Value) {
    let structural = nmstate::check(network_config);
    if structural.is_empty() {
        // The nmstate library itself: what `nmstatectl gc` does when the installer builds the ISO.
        if let Err(e) = nmstate::gen_conf(network_config) {
            f.err(
                format!("nodes[{i}].network_config"),
                "nmstate-gen-conf",
                e.to_string(),
            );
        }
    }
    for (p, msg) in structural {
        let path = if p.is_empty() {
            format!("nodes[{i}].network_config")
        } else {
            format!("nodes[{i}].network_config.{p}")
        };
        f.err(path, "nmstate-structure", msg);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use crate::plan::fixtures::*;

    #[test]
    fn rule_nmstate_network_config() {
        let good = json!({"interfaces": [{"name": "ens18", "type": "ethernet", "state": "up", "mac-address": "bc:24:11:00:00:01",
            "ipv4": {"enabled": true, "dhcp": false, "address": [{"ip": "192.168.50.10", "prefix-length": 24}]}}]});
        let p = ok_plan(&set(compact(), "/nodes/0/network_config", good.clone()));
        assert_eq!(p.hosts[0].network_config, good);
        let bad = set(
            good.clone(),
            "/interfaces/0/ipv4/address/0/prefix-length",
            json!(40),
        );
        fails(
            set(compact(), "/nodes/0/network_config", bad),
            "nodes[0].network_config.interfaces[0].ipv4.address[0].prefix-length",
            "nmstate-structure",
        );
        let typo = set(good.clone(), "/interfaces/0/ipv4/dhcpp", json!(false));
        fails(
            set(compact(), "/nodes/0/network_config", typo),
            "nodes[0].network_config",
            "nmstate-gen-conf",
        );
        // A bond of two NICs: both are listed in agent-config, and their MACs count for uniqueness.
        let bond = json!({"interfaces": [
            {"name": "bond0", "type": "bond", "state": "up", "link-aggregation": {"mode": "active-backup", "port": ["ens18", "ens19"]},
             "ipv4": {"enabled": true, "dhcp": false, "address": [{"ip": "192.168.50.10", "prefix-length": 24}]}},
            {"name": "ens18", "type": "ethernet", "state": "up", "mac-address": "BC:24:11:00:00:01"},
            {"name": "ens19", "type": "ethernet", "state": "up", "mac-address": "BC:24:11:00:01:01"}]});
        let p = ok_plan(&set(compact(), "/nodes/0/network_config", bond.clone()));
        let names: Vec<&str> = p.hosts[0]
            .interfaces
            .iter()
            .map(|i| i.name.as_str())
            .collect();
        assert_eq!(names, ["ens18", "ens19"]);
        let (_, ac) = crate::render::render(&p, None).unwrap();
        let doc: Value = serde_yaml_ng::from_str(&ac).unwrap();
        assert_eq!(
            doc["hosts"][0]["interfaces"][1]["macAddress"],
            json!("bc:24:11:00:01:01")
        );
        let clash = set(
            bond,
            "/interfaces/2/mac-address",
            json!("bc:24:11:00:00:02"),
        );
        fails(
            set(compact(), "/nodes/0/network_config", clash),
            "nodes[0].network_config",
            "mac-unique",
        );
        let other_mac = set(
            good.clone(),
            "/interfaces/0/mac-address",
            json!("bc:24:11:00:00:99"),
        );
        fails(
            set(compact(), "/nodes/0/network_config", other_mac),
            "nodes[0].network_config",
            "network-config-mac",
        );
        // No mac-address, but the node's interface name: agent-config `interfaces` maps it.
        let by_name = {
            let mut d = good.clone();
            d["interfaces"][0]
                .as_object_mut()
                .unwrap()
                .remove("mac-address");
            d
        };
        let p = ok_plan(&set(compact(), "/nodes/0/network_config", by_name.clone()));
        assert_eq!(p.hosts[0].interface, "ens18");
        assert_eq!(p.hosts[0].interfaces[0].mac, "bc:24:11:00:00:01");
        let (_, ac) = crate::render::render(&p, None).unwrap();
        let doc: Value = serde_yaml_ng::from_str(&ac).unwrap();
        assert_eq!(
            doc["hosts"][0]["interfaces"][0],
            json!({"name": "ens18", "macAddress": "bc:24:11:00:00:01"})
        );
        // A bond whose port is the node's interface, defined without a MAC.
        let bond_by_name = json!({"interfaces": [
            {"name": "bond0", "type": "bond", "state": "up", "link-aggregation": {"mode": "active-backup", "port": ["ens18"]},
             "ipv4": {"enabled": true, "dhcp": false, "address": [{"ip": "192.168.50.10", "prefix-length": 24}]}},
            {"name": "ens18", "type": "ethernet", "state": "up"}]});
        ok_plan(&set(compact(), "/nodes/0/network_config", bond_by_name));
        // Another name without a MAC maps to nothing.
        fails(
            set(
                compact(),
                "/nodes/0/network_config",
                set(by_name, "/interfaces/0/name", json!("ens19")),
            ),
            "nodes[0].network_config",
            "network-config-mac",
        );
        let other_ip = set(
            good,
            "/interfaces/0/ipv4/address/0/ip",
            json!("192.168.50.99"),
        );
        fails(
            set(compact(), "/nodes/0/network_config", other_ip),
            "nodes[0].network_config",
            "network-config-ip",
        );
    }

    #[test]
    fn dual_stack_hosts_carry_both_addresses() {
        let p = ok_plan(&dual_stack());
        let doc = &p.hosts[1].network_config;
        assert_eq!(
            doc["interfaces"][0]["ipv4"]["address"][0]["ip"],
            "192.168.50.11"
        );
        assert_eq!(
            doc["interfaces"][0]["ipv6"]["address"][0]["ip"],
            "fd00:50::11"
        );
        assert_eq!(
            doc["interfaces"][0]["ipv6"]["address"][0]["prefix-length"],
            64
        );
        assert_eq!(doc["routes"]["config"][1]["next-hop-address"], "fd00:50::1");
        let mut v = dual_stack();
        v.as_object_mut().unwrap().remove("secondary_gateway");
        fails(v, "secondary_gateway", "gateway-required");
        // The user's own networkConfig must assign the secondary address too.
        let own = p.hosts[0].network_config.clone();
        let mut v = set(dual_stack(), "/nodes/0/network_config", own);
        ok_plan(&v);
        v = set(v, "/nodes/0/secondary_ip", json!("fd00:50::99"));
        fails(v, "nodes[0].network_config", "network-config-ip");
    }
}
