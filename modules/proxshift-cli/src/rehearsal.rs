//! `proxshift rehearse`, the pure parts of a real rehearsal: the layout of a live Proxmox cluster
//! from its API answers, a pvesim seed given as a file, what can be seen wrong before the run
//! (overcommitted nodes, MAC and VMID conflicts), what the run created on the simulator, and the
//! report. No I/O here; `app` reads, runs and prints.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{json, Value};

use crate::exit::CliError;
use crate::inventory::Cluster;
use crate::rehearse::Identity;

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

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// The MACs in a VM config's `netN` entries (`virtio=BC:24:11:…,bridge=vmbr0`), upper case.
pub fn config_macs(config: &Value) -> Vec<String> {
    let mut nets: Vec<(u32, String)> = config
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| {
            let idx = k.strip_prefix("net")?.parse::<u32>().ok()?;
            let mac = text(v).split(',').find_map(|p| {
                let (_, val) = p.split_once('=')?;
                (val.len() == 17 && val.matches(':').count() == 5).then(|| val.to_uppercase())
            })?;
            Some((idx, mac))
        })
        .collect();
    nets.sort();
    nets.into_iter().map(|(_, m)| m).collect()
}

/// Disks (`scsiN`, `virtioN`, `sataN`, `ideN`, `efidisk0`, `tpmstate0`) with a storage and a size;
/// CD-ROMs are not disks.
fn config_disks(config: &Value) -> Vec<Value> {
    let mut out = Vec::new();
    for (k, v) in config.as_object().into_iter().flatten() {
        let bus = k.trim_end_matches(|c: char| c.is_ascii_digit());
        if !["scsi", "virtio", "sata", "ide", "efidisk", "tpmstate"].contains(&bus) || bus == k {
            continue;
        }
        let s = text(v);
        if s.contains("media=cdrom") {
            continue;
        }
        let Some((storage, _)) = s.split(',').next().and_then(|vol| vol.split_once(':')) else {
            continue;
        };
        if let Some(size) = s.split(',').find_map(|p| p.strip_prefix("size=")) {
            out.push(json!({"storage": storage, "size": size}));
        }
    }
    out
}

/// A live Proxmox cluster as `proxmox_layout`, from `GET /version`, `GET /nodes` with each node's
/// `GET /nodes/{node}/storage`, and `GET /cluster/resources?type=vm` with each VM's config.
pub fn layout_from_api(
    version: &Value,
    nodes: &[(Value, Vec<Value>)],
    vms: &[(Value, Value)],
) -> Value {
    let nodes: Vec<Value> = nodes
        .iter()
        .map(|(n, storages)| {
            let storages: Vec<Value> = storages
                .iter()
                .filter(|s| s["total"].as_u64().unwrap_or(0) > 0)
                .map(|s| {
                    let content: Vec<&str> = s["content"]
                        .as_str()
                        .unwrap_or_default()
                        .split(',')
                        .filter(|c| !c.is_empty())
                        .collect();
                    json!({"id": s["storage"], "type": s["type"], "content": content,
                           "size": s["total"], "free": s["avail"].as_u64().unwrap_or(0),
                           "shared": s["shared"].as_u64() == Some(1) || s["shared"] == json!(true)})
                })
                .collect();
            let mut node = json!({"name": n["node"], "storages": storages,
                                  "online": n["status"].as_str() != Some("offline")});
            if let Some(m) = n["maxmem"].as_u64() {
                node["memory"] = json!(m);
            }
            if let Some(c) = n["maxcpu"].as_u64() {
                node["cpus"] = json!(c);
            }
            node
        })
        .collect();
    let vms: Vec<Value> = vms
        .iter()
        .map(|(r, config)| {
            let memory = config
                .get("memory")
                .and_then(|m| text(m).parse::<u64>().ok())
                .or_else(|| r["maxmem"].as_u64().map(|b| b / MIB))
                .unwrap_or(512);
            let tags: Vec<String> = text(&r["tags"])
                .split([';', ',', ' '])
                .filter(|t| !t.is_empty())
                .map(str::to_string)
                .collect();
            let mut vm = json!({"vmid": r["vmid"], "node": r["node"], "memory": memory,
                "cores": config.get("cores").and_then(|c| text(c).parse::<u64>().ok()).unwrap_or(1),
                "running": r["status"].as_str() == Some("running"),
                "macs": config_macs(config), "disks": config_disks(config), "tags": tags});
            if let Some(name) = r["name"].as_str().or_else(|| config["name"].as_str()) {
                vm["name"] = json!(name);
            }
            vm
        })
        .collect();
    let mut layout = json!({"nodes": nodes, "vms": vms});
    if let Some(v) = version["version"].as_str() {
        layout["version"] = json!(v);
    }
    layout
}

