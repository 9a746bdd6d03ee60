//! A rehearsal's seed for the `pvesim` simulator: from the inventory's `proxmox_layout` (a
//! description of the real Proxmox cluster: nodes, storages, VMs already there), from a live cluster's
//! API answers (read with GETs only, see `live::read_layout`), or from a pvesim seed given as a file.
//! The seed's access part is always the rehearsal's own identity. Pure.
//!
//! ```yaml
//! proxmox_layout:                 # group_vars/all
//!   version: 8.4.1                # optional
//!   nodes:
//!     - name: pve1
//!       cpus: 32
//!       memory: 128G              # or maxmem
//!       online: true              # optional
//!       storages:                 # pvesim's storage fields
//!         - {id: local, type: dir, content: [iso], size: 200G, free: 150G}
//!         - {id: local-lvm, type: lvmthin, content: [images], size: 2T}
//!   vms:                          # VMs that exist today (they hold VMIDs, names, MACs, memory)
//!     - {vmid: 100, node: pve1, name: bastion, memory: 2048, cores: 2, running: true,
//!        macs: [BC:24:11:00:01:00], disks: [{storage: local-lvm, size: 20G}], tags: [infra]}
//! ```

use serde_json::{json, Map, Value};

use super::vm_config::{config_disks, config_macs, text};
use crate::exit::CliError;

const MIB: u64 = 1 << 20;

const STORAGE_KEYS: [&str; 7] = ["id", "type", "content", "size", "free", "shared", "files"];

fn err(msg: impl Into<String>) -> CliError {
    CliError::inventory(format!("proxmox_layout: {}", msg.into()))
}

fn size_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) if !s.trim().is_empty() => Some(s.trim().to_string()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn node_seed(i: usize, n: &Value) -> Result<Value, CliError> {
    let n = n
        .as_object()
        .ok_or_else(|| err(format!("nodes[{i}] is not a mapping")))?;
    let name = n
        .get("name")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| err(format!("nodes[{i}] has no name")))?;
    let mut out = Map::new();
    out.insert("name".into(), json!(name));
    if let Some(cpus) = n.get("cpus") {
        out.insert(
            "cpus".into(),
            json!(cpus
                .as_u64()
                .ok_or_else(|| err(format!("node {name}: cpus must be a number")))?),
        );
    }
    if let Some(mem) = n.get("memory").or_else(|| n.get("maxmem")) {
        if size_text(mem).is_none() {
            return Err(err(format!("node {name}: memory must be a size like 128G")));
        }
        out.insert("maxmem".into(), mem.clone());
    }
    if let Some(online) = n.get("online").and_then(Value::as_bool) {
        out.insert("online".into(), json!(online));
    }
    let mut storages = Vec::new();
    for (j, s) in n
        .get("storages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let s = s
            .as_object()
            .ok_or_else(|| err(format!("node {name}: storages[{j}] is not a mapping")))?;
        for key in ["id", "type", "size"] {
            if !s.contains_key(key) {
                return Err(err(format!("node {name}: storages[{j}] needs '{key}'")));
            }
        }
        if let Some(extra) = s.keys().find(|k| !STORAGE_KEYS.contains(&k.as_str())) {
            return Err(err(format!(
                "node {name}: storage field '{extra}' is unknown (fields: {})",
                STORAGE_KEYS.join(", ")
            )));
        }
        storages.push(Value::Object(s.clone()));
    }
    out.insert("storages".into(), Value::Array(storages));
    Ok(Value::Object(out))
}

