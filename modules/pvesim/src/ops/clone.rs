//! `POST /nodes/{node}/qemu/{vmid}/clone` — qemu-server's `clone_vm`: checks, a `lock: clone`
//! placeholder for the new VM, then the `qmclone` worker copies (full) or links the disks.

use std::collections::BTreeMap;

use crate::auth::Principal;
use crate::error::{locked, ErrorReply, ReplyResult};
use crate::model::{format_size, Vm};
use crate::sim::{Sim, Spawn};
use crate::tasks::{base_duration, Action, TaskError, TaskResult};
use crate::vmconfig::{
    is_cdrom, is_drive_key, is_net_key, parse_drive, parse_net, print_drive, print_net, random_mac,
    split_volid, uuid_v4,
};

use super::{existing_pool, placeholder_vm};

/// The description of a clone's temporary config while its task runs (see [`start`]).
pub const CLONE_TEMP_DESCRIPTION: &str = " qmclone temporary file";

/// A clone request as parsed by the handler.
pub struct CloneVm {
    pub node: String,
    pub vmid: u32,
    pub newid: u32,
    pub pool: Option<String>,
    /// `full`; `None`: full unless the source is a template.
    pub full: Option<bool>,
    pub storage: Option<String>,
    pub format: Option<String>,
    pub snapname: Option<String>,
    pub target: Option<String>,
    pub name: Option<String>,
    pub description: Option<String>,
}

/// Checks the request and starts the `qmclone` worker; returns its UPID.
///
/// The checks follow qemu-server `PVE/API2/Qemu.pm`, `clone_vm` (`$load_and_check`), in its
/// order: pool, target node, the target `storage` (must be shared when cloning to another
/// node), the source's lock, snapshot and linked-clone rules, then every source volume
/// (`$check_storage_access_clone`): with a `target` node, a VM with any volume on a
/// non-shared storage — a CD-ROM's ISO included, whatever `storage` says — is refused.
/// The same in PVE 8 and PVE 9.
pub fn start(sim: &mut Sim, who: &Principal, req: CloneVm) -> ReplyResult<String> {
    let (node, vmid, newid) = (req.node.clone(), req.vmid, req.newid);
    let src = sim.vm(&node, vmid)?.clone();
    let pool = existing_pool(sim, req.pool.clone())?;
    // `undef $target if $target eq $localnode`.
    let target = req.target.clone().filter(|t| *t != node);
    if let Some(t) = &target {
        match sim.nodes.get(t) {
            None => return Err(ErrorReply::die(format!("no such node '{t}'"))),
            Some(n) if !n.online => {
                return Err(ErrorReply::die(format!("target node '{t}' is not online")))
            }
            _ => {}
        }
    }
    if let Some(s) = &req.storage {
        check_target_storage(sim, who, &node, target.as_deref(), s)?;
    }
    if let Some(l) = src.lock() {
        return Err(ErrorReply::die(locked(l)));
    }
    if let Some(s) = &req.snapname {
        return Err(ErrorReply::die(format!("snapshot '{s}' does not exist")));
    }
    let full = req.full.unwrap_or(!src.is_template());
    check_linked(full, &req)?;
    let disks = source_disks(sim, &src, &node, req.storage.as_deref());
    if let Some(t) = &target {
        if !disks.shared {
            return Err(ErrorReply::die(format!(
                "can't clone VM to node '{t}' (VM uses local storage)"
            )));
        }
    }
    if sim.vmid_taken(newid) {
        return Err(ErrorReply::die(format!(
            "unable to create VM {newid}: config file already exists"
        )));
    }
    let (total, targets) = (disks.total, disks.targets);
    let target = target.unwrap_or_else(|| node.clone());
    let mut staged = BTreeMap::new();
    if let Some(n) = req.name {
        staged.insert("name".to_string(), n);
    }
    if let Some(d) = req.description {
        staged.insert("description".to_string(), d);
    }
    // qemu-server `PVE/API2/Qemu.pm`, `clone_vm` (`$clonefn`): the new VM's config is first
    // the temporary file `"# qmclone temporary file\nlock: clone\n"`; name and description are
    // only in the config the worker writes (`write_config($newid, $newconf)`), and the lock goes
    // when it ends. `PVE/QemuServer.pm`, `parse_vm_config`, reads the `#` line as the
    // description (trailing whitespace trimmed), so a GET shows `description: " qmclone
    // temporary file"`, no name, and `/cluster/resources` names the VM "VM <newid>"
    // (`vmstatus`: `$conf->{name} || "VM $vmid"`). The same in PVE 8 and PVE 9. (Upstream
    // writes `$newconf` — name included, still locked — after each cloned disk; pvesim writes
    // it once, when the task ends.)
    let mut placeholder = placeholder_vm(newid, target, "clone", staged, src.agent_delay);
    placeholder
        .conf
        .insert("description".into(), CLONE_TEMP_DESCRIPTION.into());
    sim.vms.insert(newid, placeholder);
    sim.set_pool(newid, pool.as_deref());
    // Full clones copy data (≈1 GiB/s before scaling); linked clones are quick.
    let secs = if full {
        base_duration("qmclone") + (total >> 30) as f64
    } else {
        1.0
    };
    let fail = storage_lock_timeout(sim, &targets);
    Ok(sim.spawn(
        who,
        Spawn {
            node,
            kind: "qmclone".to_string(),
            id: vmid.to_string(),
            action: Action::Clone {
                src: vmid,
                newid,
                full,
                storage: req.storage,
                format: req.format,
                targets,
            },
            base_secs: secs,
            flock: Some(newid),
            fail,
        },
    ))
}

