//! Backend of the `proxshift.proxmox.proxmox` inventory plugin: the plugin (a thin Python file) sends
//! its options as JSON on stdin and gets hosts, host vars and groups back. Ansible's own features —
//! `compose`, `keyed_groups`, `groups`, `filters` (Jinja) and the cache — stay in the plugin; the
//! Proxmox reads and everything decided from them live here.
//!
//! Options and environment variables follow community.proxmox's inventory plugin (`url`, `user`,
//! `password`, `token_id`, `token_secret`, `PROXMOX_*`, `want_facts`, `qemu_extended_statuses`,
//! `exclude_nodes`, `want_proxmox_nodes_ansible_host`), and so do the default group names
//! (`proxmox_all_qemu`, `proxmox_all_lxc`, `proxmox_all_running`, `proxmox_<node>_qemu`,
//! `proxmox_<node>_lxc`, `proxmox_pool_<pool>`, `proxmox_nodes`), and so do the host vars it sets —
//! names and shapes ([`community`]: config keys flat with property strings as dicts, the tag string,
//! `qmpstatus`, `snapshots`, the interfaces), beside ProxShift's own (`config`, `clusters`, the addresses).

use std::collections::BTreeSet;

use ansible_module::{ArgSpec, Failure, Module, Opt, Outcome, Type};
use pve_client::{Client, ConnectionOptions};
use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::community;
use crate::gather::{self, Want};
use crate::record::{clusters, Selection, VmRecord};

/// The plugin's options; `plugins/inventory/proxmox.py` documents exactly these (a test compares).
pub fn argument_spec() -> ArgSpec {
    ArgSpec::new(vec![
        Opt::str("url")
            .required()
            .env(&["PROXMOX_URL", "PROXMOX_HOST"]),
        Opt::str("user").env(&["PROXMOX_USER"]),
        Opt::str("password").no_log().env(&["PROXMOX_PASSWORD"]),
        Opt::str("token_id").env(&["PROXMOX_TOKEN_ID"]),
        Opt::str("token_secret")
            .no_log()
            .env(&["PROXMOX_TOKEN_SECRET"]),
        Opt::new("validate_certs", Type::Bool)
            .default(true)
            .env(&["PROXMOX_VALIDATE_CERTS"]),
        Opt::path("ca_path").env(&["PROXMOX_CA_PATH"]),
        Opt::int("timeout").default(30),
        Opt::bool("want_config")
            .aliases(&["want_facts"])
            .default(true),
        Opt::bool("want_agent_interfaces").default(true),
        Opt::bool("include_templates").default(false),
        Opt::str("group_prefix").default("proxmox_"),
        Opt::str("facts_prefix").default("proxmox_"),
        Opt::str("cluster_tag_prefix").default("proxshift-"),
        Opt::bool("qemu_extended_statuses").default(false),
        Opt::bool("exclude_nodes").default(false),
        Opt::bool("want_proxmox_nodes_ansible_host").default(false),
    ])
}

#[derive(Deserialize)]
struct Options {
    url: String,
    user: Option<String>,
    password: Option<String>,
    token_id: Option<String>,
    token_secret: Option<String>,
    validate_certs: bool,
    ca_path: Option<String>,
    timeout: i64,
    want_config: bool,
    want_agent_interfaces: bool,
    include_templates: bool,
    group_prefix: String,
    facts_prefix: String,
    cluster_tag_prefix: String,
    qemu_extended_statuses: bool,
    exclude_nodes: bool,
    want_proxmox_nodes_ansible_host: bool,
}

impl Options {
    fn connection(&self) -> ConnectionOptions {
        let mut c = ConnectionOptions::new(self.url.clone());
        c.api_user = self.user.clone();
        c.api_password = self.password.clone();
        c.api_token_id = self.token_id.clone();
        c.api_token_secret = self.token_secret.clone();
        c.validate_certs = self.validate_certs;
        c.ca_path = self.ca_path.as_ref().map(Into::into);
        c.api_timeout = self.timeout.max(1) as u64;
        c
    }
}

/// `main` of `proxmox_vm_info --inventory`.
pub fn main() -> ! {
    ansible_module::run_plugin("proxshift.proxmox.proxmox", argument_spec(), run)
}

