//! `POST /nodes/{node}/qemu` — qemu-server's `create_vm`: checks, a `lock: create`
//! placeholder, then the `qmcreate` worker allocates the disks and writes the config.

use std::collections::BTreeMap;

use crate::auth::Principal;
use crate::error::{ErrorReply, ReplyResult};
use crate::sim::{Sim, Spawn};
use crate::tasks::{base_duration, Action, TaskError, TaskResult};
use crate::vmconfig::{
    alloc_request, cloudinit_request, default_boot, is_cdrom, is_drive_key, normalize_tags,
    parse_drive, print_drive, uuid_v4,
};

use super::{check_balloon, existing_pool, normalise, placeholder_vm, require_config_key, vm_path};
use crate::config_perm::Change;

/// A create request as parsed by the handler.
pub struct CreateVm {
    pub node: String,
    pub vmid: u32,
    /// Config keys (`cdrom` already mapped to `ide2`).
    pub keys: BTreeMap<String, String>,
    pub pool: Option<String>,
    pub start: bool,
    /// `archive` given: a restore (`ops::vzdump::restore_start`).
    pub restore: Option<super::vzdump::Restore>,
}

/// Checks the request and starts the `qmcreate` worker; returns its UPID.
pub fn start(sim: &mut Sim, who: &Principal, req: CreateVm) -> ReplyResult<String> {
    let CreateVm {
        node,
        vmid,
        mut keys,
        pool,
        start,
        restore,
    } = req;
    let pool_ok = pool
        .as_ref()
        .map(|p| sim.access.has(who, &format!("/pool/{p}"), "VM.Allocate"))
        .unwrap_or(false);
    if !pool_ok {
        sim.access
            .require(who, &vm_path(vmid), &["VM.Allocate"], false)?;
    }
    if let Some(req) = restore {
        return super::vzdump::restore_start(sim, who, node, vmid, req, start);
    }
    // `create_vm`: `$check_vm_modify_config_perm` over the keys, then the device checks.
    // `ha-managed` is pvesim's own seeding switch (no such key upstream), not a config key.
    for (k, v) in keys.iter().filter(|(k, _)| *k != "ha-managed") {
        require_config_key(sim, who, vmid, k, (Some(v), None), Change::Create)?;
    }
    // `PVE::Cluster::check_vmid_unused`: a container's VMID is taken too ("CT <vmid> …").
    if let Err(taken) = sim.check_vmid_unused(vmid) {
        return Err(ErrorReply::die(format!(
            "unable to create VM {vmid} - {taken}"
        )));
    }
    let pool = existing_pool(sim, pool)?;
    normalise(sim, who, &node, vmid, &mut keys, true)?;
    check_balloon(&keys)?;
    let ndisks = keys.keys().filter(|k| is_drive_key(k)).count() as f64;
    sim.vms.insert(
        vmid,
        placeholder_vm(vmid, node.clone(), "create", keys, None),
    );
    sim.set_pool(vmid, pool.as_deref());
    let secs = base_duration("qmcreate") + 0.5 * ndisks;
    Ok(sim.spawn(
        who,
        Spawn {
            node,
            kind: "qmcreate".to_string(),
            id: vmid.to_string(),
            action: Action::Create { vmid, start },
            base_secs: secs,
            flock: Some(vmid),
            fail: None,
        },
    ))
}

