//! `DELETE /nodes/{node}/qemu/{vmid}` — qemu-server's `destroy_vm`: protection, HA, running
//! and lock checks, then the `qmdestroy` worker frees the disks and removes the VM.

use crate::auth::Principal;
use crate::error::{locked, ErrorReply, ReplyResult};
use crate::sim::{Sim, Spawn};
use crate::tasks::{base_duration, Action, TaskResult};
use crate::vmconfig::is_drive_key;

use super::skiplock_allowed;

/// A destroy request as parsed by the handler.
pub struct DestroyVm {
    pub node: String,
    pub vmid: u32,
    pub skiplock: bool,
    pub purge: bool,
    pub destroy_unreferenced_disks: bool,
}

/// Checks the request and starts the `qmdestroy` worker; returns its UPID.
pub fn start(sim: &mut Sim, who: &Principal, req: DestroyVm) -> ReplyResult<String> {
    let (node, vmid) = (req.node, req.vmid);
    let skip = skiplock_allowed(who, req.skiplock)?;
    let vm = sim.vm(&node, vmid)?.clone();
    if vm.conf.get("protection").map(|p| p == "1").unwrap_or(false) {
        return Err(ErrorReply::die(format!(
            "can't remove VM {vmid} - protection mode enabled"
        )));
    }
    if vm.ha && !req.purge {
        return Err(ErrorReply::die(format!(
            "unable to remove VM {vmid} - used in HA resources and purge parameter not set."
        )));
    }
    if vm.running() {
        return Err(ErrorReply::die(format!(
            "VM {vmid} is running - destroy failed"
        )));
    }
    // qemu-server `PVE/QemuServer.pm`, `destroy_vm`: `check_lock` unless skiplock or the lock
    // is `suspended` (a hibernated VM may be destroyed, its state volume with it).
    if vm.lock() != Some("suspended") {
        Sim::check_lock(&vm, skip)?;
    }
    if skip {
        sim.vm_mut(&node, vmid)?.conf.remove("lock");
    }
    let unreferenced = req.destroy_unreferenced_disks;
    Ok(sim.spawn(
        who,
        Spawn {
            node,
            kind: "qmdestroy".to_string(),
            id: vmid.to_string(),
            action: Action::Destroy { vmid, unreferenced },
            base_secs: base_duration("qmdestroy"),
            flock: Some(vmid),
            fail: None,
        },
    ))
}

/// The `qmdestroy` worker: frees the VM's volumes (and, if asked, every volume owned by its
/// vmid) and removes it.
pub fn finish(sim: &mut Sim, vmid: u32, unreferenced: bool, log: &mut Vec<String>) -> TaskResult {
    let vm = sim.vms.get(&vmid).ok_or("VM vanished")?.clone();
    if let Some(l) = vm.lock() {
        if l != "destroyed" && l != "suspended" {
            return Err(locked(l).into());
        }
    }
    // A hibernated VM's state volume goes with it.
    super::hibernate::remove_state(sim, vmid);
    for (k, v) in vm.conf.iter().chain(vm.pending.iter()) {
        if is_drive_key(k) {
            sim.free_volume(&vm.node, v, k);
        }
    }
    if unreferenced {
        let sids = sim
            .nodes
            .get(&vm.node)
            .map(|n| n.storages.clone())
            .unwrap_or_default();
        for sid in sids {
            if let Some(st) = sim.storage_mut(&vm.node, &sid) {
                st.volumes.retain(|_, v| v.vmid != Some(vmid));
            }
        }
    }
    log.push(format!("destroying VM {vmid}"));
    if sim.ha.resources.contains_key(&vmid) {
        // Only reachable with `purge` (refused above otherwise): qemu-server's `destroy_vm`
        // then drops it from the HA config (`PVE::HA::Config::delete_service_from_config`).
        sim.ha_remove(vmid, true);
    }
    sim.vms.remove(&vmid);
    Ok(0)
}