pub fn run(m: &mut Module) -> Result<Outcome, Failure> {
    let o: Options = m.options()?;
    if o.timeout <= 0 {
        return Err("timeout must be a positive number of seconds".into());
    }
    if o.qemu_extended_statuses && !o.want_config {
        // community.proxmox refuses the same combination: the status needs the facts.
        return Err("qemu_extended_statuses needs want_facts (want_config) true".into());
    }
    let client =
        pve_client::connect_module(m, &o.connection()).map_err(|e| Failure::new(e.to_string()))?;
    let sel = Selection {
        include_templates: o.include_templates,
        include_containers: true,
        ..Default::default()
    };
    // want_facts reads what community.proxmox's does: config, status (qmpstatus) and snapshots.
    let want = Want {
        config: o.want_config,
        agent: o.want_agent_interfaces,
        qmp: o.want_config,
        snapshots: o.want_config,
    };
    let listing = gather::list(&client, &sel, want).map_err(|e| Failure::new(e.to_string()))?;
    let names = Naming {
        group_prefix: &o.group_prefix,
        facts_prefix: &o.facts_prefix,
        cluster_tag_prefix: &o.cluster_tag_prefix,
    };
    let mut built = build(&listing.records, &names, o.qemu_extended_statuses);
    if !o.exclude_nodes {
        let nodes = proxmox_nodes(&client, o.want_proxmox_nodes_ansible_host)
            .map_err(|e| Failure::new(e.to_string()))?;
        add_nodes(&mut built, &nodes, &names);
    }
    for w in listing.warnings.into_iter().chain(built.warnings) {
        m.warn(w);
    }
    let containers = listing.records.iter().filter(|r| r.is_container()).count();
    Ok(Outcome::new(false)
        .msg(format!(
            "{} VMs, {containers} containers, {} Proxmox nodes",
            built.hosts.len() - containers,
            built.nodes.len()
        ))
        .with("hosts", Value::Object(built.hosts))
        .with("nodes", Value::Object(built.nodes))
        .with("groups", Value::Object(built.groups)))
}

/// The cluster's nodes with, when asked for and the node is online, its `ansible_host`.
fn proxmox_nodes(
    client: &Client,
    want_address: bool,
) -> Result<Vec<(String, Option<String>)>, pve_client::Error> {
    let mut out = Vec::new();
    for n in client.nodes()? {
        let address = if want_address && n.online() {
            node_address(&client.node_network(&n.node)?)
        } else {
            None
        };
        out.push((n.node, address));
    }
    out.sort();
    Ok(out)
}

/// The address community.proxmox's inventory gives a node as `ansible_host`: interfaces sorted by
/// name, the first one that is active and has both an address and a gateway (pure).
pub fn node_address(interfaces: &[Value]) -> Option<String> {
    let mut sorted: Vec<&Value> = interfaces.iter().collect();
    sorted.sort_by_key(|i| i.get("iface").and_then(Value::as_str).unwrap_or_default());
    sorted
        .into_iter()
        .find(|i| {
            ["active", "address", "gateway"]
                .iter()
                .all(|k| i.get(k).is_some())
        })
        .and_then(|i| i.get("address")?.as_str().map(str::to_string))
}

/// Proxmox nodes as hosts (`exclude_nodes: false`, community.proxmox's default): each in the group
/// `<group_prefix>nodes`, with `ansible_host` when known. Not subject to `filters`, as upstream.
fn add_nodes(inv: &mut Inventory, nodes: &[(String, Option<String>)], n: &Naming) {
    let group = safe_group(&format!("{}nodes", n.group_prefix));
    let mut members = Vec::new();
    for (name, address) in nodes {
        if inv.hosts.contains_key(name) {
            inv.warnings.push(format!(
                "Proxmox node {name} has the name of a VM: both are the inventory host {name}"
            ));
        }
        let mut vars = Map::new();
        if let Some(a) = address {
            vars.insert("ansible_host".into(), json!(a));
        }
        inv.nodes.insert(name.clone(), Value::Object(vars));
        members.push(json!(name));
    }
    if !members.is_empty() {
        inv.groups.insert(group, Value::Array(members));
    }
}