fn vm_seed(i: usize, v: &Value, nodes: &[String]) -> Result<Value, CliError> {
    let v = v
        .as_object()
        .ok_or_else(|| err(format!("vms[{i}] is not a mapping")))?;
    let vmid = v
        .get("vmid")
        .and_then(Value::as_u64)
        .ok_or_else(|| err(format!("vms[{i}] needs a numeric vmid")))?;
    let node = v
        .get("node")
        .and_then(Value::as_str)
        .ok_or_else(|| err(format!("VM {vmid} needs a node")))?;
    if !nodes.iter().any(|n| n == node) {
        return Err(err(format!(
            "VM {vmid} is on node '{node}', which the layout does not list"
        )));
    }
    let mut config = Map::new();
    if let Some(name) = v.get("name").and_then(Value::as_str) {
        config.insert("name".into(), json!(name));
    }
    // Real servers answer memory as a string of MiB.
    let memory = v.get("memory").and_then(Value::as_u64).unwrap_or(2048);
    config.insert("memory".into(), json!(memory.to_string()));
    config.insert(
        "cores".into(),
        json!(v.get("cores").and_then(Value::as_u64).unwrap_or(1)),
    );
    let entry = Value::Object(v.clone());
    let strings = |key: &str| crate::inventory::names(Some(&entry), key);
    let mut macs = strings("macs");
    if let Some(m) = v.get("mac").and_then(Value::as_str) {
        macs.insert(0, m.to_string());
    }
    for (k, mac) in macs.iter().enumerate() {
        config.insert(
            format!("net{k}"),
            json!(format!("virtio={},bridge=vmbr0", mac.to_uppercase())),
        );
    }
    for (k, d) in v
        .get("disks")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let storage = d.get("storage").and_then(Value::as_str);
        let size = d.get("size").and_then(size_text);
        let (Some(storage), Some(size)) = (storage, size) else {
            return Err(err(format!("VM {vmid}: disks[{k}] needs storage and size")));
        };
        config.insert(
            format!("scsi{k}"),
            json!(format!("{storage}:vm-{vmid}-disk-{k},size={size}")),
        );
    }
    let tags = strings("tags");
    if !tags.is_empty() {
        config.insert("tags".into(), json!(tags.join(";")));
    }
    Ok(json!({
        "vmid": vmid,
        "node": node,
        "running": v.get("running").and_then(Value::as_bool).unwrap_or(false),
        "config": config,
    }))
}

/// The API identity the playbook will use against the simulator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// `user@realm`
    pub user: String,
    /// Token name (no `!`).
    pub token: String,
    pub secret: String,
}

/// The pvesim seed for `layout`: its nodes and VMs, plus the playbook's user and token with every
/// privilege (a rehearsal checks placement and conflicts; `proxmox-access` checks permissions).
pub fn seed(cluster: &str, layout: &Value, who: &Identity) -> Result<Value, CliError> {
    let layout = layout.as_object().ok_or_else(|| err("is not a mapping"))?;
    let nodes: Vec<Value> = layout
        .get("nodes")
        .and_then(Value::as_array)
        .filter(|a| !a.is_empty())
        .ok_or_else(|| err("lists no nodes"))?
        .iter()
        .enumerate()
        .map(|(i, n)| node_seed(i, n))
        .collect::<Result<_, _>>()?;
    let names: Vec<String> = nodes
        .iter()
        .map(|n| n["name"].as_str().unwrap_or_default().to_string())
        .collect();
    if let Some(dup) = names
        .iter()
        .enumerate()
        .find(|(i, n)| names[..*i].contains(n))
    {
        return Err(err(format!("node '{}' is listed twice", dup.1)));
    }
    let vms: Vec<Value> = layout
        .get("vms")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, v)| vm_seed(i, v, &names))
        .collect::<Result<_, _>>()?;
    let mut cluster_seed = json!({"name": format!("rehearsal-{cluster}")});
    if let Some(v) = layout.get("version").and_then(size_text) {
        cluster_seed["version"] = json!(v);
    }
    let mut out = json!({
        "cluster": cluster_seed,
        "nodes": nodes,
        "vms": vms,
    });
    for (k, v) in access_seed(who).as_object().into_iter().flatten() {
        out[k] = v.clone();
    }
    Ok(out)
}

/// The simulator's access part: the playbook's user and token with every privilege (a rehearsal
/// checks placement and conflicts; `proxmox-access` checks permissions).
pub fn access_seed(who: &Identity) -> Value {
    json!({
        "users": [{"userid": who.user}],
        "tokens": [{"userid": who.user, "tokenid": who.token, "secret": who.secret, "privsep": false,
                    "comment": "proxshift rehearse"}],
        "acl": [{"path": "/", "user": who.user, "role": "Administrator"}],
    })
}

