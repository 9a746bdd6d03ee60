//! `PUT /nodes/{node}/qemu/{vmid}/resize` — qemu-server's `resize_vm`: grow-only checks, then
//! the `resize` worker grows the volume if the storage has room.

use crate::auth::Principal;
use crate::error::{ErrorReply, ReplyResult};
use crate::model::{format_size, parse_size};
use crate::sim::{Sim, Spawn};
use crate::tasks::{base_duration, Action, TaskResult};
use crate::vmconfig::{is_cdrom, parse_drive, print_drive, resize_target, split_volid};

use super::{check_digest, skiplock_allowed};

/// A resize request as parsed by the handler.
pub struct ResizeDisk {
    pub node: String,
    pub vmid: u32,
    pub skiplock: bool,
    pub digest: Option<String>,
    pub disk: String,
    /// `[+]SIZE`, as given.
    pub size: String,
}

/// Checks the request and starts the `resize` worker; returns its UPID.
pub fn start(sim: &mut Sim, who: &Principal, req: ResizeDisk) -> ReplyResult<String> {
    let ResizeDisk {
        node,
        vmid,
        skiplock,
        digest,
        disk,
        size,
    } = req;
    let skip = skiplock_allowed(who, skiplock)?;
    let vm = sim.vm(&node, vmid)?.clone();
    Sim::check_lock(&vm, skip)?;
    check_digest(sim, &vm, digest.as_deref())?;
    let value = vm
        .conf
        .get(&disk)
        .ok_or_else(|| ErrorReply::die(format!("disk '{disk}' does not exist")))?;
    let d = parse_drive(&disk, value);
    if is_cdrom(&d) {
        return Err(ErrorReply::die("you can't resize a cdrom"));
    }
    let cur = d
        .get("file")
        .and_then(split_volid)
        .and_then(|(s, n)| sim.storage(&node, s)?.volumes.get(n).map(|v| v.size))
        .or_else(|| d.get("size").and_then(parse_size))
        .unwrap_or(0);
    let size = resize_target(&size, cur).map_err(|e| ErrorReply::param("size", e.to_string()))?;
    if size < cur {
        return Err(ErrorReply::die("shrinking disks is not supported"));
    }
    Ok(sim.spawn(
        who,
        Spawn {
            node,
            kind: "resize".to_string(),
            id: vmid.to_string(),
            action: Action::Resize { vmid, disk, size },
            base_secs: base_duration("resize"),
            flock: Some(vmid),
            fail: None,
        },
    ))
}

/// The `resize` worker: grows the volume and the drive's `size`.
pub fn finish(sim: &mut Sim, vmid: u32, disk: &str, size: u64) -> TaskResult {
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