/// A pvesim seed given as a file: its layout (cluster, nodes, VMs) as is, its access part (users,
/// tokens, roles, ACLs) replaced by the rehearsal's identity.
pub fn seed_from_pvesim(seed: &Value, who: &Identity) -> Result<Value, CliError> {
    let mut s = seed.clone();
    let obj = s
        .as_object_mut()
        .ok_or_else(|| CliError::inventory("the pvesim seed is not a mapping"))?;
    let has_nodes = obj
        .get("nodes")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty());
    if !has_nodes {
        return Err(CliError::inventory("the pvesim seed lists no nodes"));
    }
    for k in ["users", "tokens", "roles", "acl"] {
        obj.remove(k);
    }
    let access = crate::rehearse::access_seed(who);
    for (k, v) in access.as_object().into_iter().flatten() {
        obj.insert(k.clone(), v.clone());
    }
    Ok(s)
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

/// Something that would go wrong, and what kind: `memory`, `mac`, `vmid`, `placement`, `storage`
/// or `other`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    pub kind: String,
    pub message: String,
    /// Where it was found: `layout` (before the run) or the phase that failed.
    pub source: String,
}

fn problem(kind: &str, source: &str, message: String) -> Problem {
    Problem {
        kind: kind.into(),
        message,
        source: source.into(),
    }
}

fn vm_tags(vm: &Value) -> Vec<String> {
    text(&vm["config"]["tags"])
        .split([';', ',', ' '])
        .filter(|t| !t.is_empty())
        .map(|t| t.to_ascii_lowercase())
        .collect()
}

