//! `/nodes/{node}/qemu*`: VM list, create, config, pending, resize, clone, template,
//! destroy, power actions and the guest agent.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Map, Value};

use crate::error::{locked, ApiError, ApiResult};
use crate::model::{RunState, Vm};
use crate::propstr;
use crate::schema::value_str;
use crate::server::Ctx;
use crate::sim::{Sim, Spawn};
use crate::tasks::{base_duration, Action};
use crate::vmconfig::*;

/// Parameters that steer an operation rather than being config keys.
const CONTROL: &[&str] = &[
    "node",
    "vmid",
    "digest",
    "delete",
    "revert",
    "skiplock",
    "force",
    "background_delay",
    "start",
    "unique",
    "pool",
    "storage",
    "archive",
    "bwlimit",
    "live-restore",
    "import-working-storage",
];

fn vm_path(vmid: u32) -> String {
    format!("/vms/{vmid}")
}

fn skiplock(ctx: &Ctx) -> ApiResult<bool> {
    let s = ctx.flag("skiplock");
    if s && !ctx.who.is_root() {
        return Err(ApiError::perm("Only root may use this option."));
    }
    Ok(s)
}

fn check_digest(ctx: &Ctx, vm: &Vm) -> ApiResult<()> {
    if let Some(d) = ctx.opt("digest") {
        if d != ctx.sim.digest(vm) {
            return Err(ApiError::die(
                "checksum mismatch (file change by other user?)",
            ));
        }
    }
    Ok(())
}

fn conf_json(conf: &BTreeMap<String, String>) -> Map<String, Value> {
    conf.iter()
        .map(|(k, v)| {
            let v = if k == "cipassword" {
                "**********".to_string()
            } else {
                v.clone()
            };
            (k.clone(), json_value(k, &v))
        })
        .collect()
}

fn agent_enabled(conf: &BTreeMap<String, String>) -> bool {
    conf.get("agent")
        .map(|a| propstr::parse_loose(a, "enabled").get("enabled") == Some("1"))
        .unwrap_or(false)
}

fn status_str(vm: &Vm) -> &'static str {
    if vm.running() {
        "running"
    } else {
        "stopped"
    }
}

fn qmpstatus(vm: &Vm) -> &'static str {
    match vm.state {
        RunState::Running => "running",
        RunState::Paused => "paused",
        RunState::Stopped => "stopped",
    }
}

pub fn list(ctx: &mut Ctx) -> ApiResult<Value> {
    let node = ctx.node();
    let full = ctx.flag("full");
    let sim = &*ctx.sim;
    let mut out = Vec::new();
    for vm in sim.vms.values().filter(|v| v.node == node) {
        if !sim.access.has(&ctx.who, &vm_path(vm.vmid), "VM.Audit") {
            continue;
        }
        let mut o = json!({
            "vmid": vm.vmid, "status": status_str(vm),
            "name": vm.conf.get("name").cloned().unwrap_or_else(|| format!("VM {}", vm.vmid)),
            "cpus": vm.cpus(), "maxmem": vm.memory_mib() << 20,
            "mem": if vm.running() { (vm.memory_mib() << 20) / 3 } else { 0 },
            "maxdisk": super::cluster::maxdisk(sim, vm.vmid), "disk": 0,
            "uptime": sim.uptime_secs(vm.started_at), "cpu": 0,
            "netin": 0, "netout": 0, "diskread": 0, "diskwrite": 0,
        });
        if vm.running() {
            o["pid"] = json!(vm.pid);
        }
        if full {
            o["qmpstatus"] = json!(qmpstatus(vm));
        }
        if let Some(t) = vm.conf.get("tags") {
            o["tags"] = json!(t);
        }
        if let Some(l) = vm.lock() {
            o["lock"] = json!(l);
        }
        if vm.is_template() {
            o["template"] = json!(1);
        }
        out.push(o);
    }
    Ok(Value::Array(out))
}

pub fn index(ctx: &mut Ctx) -> ApiResult<Value> {
    ctx.sim.vm(&ctx.node(), ctx.vmid())?;
    let dirs = [
        "config",
        "pending",
        "status",
        "unlink",
        "vncproxy",
        "termproxy",
        "migrate",
        "resize",
        "move",
        "rrd",
        "rrddata",
        "monitor",
        "agent",
        "snapshot",
        "spiceproxy",
        "sendkey",
        "firewall",
        "mtunnel",
        "remote_migrate",
    ];
    Ok(Value::Array(
        dirs.iter().map(|d| json!({"subdir": d})).collect(),
    ))
}

