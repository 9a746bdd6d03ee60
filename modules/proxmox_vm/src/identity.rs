//! Which VM a spec names, which clone source it points at, and whether a VM is ours (the ownership
//! tag, or the clone marker a clone carries until its first config update).

use std::collections::BTreeMap;

use pve_client::ClusterVm;
use pve_types::{config_str, normalize_tags};
use serde_json::{Map, Value};

use crate::error::VmError;
use crate::options::{CloneArgs, VmArgs};

const MIB: u64 = 1 << 20;

/// How a VM is named in messages.
pub fn label(vm: &ClusterVm) -> String {
    match &vm.name {
        Some(n) => format!("VM '{n}' ({}) on node '{}'", vm.vmid, vm.node),
        None => format!("VM {} on node '{}'", vm.vmid, vm.node),
    }
}

/// Find the VM a spec names: by `vmid`, else by `name` among non-templates (several matches is an
/// error that lists them).
pub fn resolve(
    snapshot: &[ClusterVm],
    vmid: Option<u32>,
    name: Option<&str>,
) -> Result<Option<ClusterVm>, VmError> {
    if let Some(id) = vmid {
        return Ok(snapshot.iter().find(|v| v.vmid == id as u64).cloned());
    }
    let Some(name) = name else {
        return Err(VmError::refused("each VM needs a name or a vmid"));
    };
    let matches: Vec<&ClusterVm> = snapshot
        .iter()
        .filter(|v| !v.template && v.name.as_deref() == Some(name))
        .collect();
    match matches.as_slice() {
        [] => Ok(None),
        [one] => Ok(Some((*one).clone())),
        many => Err(VmError::Refused(format!(
            "the name '{name}' matches {} VMs: {}; give vmid to pick one",
            many.len(),
            many.iter()
                .map(|v| format!("{} on {}", v.vmid, v.node))
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// The clone source: a VM or template by vmid or (unique) name.
pub fn resolve_source(snapshot: &[ClusterVm], c: &CloneArgs) -> Result<ClusterVm, VmError> {
    if let Some(id) = c.vmid {
        return snapshot
            .iter()
            .find(|v| v.vmid == id as u64)
            .cloned()
            .ok_or_else(|| VmError::Refused(format!("clone: source VM {id} does not exist")));
    }
    let name = c.name.as_deref().unwrap_or("");
    let all: Vec<&ClusterVm> = snapshot
        .iter()
        .filter(|v| v.name.as_deref() == Some(name))
        .collect();
    // Prefer templates when a name is shared by a template and VMs cloned from it.
    let templates: Vec<&&ClusterVm> = all.iter().filter(|v| v.template).collect();
    match (templates.as_slice(), all.as_slice()) {
        ([one], _) => Ok((**one).clone()),
        ([], [one]) => Ok((*one).clone()),
        ([], []) => Err(VmError::Refused(format!(
            "clone: no VM or template is named '{name}'"
        ))),
        _ => Err(VmError::Refused(format!(
            "clone: the name '{name}' matches several VMs ({}); give clone.vmid",
            all.iter()
                .map(|v| v.vmid.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

fn owned(tags: &[String], owner: &str) -> bool {
    let owner = owner.to_lowercase();
    tags.iter().any(|t| t.to_lowercase() == owner)
}

/// A clone cannot be tagged in the clone call itself, so it is created with this description line
/// and tagged in the first config update. A clone whose run died in between (a timeout on a long
/// full clone) is still recognised as ours, and the line is removed when it is converged.
pub const CLONE_MARKER: &str = "proxshift-clone-of-owner: ";

pub fn clone_marker(owner: &str) -> String {
    format!("{CLONE_MARKER}{owner}")
}

/// Owned: the ownership tag, or the clone marker of this owner in the description.
pub fn owned_config(cfg: &Map<String, Value>, owner: &str) -> bool {
    owned(&config_tags(cfg), owner)
        || config_str(cfg, "description")
            .is_some_and(|d| d.lines().any(|l| l.trim() == clone_marker(owner)))
}

/// The description without clone marker lines, when it carries one.
pub fn without_marker(description: Option<&str>) -> Option<String> {
    let d = description?;
    if !d.contains(CLONE_MARKER) {
        return None;
    }
    Some(
        d.lines()
            .filter(|l| !l.trim().starts_with(CLONE_MARKER))
            .collect::<Vec<_>>()
            .join("\n")
            .trim()
            .to_string(),
    )
}

pub fn config_tags(cfg: &Map<String, Value>) -> Vec<String> {
    normalize_tags(config_str(cfg, "tags"))
}

/// Memory (bytes) a new VM reserves: its `memory`, a clone's template's, or PVE's default 512 MiB.
pub fn requested_memory(args: &VmArgs, snapshot: &[ClusterVm]) -> u64 {
    if let Some(m) = args.spec.memory {
        return m * MIB;
    }
    if let Some(cl) = &args.clone {
        if let Ok(src) = resolve_source(snapshot, cl) {
            if src.maxmem > 0 {
                return src.maxmem;
            }
        }
    }
    512 * MIB
}

/// Sum of `maxmem` of non-template VMs per node, and this cluster's VM count per node.
pub fn node_usage(snapshot: &[ClusterVm], owner: &str) -> BTreeMap<String, (u64, u32)> {
    let mut m: BTreeMap<String, (u64, u32)> = BTreeMap::new();
    for v in snapshot.iter().filter(|v| !v.template) {
        let e = m.entry(v.node.clone()).or_default();
        e.0 += v.maxmem;
        if owned(&v.tag_list(), owner) {
            e.1 += 1;
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn vm(vmid: u64, name: &str, node: &str, template: bool) -> ClusterVm {
        ClusterVm {
            vmid,
            name: Some(name.into()),
            node: node.into(),
            kind: "qemu".into(),
            status: Some("stopped".into()),
            template,
            tags: Some("proxshift;ocp".into()),
            lock: None,
            pool: None,
            maxmem: 8 << 30,
            hastate: None,
        }
    }

    #[test]
    fn identity_by_vmid_and_name() {
        let snap = vec![
            vm(100, "a", "pve1", false),
            vm(101, "b", "pve1", false),
            vm(102, "b", "pve2", false),
            vm(9000, "a", "pve1", true),
        ];
        assert_eq!(
            resolve(&snap, Some(101), Some("zzz"))
                .unwrap()
                .unwrap()
                .vmid,
            101
        );
        assert_eq!(resolve(&snap, None, Some("a")).unwrap().unwrap().vmid, 100);
        assert!(resolve(&snap, None, Some("c")).unwrap().is_none());
        let e = resolve(&snap, None, Some("b")).unwrap_err().to_string();
        assert!(e.contains("matches 2 VMs: 101 on pve1, 102 on pve2"), "{e}");
        assert!(resolve(&snap, None, None).is_err());
    }

    #[test]
    fn clone_source_prefers_the_template() {
        let snap = vec![
            vm(100, "rhcos", "pve1", false),
            vm(9000, "rhcos", "pve1", true),
        ];
        let c = CloneArgs {
            vmid: None,
            name: Some("rhcos".into()),
            full: true,
            storage: None,
            format: None,
        };
        assert_eq!(resolve_source(&snap, &c).unwrap().vmid, 9000);
        let c2 = CloneArgs {
            name: Some("nope".into()),
            ..c
        };
        assert!(resolve_source(&snap, &c2)
            .unwrap_err()
            .to_string()
            .contains("no VM or template"));
    }

    #[test]
    fn clone_marker_counts_as_ownership_and_is_removed() {
        let cfg: Map<String, Value> = serde_json::from_value(json!({
            "description": "proxshift-clone-of-owner: ocp1", "tags": "rhcos;template"
        }))
        .unwrap();
        assert!(owned_config(&cfg, "ocp1"));
        assert!(!owned_config(&cfg, "ocp2"));
        assert_eq!(
            without_marker(Some("notes\nproxshift-clone-of-owner: ocp1")).as_deref(),
            Some("notes")
        );
        assert_eq!(without_marker(Some("plain")), None);
    }

    #[test]
    fn usage_counts_only_non_templates_and_owned() {
        let mut other = vm(103, "x", "pve2", false);
        other.tags = None;
        let snap = vec![
            vm(100, "a", "pve1", false),
            vm(9000, "t", "pve1", true),
            other,
        ];
        let u = node_usage(&snap, "proxshift");
        assert_eq!(u["pve1"], (8 << 30, 1));
        assert_eq!(u["pve2"], (8 << 30, 0));
    }
}
