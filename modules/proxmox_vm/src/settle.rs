//! The cluster as the plan may see it: no VM this run may be looking for is half-built.
//!
//! Proxmox writes a new VM's config in two steps. A create first writes a bare `lock: create`
//! config and the rest when `qmcreate` ends; a clone first writes its temporary file (`lock:
//! clone` and the line `# qmclone temporary file`, which reads back as the description) and the
//! name, description and disks only from its worker (qemu-server `PVE/API2/Qemu.pm`,
//! `create_vm` and `clone_vm`). Until then `/cluster/resources` names the VM "VM <vmid>"
//! (`PVE/QemuServer.pm`, `vmstatus`). A VM an earlier run's timed-out (or killed) create or clone
//! is still building can therefore be found neither by name nor by its ownership marks: deciding
//! now would create or clone it a second time, or refuse it as a VM that is not ours. So, when a
//! VM of this run is not found or is found by vmid as such a VM, wait for the half-built VMs and
//! list the cluster again.

use std::time::Duration;

use ansible_module::Failure;
use pve_client::{Client, ClusterVm};

use crate::error::VmError;
use crate::identity::resolve;
use crate::options::{Timeouts, VmArgs};

/// A VM whose create or clone task still runs: locked `create`/`clone`, no name of its own.
pub fn is_building(v: &ClusterVm) -> bool {
    let nameless = v
        .name
        .as_deref()
        .is_none_or(|n| n == format!("VM {}", v.vmid));
    nameless && matches!(v.lock.as_deref(), Some("create") | Some("clone"))
}

/// Whether some VM of this run cannot be decided on in `snapshot`: it is to be present and is
/// either not found (it may be one of the half-built VMs) or found by vmid as a half-built VM.
fn undecided(snapshot: &[ClusterVm], parsed: &[Result<VmArgs, VmError>]) -> bool {
    parsed.iter().flatten().any(|a| {
        a.state == "present"
            && match resolve(snapshot, a.vmid, a.spec.name.as_deref()) {
                Ok(None) => true,
                Ok(Some(vm)) => is_building(&vm),
                Err(_) => false,
            }
    })
}

/// The guests of `/cluster/resources`: QEMU VMs, and LXC containers (whose VMIDs this module
/// refuses).
pub struct Guests {
    pub vms: Vec<ClusterVm>,
    pub containers: Vec<ClusterVm>,
}

fn list_guests(client: &Client) -> Result<Guests, Failure> {
    let all = client
        .cluster_guests()
        .map_err(|e| Failure::new(format!("cannot list the cluster's VMs: {e}")))?;
    let (vms, others): (Vec<_>, Vec<_>) = all.into_iter().partition(|v| v.kind == "qemu");
    Ok(Guests {
        vms,
        containers: others.into_iter().filter(|v| v.kind == "lxc").collect(),
    })
}

/// `/cluster/resources` once no half-built VM can be one this run is looking for: waits (a
/// create's for `timeouts.create`, a clone's for `timeouts.clone`) for each half-built VM when
/// the plan would otherwise have to guess, then lists again.
pub fn settled_snapshot(
    client: &Client,
    parsed: &[Result<VmArgs, VmError>],
    timeouts: &Timeouts,
) -> Result<Guests, Failure> {
    let list = || list_guests(client);
    let guests = list()?;
    let snapshot = &guests.vms;
    let building: Vec<&ClusterVm> = snapshot.iter().filter(|v| is_building(v)).collect();
    if building.is_empty() || !undecided(snapshot, parsed) {
        return Ok(guests);
    }
    for vm in building {
        let vmid = vm.vmid as u32;
        // A create's task carries the new vmid; a clone's the source's, so any running clone.
        let (doing, secs, kind, task_id) = match vm.lock.as_deref() {
            Some("clone") => ("cloned", timeouts.clone, "qmclone", None),
            _ => ("created", timeouts.create, "qmcreate", Some(vmid)),
        };
        let waited = client.wait_unlocked(&vm.node, vmid, Duration::from_secs(secs));
        match waited {
            Ok(_) => {}
            // The task failed and Proxmox removed its VM: nothing left to wait for.
            Err(e) if e.is_not_found() => {}
            Err(e) => {
                let tasks = client
                    .running_tasks(&vm.node, kind, task_id)
                    .unwrap_or_default();
                let tasks = match tasks.as_slice() {
                    [] => String::new(),
                    t => format!(" ({kind} running on node '{}': {})", vm.node, t.join(", ")),
                };
                return Err(Failure::new(format!(
                    "VM {vmid} on node '{}' is still being {doing} (lock '{}'){tasks}, perhaps by \
                     an earlier run of this task; waited {secs}s for it so as not to make a VM \
                     twice: {e}",
                    vm.node,
                    vm.lock.as_deref().unwrap_or(""),
                )));
            }
        }
    }
    list()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::vm_args;
    use serde_json::json;

    fn vm(vmid: u64, name: Option<&str>, lock: Option<&str>) -> ClusterVm {
        ClusterVm {
            vmid,
            name: name.map(str::to_string),
            node: "pve1".into(),
            kind: "qemu".into(),
            status: Some("stopped".into()),
            template: false,
            tags: None,
            lock: lock.map(str::to_string),
            pool: None,
            maxmem: 0,
            hastate: None,
        }
    }

    fn args(v: serde_json::Value) -> Vec<Result<VmArgs, VmError>> {
        vec![vm_args(serde_json::from_value(v).unwrap())]
    }

    #[test]
    fn half_built_vms_are_nameless_and_locked_create_or_clone() {
        assert!(is_building(&vm(101, Some("VM 101"), Some("clone"))));
        assert!(is_building(&vm(101, None, Some("create"))));
        assert!(!is_building(&vm(101, Some("w0"), Some("clone"))));
        assert!(!is_building(&vm(101, Some("VM 101"), Some("backup"))));
        assert!(!is_building(&vm(101, Some("VM 101"), None)));
    }

    #[test]
    fn only_a_vm_not_found_or_found_half_built_waits() {
        let snap = vec![
            vm(101, Some("VM 101"), Some("clone")),
            vm(102, Some("w1"), None),
        ];
        assert!(undecided(&snap, &args(json!({"name": "w0"}))));
        assert!(!undecided(&snap, &args(json!({"name": "w1"}))));
        assert!(undecided(&snap, &args(json!({"name": "w0", "vmid": 101}))));
        assert!(!undecided(
            &snap,
            &args(json!({"name": "w0", "state": "absent"}))
        ));
    }
}
