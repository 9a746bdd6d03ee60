//! VM snapshots: `GET|POST /nodes/{node}/qemu/{vmid}/snapshot`, `GET|DELETE …/snapshot/{snapname}`,
//! `GET|PUT …/snapshot/{snapname}/config`, `POST …/snapshot/{snapname}/rollback` — qemu-server's
//! `PVE/API2/Qemu.pm` (`snapshot_list`, `snapshot`, `snapshot_cmd_idx`, `get_snapshot_config`,
//! `update_snapshot_config`, `rollback`, `delsnapshot`) over pve-guest-common's `PVE/AbstractConfig.pm`.
//!
//! - Create (`qmsnapshot` worker): the names `current` and `pending` (any case) are refused by the API at
//!   once; in the worker `snapshot_prepare` refuses a locked VM (`check_lock`), a name already used ("snapshot
//!   name '…' already used") and a VM with a disk whose storage cannot snapshot it (`has_feature('snapshot')`,
//!   "snapshot feature is not available"; CD-ROM and cloud-init drives are skipped: pve-storage's
//!   `volume_has_feature`: LVM-thin, ZFS, RBD always, file storages for qcow2 only, plain LVM never). The
//!   config is locked `snapshot` while the worker runs; the snapshot section holds the config as it was
//!   (`snapshot_save_config`: every key but `lock`, plus `snaptime`, `description`, `vmstate` only for a running
//!   VM asked to save it), and `snapshot_commit` makes it the config's `parent`.
//! - Delete (`qmdelsnapshot`): a missing snapshot or a locked VM fails the worker; the config is locked
//!   `snapshot-delete` meanwhile; snapshots (and the config) whose `parent` was the deleted one get its parent
//!   (`snapshot_delete`, "fixup parent").
//! - Rollback (`qmrollback`): a missing snapshot, one still being made (`snapstate`: "unable to rollback to
//!   incomplete snapshot") or a locked VM fails the worker; a running VM is stopped first
//!   (`__snapshot_rollback_vm_stop`), the config becomes the snapshot's (snapshots kept, `parent` the snapshot,
//!   pending changes dropped), lock `rollback` meanwhile; with the snapshot's RAM (`vmstate`) or `start=1` the VM
//!   is started again.
//!
//! Volume-level snapshots are not modelled: pvesim keeps no disk contents.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::auth::Principal;
use crate::error::{locked, ErrorReply, ReplyResult};
use crate::model::Vm;
use crate::sim::{Sim, Spawn};
use crate::tasks::{base_duration, Action, TaskResult};
use crate::vmconfig::{is_cdrom, is_drive_key, parse_drive, split_volid};

/// What a snapshot operation is asked to do (`Action::Snapshot`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SnapshotOp {
    Create {
        name: String,
        vmstate: bool,
        description: Option<String>,
    },
    Delete {
        name: String,
    },
    Rollback {
        name: String,
        start: bool,
    },
}

impl SnapshotOp {
    fn name(&self) -> &str {
        match self {
            SnapshotOp::Create { name, .. }
            | SnapshotOp::Delete { name }
            | SnapshotOp::Rollback { name, .. } => name,
        }
    }
    /// The worker type and the lock it holds on the config meanwhile.
    pub(crate) fn kind_and_lock(&self) -> (&'static str, &'static str) {
        match self {
            SnapshotOp::Create { .. } => ("qmsnapshot", "snapshot"),
            SnapshotOp::Delete { .. } => ("qmdelsnapshot", "snapshot-delete"),
            SnapshotOp::Rollback { .. } => ("qmrollback", "rollback"),
        }
    }
}

/// Keys of a snapshot section that are the snapshot's own, not the VM config it saved.
const OWN_KEYS: [&str; 4] = ["snaptime", "description", "vmstate", "snapstate"];

/// `GET …/snapshot`: every snapshot, then `current` (its `parent` when it has one).
pub fn list(sim: &Sim, vm: &Vm) -> Value {
    let mut out: Vec<Value> = vm
        .snapshots
        .iter()
        .map(|(name, s)| {
            let mut o = json!({
                "name": name,
                "description": s.get("description").cloned().unwrap_or_default(),
                "snaptime": s.get("snaptime").and_then(|t| t.parse::<u64>().ok()).unwrap_or(0),
                "vmstate": if s.contains_key("vmstate") { 1 } else { 0 },
            });
            for k in ["parent", "snapstate"] {
                if let Some(v) = s.get(k) {
                    o[k] = json!(v);
                }
            }
            o
        })
        .collect();
    let mut current = json!({
        "name": "current",
        "digest": sim.digest(vm),
        "running": if vm.running() { 1 } else { 0 },
        "description": "You are here!",
    });
    if let Some(p) = vm.conf.get("parent") {
        current["parent"] = json!(p);
    }
    out.push(current);
    Value::Array(out)
}