/// Prefixes of group and host-var names.
pub struct Naming<'a> {
    pub group_prefix: &'a str,
    pub facts_prefix: &'a str,
    pub cluster_tag_prefix: &'a str,
}

/// Hosts with their vars, groups with their hosts (both in VMID order), and notes.
#[derive(Debug, Default)]
pub struct Inventory {
    pub hosts: Map<String, Value>,
    /// Proxmox nodes as hosts (name → vars).
    pub nodes: Map<String, Value>,
    pub groups: Map<String, Value>,
    pub warnings: Vec<String>,
}

/// A group name Ansible accepts without a warning: lower case, `[a-z0-9_]` only (as Ansible's
/// `to_safe_group_name` with the default `TRANSFORM_INVALID_GROUP_CHARS`).
pub fn safe_group(name: &str) -> String {
    name.to_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The inventory host name of each record: the VM name; `vm-<vmid>` for a VM without one; a name
/// used by several VMs (PVE does not forbid it) becomes `<name>-<vmid>` for all but the lowest VMID.
fn host_names(records: &[VmRecord]) -> (Vec<String>, Vec<String>) {
    let mut seen = BTreeSet::new();
    let mut warnings = Vec::new();
    let names = records
        .iter()
        .map(|r| {
            let base = r
                .vm
                .name
                .clone()
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| format!("vm-{}", r.vm.vmid));
            if seen.insert(base.clone()) {
                base
            } else {
                let unique = format!("{base}-{}", r.vm.vmid);
                warnings.push(format!(
                    "VM {} has the same name as another VM ({base}); its inventory host is {unique}",
                    r.vm.vmid
                ));
                seen.insert(unique.clone());
                unique
            }
        })
        .collect();
    (names, warnings)
}

/// One host's vars, named as community.proxmox names them (`to_safe(facts_prefix + key)`): the
/// record's (as `proxmox_vm_info` returns it) with community.proxmox's shapes where the names meet,
/// so its users' `compose`/`groups`/`keyed_groups` work unchanged (see [`community`]): `tags` the
/// tag string as Proxmox keeps it and `tags_parsed` the list; `agent_interfaces` and
/// `lxc_interfaces` in its shape; a VM's `qmpstatus` (with the config; a VM that is not running
/// has its status as `qmpstatus`, as qemu-server's `vmstatus` answers); every config key flat
/// (`proxmox_net0`, `proxmox_cores`), property strings split into dicts, beside the nested `config`
/// (raw) unless a record key has that name already (`name`, `tags`, `lock`).
pub fn host_vars(r: &VmRecord, n: &Naming) -> Map<String, Value> {
    let mut vars = r.to_json(n.cluster_tag_prefix);
    // A key the API leaves out is no variable (the record says null): community.proxmox leaves it
    // undefined, and its users' filters (`proxmox_lock is not defined`) must keep the guest.
    vars.retain(|key, value| !(value.is_null() && FROM_THE_LISTING.contains(&key.as_str())));
    let config_tags = r.config.as_ref().and_then(|c| c.get("tags"));
    let tags = config_tags.cloned().or_else(|| {
        r.vm.tags
            .clone()
            .filter(|t| !t.is_empty())
            .map(Value::String)
    });
    // community.proxmox: `tags` only when the guest has the key, `tags_parsed` only when it holds a tag.
    match tags {
        Some(t) => vars.insert("tags".into(), t),
        None => vars.remove("tags"),
    };
    let parsed = r.tags();
    if parsed.is_empty() {
        vars.remove("tags_parsed");
    } else {
        vars.insert("tags_parsed".into(), json!(parsed));
    }
    let shaped = [
        (
            "agent_interfaces",
            r.interfaces
                .as_deref()
                .and_then(community::agent_interfaces),
        ),
        (
            "lxc_interfaces",
            r.lxc_interfaces
                .as_deref()
                .and_then(community::lxc_interfaces),
        ),
    ];
    for (key, value) in shaped {
        match value {
            Some(v) => vars.insert(key.into(), v),
            None => vars.remove(key),
        };
    }
    if !r.is_container() && r.config.is_some() && r.qmpstatus.is_none() {
        if let Some(status) = r.vm.status.as_deref().filter(|s| *s != "running") {
            vars.insert("qmpstatus".into(), json!(status));
        }
    }
    let mut out: Map<String, Value> = vars
        .iter()
        .map(|(k, v)| (community::fact_name(n.facts_prefix, k), v.clone()))
        .collect();
    if let Some(config) = &r.config {
        for (key, value) in config {
            if !vars.contains_key(key) {
                out.insert(
                    community::fact_name(n.facts_prefix, key),
                    community::config_fact(key, value),
                );
            }
        }
    }
    out
}