fn vm_label(vm: &Value) -> String {
    match vm["config"]["name"].as_str() {
        Some(n) => format!("VM {} ({n}) on {}", vm["vmid"], text(&vm["node"])),
        None => format!("VM {} on {}", vm["vmid"], text(&vm["node"])),
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
                out.push(problem(
                    "mac",
                    "layout",
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
        .filter(|(mac, vms)| vms.len() > 1 && !known.iter().any(|p| p.message.contains(mac)))
        .map(|(mac, vms)| {
            problem(
                "mac",
                "vms",
                format!("MAC {mac} is used by {}", vms.join(" and ")),
            )
        })
        .collect()
}

/// The kind of a failed task's message.
pub fn classify(message: &str) -> &'static str {
    let m = message.to_ascii_lowercase();
    if m.contains("memory") {
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

/// The whole rehearsal's result.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub cluster: String,
    /// Where the layout came from: `proxmox (https://…)`, `inventory proxmox_layout` or `seed FILE`.
    pub layout_source: String,
    /// `ok` (the run would succeed) or `failed`.
    pub status: String,
    pub ansible_rc: Option<i32>,
    pub exit_code: i32,
    pub created: Vec<Created>,
    pub problems: Vec<Problem>,
    pub seed_file: String,
    pub work_dir: String,
}

pub fn report_text(r: &Report) -> String {
    let mut s = String::new();
    let verdict = if r.status == "ok" {
        "would succeed"
    } else {
        "would fail"
    };
    s.push_str(&format!(
        "Rehearsal of {} on a copy of {}: the run {verdict}.\n",
        r.cluster, r.layout_source
    ));
    if r.created.is_empty() {
        s.push_str("\nNo VM would be created.\n");
    } else {
        let mut t = crate::table::Table::new(["VM", "NODE", "VMID", "GIB", "MACS", "STATE"]);
        for c in &r.created {
            t.row(vec![
                c.name.clone().into(),
                c.node.clone().into(),
                c.vmid.to_string().into(),
                format!("{:.1}", c.memory_mib as f64 / 1024.0).into(),
                c.macs.join(",").into(),
                if c.running { "running" } else { "stopped" }.into(),
            ]);
        }
        s.push_str("\nWould create:\n");
        s.push_str(&t.render(false));
    }
    if r.problems.is_empty() {
        s.push_str("\nNo problems found.\n");
    } else {
        s.push_str(&format!("\nWould fail or clash ({}):\n", r.problems.len()));
        for p in &r.problems {
            s.push_str(&format!("- [{}] {} ({})\n", p.kind, p.message, p.source));
        }
    }
    s.push_str(&format!(
        "\nNothing was written to Proxmox. Simulator seed: {}; rehearsal files: {}\n",
        r.seed_file, r.work_dir
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inventory::{Host, Role, Topology};
    use crate::rehearse::tests::who;

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

    #[test]
    fn layout_from_the_api() {
        let version = json!({"version": "8.4.1"});
        let nodes = vec![(
            json!({"node": "pve1", "maxmem": 68719476736u64, "maxcpu": 16, "status": "online"}),
            vec![
                json!({"storage": "local", "type": "dir", "content": "iso,backup", "total": 100, "avail": 40, "shared": 0}),
                json!({"storage": "gone", "type": "nfs", "content": "images", "active": 0}),
            ],
        )];
        let vms = vec![(
            json!({"vmid": 100, "node": "pve1", "name": "bastion", "status": "running", "tags": "infra;keep", "maxmem": 2147483648u64}),
            json!({"memory": "2048", "cores": 2, "net0": "virtio=bc:24:11:00:01:00,bridge=vmbr0",
                   "scsi0": "local-lvm:vm-100-disk-0,size=20G", "ide2": "local:iso/x.iso,media=cdrom"}),
        )];
        let l = layout_from_api(&version, &nodes, &vms);
        assert_eq!(
            l,
            json!({"version": "8.4.1",
                "nodes": [{"name": "pve1", "memory": 68719476736u64, "cpus": 16, "online": true,
                           "storages": [{"id": "local", "type": "dir", "content": ["iso", "backup"], "size": 100, "free": 40, "shared": false}]}],
                "vms": [{"vmid": 100, "node": "pve1", "name": "bastion", "memory": 2048, "cores": 2, "running": true,
                         "macs": ["BC:24:11:00:01:00"], "disks": [{"storage": "local-lvm", "size": "20G"}],
                         "tags": ["infra", "keep"]}]})
        );
        // …and it is a valid layout for the seed.
        let seed = crate::rehearse::seed("c", &l, &who()).unwrap();
        assert_eq!(
            seed["vms"][0]["config"]["net0"],
            "virtio=BC:24:11:00:01:00,bridge=vmbr0"
        );
    }

    #[test]
    fn pvesim_seed_keeps_layout_and_replaces_access() {
        let s = json!({"nodes": [{"name": "pve1"}], "vms": [], "users": [{"userid": "root@pam", "password": "p"}],
                       "tokens": [{"userid": "root@pam", "tokenid": "x", "secret": "real"}]});
        let out = seed_from_pvesim(&s, &who()).unwrap();
        assert_eq!(out["users"], json!([{"userid": "proxshift@pve"}]));
        assert_eq!(out["tokens"][0]["secret"], "sim-secret");
        assert!(!out.to_string().contains("real"));
        assert!(seed_from_pvesim(&json!({"vms": []}), &who()).is_err());
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
        assert!(duplicate_macs(
            &after,
            &[problem(
                "mac",
                "layout",
                "MAC BC:24:11:00:01:00 of b".into()
            )]
        )
        .is_empty());
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

    #[test]
    fn report_text_lists_vms_and_problems() {
        let r = Report {
            cluster: "demo".into(),
            layout_source: "seed demo/pvesim-seed.yaml".into(),
            status: "failed".into(),
            ansible_rc: Some(2),
            exit_code: 1,
            created: vec![Created {
                name: "demo-master-0".into(),
                vmid: 4100,
                node: "pve1".into(),
                memory_mib: 24576,
                macs: vec!["BC:24:11:00:00:01".into()],
                running: true,
            }],
            problems: vec![problem(
                "memory",
                "layout",
                "node pve3 is overcommitted".into(),
            )],
            seed_file: "/w/seed.yaml".into(),
            work_dir: "/w".into(),
        };
        let t = report_text(&r);
        assert!(
            t.starts_with(
                "Rehearsal of demo on a copy of seed demo/pvesim-seed.yaml: the run would fail."
            ),
            "{t}"
        );
        assert!(t.contains("demo-master-0  pve1"), "{t}");
        assert!(
            t.contains("- [memory] node pve3 is overcommitted (layout)"),
            "{t}"
        );
        assert!(t.contains("Nothing was written to Proxmox"));
    }
}