pub fn status_index(ctx: &mut Ctx) -> ApiResult<Value> {
    ctx.sim.vm(&ctx.node(), ctx.vmid())?;
    let dirs = [
        "current", "start", "stop", "reset", "shutdown", "suspend", "reboot", "resume",
    ];
    Ok(Value::Array(
        dirs.iter().map(|d| json!({"subdir": d})).collect(),
    ))
}

/// Collects config keys from the request (`cdrom` is an alias for `ide2`).
fn requested_keys(ctx: &Ctx) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (k, v) in &ctx.params {
        if CONTROL.contains(&k.as_str()) {
            continue;
        }
        let v = value_str(v);
        if k == "cdrom" {
            let d = if v.contains("media=") {
                v
            } else {
                format!("{v},media=cdrom")
            };
            out.insert("ide2".into(), d);
        } else {
            out.insert(k.clone(), v);
        }
    }
    out
}

/// Shared normalisation and synchronous checks for create and config updates.
/// `creating`: volume existence is then checked by the create task (a task error), as
/// qemu-server does.
fn normalise(
    ctx: &Ctx,
    node: &str,
    vmid: u32,
    keys: &mut BTreeMap<String, String>,
    creating: bool,
) -> ApiResult<()> {
    let mut errors = BTreeMap::new();
    for (k, v) in keys.iter_mut() {
        if is_net_key(k) {
            *v = ctx.sim.normalize_net(v);
        } else if k == "tags" {
            *v = normalize_tags(v);
        } else if is_drive_key(k) {
            let d = parse_drive(k, v);
            let file = d.get("file").unwrap_or_default().to_string();
            if let Some((sid, _)) = alloc_request(&file) {
                if ctx.sim.storage(node, sid).is_none() {
                    return Err(ApiError::die(format!("storage '{sid}' does not exist")));
                }
                ctx.sim.access.require(
                    &ctx.who,
                    &format!("/storage/{sid}"),
                    &["Datastore.AllocateSpace"],
                    false,
                )?;
            } else if creating {
                // Checked by the qmcreate task.
            } else if is_cdrom(&d) {
                if file != "none" && file != "cdrom" && !ctx.sim.volume_exists(node, &file) {
                    return Err(ApiError::die(format!("volume {file} does not exist")));
                }
            } else if let Some((sid, name)) = split_volid(&file) {
                // Attaching an existing volume: it must exist and belong to this VM.
                let owned = ctx
                    .sim
                    .storage(node, sid)
                    .and_then(|s| s.volumes.get(name))
                    .map(|v| v.vmid == Some(vmid) || v.vmid.is_none());
                if owned != Some(true) {
                    errors.insert(k.clone(), format!("volume {file} does not exist"));
                }
            }
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ApiError::params(errors))
    }
}

fn check_balloon(conf: &BTreeMap<String, String>) -> ApiResult<()> {
    if let Some(b) = conf.get("balloon").and_then(|b| b.parse::<u64>().ok()) {
        if b > memory_mib_of(conf) {
            return Err(ApiError::die(
                "balloon value too large (must be smaller than assigned memory)",
            ));
        }
    }
    Ok(())
}

fn memory_mib_of(conf: &BTreeMap<String, String>) -> u64 {
    crate::model::memory_mib(conf.get("memory").map(String::as_str))
}

/// The `pool` of a create or clone, which must exist.
fn existing_pool(ctx: &Ctx) -> ApiResult<Option<String>> {
    match ctx.opt("pool") {
        Some(p) if !ctx.sim.pools.contains_key(&p) => {
            Err(ApiError::die(format!("pool '{p}' does not exist")))
        }
        other => Ok(other),
    }
}