/// The `qmcreate` worker: allocates the staged disks, writes the config, optionally starts.
pub fn finish(sim: &mut Sim, vmid: u32, start: bool, log: &mut Vec<String>) -> TaskResult {
    let vm = sim.vms.get(&vmid).ok_or("VM vanished")?;
    let node = vm.node.clone();
    let spec = vm.staged.clone();
    let mut conf = match allocate_disks(sim, &node, vmid, &spec, log) {
        Ok(conf) => conf,
        Err(e) => {
            sim.vms.remove(&vmid);
            return Err(format!("unable to create VM {vmid} - {e}").into());
        }
    };
    let ha = conf.remove("ha-managed").map(|v| v == "1").unwrap_or(false);
    let now = sim.unix_now();
    conf.entry("smbios1".into())
        .or_insert_with(|| format!("uuid={}", uuid_v4()));
    conf.entry("vmgenid".into()).or_insert_with(uuid_v4);
    conf.insert("meta".into(), format!("creation-qemu=9.2.0,ctime={now}"));
    if !conf.contains_key("boot") {
        let b = default_boot(&conf);
        conf.insert("boot".into(), b);
    }
    if let Some(t) = conf.get("tags").cloned() {
        conf.insert("tags".into(), normalize_tags(&t));
    }
    let vm = sim.vms.get_mut(&vmid).ok_or("VM vanished")?;
    vm.conf = conf;
    vm.staged.clear();
    if ha {
        // qemu-server `create_vm` with `ha-managed`: `PVE::HA::Config::add_service_to_config`,
        // requested `started` when the VM is started, else `stopped`.
        let state = if start {
            crate::ha::Requested::Started
        } else {
            crate::ha::Requested::Stopped
        };
        sim.ha_add(vmid, crate::ha::HaResource::new(state));
    }
    if start {
        let mut l = Vec::new();
        if let Err(e) = super::power::start_vm(sim, vmid, &mut l) {
            log.extend(l);
            log.push(format!("WARN: start failed: {e}"));
            return Ok(1);
        }
    }
    Ok(0)
}

/// The config with every `STORAGE:SIZE` drive allocated; on failure nothing stays allocated.
fn allocate_disks(
    sim: &mut Sim,
    node: &str,
    vmid: u32,
    spec: &BTreeMap<String, String>,
    log: &mut Vec<String>,
) -> Result<BTreeMap<String, String>, TaskError> {
    let mut conf = BTreeMap::new();
    let mut allocated: Vec<(String, String)> = Vec::new();
    let mut fail: Option<TaskError> = None;
    // BTreeMap order = alphabetical: efidisk0 gets disk-0 before scsi0, like PVE.
    for (k, v) in spec {
        if !is_drive_key(k) {
            conf.insert(k.clone(), v.clone());
            continue;
        }
        let d = parse_drive(k, v);
        if let Some(sid) = cloudinit_request(d.get("file").unwrap_or_default()) {
            match sim.allocate_cloudinit(node, vmid, sid) {
                Ok(s) => {
                    log.push(format!("{k}: successfully created disk '{s}'"));
                    allocated.push((k.clone(), s.clone()));
                    conf.insert(k.clone(), s);
                    continue;
                }
                Err(e) => {
                    fail = Some(e);
                    break;
                }
            }
        }
        if is_cdrom(&d) {
            let f = d.get("file").unwrap_or("none");
            if f != "none" && f != "cdrom" && !sim.volume_exists(node, f) {
                fail = Some(format!("volume {f} does not exist").into());
                break;
            }
            conf.insert(k.clone(), print_drive(&d));
            continue;
        }
        let f = d.get("file").unwrap_or_default().to_string();
        if alloc_request(&f).is_none() && !sim.volume_exists(node, &f) {
            fail = Some(format!("volume {f} does not exist").into());
            break;
        }
        match sim.allocate(node, vmid, k, d, false) {
            Ok(s) => {
                if alloc_request(&f).is_some() {
                    log.push(format!(
                        "{k}: successfully created disk '{}'",
                        s.split(',').next().unwrap_or_default()
                    ));
                    allocated.push((k.clone(), s.clone()));
                }
                conf.insert(k.clone(), s);
            }
            Err(e) => {
                fail = Some(e);
                break;
            }
        }
    }
    match fail {
        None => Ok(conf),
        Some(e) => {
            for (k, s) in allocated {
                sim.free_volume(node, &s, &k);
            }
            Err(e)
        }
    }
}
