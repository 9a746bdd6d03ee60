//! The clusters of an inventory, from `ansible-inventory --list` JSON (the CLI never parses the
//! inventory's YAML itself, so every inventory source and plugin works). Pure.

use serde::Serialize;
use serde_json::{Map, Value};

use crate::exit::CliError;

/// Role of a node, as the flow derives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Master,
    Worker,
}

/// What a VM looks like on Proxmox right now (filled in by the live lookup).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LiveState {
    /// `running`, `stopped`, `paused`…, or `absent` when no VM has the host's name.
    pub state: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vmid: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The VM carries the cluster's ownership tag (`proxshift-<name>`, as playbooks/tasks/cluster_model.yml sets it); a same-named VM without it is
    /// someone else's and the flow will refuse to touch it.
    pub owned: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Host {
    pub name: String,
    pub role: Role,
    /// The inventory gives no role; it follows from the host's position.
    pub role_derived: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ip: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pve_node: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vmid: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub live: Option<LiveState>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Topology {
    /// One master.
    Sno,
    /// One master plus workers (added day 2).
    SnoWorkers,
    /// Three (or more) masters, no workers.
    Compact,
    /// Three (or more) masters and workers.
    Ha,
    /// No usable control plane (zero or two masters).
    Invalid,
}

impl Topology {
    pub fn from_counts(masters: usize, workers: usize) -> Self {
        match (masters, workers) {
            (1, 0) => Topology::Sno,
            (1, _) => Topology::SnoWorkers,
            (m, 0) if m >= 3 => Topology::Compact,
            (m, _) if m >= 3 => Topology::Ha,
            _ => Topology::Invalid,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Topology::Sno => "SNO",
            Topology::SnoWorkers => "SNO+workers",
            Topology::Compact => "compact",
            Topology::Ha => "HA",
            Topology::Invalid => "invalid",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Cluster {
    pub name: String,
    pub topology: Topology,
    pub masters: usize,
    pub workers: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_domain: Option<String>,
    pub hosts: Vec<Host>,
}

impl Cluster {
    /// The ownership tag the flow puts on the cluster's VMs.
    pub fn tag(&self) -> String {
        format!("proxshift-{}", self.name)
    }
}

/// Site-level Proxmox connection settings found in the inventory (group_vars/all).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProxmoxSettings {
    pub host: Option<String>,
    pub port: Option<u16>,
    pub user: Option<String>,
    pub token_id: Option<String>,
    pub token_secret: Option<String>,
    pub password: Option<String>,
    pub validate_certs: Option<bool>,
    pub ca_path: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub struct Inventory {
    pub clusters: Vec<Cluster>,
    pub proxmox: ProxmoxSettings,
    /// The site's `proxmox_layout` (what the Proxmox cluster looks like), for `rehearse`.
    pub proxmox_layout: Option<Value>,
}

impl Inventory {
    pub fn cluster(&self, name: &str) -> Option<&Cluster> {
        self.clusters.iter().find(|c| c.name == name)
    }

    pub fn names(&self) -> Vec<&str> {
        self.clusters.iter().map(|c| c.name.as_str()).collect()
    }

    /// The cluster, or an inventory error that lists the ones there are.
    pub fn require(&self, name: &str, source: &str) -> Result<&Cluster, CliError> {
        self.cluster(name).ok_or_else(|| {
            let known = if self.clusters.is_empty() {
                "it defines no clusters".to_string()
            } else {
                format!("clusters: {}", self.names().join(", "))
            };
            CliError::inventory(format!(
                "cluster '{name}' is not in the inventory {source} ({known}); clusters are groups under all.children.clusters.children"
            ))
        })
    }
}

/// A scalar as text (`ocp_version: 4.19` arrives as a number); templates (`{{ … }}`) are unknown here.
fn text(v: Option<&Value>) -> Option<String> {
    let s = match v? {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        _ => return None,
    };
    (!s.trim().is_empty() && !s.contains("{{")).then_some(s)
}

fn number(v: Option<&Value>) -> Option<u64> {
    match v? {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

fn boolean(v: Option<&Value>) -> Option<bool> {
    match v? {
        Value::Bool(b) => Some(*b),
        Value::String(s) => match s.trim().to_ascii_lowercase().as_str() {
            "true" | "yes" | "on" | "1" | "y" => Some(true),
            "false" | "no" | "off" | "0" | "n" => Some(false),
            _ => None,
        },
        Value::Number(n) => n.as_u64().map(|n| n != 0),
        _ => None,
    }
}

/// The strings of the list under `key` (non-strings and a missing key give nothing).
pub(crate) fn names(group: Option<&Value>, key: &str) -> Vec<String> {
    group
        .and_then(|g| g.get(key))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// Hosts of a group and its child groups, in inventory order, each once.
fn group_hosts(doc: &Map<String, Value>, group: &str, out: &mut Vec<String>, depth: usize) {
    if depth > 32 {
        return;
    }
    for h in names(doc.get(group), "hosts") {
        if !out.contains(&h) {
            out.push(h);
        }
    }
    for child in names(doc.get(group), "children") {
        group_hosts(doc, &child, out, depth + 1);
    }
}

/// Roles as the flow assigns them: an explicit `role` wins; otherwise the first host (one- or
/// two-host clusters) or the first three hosts are masters.
fn assign_roles(explicit: &[Option<Role>]) -> Vec<(Role, bool)> {
    let target = if explicit.len() >= 3 { 3 } else { 1 };
    let mut masters = explicit
        .iter()
        .filter(|r| **r == Some(Role::Master))
        .count();
    explicit
        .iter()
        .map(|r| match r {
            Some(role) => (*role, false),
            None if masters < target => {
                masters += 1;
                (Role::Master, true)
            }
            None => (Role::Worker, true),
        })
        .collect()
}

/// Build the clusters from `ansible-inventory --list` output.
pub fn parse(json: &str) -> Result<Inventory, CliError> {
    let doc: Value = serde_json::from_str(json).map_err(|e| {
        CliError::inventory(format!("ansible-inventory printed no JSON inventory: {e}"))
    })?;
    let doc = doc
        .as_object()
        .ok_or_else(|| CliError::inventory("ansible-inventory output is not a JSON object"))?;
    let empty = Map::new();
    let hostvars = doc
        .get("_meta")
        .and_then(|m| m.get("hostvars"))
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let vars_of = |h: &str| hostvars.get(h).and_then(Value::as_object).unwrap_or(&empty);

    let mut inv = Inventory::default();
    for name in names(doc.get("clusters"), "children") {
        let mut host_names = Vec::new();
        group_hosts(doc, &name, &mut host_names, 0);
        let explicit: Vec<Option<Role>> = host_names
            .iter()
            .map(|h| match text(vars_of(h).get("role")).as_deref() {
                Some("master") | Some("control-plane") => Some(Role::Master),
                Some("worker") => Some(Role::Worker),
                _ => None,
            })
            .collect();
        let roles = assign_roles(&explicit);
        let hosts: Vec<Host> = host_names
            .iter()
            .zip(roles)
            .map(|(h, (role, derived))| {
                let v = vars_of(h);
                Host {
                    name: h.clone(),
                    role,
                    role_derived: derived,
                    ip: text(v.get("ip")),
                    mac: text(v.get("mac")),
                    pve_node: text(v.get("pve_node")),
                    vmid: number(v.get("vmid")),
                    live: None,
                }
            })
            .collect();
        let masters = hosts.iter().filter(|h| h.role == Role::Master).count();
        let workers = hosts.len() - masters;
        let first = host_names.first().map(|h| vars_of(h));
        inv.clusters.push(Cluster {
            topology: Topology::from_counts(masters, workers),
            masters,
            workers,
            version: first.and_then(|v| text(v.get("ocp_version"))),
            base_domain: first.and_then(|v| text(v.get("base_domain"))),
            name,
            hosts,
        });
    }

    // Site settings live in group_vars/all, so every host carries them; take the first host's.
    if let Some(v) = hostvars.values().find_map(Value::as_object) {
        inv.proxmox = ProxmoxSettings {
            host: text(v.get("proxmox_api_host")),
            port: number(v.get("proxmox_api_port")).and_then(|p| u16::try_from(p).ok()),
            user: text(v.get("proxmox_api_user")),
            token_id: text(v.get("proxmox_api_token_id")),
            token_secret: text(v.get("proxmox_api_token_secret")),
            password: text(v.get("proxmox_api_password")),
            validate_certs: boolean(v.get("proxmox_validate_certs")),
            ca_path: text(v.get("proxmox_ca_path")),
        };
        inv.proxmox_layout = v.get("proxmox_layout").cloned();
    }
    Ok(inv)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    /// Shaped like `ansible-inventory -i inventory/ --list` for the example inventory.
    pub(crate) fn example() -> String {
        let site = json!({
            "proxmox_api_host": "pve1.lab.example.com", "proxmox_api_port": 8006,
            "proxmox_api_user": "proxshift@pve", "proxmox_api_token_id": "ansible",
            "proxmox_validate_certs": true,
            "proxshift_work_dir": "{{ inventory_dir }}/../.proxshift/clusters"
        });
        let with = |extra: Value| {
            let mut m = site.as_object().unwrap().clone();
            m.extend(extra.as_object().unwrap().clone());
            Value::Object(m)
        };
        json!({
            "_meta": {"hostvars": {
                "lab-sno-0": with(json!({"ocp_version": "4.19", "base_domain": "lab.example.com",
                    "ip": "10.20.0.11", "mac": "BC:24:11:20:00:11", "pve_node": "pve1"})),
                "lab-compact-0": with(json!({"ocp_version": 4.19, "base_domain": "lab.example.com", "mac": "BC:24:11:30:00:21"})),
                "lab-compact-1": with(json!({"ocp_version": 4.19, "base_domain": "lab.example.com"})),
                "lab-compact-2": with(json!({"ocp_version": 4.19, "base_domain": "lab.example.com"})),
                "prod-ha-master-0": with(json!({"ocp_version": "4.19", "base_domain": "example.com", "role": "master", "vmid": "3001"})),
                "prod-ha-master-1": with(json!({"ocp_version": "4.19", "base_domain": "example.com", "role": "master"})),
                "prod-ha-master-2": with(json!({"ocp_version": "4.19", "base_domain": "example.com", "role": "master"})),
                "prod-ha-worker-0": with(json!({"ocp_version": "4.19", "base_domain": "example.com", "role": "worker", "vmid": 3004}))
            }},
            "all": {"children": ["ungrouped", "clusters"]},
            "clusters": {"children": ["lab-compact", "prod-ha", "lab-sno"]},
            "lab-compact": {"hosts": ["lab-compact-0", "lab-compact-1", "lab-compact-2"]},
            "lab-sno": {"hosts": ["lab-sno-0"]},
            "prod-ha": {"children": ["prod-ha-masters", "prod-ha-workers"]},
            "prod-ha-masters": {"hosts": ["prod-ha-master-0", "prod-ha-master-1", "prod-ha-master-2"]},
            "prod-ha-workers": {"hosts": ["prod-ha-worker-0"]}
        })
        .to_string()
    }

    #[test]
    fn clusters_topologies_and_fields() {
        let inv = parse(&example()).unwrap();
        assert_eq!(inv.names(), vec!["lab-compact", "prod-ha", "lab-sno"]);
        let sno = inv.cluster("lab-sno").unwrap();
        assert_eq!(sno.topology, Topology::Sno);
        assert_eq!(sno.version.as_deref(), Some("4.19"));
        assert_eq!(sno.hosts[0].ip.as_deref(), Some("10.20.0.11"));
        assert_eq!(sno.hosts[0].pve_node.as_deref(), Some("pve1"));
        assert!(sno.hosts[0].role_derived);
        let compact = inv.cluster("lab-compact").unwrap();
        assert_eq!(
            (compact.topology, compact.masters, compact.workers),
            (Topology::Compact, 3, 0)
        );
        // A number in YAML is still the version text.
        assert_eq!(compact.version.as_deref(), Some("4.19"));
        // Hosts from child groups, in order.
        let ha = inv.cluster("prod-ha").unwrap();
        assert_eq!(ha.topology, Topology::Ha);
        assert_eq!(ha.hosts.len(), 4);
        assert_eq!(ha.hosts[3].name, "prod-ha-worker-0");
        assert_eq!(
            (ha.hosts[0].vmid, ha.hosts[3].vmid),
            (Some(3001), Some(3004))
        );
        assert!(!ha.hosts[0].role_derived);
        assert_eq!(ha.tag(), "proxshift-prod-ha");
        assert_eq!(inv.proxmox.host.as_deref(), Some("pve1.lab.example.com"));
        assert_eq!(inv.proxmox.port, Some(8006));
        assert_eq!(inv.proxmox.token_id.as_deref(), Some("ansible"));
        assert_eq!(inv.proxmox.validate_certs, Some(true));
    }

    #[test]
    fn role_derivation_and_topology_labels() {
        use Role::*;
        let r = assign_roles(&[None, None, None, None]);
        assert_eq!(
            r.iter().map(|x| x.0).collect::<Vec<_>>(),
            vec![Master, Master, Master, Worker]
        );
        let r = assign_roles(&[None, None]);
        assert_eq!(
            r.iter().map(|x| x.0).collect::<Vec<_>>(),
            vec![Master, Worker]
        );
        // Explicit masters count towards the three.
        let r = assign_roles(&[Some(Worker), Some(Master), None, None, None]);
        assert_eq!(
            r.iter().map(|x| x.0).collect::<Vec<_>>(),
            vec![Worker, Master, Master, Master, Worker]
        );
        assert_eq!(Topology::from_counts(1, 2).label(), "SNO+workers");
        assert_eq!(Topology::from_counts(2, 0), Topology::Invalid);
        assert_eq!(Topology::from_counts(0, 3), Topology::Invalid);
        assert_eq!(Topology::from_counts(5, 0), Topology::Compact);
    }

    #[test]
    fn errors_and_missing_clusters() {
        let e = parse("[WARNING]: no inventory").unwrap_err();
        assert_eq!(e.code, crate::exit::INVENTORY);
        let inv =
            parse(r#"{"_meta": {"hostvars": {}}, "all": {"children": ["ungrouped"]}}"#).unwrap();
        assert!(inv.clusters.is_empty());
        let e = inv.require("x", "inventory/").unwrap_err();
        assert!(e.message.contains("defines no clusters"), "{}", e.message);
        let inv = parse(&example()).unwrap();
        let e = inv.require("ocp-sno3", "inventory/").unwrap_err();
        assert!(
            e.message.contains("lab-compact, prod-ha, lab-sno"),
            "{}",
            e.message
        );
        assert!(inv.require("lab-sno", "inventory/").is_ok());
    }
}