pub fn create(ctx: &mut Ctx) -> ApiResult<Value> {
    let node = ctx.node();
    let vmid = ctx.vmid();
    let pool_ok = ctx
        .opt("pool")
        .map(|p| {
            ctx.sim
                .access
                .has(&ctx.who, &format!("/pool/{p}"), "VM.Allocate")
        })
        .unwrap_or(false);
    if !pool_ok {
        ctx.sim
            .access
            .require(&ctx.who, &vm_path(vmid), &["VM.Allocate"], false)?;
    }
    if ctx.params.contains_key("archive") {
        return Err(ApiError::die(
            "pvesim: restore from archive is not simulated",
        ));
    }
    if let Some(other) = ctx.sim.vms.get(&vmid) {
        return Err(ApiError::die(format!(
            "unable to create VM {vmid} - VM {vmid} already exists on node '{}'",
            other.node
        )));
    }
    let pool = existing_pool(ctx)?;
    let mut keys = requested_keys(ctx);
    normalise(ctx, &node, vmid, &mut keys, true)?;
    check_balloon(&keys)?;
    let start = ctx.flag("start");
    let ndisks = keys.keys().filter(|k| is_drive_key(k)).count() as f64;
    let mut conf = BTreeMap::new();
    conf.insert("lock".to_string(), "create".to_string());
    ctx.sim.vms.insert(
        vmid,
        Vm {
            vmid,
            node: node.clone(),
            conf,
            pending: BTreeMap::new(),
            pending_delete: BTreeMap::new(),
            staged: keys,
            state: RunState::Stopped,
            started_at: None,
            agent_ready_at: None,
            agent_delay: None,
            agent_ips: BTreeMap::new(),
            ignore_shutdown: false,
            ha: false,
            flock_until: None,
            pid: 0,
        },
    );
    ctx.sim.set_pool(vmid, pool.as_deref());
    let who = ctx.who.clone();
    let secs = base_duration("qmcreate") + 0.5 * ndisks;
    let upid = ctx.sim.spawn(
        &who,
        Spawn {
            node: node.to_string(),
            kind: "qmcreate".to_string(),
            id: vmid.to_string(),
            action: Action::Create { vmid, start },
            base_secs: secs,
            flock: Some(vmid),
            fail: None,
        },
    );
    Ok(json!(upid))
}

pub fn config_get(ctx: &mut Ctx) -> ApiResult<Value> {
    let vm = ctx.sim.vm(&ctx.node(), ctx.vmid())?;
    if let Some(s) = ctx.opt("snapshot") {
        return Err(ApiError::die(format!("snapshot '{s}' does not exist")));
    }
    let conf = if ctx.flag("current") {
        vm.conf.clone()
    } else {
        vm.effective_conf()
    };
    let mut out = conf_json(&conf);
    out.insert("digest".into(), json!(ctx.sim.digest(vm)));
    Ok(Value::Object(out))
}

pub fn pending(ctx: &mut Ctx) -> ApiResult<Value> {
    let vm = ctx.sim.vm(&ctx.node(), ctx.vmid())?;
    let keys: BTreeSet<&String> = vm
        .conf
        .keys()
        .chain(vm.pending.keys())
        .chain(vm.pending_delete.keys())
        .collect();
    let list = keys
        .into_iter()
        .map(|k| {
            let mut o = json!({"key": k});
            if let Some(v) = vm.conf.get(k) {
                o["value"] = json_value(k, v);
            }
            if let Some(v) = vm.pending.get(k) {
                o["pending"] = json_value(k, v);
            }
            if let Some(force) = vm.pending_delete.get(k) {
                o["delete"] = json!(if *force { 2 } else { 1 });
            }
            o
        })
        .collect();
    Ok(Value::Array(list))
}

fn split_list(s: Option<String>) -> Vec<String> {
    s.map(|s| {
        s.split([',', ';', ' '])
            .filter(|x| !x.is_empty())
            .map(str::to_string)
            .collect()
    })
    .unwrap_or_default()
}

