//! `PUT /nodes/{node}/qemu/{vmid}/resize` — qemu-server's `resize_vm`: only the `skiplock`
//! permission is checked before the worker (and the size's syntax by the schema); the worker
//! loads the config under its lock and does every other check there — digest, lock, the disk,
//! cdrom, the current size, no shrinking — so each of those fails the task, not the request
//! (qemu-server PVE/API2/Qemu.pm `resize_vm`: `$updatefn` runs inside `fork_worker('resize')`).

use crate::auth::Principal;
use crate::error::ReplyResult;
use crate::model::{format_size, parse_size};
use crate::sim::{Sim, Spawn};
use crate::tasks::{base_duration, Action, TaskError, TaskResult};
use crate::vmconfig::{is_cdrom, parse_drive, print_drive, resize_target, split_volid};

use super::{digest_mismatch_text, skiplock_allowed};

/// A resize request as parsed by the handler.
#[derive(Debug, Clone)]
pub struct ResizeDisk {
    pub node: String,
    pub vmid: u32,
    pub skiplock: bool,
    pub digest: Option<String>,
    pub disk: String,
    /// `[+]SIZE`, as given.
    pub size: String,
}

/// Checks `skiplock` and starts the `resize` worker; returns its UPID.
pub fn start(sim: &mut Sim, who: &Principal, req: ResizeDisk) -> ReplyResult<String> {
    let skiplock = skiplock_allowed(who, req.skiplock)?;
    let vmid = req.vmid;
    Ok(sim.spawn(
        who,
        Spawn {
            node: req.node.clone(),
            kind: "resize".to_string(),
            id: vmid.to_string(),
            action: Action::Resize(ResizeDisk { skiplock, ..req }),
            base_secs: base_duration("resize"),
            flock: Some(vmid),
            fail: None,
        },
    ))
}

/// `$updatefn`'s checks, in its order, against the config as the worker finds it; the target
/// size in bytes, or None when it is the current size (nothing to do).
fn check(sim: &Sim, req: &ResizeDisk) -> Result<Option<u64>, TaskError> {
    let (node, vmid, disk) = (&req.node, req.vmid, &req.disk);
    let reply = |e: crate::error::ErrorReply| TaskError(e.message.trim_end().to_string());
    let vm = sim.vm(node, vmid).map_err(reply)?;
    if req.digest.as_deref().is_some_and(|d| d != sim.digest(vm)) {
        return Err(digest_mismatch_text(sim.version).into());
    }
    Sim::check_lock(vm, req.skiplock).map_err(reply)?;
    let value = vm
        .conf
        .get(disk)
        .ok_or_else(|| format!("disk '{disk}' does not exist"))?;
    let d = parse_drive(disk, value);
    if is_cdrom(&d) {
        return Err("you can't resize a cdrom".into());
    }
    let cur = d
        .get("file")
        .and_then(split_volid)
        .and_then(|(s, n)| sim.storage(node, s)?.volumes.get(n).map(|v| v.size))
        .or_else(|| d.get("size").and_then(parse_size))
        .unwrap_or(0);
    let size = resize_target(&req.size, cur).map_err(|e| TaskError(e.to_string()))?;
    if size < cur {
        return Err("shrinking disks is not supported".into());
    }
    Ok((size != cur).then_some(size))
}

/// The `resize` worker: checks the request against the config, then grows the volume and the
/// drive's `size`.
pub fn finish(sim: &mut Sim, req: &ResizeDisk) -> TaskResult {
    let Some(size) = check(sim, req)? else {
        return Ok(0);
    };
    let (vmid, disk) = (req.vmid, req.disk.as_str());
    let vm = sim.vms.get(&vmid).ok_or("VM vanished")?;
    let node = vm.node.clone();
    let value = vm
        .conf
        .get(disk)
        .cloned()
        .ok_or_else(|| format!("disk '{disk}' does not exist"))?;
    let mut d = parse_drive(disk, &value);
    let (sid, name) = d
        .get("file")
        .and_then(split_volid)
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .ok_or_else(|| format!("disk '{disk}' has no volume"))?;
    let st = sim
        .storage_mut(&node, &sid)
        .ok_or_else(|| format!("storage '{sid}' does not exist"))?;
    let cur = st.volumes.get(&name).map(|v| v.size).unwrap_or(0);
    if size > cur && size - cur > st.avail() {
        return Err(format!(
            "error resizing volume '{sid}:{name}': not enough free space on storage '{sid}'"
        )
        .into());
    }
    if let Some(v) = st.volumes.get_mut(&name) {
        v.size = size;
    }
    d.set("size", format_size(size));
    let vm = sim.vms.get_mut(&vmid).ok_or("VM vanished")?;
    vm.conf.insert(disk.to_string(), print_drive(&d));
    Ok(0)
}