/// The record's keys read from `/cluster/resources`, which PVE leaves out of a guest that has none.
const FROM_THE_LISTING: &[&str] = &["name", "status", "pool", "lock", "hastate"];

/// The inventory of `records`: host vars prefixed with `facts_prefix`, groups by status, node, pool,
/// tag and cluster (from the ownership tag), prefixed with `group_prefix`. With `extended_statuses`
/// a running VM's status group is its `qmpstatus` (`all_paused`, `all_prelaunch`), as
/// community.proxmox's `qemu_extended_statuses`.
pub fn build(records: &[VmRecord], n: &Naming, extended_statuses: bool) -> Inventory {
    let (names, warnings) = host_names(records);
    let mut inv = Inventory {
        warnings,
        ..Default::default()
    };
    let g = |s: String| safe_group(&format!("{}{s}", n.group_prefix));
    for (r, host) in records.iter().zip(&names) {
        inv.hosts
            .insert(host.clone(), Value::Object(host_vars(r, n)));
        let tags = r.tags();
        // `all_qemu`/`all_lxc` and `<node>_qemu`/`<node>_lxc`, as community.proxmox names them.
        let kind = &r.vm.kind;
        let mut groups = vec![
            g(format!("all_{kind}")),
            g(format!("{}_{kind}", r.vm.node)),
            g(format!("all_{}", status_group(r, extended_statuses))),
        ];
        if let Some(p) = r.vm.pool.as_deref().filter(|p| !p.is_empty()) {
            groups.push(g(format!("pool_{p}")));
        }
        groups.extend(tags.iter().map(|t| g(format!("tag_{t}"))));
        groups.extend(
            clusters(&tags, n.cluster_tag_prefix)
                .iter()
                .map(|c| g(format!("cluster_{c}"))),
        );
        for group in groups {
            let members = inv.groups.entry(group).or_insert_with(|| json!([]));
            if let Value::Array(a) = members {
                if !a.iter().any(|h| h == host) {
                    a.push(json!(host));
                }
            }
        }
    }
    inv
}