/// `POST` (async, UPID) and `PUT` (sync, null) `/config`.
pub fn config_update(ctx: &mut Ctx, is_async: bool) -> ApiResult<Value> {
    let node = ctx.node();
    let vmid = ctx.vmid();
    let skip = skiplock(ctx)?;
    let mut set = requested_keys(ctx);
    let delete = split_list(ctx.opt("delete"));
    let revert = split_list(ctx.opt("revert"));
    let force = ctx.flag("force");
    if set.is_empty() && delete.is_empty() && revert.is_empty() {
        return Err(ApiError::die("no options specified"));
    }
    let mut perr = BTreeMap::new();
    for k in &delete {
        if set.contains_key(k) {
            perr.insert(
                "delete".to_string(),
                format!("you can't use '-{k}' and -delete {k}' at the same time"),
            );
        }
        if crate::schema::lookup_prop(ctx.def, k).is_none() && k != "lock" {
            perr.insert(
                "delete".to_string(),
                format!("invalid configuration ID '{k}'"),
            );
        }
    }
    if !perr.is_empty() {
        return Err(ApiError::params(perr));
    }
    let vm = ctx.sim.vm(&node, vmid)?.clone();
    // `delete=lock` is `qm unlock`; everything else respects the lock.
    if !(delete.len() == 1 && delete[0] == "lock" && set.is_empty()) {
        Sim::check_lock(&vm, skip)?;
    }
    check_digest(ctx, &vm)?;
    for (k, v) in &set {
        let p = privilege_for(k, Some(v));
        ctx.sim
            .access
            .require(&ctx.who, &vm_path(vmid), &[p], false)?;
    }
    for k in &delete {
        let p = privilege_for(k, vm.effective_conf().get(k).map(String::as_str));
        ctx.sim
            .access
            .require(&ctx.who, &vm_path(vmid), &[p], false)?;
    }
    normalise(ctx, &node, vmid, &mut set, false)?;
    let mut after = vm.effective_conf();
    for (k, v) in &set {
        after.insert(k.clone(), v.clone());
    }
    for k in &delete {
        after.remove(k);
    }
    check_balloon(&after)?;
    if let Some(dev) = missing_boot_device(&after) {
        return Err(ApiError::param(
            "boot",
            format!("invalid bootorder: device '{dev}' does not exist'"),
        ));
    }
    if !is_async {
        ctx.sim.check_flock(vmid, ctx.arrived)?;
    }
    // qemu-server stages into [PENDING] under the config file lock, then applies: here for PUT,
    // in the worker for POST — so a worker that cannot get the lock changes nothing.
    let changes = crate::tasks::ConfigChanges {
        set,
        delete,
        revert,
        force,
    };
    if !is_async {
        ctx.sim.vm_mut(&node, vmid)?.stage(&changes);
    }
    if is_async {
        let who = ctx.who.clone();
        let upid = ctx.sim.spawn(
            &who,
            Spawn {
                node: node.to_string(),
                kind: "qmconfig".to_string(),
                id: vmid.to_string(),
                action: Action::Config { vmid, changes },
                base_secs: base_duration("qmconfig"),
                flock: Some(vmid),
                fail: None,
            },
        );
        if ctx.params.contains_key("background_delay") {
            if let Some(t) = ctx.sim.task(&upid) {
                if !t.running() && t.exitstatus.as_deref() == Some("OK") {
                    return Ok(Value::Null);
                }
            }
        }
        return Ok(json!(upid));
    }
    let mut log = Vec::new();
    ctx.sim
        .apply_pending(vmid, false, &mut log)
        .map_err(ApiError::die)?;
    Ok(Value::Null)
}

pub fn resize(ctx: &mut Ctx) -> ApiResult<Value> {
    let node = ctx.node();
    let vmid = ctx.vmid();
    let skip = skiplock(ctx)?;
    let disk = ctx.str("disk");
    let vm = ctx.sim.vm(&node, vmid)?.clone();
    Sim::check_lock(&vm, skip)?;
    check_digest(ctx, &vm)?;
    let value = vm
        .conf
        .get(&disk)
        .ok_or_else(|| ApiError::die(format!("disk '{disk}' does not exist")))?;
    let d = parse_drive(&disk, value);
    if is_cdrom(&d) {
        return Err(ApiError::die("you can't resize a cdrom"));
    }
    let cur = d
        .get("file")
        .and_then(split_volid)
        .and_then(|(s, n)| ctx.sim.storage(&node, s)?.volumes.get(n).map(|v| v.size))
        .or_else(|| d.get("size").and_then(crate::model::parse_size))
        .unwrap_or(0);
    let size = resize_target(&ctx.str("size"), cur).map_err(|e| ApiError::param("size", e))?;
    if size < cur {
        return Err(ApiError::die("shrinking disks is not supported"));
    }
    let who = ctx.who.clone();
    let upid = ctx.sim.spawn(
        &who,
        Spawn {
            node: node.to_string(),
            kind: "resize".to_string(),
            id: vmid.to_string(),
            action: Action::Resize { vmid, disk, size },
            base_secs: base_duration("resize"),
            flock: Some(vmid),
            fail: None,
        },
    );
    Ok(json!(upid))
}

