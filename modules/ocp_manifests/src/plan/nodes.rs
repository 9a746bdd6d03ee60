//! Each node as given: a hostname the agent accepts, unique name and MAC, a valid interface name and IP.

use std::collections::BTreeMap;
use std::net::IpAddr;

use crate::model::NodeOpt;
use crate::net::parse_mac;
use crate::nmstate;

use super::context::{Ctx, Findings, Staged, STRICTER};

#[derive(Default)]
pub(super) struct Nodes {
    /// Normalised MAC → the first node that has it.
    pub macs: BTreeMap<String, usize>,
    /// Each node's MAC, normalised (lowercased as given when it did not parse).
    pub node_macs: Vec<String>,
    /// Each node's own `ip`, when given and valid.
    pub static_ips: Vec<Option<IpAddr>>,
    /// Each node's `secondary_ip` (dual stack), when given and valid.
    pub secondary_ips: Vec<Option<IpAddr>>,
    /// Each node takes its addresses from DHCP: no networkConfig, its `ip` (optional) is the
    /// address the DHCP server reserves for it.
    pub dhcp: Vec<bool>,
}

pub(super) fn check(cx: &Ctx) -> Staged<Nodes> {
    let mut f = Findings::default();
    let o = cx.o;
    if o.nodes.is_empty() {
        f.err("nodes", "nodes-required", "at least one node is required");
    }
    let mut names = BTreeMap::new();
    let mut nodes = Nodes::default();
    for (i, n) in o.nodes.iter().enumerate() {
        check_name(&mut f, n, i);
        if let Some(j) = names.insert(n.name.clone(), i) {
            f.err(
                format!("nodes[{i}].name"),
                "hostname-unique",
                format!("'{}' is also the name of nodes[{j}]", n.name),
            );
        }
        let mac = check_mac(&mut f, n, i, &mut nodes.macs);
        nodes.node_macs.push(mac);
        if let Some(ifn) = &n.interface {
            if !nmstate::is_ifname(ifn) {
                f.err(
                    format!("nodes[{i}].interface"),
                    "interface-name",
                    format!("'{ifn}' is not a Linux interface name"),
                );
            }
        }
        let ip =
            n.ip.as_deref()
                .and_then(|s| f.ip(s, &format!("nodes[{i}].ip")));
        nodes.static_ips.push(ip);
        let secondary = n
            .secondary_ip
            .as_deref()
            .and_then(|s| f.ip(s, &format!("nodes[{i}].secondary_ip")));
        nodes.secondary_ips.push(secondary);
        let dhcp = n.dhcp.unwrap_or(o.dhcp);
        if dhcp && n.network_config.is_some() {
            f.err(
                format!("nodes[{i}].network_config"),
                "dhcp-network-config",
                "a DHCP node has no static networkConfig; drop network_config or set dhcp: false",
            );
        }
        nodes.dhcp.push(dhcp);
    }
    f.with(nodes)
}

fn check_name(f: &mut Findings, n: &NodeOpt, i: usize) {
    // assisted-service internal/host/hostutil `ValidateHostname`, which the agent applies to each
    // host's requested hostname: not one DNS label but a dotted name of lowercase labels.
    if let Err(why) = agent_hostname(&n.name) {
        f.err(
            format!("nodes[{i}].name"),
            "hostname-format",
            format!("'{}' {why}", n.name),
        );
    }
}

/// The names assisted-service keeps for itself (`ForbiddenHostnames`).
const FORBIDDEN_HOSTNAMES: [&str; 6] = [
    "localhost",
    "localhost.localdomain",
    "localhost4",
    "localhost4.localdomain4",
    "localhost6",
    "localhost6.localdomain6",
];

/// assisted-service `ValidateHostname`: at most 253 characters; a first label of 1–63 lowercase
/// letters, digits and '-' that starts with a letter or digit, then any number of '.'-separated
/// labels of 1–63 of those; none of the localhost names. Why not, when it is refused.
pub(crate) fn agent_hostname(name: &str) -> Result<(), &'static str> {
    if name.len() > 253 {
        return Err("is longer than 253 characters");
    }
    let label_ok = |l: &str| {
        (1..=63).contains(&l.len())
            && l.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    };
    let first_ok = name
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    if !first_ok || !name.split('.').all(label_ok) {
        return Err("must be lowercase letters, digits and '-' in '.'-separated labels of 1 to 63 characters, starting with a letter or digit");
    }
    if FORBIDDEN_HOSTNAMES.contains(&name) {
        return Err("is a localhost name, which the assisted installer refuses");
    }
    Ok(())
}

/// The node's normalised MAC, recorded in `macs` when it is the first node with it.
fn check_mac(
    f: &mut Findings,
    n: &NodeOpt,
    i: usize,
    macs: &mut BTreeMap<String, usize>,
) -> String {
    match parse_mac(&n.mac) {
        Ok(m) => {
            if let Some(j) = macs.get(&m) {
                f.err(
                    format!("nodes[{i}].mac"),
                    "mac-unique",
                    format!(
                        "{} is also the MAC of nodes[{j}] (compared case-insensitively). {STRICTER} the installer compares MACs as written, but a NIC's MAC has no case: both hosts would claim one interface, and the agent matches its host config by MAC, so one host boots with the other's network config",
                        n.mac
                    ),
                );
            } else {
                macs.insert(m.clone(), i);
            }
            m
        }
        Err(e) => {
            f.err(format!("nodes[{i}].mac"), "mac-unicast", e.to_string());
            n.mac.to_ascii_lowercase()
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::plan::fixtures::*;

    #[test]
    fn rule_macs() {
        fails(
            set(compact(), "/nodes/1/mac", json!("01:00:5e:00:00:01")),
            "nodes[1].mac",
            "mac-unicast",
        );
        fails(
            set(compact(), "/nodes/1/mac", json!("zz:24:11:00:00:01")),
            "nodes[1].mac",
            "mac-unicast",
        );
        fails(
            set(compact(), "/nodes/2/mac", json!("bc:24:11:00:00:01")),
            "nodes[2].mac",
            "mac-unique",
        );
    }

    #[test]
    fn rule_hostnames() {
        fails(
            set(compact(), "/nodes/1/name", json!("Master_1")),
            "nodes[1].name",
            "hostname-format",
        );
        fails(
            set(compact(), "/nodes/2/name", json!("master-0")),
            "nodes[2].name",
            "hostname-unique",
        );
        // assisted-service ValidateHostname: dotted names are hostnames too.
        let p = ok_plan(&set(
            compact(),
            "/nodes/1/name",
            json!("master-1.lab.example.com"),
        ));
        assert_eq!(p.hosts[1].name, "master-1.lab.example.com");
        let long = format!("{}.{}", "a".repeat(63), "b".repeat(64));
        for bad in [
            "-master",
            "master..lab",
            "master.",
            "localhost.localdomain",
            "Master",
            &long,
        ] {
            fails(
                set(compact(), "/nodes/1/name", json!(bad)),
                "nodes[1].name",
                "hostname-format",
            );
        }
    }
}
