//! `proxshift.proxmox.proxmox_vm_info`: list Proxmox VE VMs by name, VMID, tag or node with their
//! status, tags, pool, config and guest-agent addresses. Read-only: check mode runs the same GETs.
//!
//! The selection and the record shape are pure ([`record`]); [`gather`] does the reads over
//! `pve-client`; [`inventory`] is the backend of the `proxshift.proxmox.proxmox` inventory plugin
//! (the same listing turned into hosts, groups and host vars).

pub mod community;
pub mod gather;
pub mod inventory;
pub mod record;

use ansible_module::{ArgSpec, Failure, Module, Opt, Outcome, Type};
use pve_client::{connection_options, ConnectionOptions};
use serde::Deserialize;
use serde_json::Value;

use gather::Want;
use record::Selection;

/// The module's options; the documentation stub `plugins/modules/proxmox_vm_info.py` documents exactly these.
pub fn argument_spec() -> ArgSpec {
    ArgSpec::new(vec![
        Opt::str("name"),
        Opt::int("vmid"),
        Opt::str("node"),
        Opt::list("tags", Type::Str).default(Value::Array(vec![])),
        Opt::str("cluster"),
        Opt::str("cluster_tag_prefix").default("proxshift-"),
        Opt::bool("config").default(true),
        Opt::bool("network").default(false),
        Opt::bool("include_templates").default(false),
    ])
    .with(connection_options())
}

#[derive(Deserialize)]
struct Options {
    name: Option<String>,
    vmid: Option<i64>,
    node: Option<String>,
    tags: Vec<String>,
    cluster: Option<String>,
    cluster_tag_prefix: String,
    config: bool,
    network: bool,
    include_templates: bool,
    #[serde(flatten)]
    conn: ConnectionOptions,
}

pub fn run(m: &mut Module) -> Result<Outcome, Failure> {
    let o: Options = m.options()?;
    let vmid = match o.vmid {
        Some(v) if !(100..=999_999_999).contains(&v) => {
            return Err(Failure::new(format!(
                "vmid {v} is out of range: Proxmox VMIDs are 100 to 999999999"
            )))
        }
        v => v.map(|v| v as u64),
    };
    let mut tags = o.tags.clone();
    if let Some(c) = o
        .cluster
        .as_deref()
        .map(str::trim)
        .filter(|c| !c.is_empty())
    {
        tags.push(format!("{}{c}", o.cluster_tag_prefix));
    }
    let sel = Selection {
        name: o.name.clone().filter(|n| !n.is_empty()),
        vmid,
        node: o.node.clone().filter(|n| !n.is_empty()),
        tags,
        include_templates: o.include_templates,
        include_containers: false,
    };
    let want = Want {
        // The agent flag lives in the config: read it for `network` even when not returned.
        config: o.config,
        agent: o.network,
        qmp: false,
        snapshots: false,
    };
    let client = pve_client::connect_module(m, &o.conn).map_err(|e| Failure::new(e.to_string()))?;
    let listing = gather::list(&client, &sel, want).map_err(|e| Failure::new(e.to_string()))?;
    for w in listing.warnings {
        m.warn(w);
    }
    let vms: Vec<Value> = listing
        .records
        .iter()
        .map(|r| Value::Object(r.to_json(&o.cluster_tag_prefix)))
        .collect();
    let n = vms.len();
    Ok(Outcome::new(false)
        .msg(format!("found {n} VM{}", if n == 1 { "" } else { "s" }))
        .with("vms", Value::Array(vms)))
}

/// `main` of the module; with `--inventory` as `argv[1]`, the `proxshift.proxmox.proxmox` inventory plugin's backend (JSON options on stdin).
pub fn main() -> ! {
    if std::env::args_os().nth(1).as_deref() == Some(std::ffi::OsStr::new("--inventory")) {
        inventory::main()
    }
    ansible_module::run(argument_spec(), run)
}

#[cfg(test)]
mod tests {
    #[test]
    fn sidecar_matches_spec() {
        module_testkit::assert_sidecar_matches(
            &super::argument_spec(),
            "proxmox",
            "proxmox_vm_info",
        );
    }
}