pub fn clone(ctx: &mut Ctx) -> ApiResult<Value> {
    let node = ctx.node();
    let vmid = ctx.vmid();
    let newid = ctx.num("newid").unwrap_or(0) as u32;
    let src = ctx.sim.vm(&node, vmid)?.clone();
    if let Some(l) = src.lock() {
        return Err(ApiError::die(locked(l)));
    }
    if ctx.sim.vms.contains_key(&newid) {
        return Err(ApiError::die(format!(
            "unable to create VM {newid}: config file already exists"
        )));
    }
    let pool = existing_pool(ctx)?;
    let full = ctx.flag_or("full", !src.is_template());
    let storage = ctx.opt("storage");
    let format = ctx.opt("format");
    if !full {
        if storage.is_some() {
            return Err(ApiError::die(
                "parameter 'storage' not allowed for linked clones",
            ));
        }
        if format.is_some() {
            return Err(ApiError::die(
                "parameter 'format' not allowed for linked clones",
            ));
        }
    }
    if let Some(s) = ctx.opt("snapname") {
        return Err(ApiError::die(format!("snapshot '{s}' does not exist")));
    }
    let target = ctx.opt("target").unwrap_or_else(|| node.clone());
    match ctx.sim.nodes.get(&target) {
        None => return Err(ApiError::die(format!("no such node '{target}'"))),
        Some(n) if !n.online => {
            return Err(ApiError::die(format!(
                "target node '{target}' is not online"
            )))
        }
        _ => {}
    }
    let mut total = 0u64;
    let mut targets: Vec<String> = Vec::new();
    for (k, v) in src
        .conf
        .iter()
        .filter(|(k, _)| is_drive_key(k) && !k.starts_with("unused"))
    {
        let d = parse_drive(k, v);
        if is_cdrom(&d) {
            continue;
        }
        let Some((sid, name)) = d.get("file").and_then(split_volid) else {
            continue;
        };
        let st = ctx.sim.storage(&node, sid);
        total += st
            .and_then(|s| s.volumes.get(name))
            .map(|v| v.size)
            .unwrap_or(0);
        if target != node && storage.is_none() && !st.map(|s| s.shared).unwrap_or(false) {
            return Err(ApiError::die(format!(
                "can't clone VM to node '{target}' (VM uses local storage)"
            )));
        }
        let dst = storage.clone().unwrap_or_else(|| sid.to_string());
        if !targets.contains(&dst) {
            targets.push(dst);
        }
    }
    if let Some(s) = &storage {
        let st = ctx
            .sim
            .storage(&target, s)
            .ok_or_else(|| ApiError::die(format!("storage '{s}' does not exist")))?;
        if target != node && !st.shared {
            return Err(ApiError::die(format!(
                "can't clone to non-shared storage '{s}'"
            )));
        }
        ctx.sim.access.require(
            &ctx.who,
            &format!("/storage/{s}"),
            &["Datastore.AllocateSpace"],
            false,
        )?;
    }
    let mut staged = BTreeMap::new();
    if let Some(n) = ctx.opt("name") {
        staged.insert("name".to_string(), n);
    }
    if let Some(d) = ctx.opt("description") {
        staged.insert("description".to_string(), d);
    }
    let mut conf = BTreeMap::new();
    conf.insert("lock".to_string(), "clone".to_string());
    ctx.sim.vms.insert(
        newid,
        Vm {
            vmid: newid,
            node: target,
            conf,
            pending: BTreeMap::new(),
            pending_delete: BTreeMap::new(),
            staged,
            state: RunState::Stopped,
            started_at: None,
            agent_ready_at: None,
            agent_delay: src.agent_delay,
            agent_ips: BTreeMap::new(),
            ignore_shutdown: false,
            ha: false,
            flock_until: None,
            pid: 0,
        },
    );
    ctx.sim.set_pool(newid, pool.as_deref());
    // Full clones copy data (≈1 GiB/s before scaling); linked clones are quick.
    let secs = if full {
        base_duration("qmclone") + (total >> 30) as f64
    } else {
        1.0
    };
    // Storage-level lock contention under many parallel clones (CAPMOX #389, bpg #995).
    let max = ctx.sim.opts.max_parallel_clones_per_storage as usize;
    let busy = targets.iter().find(|sid| {
        max > 0
            && ctx
                .sim
                .tasks
                .iter()
                .filter(|t| t.running())
                .filter(
                    |t| matches!(&t.action, Action::Clone { targets: ts, .. } if ts.contains(sid)),
                )
                .count()
                >= max
    });
    let fail = busy.map(|sid| {
        format!(
            "clone failed: can't lock file '/var/lock/pve-manager/pve-storage-{sid}' - got timeout"
        )
    });
    let who = ctx.who.clone();
    let upid = ctx.sim.spawn(
        &who,
        Spawn {
            node: node.to_string(),
            kind: "qmclone".to_string(),
            id: vmid.to_string(),
            action: Action::Clone {
                src: vmid,
                newid,
                full,
                storage,
                format,
                targets,
            },
            base_secs: secs,
            flock: Some(newid),
            fail,
        },
    );
    Ok(json!(upid))
}

