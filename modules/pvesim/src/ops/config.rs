//! `POST`/`PUT /nodes/{node}/qemu/{vmid}/config` — qemu-server's `update_vm_api`: checks,
//! then the change is staged into `[PENDING]` under the config file lock and applied as far as
//! the VM's state allows (by the `qmconfig` worker for POST, at once for PUT).

use std::collections::BTreeMap;
use std::time::Instant;

use serde_json::{json, Value};

use crate::auth::Principal;
use crate::error::{ErrorReply, ReplyResult};
use crate::propstr::parse_loose;
use crate::schema::{lookup_prop, MethodDef};
use crate::sim::{Sim, Spawn};
use crate::tasks::{base_duration, Action, ConfigChanges, TaskError, TaskResult};
use crate::vmconfig::{
    alloc_request, cloudinit_request, is_cdrom, is_drive_key, missing_boot_device, parse_drive,
};

use super::hotplug::{self, unplug, Features, Plug};

use super::{check_balloon, check_digest, normalise, require_config_key, skiplock_allowed};
use crate::config_perm::Change;

/// A config update as parsed by the handler.
pub struct UpdateConfig {
    pub node: String,
    pub vmid: u32,
    pub skiplock: bool,
    pub digest: Option<String>,
    /// `background_delay` given (POST): answer `null` when the worker is already done.
    pub background_delay: bool,
    pub changes: ConfigChanges,
    /// The method's schema, for the keys `delete` may name.
    pub def: &'static MethodDef,
    /// When the request first arrived (PUT waits for the config file lock from then on).
    pub arrived: Instant,
}

/// `is_async` (POST): start the `qmconfig` worker and answer its UPID; otherwise (PUT) apply
/// now and answer `null`.
pub fn apply(
    sim: &mut Sim,
    who: &Principal,
    req: UpdateConfig,
    is_async: bool,
) -> ReplyResult<Value> {
    let (node, vmid) = (req.node.clone(), req.vmid);
    let skip = skiplock_allowed(who, req.skiplock)?;
    let mut changes = req.changes;
    if changes.set.is_empty() && changes.delete.is_empty() && changes.revert.is_empty() {
        return Err(ErrorReply::die("no options specified"));
    }
    check_delete_keys(req.def, &changes)?;
    let vm = sim.vm(&node, vmid)?.clone();
    // `delete=lock` is `qm unlock`; everything else respects the lock.
    let unlock = changes.delete.len() == 1 && changes.delete[0] == "lock" && changes.set.is_empty();
    // Deleting `vmstate` throws a hibernated VM's state away, and its lock with it
    // (`$update_vm_api`, see `ops::hibernate`).
    let discard = vm.lock() == Some("suspended") && changes.delete.iter().any(|k| k == "vmstate");
    if !unlock && !discard {
        Sim::check_lock(&vm, skip)?;
    }

    check_digest(sim, &vm, req.digest.as_deref())?;
    let current = vm.effective_conf();
    let old = |k: &str| current.get(k).map(String::as_str);
    for (k, v) in &changes.set {
        require_config_key(sim, who, vmid, k, (Some(v), old(k)), Change::Set)?;
    }
    for k in &changes.delete {
        require_config_key(sim, who, vmid, k, (None, old(k)), Change::Delete)?;
    }
    normalise(sim, who, &node, vmid, &mut changes.set, false)?;
    follow_boot_order(&vm.conf, &mut changes);
    check_result(&vm.effective_conf(), &changes)?;
    if discard {
        changes.delete.retain(|k| k != "vmstate");
        super::hibernate::remove_state(sim, vmid);
    }
    // qemu-server stages into [PENDING] under the config file lock, then applies: here for PUT,
    // in the worker for POST — so a worker that cannot get the lock changes nothing.
    if is_async {
        return spawn_worker(sim, who, node, vmid, changes, req.background_delay);
    }
    sim.check_flock(vmid, req.arrived)?;
    let mut log = Vec::new();
    stage(sim, vmid, &changes, &mut log).map_err(|e| ErrorReply::die(e.0))?;
    let errors = apply_pending(sim, vmid, false, &mut log).map_err(|e| ErrorReply::die(e.0))?;
    if errors.is_empty() {
        Ok(Value::Null)
    } else {
        // `raise_param_exc($errors)`: a 400 naming each key that did not hot-plug.
        Err(ErrorReply::params(errors))
    }
}

/// `delete` may not name a key that is also set, nor one the schema does not know.
fn check_delete_keys(def: &MethodDef, changes: &ConfigChanges) -> ReplyResult<()> {
    let mut perr = BTreeMap::new();
    for k in &changes.delete {
        if changes.set.contains_key(k) {
            perr.insert(
                "delete".to_string(),
                format!("you can't use '-{k}' and -delete {k}' at the same time"),
            );
        }
        // `lock` and `vmstate` are config keys (`PVE/QemuServer.pm`, `$confdesc`) the
        // schema subset does not list for updates.
        if lookup_prop(def, k).is_none() && k != "lock" && k != "vmstate" {
            perr.insert(
                "delete".to_string(),
                format!("invalid configuration ID '{k}'"),
            );
        }
    }
    if perr.is_empty() {
        Ok(())
    } else {
        Err(ErrorReply::params(perr))
    }
}

