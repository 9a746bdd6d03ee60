//! `agent_iso.state: absent`: the agent ISO a cluster's runs uploaded is deleted from its storage
//! once the run's VMs are gone — on every node whose storage holds it (once for a shared storage).
//!
//! Only a volume ProxShift can vouch for is deleted: its file name must carry the caller's tag
//! (`name_prefix`, the cluster's name in `<cluster>-agent-<sha>.iso`) and `storage` + `filename`
//! must name exactly the volume ID recorded at upload (`volid`). Both are checked before anything
//! is removed, VMs included ([`removal_volid`], from `check_args`). A VM that still uses the ISO
//! and carries the owner tag (one this run did not remove) keeps it: PVE would delete it all the
//! same (`vdisk_free` asks no VM), and that VM could no longer start.

use std::collections::BTreeSet;

use pve_client::{Client, Error as PveError};
use serde_json::{json, Map, Value};

use crate::converge::{Ctx, VmResult};
use crate::error::VmError;
use crate::identity::owned_config;
use crate::options::{AgentIso, VmArgs};

/// The volume to delete, when the options vouch for it: the name carries `name_prefix` and
/// `storage:iso/filename` is the recorded `volid`. Pure.
pub fn removal_volid(iso: &AgentIso) -> Result<String, VmError> {
    let refuse = |why: String| Err(VmError::Refused(format!("agent_iso (state absent): {why}")));
    let (Some(filename), Some(recorded), Some(prefix)) =
        (&iso.filename, &iso.volid, &iso.name_prefix)
    else {
        return refuse("filename, volid and name_prefix are required".into());
    };
    if prefix.trim().is_empty() {
        return refuse("name_prefix is empty: every name would carry it".into());
    }
    if filename.contains('/') || !(filename.ends_with(".iso") || filename.ends_with(".img")) {
        return refuse(format!(
            "filename '{filename}' is not an ISO file name (NAME.iso or NAME.img)"
        ));
    }
    if !filename.starts_with(prefix.as_str()) || filename.len() == prefix.len() {
        return refuse(format!(
            "filename '{filename}' does not carry the tag '{prefix}': refusing to delete a volume \
             ProxShift did not upload"
        ));
    }
    let volid = format!("{}:iso/{filename}", iso.storage);
    if volid != *recorded {
        return refuse(format!(
            "'{volid}' (storage and filename) is not the recorded volume '{recorded}': refusing to \
             delete it (was the ISO storage changed since the upload?)"
        ));
    }
    Ok(volid)
}

/// Does a VM config use the volume (a drive, pending or not, whose file is `volid`)? Pure.
pub fn config_uses(cfg: &Map<String, Value>, volid: &str) -> bool {
    cfg.values()
        .filter_map(Value::as_str)
        .any(|v| v.split(',').next() == Some(volid))
}

/// The ISOs the run removes: one per volume ID, with the owner tag of the first VM naming it.
fn wanted(plans: &[&VmArgs]) -> Vec<(String, AgentIso, String)> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for a in plans {
        let Some(iso) = a.agent_iso.as_ref().filter(|i| i.absent()) else {
            continue;
        };
        if let Ok(volid) = removal_volid(iso) {
            if seen.insert(volid.clone()) {
                out.push((volid, iso.clone(), a.owner_tag.clone()));
            }
        }
    }
    out
}

/// What the ISO removal did (or, in check mode, would do).
#[derive(Debug, Default)]
pub struct IsoReport {
    pub changed: bool,
    /// One entry per volume: `volid` and the `nodes` it was deleted from.
    pub removed: Vec<Value>,
    pub task_ids: Vec<String>,
    pub warnings: Vec<String>,
    pub error: Option<VmError>,
    pub before: Map<String, Value>,
    pub after: Map<String, Value>,
}