pub fn template(ctx: &mut Ctx) -> ApiResult<Value> {
    let node = ctx.node();
    let vmid = ctx.vmid();
    let vm = ctx.sim.vm(&node, vmid)?.clone();
    Sim::check_lock(&vm, false)?;
    if vm.is_template() {
        return Err(ApiError::die("you can't convert a template to a template"));
    }
    if vm.running() {
        return Err(ApiError::die(
            "you can't convert a VM to template if VM is running",
        ));
    }
    let who = ctx.who.clone();
    Ok(json!(ctx.sim.spawn(
        &who,
        Spawn {
            node: node.to_string(),
            kind: "qmtemplate".to_string(),
            id: vmid.to_string(),
            action: Action::Template { vmid },
            base_secs: base_duration("qmtemplate"),
            flock: Some(vmid),
            fail: None,
        }
    )))
}

pub fn destroy(ctx: &mut Ctx) -> ApiResult<Value> {
    let node = ctx.node();
    let vmid = ctx.vmid();
    let skip = skiplock(ctx)?;
    let vm = ctx.sim.vm(&node, vmid)?.clone();
    if vm.conf.get("protection").map(|p| p == "1").unwrap_or(false) {
        return Err(ApiError::die(format!(
            "can't remove VM {vmid} - protection mode enabled"
        )));
    }
    if vm.ha && !ctx.flag("purge") {
        return Err(ApiError::die(format!(
            "unable to remove VM {vmid} - used in HA resources and purge parameter not set."
        )));
    }
    if vm.running() {
        return Err(ApiError::die(format!(
            "VM {vmid} is running - destroy failed"
        )));
    }
    Sim::check_lock(&vm, skip)?;
    if skip {
        ctx.sim.vm_mut(&node, vmid)?.conf.remove("lock");
    }
    let unreferenced = ctx.flag("destroy-unreferenced-disks");
    let who = ctx.who.clone();
    Ok(json!(ctx.sim.spawn(
        &who,
        Spawn {
            node: node.to_string(),
            kind: "qmdestroy".to_string(),
            id: vmid.to_string(),
            action: Action::Destroy { vmid, unreferenced },
            base_secs: base_duration("qmdestroy"),
            flock: Some(vmid),
            fail: None,
        }
    )))
}

