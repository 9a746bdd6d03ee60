//! Pure part of the VM listing: which VMs a query selects, and the JSON record of one VM (shared by
//! the module's `vms` and the inventory's host vars). The inventory lists LXC containers too
//! (`include_containers`); their records carry `vmtype: lxc` and the interfaces Proxmox reads from
//! the running container instead of the guest agent's.

use pve_client::power::GuestInterface;
use pve_client::ClusterVm;
use serde_json::{json, Map, Value};

/// Which VMs to list. Every given criterion must hold.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    pub name: Option<String>,
    pub vmid: Option<u64>,
    pub node: Option<String>,
    /// The VM carries every one of these tags.
    pub tags: Vec<String>,
    /// Templates are left out unless asked for (or selected by `vmid`).
    pub include_templates: bool,
    /// LXC containers too (the inventory); QEMU VMs only otherwise.
    pub include_containers: bool,
}

impl Selection {
    pub fn matches(&self, vm: &ClusterVm) -> bool {
        if !(vm.kind == "qemu" || (self.include_containers && vm.kind == "lxc")) {
            return false;
        }
        if vm.template && !self.include_templates && self.vmid != Some(vm.vmid) {
            return false;
        }
        let vm_tags = vm.tag_list();
        self.name
            .as_ref()
            .is_none_or(|n| vm.name.as_ref() == Some(n))
            && self.vmid.is_none_or(|id| id == vm.vmid)
            && self.node.as_ref().is_none_or(|n| &vm.node == n)
            && self.tags.iter().all(|t| vm_tags.contains(t))
    }
}

/// Everything known about one VM: the cluster listing, plus config and guest interfaces when read.
#[derive(Debug, Clone)]
pub struct VmRecord {
    pub vm: ClusterVm,
    pub config: Option<Map<String, Value>>,
    /// `None`: not asked for, agent not enabled, VM not running, or the agent did not answer.
    pub interfaces: Option<Vec<GuestInterface>>,
    /// What a running VM's CPUs do (`status/current` `qmpstatus`: `running`, `paused`, `prelaunch`, …);
    /// `None` unless asked for (the inventory's `want_facts`) or the VM is not running.
    pub qmpstatus: Option<String>,
    /// A running container's interfaces (`GET …/lxc/{vmid}/interfaces`: `name`, `hwaddr`, `inet`,
    /// `inet6`); `None` for VMs, stopped containers, or when not asked for.
    pub lxc_interfaces: Option<Vec<Value>>,
    /// The guest's snapshot names (the inventory's `want_facts`); `None` when not asked for.
    pub snapshots: Option<Vec<String>>,
}

/// The snapshot names of a `…/snapshot` listing: every entry but `current` (the "You are here!"
/// entry qemu-server and pve-container add), as community.proxmox's `proxmox_snapshots`.
pub fn snapshot_names(list: &[Value]) -> Vec<String> {
    list.iter()
        .filter_map(|s| s.get("name").and_then(Value::as_str))
        .filter(|n| *n != "current")
        .map(str::to_string)
        .collect()
}

/// Does this VM's config enable the QEMU guest agent (`agent: 1` or `agent: enabled=1,...`)?
/// Mirrors qemu-server's `PVE::QemuServer::Agent::get_qga_key($conf, 'enabled')`: the first,
/// default-key value of the property string.
pub fn agent_enabled(config: &Map<String, Value>) -> bool {
    let Some(v) = config.get("agent") else {
        return false;
    };
    let text = match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    text.split(',').any(|part| match part.split_once('=') {
        None => matches!(part.trim(), "1" | "true" | "yes" | "on"),
        Some((k, val)) => {
            k.trim() == "enabled" && matches!(val.trim(), "1" | "true" | "yes" | "on")
        }
    })
}

