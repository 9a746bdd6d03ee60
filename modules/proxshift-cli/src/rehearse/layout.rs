//! What a rehearsal finds: problems visible in the layout before the run (overcommitted nodes, MAC and
//! VMID conflicts, pinned nodes that do not exist), what the run created on the simulator, MACs it
//! handed out twice, and the kind of a failed task's message. Pure.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use super::vm_config::{config_macs, text, vm_label, vm_tags};
use crate::inventory::Cluster;

const MIB: u64 = 1 << 20;
const GIB: f64 = (1u64 << 30) as f64;

/// A node's `maxmem`: bytes as a number, or a PVE size string (`128G`, `1.5T`, bare = bytes),
/// parsed by pve-types so the CLI rounds exactly as the modules do. `None` when it is no size.
pub fn parse_size(v: &Value) -> Option<u64> {
    match v {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => pve_types::propstring::parse_size(s, 'B').ok(),
        _ => None,
    }
}

/// The MAC the flow derives for a host without one (playbooks/tasks/cluster_model.yml): Proxmox's
/// OUI BC:24:11 and the first three bytes of SHA-1("<cluster>/<host>").
pub fn derived_mac(cluster: &str, host: &str) -> String {
    let d = ring::digest::digest(
        &ring::digest::SHA1_FOR_LEGACY_USE_ONLY,
        format!("{cluster}/{host}").as_bytes(),
    );
    let b = d.as_ref();
    format!("BC:24:11:{:02X}:{:02X}:{:02X}", b[0], b[1], b[2])
}

/// One host of the rehearsed cluster as the flow will create it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planned {
    pub name: String,
    pub mac: String,
    pub vmid: Option<u64>,
    pub node: Option<String>,
}

pub fn planned(cluster: &Cluster) -> Vec<Planned> {
    cluster
        .hosts
        .iter()
        .map(|h| Planned {
            name: h.name.clone(),
            mac: h
                .mac
                .clone()
                .map(|m| m.to_uppercase())
                .unwrap_or_else(|| derived_mac(&cluster.name, &h.name)),
            vmid: h.vmid,
            node: h.pve_node.clone(),
        })
        .collect()
}

/// Something that would go wrong, and what kind: `memory`, `mac`, `vmid`, `placement`, `storage`,
/// `dns` or `other`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    pub kind: String,
    pub message: String,
    /// Where it was found: `layout` (before the run) or the phase that failed.
    pub source: String,
    /// The MAC a `mac` problem is about (not shown): a clash seen in the layout is not reported a
    /// second time from the final state.
    #[serde(skip)]
    pub mac: Option<String>,
}

pub(crate) fn problem(kind: &str, source: &str, message: String) -> Problem {
    Problem {
        kind: kind.into(),
        message,
        source: source.into(),
        mac: None,
    }
}

fn mac_problem(source: &str, mac: &str, message: String) -> Problem {
    Problem {
        mac: Some(mac.to_string()),
        ..problem("mac", source, message)
    }
}

/// What the seed already shows: nodes whose VMs hold more memory than the node has, and planned
/// hosts whose MAC, VMID or pinned node clash with what exists (VMs carrying `tag` are the
/// cluster's own and never clash).
pub fn layout_problems(seed: &Value, planned: &[Planned], tag: &str) -> Vec<Problem> {
    let mut out = Vec::new();
    let vms: Vec<&Value> = seed["vms"].as_array().into_iter().flatten().collect();
    let nodes: Vec<&Value> = seed["nodes"].as_array().into_iter().flatten().collect();
    for n in &nodes {
        let name = text(&n["name"]);
        let Some(total) = parse_size(&n["maxmem"]) else {
            continue;
        };
        let held: u64 = vms
            .iter()
            .filter(|v| text(&v["node"]) == name)
            .filter_map(|v| text(&v["config"]["memory"]).parse::<u64>().ok())
            .sum::<u64>()
            * MIB;
        if held > total {
            out.push(problem(
                "memory",
                "layout",
                format!(
                    "node {name} is overcommitted: its VMs are given {:.1} GiB of memory, the node has {:.1} GiB — nothing new can be placed there",
                    held as f64 / GIB,
                    total as f64 / GIB
                ),
            ));
        }
    }
    let foreign: Vec<&&Value> = vms
        .iter()
        .filter(|v| !vm_tags(v).iter().any(|t| t == tag))
        .collect();
    for p in planned {
        for vm in &foreign {
            if config_macs(&vm["config"]).contains(&p.mac) {
                out.push(mac_problem(
                    "layout",
                    &p.mac,
                    format!(
                        "MAC {} of {} is already used by {} — two NICs with one MAC break the network and the agent install; set another mac for {} in the inventory",
                        p.mac, p.name, vm_label(vm), p.name
                    ),
                ));
            }
            if p.vmid.is_some_and(|id| vm["vmid"].as_u64() == Some(id)) {
                out.push(problem(
                    "vmid",
                    "layout",
                    format!(
                        "VMID {} of {} is taken by {}",
                        vm["vmid"],
                        p.name,
                        vm_label(vm)
                    ),
                ));
            }
        }
        if let Some(node) = &p.node {
            if !nodes.iter().any(|n| text(&n["name"]) == *node) {
                out.push(problem(
                    "placement",
                    "layout",
                    format!(
                        "{} is pinned to node {node}, which the cluster does not have",
                        p.name
                    ),
                ));
            }
        }
    }
    out
}