pub fn status_current(ctx: &mut Ctx) -> ApiResult<Value> {
    let sim = &*ctx.sim;
    let vm = sim.vm(&ctx.node(), ctx.vmid())?;
    let conf = vm.effective_conf();
    let mut o = json!({
        "vmid": vm.vmid, "status": status_str(vm), "qmpstatus": qmpstatus(vm),
        "name": conf.get("name").cloned().unwrap_or_else(|| format!("VM {}", vm.vmid)),
        "uptime": sim.uptime_secs(vm.started_at), "cpus": vm.cpus(), "cpu": 0,
        "maxmem": vm.memory_mib() << 20,
        "mem": if vm.running() { (vm.memory_mib() << 20) / 3 } else { 0 },
        "maxdisk": super::cluster::maxdisk(sim, vm.vmid), "disk": 0,
        "netin": 0, "netout": 0, "diskread": 0, "diskwrite": 0,
        "agent": if agent_enabled(&vm.conf) { 1 } else { 0 },
        "ha": if vm.ha { json!({"managed": 1, "state": if vm.running() { "started" } else { "stopped" }, "group": null}) } else { json!({"managed": 0}) },
    });
    if vm.running() {
        o["pid"] = json!(vm.pid);
        o["running-machine"] = json!("pc-q35-9.2+pve1");
        o["running-qemu"] = json!("9.2.0");
    }
    if let Some(t) = conf.get("tags") {
        o["tags"] = json!(t);
    }
    if let Some(l) = vm.lock() {
        o["lock"] = json!(l);
    }
    if vm.is_template() {
        o["template"] = json!(1);
    }
    Ok(o)
}

pub fn power(ctx: &mut Ctx, action: &str) -> ApiResult<Value> {
    let node = ctx.node();
    let vmid = ctx.vmid();
    let skip = skiplock(ctx)?;
    let vm = ctx.sim.vm(&node, vmid)?.clone();
    let id = vmid.to_string();
    let who = ctx.who.clone();
    let (kind, act, secs) = match action {
        "start" => {
            if vm.ha {
                (
                    "hastart",
                    Action::Ha { vmid, start: true },
                    base_duration("hastart"),
                )
            } else {
                ("qmstart", Action::Start { vmid }, base_duration("qmstart"))
            }
        }
        "stop" => {
            if !skip && vm.lock().is_some() {
                Sim::check_lock(&vm, false)?;
            }
            if vm.ha {
                (
                    "hastop",
                    Action::Ha { vmid, start: false },
                    base_duration("hastop"),
                )
            } else {
                ("qmstop", Action::Stop { vmid }, base_duration("qmstop"))
            }
        }
        "shutdown" => {
            let force = ctx.flag("forceStop");
            if vm.state == RunState::Paused && !force {
                return Err(ApiError::die("VM is paused - cannot shutdown"));
            }
            Sim::check_lock(&vm, skip)?;
            let secs = if vm.ignore_shutdown && vm.running() {
                ctx.num("timeout").unwrap_or(60) as f64
            } else {
                base_duration("qmshutdown")
            };
            if vm.ha {
                (
                    "hastop",
                    Action::Ha { vmid, start: false },
                    base_duration("hastop"),
                )
            } else {
                ("qmshutdown", Action::Shutdown { vmid, force }, secs)
            }
        }
        "reboot" | "reset" | "suspend" | "resume" => {
            if !vm.running() {
                return Err(ApiError::die(format!("VM {vmid} not running")));
            }
            if action == "reboot" && vm.state == RunState::Paused {
                return Err(ApiError::die("VM is paused - cannot shutdown"));
            }
            if action != "resume" {
                Sim::check_lock(&vm, skip)?;
            }
            match action {
                "reboot" => (
                    "qmreboot",
                    Action::Reboot { vmid },
                    base_duration("qmreboot"),
                ),
                "reset" => ("qmreset", Action::Reset { vmid }, base_duration("qmreset")),
                "suspend" => {
                    let todisk = ctx.flag("todisk");
                    let kind = if todisk { "qmsuspend" } else { "qmpause" };
                    (kind, Action::Pause { vmid, todisk }, base_duration(kind))
                }
                _ => (
                    "qmresume",
                    Action::Resume { vmid },
                    base_duration("qmresume"),
                ),
            }
        }
        other => {
            return Err(ApiError::not_implemented(format!(
                "Method 'POST /nodes/{node}/qemu/{vmid}/status/{other}' not implemented"
            )))
        }
    };
    Ok(json!(ctx.sim.spawn(
        &who,
        Spawn {
            node: node.to_string(),
            kind: kind.to_string(),
            id: id.to_string(),
            action: act,
            base_secs: secs,
            flock: Some(vmid),
            fail: None,
        }
    )))
}

