//! `/nodes/{node}/qemu*`: VM list, config and status reads, and the routes of the VM
//! operations (create, config, resize, clone, template, destroy, power) to `crate::ops`.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Map, Value};

use crate::error::{ErrorReply, ReplyResult};
use crate::model::{RunState, Vm};
use crate::ops::{self, vm_path};
use crate::schema::value_str;
use crate::server::Ctx;
use crate::tasks::ConfigChanges;
use crate::vmconfig::json_value;

use super::agent::agent_enabled;

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

pub fn list(ctx: &mut Ctx) -> ReplyResult<Value> {
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

pub fn index(ctx: &mut Ctx) -> ReplyResult<Value> {
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

pub fn status_index(ctx: &mut Ctx) -> ReplyResult<Value> {
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
pub fn config_get(ctx: &mut Ctx) -> ReplyResult<Value> {
    let vm = ctx.sim.vm(&ctx.node(), ctx.vmid())?;
    if let Some(s) = ctx.opt("snapshot") {
        return Err(ErrorReply::die(format!("snapshot '{s}' does not exist")));
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

pub fn pending(ctx: &mut Ctx) -> ReplyResult<Value> {
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
pub fn status_current(ctx: &mut Ctx) -> ReplyResult<Value> {
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
        "ha": match sim.ha.resources.get(&vm.vmid) {
            // `PVE::HA::Config::get_service_status`: the CRM's state and the group, if any.
            Some(r) => json!({"managed": 1, "state": r.service.as_str(), "group": r.group}),
            None => json!({"managed": 0}),
        },
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

/// `GET /feature` (`vm_feature`; `feature` is checked against the schema's enum).
pub fn feature(ctx: &mut Ctx) -> ReplyResult<Value> {
    let vm = ctx.sim.vm(&ctx.node(), ctx.vmid())?;
    let snapname = ctx.opt("snapname");
    ops::snapshot::feature(ctx.sim, vm, &ctx.str("feature"), snapname.as_deref())
}

/// `GET /snapshot` (qemu-server `PVE/API2/Qemu.pm`, `snapshot_list`): one entry per
/// snapshot, then `current`.
pub fn snapshot_list(ctx: &mut Ctx) -> ReplyResult<Value> {
    let vm = ctx.sim.vm(&ctx.node(), ctx.vmid())?;
    Ok(ops::snapshot::list(ctx.sim, vm))
}

fn snapshot_op(ctx: &mut Ctx, op: ops::snapshot::SnapshotOp) -> ReplyResult<Value> {
    let who = ctx.who.clone();
    let (node, vmid) = (ctx.node(), ctx.vmid());
    Ok(json!(ops::snapshot::start(ctx.sim, &who, node, vmid, op)?))
}

/// `POST /snapshot`: the `qmsnapshot` worker's UPID.
pub fn snapshot_create(ctx: &mut Ctx) -> ReplyResult<Value> {
    let op = ops::snapshot::SnapshotOp::Create {
        name: ctx.str("snapname"),
        vmstate: ctx.flag("vmstate"),
        description: ctx.opt("description"),
    };
    snapshot_op(ctx, op)
}

/// `GET /snapshot/{snapname}` (`snapshot_cmd_idx`): the two sub-commands, for any name.
pub fn snapshot_index(_ctx: &mut Ctx) -> ReplyResult<Value> {
    Ok(json!([{"cmd": "rollback"}, {"cmd": "config"}]))
}

/// `DELETE /snapshot/{snapname}`: the `qmdelsnapshot` worker's UPID.
pub fn snapshot_delete(ctx: &mut Ctx) -> ReplyResult<Value> {
    let op = ops::snapshot::SnapshotOp::Delete {
        name: ctx.str("snapname"),
    };
    snapshot_op(ctx, op)
}

/// `POST /snapshot/{snapname}/rollback`: the `qmrollback` worker's UPID.
pub fn snapshot_rollback(ctx: &mut Ctx) -> ReplyResult<Value> {
    let op = ops::snapshot::SnapshotOp::Rollback {
        name: ctx.str("snapname"),
        start: ctx.flag("start"),
    };
    snapshot_op(ctx, op)
}

/// `GET /snapshot/{snapname}/config`.
pub fn snapshot_config(ctx: &mut Ctx) -> ReplyResult<Value> {
    let vm = ctx.sim.vm(&ctx.node(), ctx.vmid())?;
    ops::snapshot::config(vm, &ctx.str("snapname"))
}

/// `PUT /snapshot/{snapname}/config`: `null`.
pub fn snapshot_config_update(ctx: &mut Ctx) -> ReplyResult<Value> {
    let (node, vmid, name, d) = (
        ctx.node(),
        ctx.vmid(),
        ctx.str("snapname"),
        ctx.opt("description"),
    );
    ops::snapshot::set_description(ctx.sim, &node, vmid, &name, d)?;
    Ok(Value::Null)
}

/// `POST /nodes/{node}/qemu`.
pub fn create(ctx: &mut Ctx) -> ReplyResult<Value> {
    let req = ops::create::CreateVm {
        node: ctx.node(),
        vmid: ctx.vmid(),
        keys: requested_keys(ctx),
        pool: ctx.opt("pool"),
        start: ctx.flag("start"),
        restore: ctx.opt("archive").map(|archive| ops::vzdump::Restore {
            archive,
            storage: ctx.opt("storage"),
            force: ctx.flag("force"),
        }),
    };
    let who = ctx.who.clone();
    Ok(json!(ops::create::start(ctx.sim, &who, req)?))
}

/// `POST` (async, UPID) and `PUT` (sync, null) `/config`.
pub fn config_update(ctx: &mut Ctx, is_async: bool) -> ReplyResult<Value> {
    let req = ops::config::UpdateConfig {
        node: ctx.node(),
        vmid: ctx.vmid(),
        skiplock: ctx.flag("skiplock"),
        digest: ctx.opt("digest"),
        background_delay: ctx.params.contains_key("background_delay"),
        changes: ConfigChanges {
            set: requested_keys(ctx),
            delete: split_list(ctx.opt("delete")),
            revert: split_list(ctx.opt("revert")),
            force: ctx.flag("force"),
        },
        def: ctx.def,
        arrived: ctx.arrived,
    };
    let who = ctx.who.clone();
    ops::config::apply(ctx.sim, &who, req, is_async)
}

pub fn resize(ctx: &mut Ctx) -> ReplyResult<Value> {
    let req = ops::resize::ResizeDisk {
        node: ctx.node(),
        vmid: ctx.vmid(),
        skiplock: ctx.flag("skiplock"),
        digest: ctx.opt("digest"),
        disk: ctx.str("disk"),
        size: ctx.str("size"),
    };
    let who = ctx.who.clone();
    Ok(json!(ops::resize::start(ctx.sim, &who, req)?))
}

pub fn clone(ctx: &mut Ctx) -> ReplyResult<Value> {
    let req = ops::clone::CloneVm {
        node: ctx.node(),
        vmid: ctx.vmid(),
        newid: ctx.num("newid").unwrap_or(0) as u32,
        pool: ctx.opt("pool"),
        full: ctx.opt("full").map(|v| v == "1"),
        storage: ctx.opt("storage"),
        format: ctx.opt("format"),
        snapname: ctx.opt("snapname"),
        target: ctx.opt("target"),
        name: ctx.opt("name"),
        description: ctx.opt("description"),
    };
    let who = ctx.who.clone();
    Ok(json!(ops::clone::start(ctx.sim, &who, req)?))
}

pub fn template(ctx: &mut Ctx) -> ReplyResult<Value> {
    let who = ctx.who.clone();
    let (node, vmid) = (ctx.node(), ctx.vmid());
    Ok(json!(ops::template::start(ctx.sim, &who, node, vmid)?))
}

pub fn destroy(ctx: &mut Ctx) -> ReplyResult<Value> {
    let req = ops::destroy::DestroyVm {
        node: ctx.node(),
        vmid: ctx.vmid(),
        skiplock: ctx.flag("skiplock"),
        purge: ctx.flag("purge"),
        destroy_unreferenced_disks: ctx.flag("destroy-unreferenced-disks"),
    };
    let who = ctx.who.clone();
    Ok(json!(ops::destroy::start(ctx.sim, &who, req)?))
}

/// `POST /status/{action}`.
pub fn power(ctx: &mut Ctx, action: &str) -> ReplyResult<Value> {
    let req = ops::power::PowerAction {
        node: ctx.node(),
        vmid: ctx.vmid(),
        action: action.to_string(),
        skiplock: ctx.flag("skiplock"),
        force_stop: ctx.flag("forceStop"),
        timeout: ctx.num("timeout"),
        todisk: ctx.flag("todisk"),
    };
    let who = ctx.who.clone();
    Ok(json!(ops::power::start(ctx.sim, &who, req)?))
}