/// Addresses worth connecting to: no loopback, no link-local, nothing on `lo`.
pub fn usable_addresses(ifaces: &[GuestInterface], family: &str) -> Vec<String> {
    ifaces
        .iter()
        .filter(|i| i.name != "lo")
        .flat_map(|i| i.addresses.iter())
        .filter(|a| a.family.as_deref() == Some(family))
        .map(|a| a.ip.clone())
        .filter(|ip| {
            !(ip.starts_with("127.")
                || ip == "::1"
                || ip.starts_with("169.254.")
                || ip.to_ascii_lowercase().starts_with("fe80:"))
        })
        .collect()
}

/// The cluster names of a VM's ownership tags (`proxshift-<cluster>` with the default prefix).
pub fn clusters(tags: &[String], prefix: &str) -> Vec<String> {
    tags.iter()
        .filter_map(|t| t.strip_prefix(prefix))
        .filter(|c| !c.is_empty())
        .map(str::to_string)
        .collect()
}

fn interfaces_json(ifaces: &[GuestInterface]) -> Value {
    Value::Array(
        ifaces
            .iter()
            .map(|i| {
                let addrs: Vec<Value> = i
                    .addresses
                    .iter()
                    .map(|a| json!({"ip": a.ip, "family": a.family, "prefix": a.prefix}))
                    .collect();
                json!({"name": i.name, "mac": i.mac, "ip_addresses": addrs})
            })
            .collect(),
    )
}

/// The addresses of a container's interfaces (`inet`/`inet6`, CIDR, possibly several separated
/// by commas) without their prefix length, loopback and link-local left out as for VMs.
pub fn lxc_addresses(ifaces: &[Value], key: &str) -> Vec<String> {
    let as_guest: Vec<GuestInterface> = ifaces
        .iter()
        .map(|i| GuestInterface {
            name: i
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            mac: None,
            addresses: i
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .split([',', ' '])
                .filter(|a| !a.is_empty())
                .map(|a| pve_client::power::GuestAddress {
                    ip: a.split('/').next().unwrap_or_default().to_string(),
                    family: Some(if key == "inet" { "ipv4" } else { "ipv6" }.to_string()),
                    prefix: a
                        .split_once('/')
                        .and_then(|(_, p)| p.parse().ok())
                        .unwrap_or_default(),
                })
                .collect(),
        })
        .collect();
    usable_addresses(&as_guest, if key == "inet" { "ipv4" } else { "ipv6" })
}

impl VmRecord {
    pub fn tags(&self) -> Vec<String> {
        self.vm.tag_list()
    }

    pub fn is_container(&self) -> bool {
        self.vm.kind == "lxc"
    }