fn agent_ready(ctx: &Ctx) -> ApiResult<()> {
    let vmid = ctx.vmid();
    let vm = ctx.sim.vm(&ctx.node(), vmid)?;
    if !agent_enabled(&vm.conf) {
        return Err(ApiError::die("No QEMU guest agent configured"));
    }
    if !vm.running() {
        return Err(ApiError::die(format!("VM {vmid} is not running")));
    }
    if vm.agent_ready_at.map(|t| t > ctx.sim.now()).unwrap_or(true) {
        return Err(ApiError::die("QEMU guest agent is not running"));
    }
    Ok(())
}

pub fn agent_ping(ctx: &mut Ctx) -> ApiResult<Value> {
    agent_ready(ctx)?;
    Ok(json!({"result": {}}))
}

/// Link-local IPv6 (EUI-64) for a MAC.
fn link_local(mac: &str) -> String {
    let b: Vec<u8> = mac
        .split(':')
        .filter_map(|x| u8::from_str_radix(x, 16).ok())
        .collect();
    if b.len() != 6 {
        return "fe80::1".into();
    }
    format!(
        "fe80::{:x}:{:x}:{:x}:{:x}",
        (((b[0] ^ 2) as u16) << 8) | b[1] as u16,
        ((b[2] as u16) << 8) | 0xff,
        0xfe00 | b[3] as u16,
        ((b[4] as u16) << 8) | b[5] as u16
    )
}

fn ip_entry(cidr: &str) -> Value {
    let (ip, prefix) = cidr.split_once('/').unwrap_or((cidr, ""));
    let v6 = ip.contains(':');
    let prefix: u32 = prefix.parse().unwrap_or(if v6 { 64 } else { 24 });
    json!({"ip-address": ip, "ip-address-type": if v6 { "ipv6" } else { "ipv4" }, "prefix": prefix})
}

pub fn agent_interfaces(ctx: &mut Ctx) -> ApiResult<Value> {
    agent_ready(ctx)?;
    let vm = ctx.sim.vm(&ctx.node(), ctx.vmid())?;
    // Right after boot only link-local addresses exist (bpg #776).
    let ip_delay = ctx.sim.scaled(ctx.sim.opts.agent_ip_delay);
    let addresses_ready = vm
        .agent_ready_at
        .map(|t| t + ip_delay <= ctx.sim.now())
        .unwrap_or(false);
    let conf = &vm.conf;
    let mut ifaces = vec![json!({
        "name": "lo", "hardware-address": "00:00:00:00:00:00",
        "ip-addresses": [
            {"ip-address": "127.0.0.1", "ip-address-type": "ipv4", "prefix": 8},
            {"ip-address": "::1", "ip-address-type": "ipv6", "prefix": 128}
        ],
        "statistics": {"rx-bytes": 0, "rx-packets": 0, "tx-bytes": 0, "tx-packets": 0, "rx-errs": 0, "tx-errs": 0, "rx-dropped": 0, "tx-dropped": 0}
    })];
    for i in 0..32 {
        let key = format!("net{i}");
        let Some(net) = conf.get(&key) else { continue };
        let mac = parse_net(net)
            .get("macaddr")
            .unwrap_or("00:00:00:00:00:00")
            .to_lowercase();
        let mut addrs: Vec<Value> = Vec::new();
        if !addresses_ready {
            // Only the link-local address below.
        } else if let Some(ips) = vm.agent_ips.get(&key) {
            addrs.extend(ips.iter().map(|c| ip_entry(c)));
        } else if let Some(ipc) = conf.get(&format!("ipconfig{i}")) {
            let ps = propstr::parse_loose(ipc, "ip");
            for k in ["ip", "ip6"] {
                if let Some(a) = ps.get(k).filter(|a| a.contains('/')) {
                    addrs.push(ip_entry(a));
                }
            }
        }
        addrs
            .push(json!({"ip-address": link_local(&mac), "ip-address-type": "ipv6", "prefix": 64}));
        ifaces.push(json!({
            "name": format!("ens{}", 18 + i), "hardware-address": mac, "ip-addresses": addrs,
            "statistics": {"rx-bytes": 1024, "rx-packets": 10, "tx-bytes": 512, "tx-packets": 5, "rx-errs": 0, "tx-errs": 0, "rx-dropped": 0, "tx-dropped": 0}
        }));
    }
    Ok(json!({"result": ifaces}))
}