/// Remove the run's `agent_iso.state: absent` volumes, after its VMs: only when every VM of the
/// run succeeded (a VM still there may boot from the ISO).
pub fn remove_isos(ctx: &Ctx, args: &[&VmArgs], results: &[VmResult]) -> IsoReport {
    let mut rep = IsoReport::default();
    let isos = wanted(args);
    if isos.is_empty() {
        return rep;
    }
    if results.iter().any(|r| r.failed) {
        for (volid, ..) in &isos {
            rep.warnings.push(format!(
                "agent_iso: {volid} kept: not every VM of the run reached its state"
            ));
        }
        return rep;
    }
    let gone: BTreeSet<u32> = results
        .iter()
        .filter(|r| r.state == "absent")
        .filter_map(|r| r.vmid)
        .collect();
    for (volid, iso, owner) in &isos {
        match remove_one(ctx, volid, &iso.storage, owner, &gone, &mut rep) {
            Ok(nodes) if nodes.is_empty() => {}
            Ok(nodes) => {
                rep.changed = true;
                rep.before.insert(volid.clone(), json!(nodes));
                rep.removed.push(json!({"volid": volid, "nodes": nodes}));
            }
            Err(e) => {
                rep.error = Some(e);
                break;
            }
        }
    }
    rep
}

/// One volume: refuse when a VM the run did not remove still uses it, then delete it on each
/// node that lists it (a shared storage once). Returns the nodes it was (or would be) removed from.
fn remove_one(
    ctx: &Ctx,
    volid: &str,
    storage: &str,
    owner_tag: &str,
    gone: &BTreeSet<u32>,
    rep: &mut IsoReport,
) -> Result<Vec<String>, VmError> {
    let c = ctx.client;
    refuse_if_used(c, volid, owner_tag, gone)?;
    let mut nodes = Vec::new();
    let mut shared_seen = false;
    for n in c.nodes()? {
        if !n.online() {
            rep.warnings.push(format!(
                "agent_iso: node '{}' is offline: {volid} not looked for there",
                n.node
            ));
            continue;
        }
        let storages = c.storages(&n.node)?;
        let Some(st) = storages.iter().find(|s| s.storage == storage) else {
            continue;
        };
        if !st.has_content("iso") || (st.shared && shared_seen) {
            continue;
        }
        shared_seen |= st.shared;
        let content = match c.storage_content(&n.node, storage, Some("iso")) {
            Ok(v) => v,
            // The storage is configured but not usable on this node: nothing of ours there.
            Err(e) if e.is_not_found() => continue,
            Err(e) => {
                return Err(VmError::step(
                    format!("listing {storage} on node '{}'", n.node),
                    e,
                ))
            }
        };
        if !content.iter().any(|v| v.volid == volid) {
            continue;
        }
        if !ctx.check_mode {
            let t = c
                .delete_volume(&n.node, volid, ctx.secs(ctx.timeouts.delete))
                .map_err(|e| delete_error(volid, &n.node, storage, e))?;
            if let Some(t) = t {
                rep.task_ids.push(t.upid);
            }
        }
        nodes.push(n.node.clone());
    }
    Ok(nodes)
}

/// A VM carrying the owner tag that this run did not remove and that still uses the volume.
fn refuse_if_used(
    c: &Client,
    volid: &str,
    owner_tag: &str,
    gone: &BTreeSet<u32>,
) -> Result<(), VmError> {
    for vm in c.cluster_vms()? {
        let vmid = vm.vmid as u32;
        if gone.contains(&vmid) || !vm.tag_list().iter().any(|t| t == owner_tag) {
            continue;
        }
        let cfg = c.vm_config(&vm.node, vmid, false)?;
        if owned_config(&cfg, owner_tag) && config_uses(&cfg, volid) {
            return Err(VmError::Refused(format!(
                "agent_iso: {volid} is still used by VM {vmid} ({}), which carries '{owner_tag}' and \
                 is not removed by this run: the ISO is kept (PVE would delete it from under the VM)",
                vm.name.as_deref().unwrap_or("unnamed")
            )));
        }
    }
    Ok(())
}