/// The boot order follows the devices (qemu-server `$update_vm_api`): a deleted device leaves the
/// `order` of the VM's current `boot`, a new CD-ROM joins it (an empty order means the legacy
/// default, which takes every CD-ROM anyway) — staged as a pending `boot`, unless the request
/// sets `boot` itself (that value wins) or deletes `bootorder`.
fn follow_boot_order(current: &BTreeMap<String, String>, changes: &mut ConfigChanges) {
    let Some(order) = current
        .get("boot")
        .and_then(|b| parse_loose(b, "legacy").get("order").map(str::to_string))
    else {
        return;
    };
    let mut devs: Vec<String> = order
        .split(';')
        .filter(|d| !d.is_empty())
        .map(String::from)
        .collect();
    if devs.is_empty() || changes.delete.iter().any(|k| k == "bootorder") {
        return;
    }
    let before = devs.clone();
    devs.retain(|d| !changes.delete.contains(d));
    for (k, v) in &changes.set {
        if is_drive_key(k) && is_cdrom(&parse_drive(k, v)) && !devs.contains(k) {
            devs.push(k.clone());
        }
    }
    if devs == before || changes.set.contains_key("boot") {
        return;
    }
    if devs.is_empty() {
        // `print_bootorder` of no devices is '': no order left, qemu-server's default applies.
        changes.delete.push("boot".into());
    } else {
        changes
            .set
            .insert("boot".into(), format!("order={}", devs.join(";")));
    }
}

/// Checks on the config as it would be after the change. A `boot` order the request sets must
/// name devices that exist and are not being deleted (`$update_vm_api`: "invalid bootorder").
fn check_result(current: &BTreeMap<String, String>, changes: &ConfigChanges) -> ReplyResult<()> {
    let mut after = current.clone();
    for (k, v) in &changes.set {
        after.insert(k.clone(), v.clone());
    }
    for k in &changes.delete {
        after.remove(k);
    }
    check_balloon(&after)?;
    if changes.set.contains_key("boot") {
        if let Some(dev) = missing_boot_device(&after) {
            // A `die` in `$update_vm_api` (a 500), not a parameter error; the stray quote is upstream's.
            return Err(ErrorReply::die(format!(
                "invalid bootorder: device '{dev}' does not exist'"
            )));
        }
    }
    Ok(())
}

fn spawn_worker(
    sim: &mut Sim,
    who: &Principal,
    node: String,
    vmid: u32,
    changes: ConfigChanges,
    background_delay: bool,
) -> ReplyResult<Value> {
    let upid = sim.spawn(
        who,
        Spawn {
            node,
            kind: "qmconfig".to_string(),
            id: vmid.to_string(),
            action: Action::Config { vmid, changes },
            base_secs: base_duration("qmconfig"),
            flock: Some(vmid),
            fail: None,
        },
    );
    if background_delay {
        if let Some(t) = sim.task(&upid) {
            if !t.running() && t.exitstatus.as_deref() == Some("OK") {
                return Ok(Value::Null);
            }
        }
    }
    Ok(json!(upid))
}

/// The `qmconfig` worker holds the config lock: stage the update, then apply what can be.
/// A hot-plug failure fails the task, its values staying in `[PENDING]`.
pub fn finish(
    sim: &mut Sim,
    vmid: u32,
    changes: &ConfigChanges,
    log: &mut Vec<String>,
) -> TaskResult {
    stage(sim, vmid, changes, log)?;
    let errors = apply_pending(sim, vmid, false, log)?;
    if errors.is_empty() {
        return Ok(0);
    }
    // `raise_param_exc($errors)` in the worker: `fork_worker` writes the exception's text with
    // its newlines made spaces as `TASK ERROR: …`.
    let mut text = "400 Parameter verification failed.".to_string();
    for (k, e) in &errors {
        text.push_str(&format!(" {k}: {e}"));
    }
    Err(text.into())
}