fn check_linked(full: bool, req: &CloneVm) -> ReplyResult<()> {
    if full {
        return Ok(());
    }
    if req.storage.is_some() {
        return Err(ErrorReply::die(
            "parameter 'storage' not allowed for linked clones",
        ));
    }
    if req.format.is_some() {
        return Err(ErrorReply::die(
            "parameter 'format' not allowed for linked clones",
        ));
    }
    Ok(())
}

/// What the source's volumes mean for a clone.
struct SourceDisks {
    /// Bytes of the disks to copy.
    total: u64,
    /// The storages the clone writes to.
    targets: Vec<String>,
    /// Every volume (CD-ROM ISOs included) is on shared storage.
    shared: bool,
}

/// qemu-server `PVE/API2/Qemu.pm`, `$check_storage_access_clone`: over every volume of the
/// source (`foreach_volume`, so not `unused*`), `$sharedvm = 0 if !$scfg->{shared}` for
/// disks *and* CD-ROM media other than `none`/`cdrom`.
fn source_disks(sim: &Sim, src: &Vm, node: &str, storage: Option<&str>) -> SourceDisks {
    let mut out = SourceDisks {
        total: 0,
        targets: Vec::new(),
        shared: true,
    };
    for (k, v) in src
        .conf
        .iter()
        .filter(|(k, _)| is_drive_key(k) && !k.starts_with("unused"))
    {
        let d = parse_drive(k, v);
        let Some((sid, name)) = d.get("file").and_then(split_volid) else {
            continue;
        };
        let st = sim.storage(node, sid);
        if !st.map(|s| s.shared).unwrap_or(false) {
            out.shared = false;
        }
        if is_cdrom(&d) {
            continue;
        }
        out.total += st
            .and_then(|s| s.volumes.get(name))
            .map(|v| v.size)
            .unwrap_or(0);
        let dst = storage.unwrap_or(sid).to_string();
        if !out.targets.contains(&dst) {
            out.targets.push(dst);
        }
    }
    out
}

/// The `storage` of a clone: enabled here and holding images, and with a `target` node
/// available there and shared (`clone_vm`: "can't clone to non-shared storage").
fn check_target_storage(
    sim: &Sim,
    who: &Principal,
    node: &str,
    target: Option<&str>,
    s: &str,
) -> ReplyResult<()> {
    let st = sim
        .storage(node, s)
        .ok_or_else(|| ErrorReply::die(format!("storage '{s}' does not exist")))?;
    if !st.enabled {
        return Err(ErrorReply::die(format!("storage '{s}' is disabled")));
    }
    if !st.content.contains("images") {
        return Err(ErrorReply::param(
            "storage",
            format!("storage '{s}' does not support vm images"),
        ));
    }
    if let Some(t) = target {
        if sim.storage(t, s).is_none() {
            return Err(ErrorReply::die(format!(
                "storage '{s}' is not available on node '{t}'"
            )));
        }
        if !st.shared {
            return Err(ErrorReply::die(format!(
                "can't clone to non-shared storage '{s}'"
            )));
        }
    }
    sim.access.require(
        who,
        &format!("/storage/{s}"),
        &["Datastore.AllocateSpace"],
        false,
    )
}

/// Storage-level lock contention under many parallel clones (CAPMOX #389, bpg #995).
fn storage_lock_timeout(sim: &Sim, targets: &[String]) -> Option<String> {
    let max = sim.opts.max_parallel_clones_per_storage as usize;
    let busy = targets.iter().find(|sid| {
        max > 0
            && sim
                .tasks
                .iter()
                .filter(|t| t.running())
                .filter(
                    |t| matches!(&t.action, Action::Clone { targets: ts, .. } if ts.contains(sid)),
                )
                .count()
                >= max
    });
    busy.map(|sid| {
        format!(
            "clone failed: can't lock file '/var/lock/pve-manager/pve-storage-{sid}' - got timeout"
        )
    })
}