/// The `all_<status>` group of a VM.
fn status_group(r: &VmRecord, extended_statuses: bool) -> &str {
    let status = r.vm.status.as_deref().unwrap_or("unknown");
    match r.qmpstatus.as_deref() {
        Some(q) if extended_statuses && status == "running" => q,
        _ => status,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_vars_carry_community_names_and_shapes_beside_the_records() {
        let mut r = rec(100, "a", "pve1", "running", "x;proxshift-sno", None);
        r.config = Some(
            json!({"cores": 4, "net0": "virtio=BC:24:11:00:00:01,bridge=vmbr0", "name": "a", "tags": "x;proxshift-sno",
                   "agent": "1", "description": "k=v"})
                .as_object()
                .unwrap()
                .clone(),
        );
        r.qmpstatus = Some("running".into());
        r.snapshots = Some(vec!["before-upgrade".into()]);
        r.interfaces = Some(
            serde_json::from_value(json!([{"name": "eth0", "hardware-address": "bc:24:11:00:00:01",
                "ip-addresses": [{"ip-address": "10.1.0.1", "ip-address-type": "ipv4", "prefix": 24}]}]))
            .unwrap(),
        );
        let v = host_vars(&r, &N);
        // community.proxmox: the tag string as Proxmox keeps it, and the list.
        assert_eq!(v["proxmox_tags"], json!("x;proxshift-sno"));
        assert_eq!(v["proxmox_tags_parsed"], json!(["x", "proxshift-sno"]));
        assert_eq!(v["proxmox_cores"], json!(4));
        assert_eq!(
            v["proxmox_net0"],
            json!({"virtio": "BC:24:11:00:00:01", "bridge": "vmbr0"})
        );
        assert_eq!(v["proxmox_description"], json!("k=v"));
        assert_eq!(v["proxmox_agent"], json!("1"));
        assert_eq!(v["proxmox_qmpstatus"], json!("running"));
        assert_eq!(v["proxmox_snapshots"], json!(["before-upgrade"]));
        assert_eq!(
            v["proxmox_agent_interfaces"],
            json!([{"name": "eth0", "mac-address": "bc:24:11:00:00:01", "ip-addresses": ["10.1.0.1/24"]}])
        );
        assert_eq!(v["proxmox_ipv4_addresses"], json!(["10.1.0.1"]));
        // ProxShift's own: the raw config nested, the agent flag, the clusters.
        assert_eq!(
            v["proxmox_config"]["net0"],
            json!("virtio=BC:24:11:00:00:01,bridge=vmbr0")
        );
        assert_eq!(v["proxmox_agent_enabled"], json!(true));
        assert_eq!(v["proxmox_clusters"], json!(["sno"]));
        assert_eq!(v["proxmox_name"], json!("a"));
        // Without config (want_facts: false): the listing's tags, no flat keys, no qmpstatus.
        let mut stopped = rec(101, "b", "pve1", "stopped", "", None);
        let bare = host_vars(&stopped, &N);
        // What the API leaves out is undefined, not null or "": community.proxmox's filters
        // (`proxmox_lock is not defined`) keep the guest.
        for absent in [
            "proxmox_tags",
            "proxmox_tags_parsed",
            "proxmox_lock",
            "proxmox_pool",
            "proxmox_hastate",
        ] {
            assert!(
                !bare.contains_key(absent),
                "{absent}: {:?}",
                bare.get(absent)
            );
        }
        let mut locked = rec(102, "c", "pve1", "running", "", Some("ocp"));
        locked.vm.lock = Some("backup".into());
        locked.vm.hastate = Some("started".into());
        let v = host_vars(&locked, &N);
        assert_eq!(
            (
                &v["proxmox_lock"],
                &v["proxmox_pool"],
                &v["proxmox_hastate"]
            ),
            (&json!("backup"), &json!("ocp"), &json!("started"))
        );
        assert!(!bare.contains_key("proxmox_cores") && !bare.contains_key("proxmox_qmpstatus"));
        // With config, a VM that is not running has its status as qmpstatus (qemu-server's vmstatus).
        stopped.config = Some(Map::new());
        stopped.interfaces = Some(vec![]);
        let v = host_vars(&stopped, &N);
        assert_eq!(v["proxmox_qmpstatus"], json!("stopped"));
        assert!(
            !v.contains_key("proxmox_agent_interfaces"),
            "none when there is none, as upstream"
        );
    }

    fn rec(
        vmid: u64,
        name: &str,
        node: &str,
        status: &str,
        tags: &str,
        pool: Option<&str>,
    ) -> VmRecord {
        VmRecord {
            vm: serde_json::from_value(
                json!({"vmid": vmid, "name": name, "node": node, "type": "qemu",
                "status": status, "tags": tags, "pool": pool}),
            )
            .unwrap(),
            config: None,
            interfaces: None,
            qmpstatus: None,
            lxc_interfaces: None,
            snapshots: None,
        }
    }

    /// A container record: `type: lxc` in the listing.
    fn ct(vmid: u64, name: &str, node: &str, status: &str) -> VmRecord {
        let mut r = rec(vmid, name, node, status, "", None);
        r.vm.kind = "lxc".into();
        r
    }

    /// Containers are hosts with `vmtype: lxc`, in `all_lxc` and `<node>_lxc` (not the qemu groups),
    /// and in the status groups like VMs; their interfaces give the addresses, config keys are flat.
    #[test]
    fn containers_are_grouped_by_type_and_carry_their_interfaces() {
        let mut web = ct(200, "web-ct", "pve1", "running");
        web.config = Some(
            json!({"hostname": "web-ct", "memory": 1024, "net0": "name=eth0,bridge=vmbr0,ip=dhcp"})
                .as_object()
                .unwrap()
                .clone(),
        );
        web.lxc_interfaces = Some(vec![
            json!({"name": "lo", "hwaddr": "00:00:00:00:00:00", "inet": "127.0.0.1/8", "inet6": "::1/128"}),
            json!({"name": "eth0", "hwaddr": "bc:24:11:aa:00:01", "inet": "10.2.0.5/24", "inet6": "fe80::1/64"}),
        ]);
        let inv = build(
            &[
                rec(101, "vm", "pve1", "running", "", None),
                web,
                ct(201, "db-ct", "pve2", "stopped"),
            ],
            &N,
            false,
        );
        assert_eq!(inv.groups["proxmox_all_lxc"], json!(["web-ct", "db-ct"]));
        assert_eq!(inv.groups["proxmox_all_qemu"], json!(["vm"]));
        assert_eq!(inv.groups["proxmox_pve1_lxc"], json!(["web-ct"]));
        assert_eq!(inv.groups["proxmox_pve2_lxc"], json!(["db-ct"]));
        assert_eq!(inv.groups["proxmox_pve1_qemu"], json!(["vm"]));
        assert_eq!(inv.groups["proxmox_all_running"], json!(["vm", "web-ct"]));
        assert_eq!(inv.groups["proxmox_all_stopped"], json!(["db-ct"]));
        let v = &inv.hosts["web-ct"];
        assert_eq!(v["proxmox_vmtype"], json!("lxc"));
        assert_eq!(inv.hosts["vm"]["proxmox_vmtype"], json!("qemu"));
        assert_eq!(v["proxmox_memory"], json!(1024));
        assert_eq!(v["proxmox_hostname"], json!("web-ct"));
        assert_eq!(
            v["proxmox_ipv4_addresses"],
            json!(["10.2.0.5"]),
            "no loopback"
        );
        assert_eq!(v["proxmox_ipv6_addresses"], json!([]), "no link-local");
        assert_eq!(
            v["proxmox_lxc_interfaces"][1],
            json!({"name": "eth0", "hwaddr": "bc:24:11:aa:00:01", "inet": "10.2.0.5/24", "inet6": "fe80::1/64"})
        );
        assert_eq!(
            v["proxmox_net0"],
            json!({"name": "eth0", "bridge": "vmbr0", "ip": "dhcp"})
        );
        assert!(
            !v.as_object().unwrap().contains_key("proxmox_qmpstatus"),
            "no qmpstatus for a container"
        );
        assert!(
            !v.as_object().unwrap().contains_key("proxmox_agent_enabled"),
            "no guest agent in a container"
        );
    }

    const N: Naming = Naming {
        group_prefix: "proxmox_",
        facts_prefix: "proxmox_",
        cluster_tag_prefix: "proxshift-",
    };

    #[test]
    fn groups_by_status_node_pool_tag_and_cluster() {
        let inv = build(
            &[
                rec(
                    101,
                    "sno-0",
                    "pve1",
                    "running",
                    "proxshift-sno;master",
                    Some("ocp"),
                ),
                rec(102, "spare", "pve-2", "stopped", "", None),
            ],
            &N,
            false,
        );
        let members = |g: &str| inv.groups[g].clone();
        assert_eq!(members("proxmox_all_qemu"), json!(["sno-0", "spare"]));
        assert_eq!(members("proxmox_all_running"), json!(["sno-0"]));
        assert_eq!(members("proxmox_all_stopped"), json!(["spare"]));
        assert_eq!(members("proxmox_pve1_qemu"), json!(["sno-0"]));
        assert_eq!(members("proxmox_pve_2_qemu"), json!(["spare"]));
        assert_eq!(members("proxmox_pool_ocp"), json!(["sno-0"]));
        assert_eq!(members("proxmox_tag_proxshift_sno"), json!(["sno-0"]));
        assert_eq!(members("proxmox_tag_master"), json!(["sno-0"]));
        assert_eq!(members("proxmox_cluster_sno"), json!(["sno-0"]));
        let vars = &inv.hosts["sno-0"];
        assert_eq!(vars["proxmox_vmid"], json!(101));
        assert_eq!(vars["proxmox_clusters"], json!(["sno"]));
        assert_eq!(vars["proxmox_tags"], json!("proxshift-sno;master"));
        assert_eq!(
            vars["proxmox_tags_parsed"],
            json!(["proxshift-sno", "master"])
        );
    }

    #[test]
    fn plugin_documentation_matches_spec() {
        module_testkit::assert_plugin_docs_match(
            &argument_spec(),
            "proxmox",
            "inventory/proxmox.py",
            "proxmox",
            &[],
            &["plugin", "filters"],
        );
    }

    #[test]
    fn duplicate_and_missing_names_get_unique_hosts() {
        let inv = build(
            &[
                rec(101, "web", "pve1", "running", "", None),
                rec(102, "web", "pve1", "running", "", None),
                rec(103, "", "pve1", "running", "", None),
            ],
            &N,
            false,
        );
        let hosts: Vec<&String> = inv.hosts.keys().collect();
        assert_eq!(hosts, ["web", "web-102", "vm-103"]);
        assert_eq!(inv.warnings.len(), 1, "{:?}", inv.warnings);
        assert!(inv.warnings[0].contains("web-102"));
    }

    #[test]
    fn prefixes_apply_to_groups_and_vars() {
        let n = Naming {
            group_prefix: "pve-",
            facts_prefix: "",
            cluster_tag_prefix: "owner-",
        };
        let inv = build(
            &[rec(101, "a", "pve1", "running", "owner-x", None)],
            &n,
            false,
        );
        assert!(inv.groups.contains_key("pve_cluster_x"), "{:?}", inv.groups);
        assert_eq!(inv.hosts["a"]["vmid"], json!(101));
    }

    /// qemu_extended_statuses: a running VM whose CPUs are paused is in `all_paused`, not
    /// `all_running`, and carries `qmpstatus`; without the option the listing status decides.
    #[test]
    fn extended_statuses_group_running_vms_by_qmpstatus() {
        let mut paused = rec(101, "p", "pve1", "running", "", None);
        paused.qmpstatus = Some("paused".into());
        let running = rec(102, "r", "pve1", "running", "", None);
        let inv = build(&[paused.clone(), running.clone()], &N, true);
        assert_eq!(inv.groups["proxmox_all_paused"], json!(["p"]));
        assert_eq!(inv.groups["proxmox_all_running"], json!(["r"]));
        assert_eq!(inv.hosts["p"]["proxmox_qmpstatus"], json!("paused"));
        let plain = build(&[paused, running], &N, false);
        assert_eq!(plain.groups["proxmox_all_running"], json!(["p", "r"]));
    }

    /// Nodes: `proxmox_nodes` with `ansible_host` from the first (by name) active interface with an
    /// address and a gateway, as community.proxmox picks it.
    #[test]
    fn nodes_are_hosts_with_the_address_upstream_picks() {
        let ifaces = vec![
            json!({"iface": "vmbr1", "active": 1, "address": "10.9.0.2", "gateway": "10.9.0.1"}),
            json!({"iface": "eno1", "active": 1}),
            json!({"iface": "vmbr0", "active": 1, "address": "192.0.2.11", "gateway": "192.0.2.1"}),
            json!({"iface": "bond0", "address": "10.8.0.2", "gateway": "10.8.0.1"}),
        ];
        assert_eq!(node_address(&ifaces).as_deref(), Some("192.0.2.11"));
        assert_eq!(node_address(&ifaces[1..2]), None);
        let mut inv = build(&[rec(101, "pve2", "pve1", "running", "", None)], &N, false);
        add_nodes(
            &mut inv,
            &[
                ("pve1".into(), Some("192.0.2.11".into())),
                ("pve2".into(), None),
            ],
            &N,
        );
        assert_eq!(inv.groups["proxmox_nodes"], json!(["pve1", "pve2"]));
        assert_eq!(inv.nodes["pve1"], json!({"ansible_host": "192.0.2.11"}));
        assert_eq!(inv.nodes["pve2"], json!({}));
        assert!(
            inv.warnings.iter().any(|w| w.contains("pve2")),
            "{:?}",
            inv.warnings
        );
    }
}