    /// The record as JSON with plain keys (`vmid`, `node`, ...); the inventory prefixes them.
    pub fn to_json(&self, cluster_tag_prefix: &str) -> Map<String, Value> {
        let vm = &self.vm;
        let tags = self.tags();
        let mut m = Map::new();
        m.insert("vmid".into(), json!(vm.vmid));
        // community.proxmox's `proxmox_vmtype`: `qemu` or `lxc`.
        m.insert("vmtype".into(), json!(vm.kind));
        m.insert("name".into(), json!(vm.name));
        m.insert("node".into(), json!(vm.node));
        m.insert("status".into(), json!(vm.status));
        if let Some(q) = &self.qmpstatus {
            m.insert("qmpstatus".into(), json!(q));
        }
        m.insert("template".into(), json!(vm.template));
        m.insert("tags".into(), json!(tags));
        m.insert(
            "clusters".into(),
            json!(clusters(&tags, cluster_tag_prefix)),
        );
        m.insert("pool".into(), json!(vm.pool));
        m.insert("lock".into(), json!(vm.lock));
        m.insert("hastate".into(), json!(vm.hastate));
        m.insert("maxmem".into(), json!(vm.maxmem));
        if let Some(c) = &self.config {
            if !self.is_container() {
                m.insert("agent_enabled".into(), json!(agent_enabled(c)));
            }
            m.insert("config".into(), Value::Object(c.clone()));
        }
        if let Some(ifaces) = &self.lxc_interfaces {
            m.insert("lxc_interfaces".into(), Value::Array(ifaces.clone()));
            m.insert(
                "ipv4_addresses".into(),
                json!(lxc_addresses(ifaces, "inet")),
            );
            m.insert(
                "ipv6_addresses".into(),
                json!(lxc_addresses(ifaces, "inet6")),
            );
        }
        if let Some(s) = &self.snapshots {
            m.insert("snapshots".into(), json!(s));
        }
        if let Some(ifaces) = &self.interfaces {
            m.insert("agent_interfaces".into(), interfaces_json(ifaces));
            m.insert(
                "ipv4_addresses".into(),
                json!(usable_addresses(ifaces, "ipv4")),
            );
            m.insert(
                "ipv6_addresses".into(),
                json!(usable_addresses(ifaces, "ipv6")),
            );
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vm(vmid: u64, name: &str, node: &str, tags: &str, template: bool) -> ClusterVm {
        serde_json::from_value(
            json!({"vmid": vmid, "name": name, "node": node, "type": "qemu",
            "status": "running", "template": u8::from(template), "tags": tags}),
        )
        .unwrap()
    }

    #[test]
    fn selection_needs_every_criterion() {
        let a = vm(101, "m0", "pve1", "proxshift-a;master", false);
        let all = Selection::default();
        assert!(all.matches(&a));
        let s = Selection {
            tags: vec!["proxshift-a".into(), "master".into()],
            node: Some("pve1".into()),
            ..Default::default()
        };
        assert!(s.matches(&a));
        let s = Selection {
            tags: vec!["proxshift-a".into(), "worker".into()],
            ..Default::default()
        };
        assert!(!s.matches(&a));
        let s = Selection {
            name: Some("m1".into()),
            ..Default::default()
        };
        assert!(!s.matches(&a));
    }

    #[test]
    fn templates_only_when_asked_or_named_by_vmid() {
        let t = vm(9000, "tpl", "pve1", "", true);
        assert!(!Selection::default().matches(&t));
        assert!(Selection {
            vmid: Some(9000),
            ..Default::default()
        }
        .matches(&t));
        assert!(Selection {
            include_templates: true,
            ..Default::default()
        }
        .matches(&t));
    }

    #[test]
    fn agent_flag_forms() {
        let c = |v: Value| json!({"agent": v}).as_object().unwrap().clone();
        assert!(agent_enabled(&c(json!("1"))));
        assert!(agent_enabled(&c(json!(1))));
        assert!(agent_enabled(&c(json!("enabled=1,fstrim_cloned_disks=1"))));
        assert!(!agent_enabled(&c(json!("0"))));
        assert!(!agent_enabled(&c(json!("enabled=0"))));
        assert!(!agent_enabled(&Map::new()));
    }

    #[test]
    fn usable_addresses_skip_loopback_and_link_local() {
        let ifaces: Vec<GuestInterface> = serde_json::from_value(json!([
            {"name": "lo", "ip-addresses": [{"ip-address": "127.0.0.1", "ip-address-type": "ipv4", "prefix": 8}]},
            {"name": "ens18", "hardware-address": "bc:24:11:00:00:01", "ip-addresses": [
                {"ip-address": "10.0.0.5", "ip-address-type": "ipv4", "prefix": 24},
                {"ip-address": "169.254.3.1", "ip-address-type": "ipv4", "prefix": 16},
                {"ip-address": "fe80::1", "ip-address-type": "ipv6", "prefix": 64},
                {"ip-address": "fd00::5", "ip-address-type": "ipv6", "prefix": 64}]}
        ]))
        .unwrap();
        assert_eq!(usable_addresses(&ifaces, "ipv4"), vec!["10.0.0.5"]);
        assert_eq!(usable_addresses(&ifaces, "ipv6"), vec!["fd00::5"]);
    }

    #[test]
    fn ownership_tags_name_clusters() {
        let tags = vec!["proxshift-sno".to_string(), "proxshift-".into(), "x".into()];
        assert_eq!(clusters(&tags, "proxshift-"), vec!["sno"]);
    }
}