/// The `qmclone` worker: copies or links every disk, new MACs, UUIDs and name.
pub fn finish(
    sim: &mut Sim,
    src: u32,
    newid: u32,
    full: bool,
    storage: Option<String>,
    format: Option<String>,
    log: &mut Vec<String>,
) -> TaskResult {
    let fail = |sim: &mut Sim, e: TaskError| {
        sim.vms.remove(&newid);
        Err(format!("clone failed: {e}").into())
    };
    let Some(source) = sim.vms.get(&src).cloned() else {
        return fail(
            sim,
            format!("Configuration file 'nodes/?/qemu-server/{src}.conf' does not exist").into(),
        );
    };
    let target = sim
        .vms
        .get(&newid)
        .map(|v| v.node.clone())
        .ok_or("VM vanished")?;
    let copy = DiskCopy {
        source: &source,
        target: &target,
        newid,
        full,
        storage: storage.as_deref(),
        format: format.as_deref(),
    };
    let mut conf = match copy_config(sim, &copy, log) {
        Ok(conf) => conf,
        Err(e) => return fail(sim, e),
    };
    let staged = sim
        .vms
        .get(&newid)
        .map(|v| v.staged.clone())
        .unwrap_or_default();
    for (k, v) in staged {
        conf.insert(k, v);
    }
    conf.entry("name".into()).or_insert_with(|| {
        format!(
            "Copy-of-VM-{}",
            source
                .conf
                .get("name")
                .cloned()
                .unwrap_or_else(|| src.to_string())
        )
    });
    conf.insert("smbios1".into(), format!("uuid={}", uuid_v4()));
    conf.insert("vmgenid".into(), uuid_v4());
    conf.insert(
        "meta".into(),
        format!("creation-qemu=9.2.0,ctime={}", sim.unix_now()),
    );
    let vm = sim.vms.get_mut(&newid).ok_or("VM vanished")?;
    vm.conf = conf;
    vm.staged.clear();
    vm.agent_ips = BTreeMap::new();
    Ok(0)
}

/// What the clone worker copies where.
struct DiskCopy<'a> {
    source: &'a Vm,
    target: &'a str,
    newid: u32,
    full: bool,
    storage: Option<&'a str>,
    format: Option<&'a str>,
}

/// The new VM's config from the source's: fresh MACs, copied or linked disks, no identity
/// keys. On failure every volume allocated so far is freed again.
fn copy_config(
    sim: &mut Sim,
    c: &DiskCopy,
    log: &mut Vec<String>,
) -> Result<BTreeMap<String, String>, TaskError> {
    let mut conf = BTreeMap::new();
    let mut allocated: Vec<(String, String)> = Vec::new();
    for (k, v) in &c.source.conf {
        if matches!(
            k.as_str(),
            "lock" | "template" | "meta" | "vmgenid" | "smbios1" | "name"
        ) || k.starts_with("unused")
        {
            continue;
        }
        if is_net_key(k) {
            let mut n = parse_net(v);
            n.set("macaddr", random_mac(&sim.opts.mac_prefix));
            conf.insert(k.clone(), print_net(&n));
            continue;
        }
        if !is_drive_key(k) {
            conf.insert(k.clone(), v.clone());
            continue;
        }
        match copy_disk(sim, c, k, v, log) {
            Ok(Some(s)) => {
                allocated.push((k.clone(), s.clone()));
                conf.insert(k.clone(), s);
            }
            Ok(None) => {
                conf.insert(k.clone(), v.clone());
            }
            Err(e) => {
                for (k, s) in allocated {
                    sim.free_volume(c.target, &s, &k);
                }
                return Err(e);
            }
        }
    }
    Ok(conf)
}

/// Copies (or links) one disk; `Ok(None)` for CD-ROMs and drives without a volume, which
/// are kept as they are.
fn copy_disk(
    sim: &mut Sim,
    c: &DiskCopy,
    k: &str,
    v: &str,
    log: &mut Vec<String>,
) -> Result<Option<String>, TaskError> {
    let d = parse_drive(k, v);
    if is_cdrom(&d) {
        return Ok(None);
    }
    let Some((sid, name)) = d.get("file").and_then(split_volid) else {
        return Ok(None);
    };
    let src_size = sim
        .storage(&c.source.node, sid)
        .and_then(|s| s.volumes.get(name))
        .map(|v| v.size)
        .unwrap_or(0);
    if !c.full && !c.source.is_template() {
        return Err("clone_image only works on base images".into());
    }
    let dst = c.storage.unwrap_or(sid).to_string();
    let mut nd = d.clone();
    nd.set(
        "file",
        format!("{dst}:{}", (src_size as f64) / (1u64 << 30) as f64),
    );
    nd.remove("size");
    if let Some(f) = c.format {
        nd.set("format", f.to_string());
    }
    log.push(format!(
        "create {} clone of drive {k} ({})",
        if c.full { "full" } else { "linked" },
        d.get("file").unwrap_or_default()
    ));
    let s = sim.allocate(c.target, c.newid, k, nd, true)?;
    // Keep the source's exact size (allocation rounds through GiB).
    let mut ps = parse_drive(k, &s);
    if let Some((nsid, nname)) = ps
        .get("file")
        .and_then(split_volid)
        .map(|(a, b)| (a.to_string(), b.to_string()))
    {
        if let Some(st) = sim.storage_mut(c.target, &nsid) {
            if let Some(vol) = st.volumes.get_mut(&nname) {
                vol.size = src_size;
                if !c.full {
                    vol.parent = Some(name.to_string());
                }
            }
        }
    }
    ps.set("size", format_size(src_size));
    Ok(Some(print_drive(&ps)))
}