/// The delete's failure, with what it needs when PVE refused the privilege.
fn delete_error(volid: &str, node: &str, storage: &str, e: PveError) -> VmError {
    let note = if e.status() == Some(403) {
        format!(
            " (deleting a volume needs Datastore.Allocate on /storage/{storage}; \
             playbooks/proxmox_access.yaml grants it on the ISO storage)"
        )
    } else {
        String::new()
    };
    VmError::Step {
        doing: format!("deleting {volid} on node '{node}'"),
        source: Box::new(e),
        note,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iso(storage: &str, filename: &str, volid: &str, prefix: &str) -> AgentIso {
        serde_json::from_value(json!({
            "state": "absent", "storage": storage, "filename": filename,
            "volid": volid, "name_prefix": prefix,
        }))
        .unwrap()
    }

    #[test]
    fn only_a_tagged_name_at_the_recorded_volid_is_removed() {
        let ok = iso(
            "local",
            "c1-agent-0123456789ab.iso",
            "local:iso/c1-agent-0123456789ab.iso",
            "c1-agent-",
        );
        assert_eq!(
            removal_volid(&ok).unwrap(),
            "local:iso/c1-agent-0123456789ab.iso"
        );
        let cases = [
            // Another cluster's ISO, or one a person uploaded.
            iso(
                "local",
                "c2-agent-0123456789ab.iso",
                "local:iso/c2-agent-0123456789ab.iso",
                "c1-agent-",
            ),
            iso(
                "local",
                "rhcos-live.iso",
                "local:iso/rhcos-live.iso",
                "c1-agent-",
            ),
            // The prefix alone, an empty prefix, a path, not an ISO.
            iso(
                "local",
                "c1-agent-.iso",
                "local:iso/c1-agent-.iso",
                "c1-agent-.iso",
            ),
            iso("local", "x.iso", "local:iso/x.iso", " "),
            iso(
                "local",
                "c1-agent-a/b.iso",
                "local:iso/c1-agent-a/b.iso",
                "c1-agent-",
            ),
            iso(
                "local",
                "c1-agent-a.qcow2",
                "local:iso/c1-agent-a.qcow2",
                "c1-agent-",
            ),
            // The storage or the name is not the record's.
            iso(
                "nfs",
                "c1-agent-0123456789ab.iso",
                "local:iso/c1-agent-0123456789ab.iso",
                "c1-agent-",
            ),
            iso(
                "local",
                "c1-agent-ffffffffffff.iso",
                "local:iso/c1-agent-0123456789ab.iso",
                "c1-agent-",
            ),
        ];
        for c in &cases {
            let e = removal_volid(c).unwrap_err();
            assert!(matches!(e, VmError::Refused(_)), "{c:?}: {e}");
            assert!(
                e.to_string().starts_with("agent_iso (state absent): "),
                "{e}"
            );
        }
        let e = removal_volid(&cases[0]).unwrap_err().to_string();
        assert!(e.contains("does not carry the tag 'c1-agent-'"), "{e}");
        let e = removal_volid(&cases[6]).unwrap_err().to_string();
        assert!(
            e.contains("is not the recorded volume 'local:iso/c1-agent-0123456789ab.iso'"),
            "{e}"
        );
        let mut missing = ok.clone();
        missing.volid = None;
        assert!(removal_volid(&missing).is_err());
    }

    #[test]
    fn a_config_uses_a_volume_by_its_drive_file() {
        let cfg: Map<String, Value> = serde_json::from_value(json!({
            "ide2": "local:iso/c1-agent-0123456789ab.iso,media=cdrom",
            "scsi0": "local-lvm:vm-100-disk-0,size=32G",
            "description": "boots local:iso/other.iso",
            "cores": 4,
        }))
        .unwrap();
        assert!(config_uses(&cfg, "local:iso/c1-agent-0123456789ab.iso"));
        assert!(!config_uses(&cfg, "local:iso/other.iso"));
        assert!(!config_uses(&cfg, "local:iso/c1-agent-0123456789ab"));
    }
}