/// The seed as YAML, with a header saying where it came from.
pub fn seed_yaml(cluster: &str, seed: &Value) -> String {
    let body = serde_yaml_ng::to_string(seed).unwrap_or_default();
    format!(
        "# pvesim seed for rehearsing cluster {cluster}, generated by `proxshift rehearse` from the\n\
         # inventory's proxmox_layout. The token is for the simulator only.\n{body}"
    )
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
    let access = access_seed(who);
    for (k, v) in access.as_object().into_iter().flatten() {
        obj.insert(k.clone(), v.clone());
    }
    Ok(s)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn who() -> Identity {
        Identity {
            user: "proxshift@pve".into(),
            token: "ansible".into(),
            secret: "sim-secret".into(),
        }
    }

    fn layout() -> Value {
        serde_json::from_str(
            r#"{"version": "8.4.1",
                "nodes": [
                  {"name": "pve1", "cpus": 32, "memory": "128G",
                   "storages": [{"id": "local", "type": "dir", "content": ["iso"], "size": "200G", "free": "150G"},
                                {"id": "local-lvm", "type": "lvmthin", "content": ["images"], "size": "2T"}]},
                  {"name": "pve2", "maxmem": 68719476736, "online": false}],
                "vms": [{"vmid": 100, "node": "pve1", "name": "bastion", "memory": 4096, "cores": 2, "running": true,
                         "mac": "bc:24:11:00:01:00", "disks": [{"storage": "local-lvm", "size": "20G"}], "tags": ["infra", "keep"]}]}"#,
        )
        .unwrap()
    }

    #[test]
    fn seed_from_layout() {
        let s = seed("lab-sno", &layout(), &who()).unwrap();
        assert_eq!(
            s["cluster"],
            json!({"name": "rehearsal-lab-sno", "version": "8.4.1"})
        );
        assert_eq!(s["nodes"][0]["maxmem"], "128G");
        assert_eq!(s["nodes"][0]["storages"][1]["id"], "local-lvm");
        assert_eq!(
            s["nodes"][1],
            json!({"name": "pve2", "maxmem": 68719476736u64, "online": false, "storages": []})
        );
        assert_eq!(
            s["vms"][0],
            json!({"vmid": 100, "node": "pve1", "running": true, "config": {
                "name": "bastion", "memory": "4096", "cores": 2,
                "net0": "virtio=BC:24:11:00:01:00,bridge=vmbr0",
                "scsi0": "local-lvm:vm-100-disk-0,size=20G", "tags": "infra;keep"}})
        );
        assert_eq!(s["tokens"][0]["userid"], "proxshift@pve");
        assert_eq!(s["tokens"][0]["privsep"], false);
        assert_eq!(s["acl"][0]["role"], "Administrator");
        let yaml = seed_yaml("lab-sno", &s);
        assert!(yaml.starts_with("# pvesim seed for rehearsing cluster lab-sno"));
        let back: Value = serde_yaml_ng::from_str(&yaml).unwrap();
        assert_eq!(back, s);
    }

    #[test]
    fn layout_errors_name_the_field() {
        let e = |v: Value| seed("c", &v, &who()).unwrap_err().message;
        assert!(e(json!({"nodes": []})).contains("lists no nodes"));
        assert!(e(json!({"nodes": [{"cpus": 2}]})).contains("nodes[0] has no name"));
        assert!(e(json!({"nodes": [{"name": "a"}, {"name": "a"}]})).contains("'a' is listed twice"));
        assert!(
            e(json!({"nodes": [{"name": "a", "storages": [{"id": "x", "type": "dir"}]}]}))
                .contains("needs 'size'")
        );
        assert!(e(json!({"nodes": [{"name": "a", "storages": [{"id": "x", "type": "dir", "size": 1, "bogus": 1}]}]}))
            .contains("storage field 'bogus' is unknown"));
        assert!(
            e(json!({"nodes": [{"name": "a"}], "vms": [{"vmid": 1, "node": "b"}]}))
                .contains("'b', which the layout does not list")
        );
        assert!(
            e(json!({"nodes": [{"name": "a"}], "vms": [{"node": "a"}]})).contains("numeric vmid")
        );
        assert_eq!(
            seed("c", &json!([]), &who()).unwrap_err().code,
            crate::exit::INVENTORY
        );
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
        let seed = seed("c", &l, &who()).unwrap();
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
}