/// `GET …/snapshot/{snapname}/config`: the snapshot's section.
pub fn config(vm: &Vm, name: &str) -> ReplyResult<Value> {
    let s = vm
        .snapshots
        .get(name)
        .ok_or_else(|| ErrorReply::die(format!("snapshot '{name}' does not exist")))?;
    let mut o = serde_json::Map::new();
    for (k, v) in s {
        let value = match v.parse::<i64>() {
            Ok(n) if k == "snaptime" => json!(n),
            _ => json!(v),
        };
        o.insert(k.clone(), value);
    }
    Ok(Value::Object(o))
}

/// `PUT …/snapshot/{snapname}/config`: the description, under the config lock (synchronous).
pub fn set_description(
    sim: &mut Sim,
    node: &str,
    vmid: u32,
    name: &str,
    description: Option<String>,
) -> ReplyResult<()> {
    let Some(text) = description else {
        return Ok(());
    };
    let vm = sim.vm(node, vmid)?.clone();
    Sim::check_lock(&vm, false)?;
    let vm = sim
        .vms
        .get_mut(&vmid)
        .ok_or_else(|| ErrorReply::die("VM vanished"))?;
    let s = vm
        .snapshots
        .get_mut(name)
        .ok_or_else(|| ErrorReply::die(format!("snapshot '{name}' does not exist")))?;
    s.insert("description".into(), text);
    Ok(())
}

/// The API's own checks, then the worker; the config is locked for it when it is free.
pub fn start(
    sim: &mut Sim,
    who: &Principal,
    node: String,
    vmid: u32,
    op: SnapshotOp,
) -> ReplyResult<String> {
    let vm = sim.vm(&node, vmid)?.clone();
    if let SnapshotOp::Create { name, .. } = &op {
        if name == "current" {
            return Err(ErrorReply::die(
                "unable to use snapshot name 'current' (reserved name)",
            ));
        }
        if name.eq_ignore_ascii_case("pending") {
            return Err(ErrorReply::die(
                "unable to use snapshot name 'pending' (reserved name)",
            ));
        }
    }
    let (kind, lock) = op.kind_and_lock();
    if vm.lock().is_none() && refusal(sim, &vm, &op).is_none() {
        if let Some(v) = sim.vms.get_mut(&vmid) {
            v.conf.insert("lock".into(), lock.into());
        }
    }
    Ok(sim.spawn(
        who,
        Spawn {
            node,
            kind: kind.to_string(),
            id: vmid.to_string(),
            action: Action::Snapshot { vmid, op },
            base_secs: base_duration(kind),
            flock: Some(vmid),
            fail: None,
        },
    ))
}

/// Why the worker would fail on `vm` as it is (its own lock aside).
fn refusal(sim: &Sim, vm: &Vm, op: &SnapshotOp) -> Option<String> {
    let name = op.name();
    let snap = vm.snapshots.get(name);
    match op {
        SnapshotOp::Create { .. } if snap.is_some() => {
            Some(format!("snapshot name '{name}' already used"))
        }
        SnapshotOp::Create { .. } => {
            (!can_snapshot(sim, vm)).then(|| "snapshot feature is not available".into())
        }
        _ if snap.is_none() => Some(format!("snapshot '{name}' does not exist")),
        SnapshotOp::Rollback { .. } => snap
            .and_then(|s| s.get("snapstate"))
            .map(|st| format!("unable to rollback to incomplete snapshot (snapstate = {st})")),
        SnapshotOp::Delete { .. } => None,
    }
}

/// pve-storage `volume_has_feature(snapshot)` for every disk but CD-ROMs (cloud-init included).
fn can_snapshot(sim: &Sim, vm: &Vm) -> bool {
    disks_can(sim, &vm.node, &vm.conf, "snapshot")
}

/// Whether every disk of `conf` (a VM's config or a snapshot section) on `node` has `feature`
/// (pve-storage's `volume_has_feature` per plugin): `snapshot` and `clone` (a linked clone) on
/// LVM-thin, ZFS, RBD and Btrfs, and on file storages for qcow2 only; `copy` on any storage.
/// CD-ROM drives are skipped; plain LVM and unknown storages have neither of the first two.
fn disks_can(sim: &Sim, node: &str, conf: &BTreeMap<String, String>, feature: &str) -> bool {
    conf.iter()
        .filter(|(k, _)| is_drive_key(k) && !k.starts_with("unused"))
        .map(|(k, v)| parse_drive(k, v))
        .filter(|d| !is_cdrom(d))
        .all(|d| {
            let Some((sid, vol)) = d.get("file").and_then(split_volid) else {
                return d.get("file") == Some("none");
            };
            match (feature, sim.storage(node, sid).map(|s| s.kind.as_str())) {
                (_, None) => false,
                ("copy", Some(_)) => true,
                (_, Some("lvmthin" | "zfspool" | "zfs" | "rbd" | "btrfs")) => true,
                (_, Some("dir" | "nfs" | "cifs" | "cephfs" | "glusterfs")) => {
                    vol.ends_with(".qcow2")
                }
                _ => false,
            }
        })
}