/// `$updatefn` of `$update_vm_api` (`PVE/API2/Qemu.pm`): a new-disk request is allocated at
/// once by `create_disks`, whatever the VM's state, so `[PENDING]` holds the real volume (a
/// volume that was only pending before becomes `unusedN`); then the change is staged. An
/// allocation failure fails the update with nothing staged.
pub fn stage(
    sim: &mut Sim,
    vmid: u32,
    changes: &ConfigChanges,
    log: &mut Vec<String>,
) -> Result<(), TaskError> {
    let vm = sim
        .vms
        .get(&vmid)
        .ok_or_else(|| format!("Configuration file 'qemu-server/{vmid}.conf' does not exist"))?
        .clone();
    let node = vm.node.clone();
    let mut changes = changes.clone();
    let mut allocated: Vec<(String, String)> = Vec::new();
    for (k, v) in changes.set.iter_mut() {
        if !is_drive_key(k) {
            continue;
        }
        let d = parse_drive(k, v);
        let file = d.get("file").unwrap_or_default().to_string();
        let cloudinit = cloudinit_request(&file).map(str::to_string);
        if cloudinit.is_none() && (is_cdrom(&d) || alloc_request(&file).is_none()) {
            continue;
        }
        let made = match &cloudinit {
            Some(sid) => sim.allocate_cloudinit(&node, vmid, sid),
            None => sim.allocate(&node, vmid, k, d, false),
        };
        match made {
            Ok(value) => {
                log.push(format!(
                    "{k}: successfully created disk '{}'",
                    value.split(',').next().unwrap_or_default()
                ));
                allocated.push((k.clone(), value.clone()));
                *v = value;
            }
            Err(e) => {
                for (k, value) in allocated {
                    sim.free_volume(&node, &value, &k);
                }
                return Err(e);
            }
        }
    }
    let vm = sim.vms.get_mut(&vmid).ok_or("VM vanished")?;
    for (k, _) in &allocated {
        if let Some(old) = vm.pending.get(k).cloned() {
            let od = parse_drive(k, &old);
            if !is_cdrom(&od) {
                keep_as_unused(&mut vm.conf, od.get("file").unwrap_or_default());
            }
        }
    }
    vm.stage(&changes);
    Ok(())
}

/// Applies staged `pending` changes: everything when `all` (the VM is starting) or when it is
/// stopped (`vmconfig_apply_pending`), otherwise what hot-plugs into the running VM
/// (`vmconfig_hotplug_pending`, see [`super::hotplug`]). Returns the hot-plug errors per key
/// (`hotplug problem - …`); those keys stay pending.
pub fn apply_pending(
    sim: &mut Sim,
    vmid: u32,
    all: bool,
    log: &mut Vec<String>,
) -> Result<BTreeMap<String, String>, TaskError> {
    let vm = sim.vms.get(&vmid).ok_or("VM vanished")?.clone();
    let node = vm.node.clone();
    let live_all = all || !vm.running();
    let features = Features::parse(vm.conf.get("hotplug").map(String::as_str));
    let mut errors = BTreeMap::new();
    let mut conf = vm.conf.clone();
    let mut pending = vm.pending.clone();
    let mut pdel = vm.pending_delete.clone();
    let mut decide = |sim: &mut Sim, key: &str, plug: Plug| -> bool {
        if live_all {
            return true;
        }
        let plug = match (plug, sim.faults.take_hotplug_error(vmid, key)) {
            (Plug::Apply, Some(msg)) => Plug::Fail(msg),
            (plug, _) => plug,
        };
        match plug {
            Plug::Apply => true,
            Plug::Skip => false,
            Plug::Fail(msg) => {
                errors.insert(key.to_string(), format!("hotplug problem - {msg}"));
                false
            }
        }
    };
    // Deletions first.
    for (k, force) in vm.pending_delete.iter() {
        let plug = unplug(&conf, k, features);
        if !decide(sim, k, plug) {
            continue;
        }
        pdel.remove(k);
        if let Some(old) = conf.remove(k) {
            if is_drive_key(k) {
                let d = parse_drive(k, &old);
                if k.starts_with("unused") || *force {
                    sim.free_volume(&node, &old, k);
                } else if !is_cdrom(&d) {
                    keep_as_unused(&mut conf, d.get("file").unwrap_or_default());
                }
            }
        }
    }
    for (k, v) in vm.pending.iter() {
        let plug = hotplug::plug(&conf, k, v, features);
        if !decide(sim, k, plug) {
            continue;
        }
        let mut value = v.clone();
        if is_drive_key(k) {
            let d = parse_drive(k, v);
            // A seed may still hold a new-disk request in [PENDING].
            if !is_cdrom(&d) && alloc_request(d.get("file").unwrap_or_default()).is_some() {
                value = sim.allocate(&node, vmid, k, d, false)?;
                log.push(format!(
                    "{k}: allocated {}",
                    value.split(',').next().unwrap_or_default()
                ));
            }
            // Another volume in the slot: the old one stays with the VM as unusedN.
            if let Some(old) = conf.get(k) {
                let (od, nd) = (parse_drive(k, old), parse_drive(k, &value));
                if !is_cdrom(&od) && od.get("file") != nd.get("file") {
                    keep_as_unused(&mut conf, od.get("file").unwrap_or_default());
                }
            }
        }
        pending.remove(k);
        conf.insert(k.clone(), value);
    }
    let vm = sim.vms.get_mut(&vmid).ok_or("VM vanished")?;
    vm.conf = conf;
    vm.pending = pending;
    vm.pending_delete = pdel;
    Ok(errors)
}

/// A detached or replaced disk's volume stays with the VM as the first free `unusedN`.
fn keep_as_unused(conf: &mut BTreeMap<String, String>, volid: &str) {
    if let Some(slot) = (0..256)
        .map(|i| format!("unused{i}"))
        .find(|u| !conf.contains_key(u))
    {
        conf.insert(slot, volid.to_string());
    }
}