/// A VM the rehearsal created on the simulator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Created {
    pub name: String,
    pub vmid: u64,
    pub node: String,
    pub memory_mib: u64,
    pub macs: Vec<String>,
    pub running: bool,
}

/// VMs in `after` (pvesim's dumped state) that the seed did not have.
pub fn created(seed: &Value, after: &Value) -> Vec<Created> {
    let before: Vec<u64> = seed["vms"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v["vmid"].as_u64())
        .collect();
    let mut out: Vec<Created> = after["vms"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| v["vmid"].as_u64().is_some_and(|id| !before.contains(&id)))
        .map(|v| Created {
            name: text(&v["config"]["name"]),
            vmid: v["vmid"].as_u64().unwrap_or(0),
            node: text(&v["node"]),
            memory_mib: text(&v["config"]["memory"]).parse().unwrap_or(0),
            macs: config_macs(&v["config"]),
            running: v["running"].as_bool().unwrap_or(false),
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// MACs that more than one VM of `after` carries, unless already reported.
pub fn duplicate_macs(after: &Value, known: &[Problem]) -> Vec<Problem> {
    let mut by_mac: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for vm in after["vms"].as_array().into_iter().flatten() {
        for mac in config_macs(&vm["config"]) {
            by_mac.entry(mac).or_default().push(vm_label(vm));
        }
    }
    by_mac
        .into_iter()
        .filter(|(mac, vms)| vms.len() > 1 && !known.iter().any(|p| p.mac.as_ref() == Some(mac)))
        .map(|(mac, vms)| {
            let message = format!("MAC {mac} is used by {}", vms.join(" and "));
            mac_problem("vms", &mac, message)
        })
        .collect()
}

/// The kind of a failed task's message.
pub fn classify(message: &str) -> &'static str {
    let m = message.to_ascii_lowercase();
    if m.starts_with("dns:") {
        "dns"
    } else if m.contains("memory") {
        "memory"
    } else if m.contains("storage") || m.contains("space") || m.contains("volume") {
        "storage"
    } else if m.contains("mac ") || m.contains("mac address") {
        "mac"
    } else if m.contains("vmid") {
        "vmid"
    } else if m.contains("node") || m.contains("placement") {
        "placement"
    } else {
        "other"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inventory::{Host, Role, Topology};
    use serde_json::json;

    #[test]
    fn sizes() {
        assert_eq!(parse_size(&json!("64G")), Some(64 << 30));
        assert_eq!(parse_size(&json!("1.5T")), Some(3 << 39));
        assert_eq!(parse_size(&json!(1024)), Some(1024));
        assert_eq!(parse_size(&json!("x")), None);
    }

    #[test]
    fn sizes_round_like_pve_types() {
        // 2.0009K is 2048.92 bytes: the CLI's old parser truncated to 2048, pve-types rounds.
        assert_eq!(parse_size(&json!("2.0009K")), Some(2049));
        assert_eq!(
            parse_size(&json!("1.0000001G")),
            pve_types::propstring::parse_size("1.0000001G", 'B').ok()
        );
        assert_eq!(parse_size(&json!("64g")), Some(64 << 30));
        assert_eq!(parse_size(&json!("5Q")), None);
    }

    #[test]
    fn derived_mac_matches_the_playbook() {
        // What cluster_model.yml's expression gives, checked with ansible-core 2.19:
        // ('BC:24:11:' ~ ('lab-sno/lab-sno-0' | hash('sha1'))[0:6] | regex_replace(...)) | upper
        assert_eq!(derived_mac("lab-sno", "lab-sno-0"), "BC:24:11:E3:CB:FD");
    }

    fn cluster() -> Cluster {
        let host = |n: &str, mac: Option<&str>, vmid: Option<u64>, node: Option<&str>| Host {
            name: n.into(),
            role: Role::Master,
            role_derived: false,
            ip: None,
            mac: mac.map(Into::into),
            pve_node: node.map(Into::into),
            vmid,
            live: None,
        };
        Cluster {
            name: "demo".into(),
            topology: Topology::Compact,
            masters: 3,
            workers: 0,
            version: None,
            base_domain: None,
            hosts: vec![
                host("demo-master-0", Some("bc:24:11:00:01:00"), None, None),
                host("demo-master-1", None, Some(120), None),
                host("demo-master-2", None, None, Some("pve9")),
            ],
        }
    }

    #[test]
    fn layout_problems_find_overcommit_and_clashes() {
        let seed = json!({
        "nodes": [{"name": "pve1", "maxmem": "128G"}, {"name": "pve3", "maxmem": "64G"}],
        "vms": [
            {"vmid": 100, "node": "pve1", "config": {"name": "bastion", "memory": "2048", "net0": "virtio=BC:24:11:00:01:00,bridge=vmbr0"}},
            {"vmid": 120, "node": "pve3", "config": {"name": "db", "memory": "81920"}},
            {"vmid": 121, "node": "pve3", "config": {"name": "demo-master-2", "memory": "4096", "tags": "proxshift-demo",
                                                        "net0": format!("virtio={},bridge=vmbr0", derived_mac("demo", "demo-master-2"))}}
        ]});
        let p = layout_problems(&seed, &planned(&cluster()), "proxshift-demo");
        let kinds: Vec<&str> = p.iter().map(|p| p.kind.as_str()).collect();
        assert_eq!(kinds, ["memory", "mac", "vmid", "placement"], "{p:#?}");
        assert!(p[0]
            .message
            .starts_with("node pve3 is overcommitted: its VMs are given 84.0 GiB"));
        assert_eq!(p[1].mac.as_deref(), Some("BC:24:11:00:01:00"));
        assert!(p[1].message.contains(
            "MAC BC:24:11:00:01:00 of demo-master-0 is already used by VM 100 (bastion) on pve1"
        ));
        assert!(p[2]
            .message
            .contains("VMID 120 of demo-master-1 is taken by VM 120 (db) on pve3"));
        assert!(p[3].message.contains("pinned to node pve9"));
    }

    #[test]
    fn created_and_duplicates_from_the_final_state() {
        let seed = json!({"vms": [{"vmid": 100, "node": "pve1", "config": {"net0": "virtio=BC:24:11:00:01:00"}}]});
        let after = json!({"vms": [
            {"vmid": 100, "node": "pve1", "running": true, "config": {"name": "bastion", "net0": "virtio=BC:24:11:00:01:00"}},
            {"vmid": 4101, "node": "pve2", "running": true, "config": {"name": "b", "memory": "24576", "net0": "virtio=BC:24:11:00:01:00,bridge=vmbr0"}},
            {"vmid": 4100, "node": "pve1", "running": false, "config": {"name": "a", "memory": "24576", "net0": "virtio=BC:24:11:AA:BB:CC"}}]});
        let c = created(&seed, &after);
        assert_eq!(c.iter().map(|c| c.vmid).collect::<Vec<_>>(), [4100, 4101]);
        assert_eq!(c[1].macs, ["BC:24:11:00:01:00"]);
        let d = duplicate_macs(&after, &[]);
        assert_eq!(d.len(), 1);
        assert_eq!(
            d[0].message,
            "MAC BC:24:11:00:01:00 is used by VM 100 (bastion) on pve1 and VM 4101 (b) on pve2"
        );
        // Already reported before the run: not twice.
        let seen = mac_problem(
            "layout",
            "BC:24:11:00:01:00",
            "MAC BC:24:11:00:01:00 of b".into(),
        );
        assert!(duplicate_macs(&after, &[seen]).is_empty());
        // Decided by the MAC itself, not by what a message says.
        let other = problem("other", "vms", "MAC BC:24:11:00:01:00 is fine".into());
        assert_eq!(duplicate_macs(&after, &[other]).len(), 1);
    }

    #[test]
    fn failures_are_classified() {
        assert_eq!(classify("Preflight found 1 problem(s):\n- Proxmox: no allowed node has 24.0 GiB of reservable memory"), "memory");
        assert_eq!(
            classify("storage 'fast' does not exist on node pve1"),
            "storage"
        );
        assert_eq!(classify("node 'pve9' is not in the cluster"), "placement");
        assert_eq!(classify("boom"), "other");
    }
}