/// `shared_nodes`: the nodes where every storage `conf` uses is available; a storage that is
/// not shared only on `node` (CD-ROM images count too).
fn shared_nodes(sim: &Sim, node: &str, conf: &BTreeMap<String, String>) -> Vec<String> {
    let sids: Vec<String> = conf
        .iter()
        .filter(|(k, _)| is_drive_key(k))
        .filter_map(|(k, v)| {
            let d = parse_drive(k, v);
            d.get("file")
                .and_then(split_volid)
                .map(|(sid, _)| sid.to_string())
        })
        .collect();
    sim.nodes
        .keys()
        .filter(|n| {
            sids.iter().all(|sid| match sim.storage(n, sid) {
                Some(st) => st.enabled && (st.shared || *n == node),
                None => false,
            })
        })
        .cloned()
        .collect()
}

/// `GET /nodes/{node}/qemu/{vmid}/feature` (qemu-server `vm_feature`): `has_feature($feature,
/// …)` over the VM's config, or with `snapname` that snapshot's section ("snapshot '…' does not
/// exist" otherwise), and `nodes`, `shared_nodes` of the same config. `clone` also needs a
/// template for the current config (a linked clone is made from a base volume).
pub fn feature(sim: &Sim, vm: &Vm, feature: &str, snapname: Option<&str>) -> ReplyResult<Value> {
    let conf = match snapname {
        Some(name) => vm
            .snapshots
            .get(name)
            .ok_or_else(|| ErrorReply::die(format!("snapshot '{name}' does not exist")))?,
        None => &vm.conf,
    };
    let template = conf.get("template").is_some_and(|t| t == "1");
    let has = disks_can(sim, &vm.node, conf, feature)
        && (feature != "clone" || snapname.is_some() || template);
    Ok(json!({"hasFeature": has as u8, "nodes": shared_nodes(sim, &vm.node, conf)}))
}

/// The worker: the checks again on the config as it is now, then the effect.
pub fn finish(sim: &mut Sim, vmid: u32, op: &SnapshotOp, log: &mut Vec<String>) -> TaskResult {
    let vm = sim.vms.get(&vmid).ok_or("VM vanished")?.clone();
    let (_, own_lock) = op.kind_and_lock();
    let result = match vm.lock() {
        Some(l) if l != own_lock => Err(locked(l).into()),
        _ => match refusal(sim, &vm, op) {
            Some(why) => Err(why.into()),
            None => apply(sim, vmid, op, log),
        },
    };
    if vm.lock() == Some(own_lock) {
        if let Some(v) = sim.vms.get_mut(&vmid) {
            if v.conf.get("lock").map(String::as_str) == Some(own_lock) {
                v.conf.remove("lock");
            }
        }
    }
    result
}

fn apply(sim: &mut Sim, vmid: u32, op: &SnapshotOp, log: &mut Vec<String>) -> TaskResult {
    let now = sim.unix_now();
    let vm = sim.vms.get_mut(&vmid).ok_or("VM vanished")?;
    match op {
        SnapshotOp::Create {
            name,
            vmstate,
            description,
        } => {
            let mut s: BTreeMap<String, String> = vm
                .conf
                .iter()
                .filter(|(k, _)| k.as_str() != "lock")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            s.insert("snaptime".into(), now.to_string());
            if let Some(d) = description {
                s.insert("description".into(), d.clone());
            }
            if *vmstate && vm.running() {
                s.insert("vmstate".into(), "1".into());
            }
            vm.snapshots.insert(name.clone(), s);
            vm.conf.insert("parent".into(), name.clone());
            Ok(0)
        }
        SnapshotOp::Delete { name } => {
            let gone = vm.snapshots.remove(name).unwrap_or_default();
            let up = gone.get("parent").cloned();
            let fix = |m: &mut BTreeMap<String, String>| {
                if m.get("parent") == Some(name) {
                    match &up {
                        Some(p) => m.insert("parent".into(), p.clone()),
                        None => m.remove("parent"),
                    };
                }
            };
            vm.snapshots.values_mut().for_each(fix);
            fix(&mut vm.conf);
            Ok(0)
        }
        SnapshotOp::Rollback { name, start } => {
            let snap = vm.snapshots.get(name).cloned().unwrap_or_default();
            let with_ram = snap.contains_key("vmstate");
            if vm.running() {
                log.push(format!("stopping VM {vmid} for the rollback"));
                super::power::power_off(sim, vmid);
            }
            let vm = sim.vms.get_mut(&vmid).ok_or("VM vanished")?;
            let lock = vm.conf.get("lock").cloned();
            vm.conf = snap
                .into_iter()
                .filter(|(k, _)| !OWN_KEYS.contains(&k.as_str()))
                .collect();
            vm.conf.insert("parent".into(), name.clone());
            if let Some(l) = lock {
                vm.conf.insert("lock".into(), l);
            }
            vm.pending.clear();
            vm.pending_delete.clear();
            if with_ram || *start {
                vm.conf.remove("lock");
                return super::power::start_vm(sim, vmid, log);
            }
            Ok(0)
        }
    }
}
