//! One VM's way to its desired state: identity, ownership, pre-checks, create or clone, converge,
//! pending changes, removal. The pure decisions come from `pve_types`; all I/O goes through
//! `pve_client`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use pve_client::{sha256_file, Client, ClusterVm, Error, Params, StorageInfo, TaskOutcome};
use pve_types::placement::formats_for_storage_type;
use pve_types::{
    config_str, diff, needs_restart, normalize_tags, Cdrom, ConfigDiff, NicValue, VmSpec,
};
use serde_json::{json, Map, Value};

use crate::options::{AgentIso, CloneArgs, Timeouts, VmArgs};

const MIB: u64 = 1 << 20;
const GIB: f64 = (1u64 << 30) as f64;

/// Shared by all VMs of one module run.
pub struct Ctx<'a> {
    pub client: &'a Client,
    pub check_mode: bool,
    pub timeouts: Timeouts,
    /// `/cluster/resources` as read at the start.
    pub snapshot: Vec<ClusterVm>,
    /// vmids this run has claimed (so parallel creates never pick the same one).
    pub reserved: Mutex<BTreeSet<u32>>,
    /// Uploaded/verified ISOs by (node-or-shared, storage, filename) → volid; the lock also keeps
    /// parallel VMs from uploading the same ISO twice.
    pub isos: Mutex<HashMap<(String, String, String), String>>,
}

impl Ctx<'_> {
    fn secs(&self, s: u64) -> Duration {
        Duration::from_secs(s)
    }
}

/// Where a VM's plan points.
#[derive(Debug, Clone)]
pub enum Target {
    Existing(ClusterVm),
    New {
        node: String,
        vmid: Option<u32>,
        /// Pre-check findings allowed by `allow_overcommit`.
        warnings: Vec<String>,
    },
    Missing,
}

/// The outcome for one VM.
#[derive(Debug, Clone, Default)]
pub struct VmResult {
    pub changed: bool,
    pub failed: bool,
    pub msg: String,
    pub vmid: Option<u32>,
    pub node: Option<String>,
    pub name: Option<String>,
    pub state: String,
    pub config: Map<String, Value>,
    pub changed_keys: Vec<String>,
    pub reboot_required: bool,
    pub pending_keys: Vec<String>,
    pub task_ids: Vec<String>,
    pub created: bool,
    pub cloned: bool,
    pub deleted: bool,
    pub iso_volid: Option<String>,
    pub iso_uploaded: bool,
    pub warnings: Vec<String>,
    pub before: Map<String, Value>,
    pub after: Map<String, Value>,
}

impl VmResult {
    pub fn mac_addresses(&self) -> Map<String, Value> {
        let mut m = Map::new();
        let mut keys: Vec<&String> = self
            .config
            .keys()
            .filter(|k| {
                k.strip_prefix("net")
                    .is_some_and(|n| n.parse::<u32>().is_ok())
            })
            .collect();
        keys.sort_by_key(|k| k[3..].parse::<u32>().unwrap_or(0));
        for k in keys {
            if let Some(mac) = config_str(&self.config, k)
                .and_then(|v| NicValue::parse(&v).ok())
                .and_then(|n| n.mac)
            {
                m.insert(k.clone(), json!(mac));
            }
        }
        m
    }

    pub fn to_json(&self) -> Map<String, Value> {
        let mut config = self.config.clone();
        config.remove("digest");
        let o = json!({
            "vmid": self.vmid, "node": self.node, "name": self.name, "state": self.state,
            "changed": self.changed, "failed": self.failed, "msg": self.msg,
            "mac_addresses": self.mac_addresses(), "config": config,
            "changed_keys": self.changed_keys, "reboot_required": self.reboot_required,
            "pending_keys": self.pending_keys, "task_ids": self.task_ids,
            "created": self.created, "cloned": self.cloned, "deleted": self.deleted,
            "iso_volid": self.iso_volid, "iso_uploaded": self.iso_uploaded,
        });
        match o {
            Value::Object(m) => m,
            _ => Map::new(),
        }
    }

    fn task(&mut self, t: Option<TaskOutcome>) {
        if let Some(t) = t {
            if t.exitstatus != "OK" {
                self.warnings.push(format!(
                    "task {} ended with {}: {}",
                    t.upid,
                    t.exitstatus,
                    t.warnings.join(" | ")
                ));
            }
            self.task_ids.push(t.upid);
        }
    }
}

fn label(vm: &ClusterVm) -> String {
    match &vm.name {
        Some(n) => format!("VM '{n}' ({}) on node '{}'", vm.vmid, vm.node),
        None => format!("VM {} on node '{}'", vm.vmid, vm.node),
    }
}

fn e2s(e: Error) -> String {
    e.to_string()
}

/// Find the VM a spec names: by `vmid`, else by `name` among non-templates (several matches is an
/// error that lists them).
pub fn resolve(
    snapshot: &[ClusterVm],
    vmid: Option<u32>,
    name: Option<&str>,
) -> Result<Option<ClusterVm>, String> {
    if let Some(id) = vmid {
        return Ok(snapshot.iter().find(|v| v.vmid == id as u64).cloned());
    }
    let Some(name) = name else {
        return Err("each VM needs a name or a vmid".into());
    };
    let matches: Vec<&ClusterVm> = snapshot
        .iter()
        .filter(|v| !v.template && v.name.as_deref() == Some(name))
        .collect();
    match matches.as_slice() {
        [] => Ok(None),
        [one] => Ok(Some((*one).clone())),
        many => Err(format!(
            "the name '{name}' matches {} VMs: {}; give vmid to pick one",
            many.len(),
            many.iter()
                .map(|v| format!("{} on {}", v.vmid, v.node))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// The clone source: a VM or template by vmid or (unique) name.
fn resolve_source(snapshot: &[ClusterVm], c: &CloneArgs) -> Result<ClusterVm, String> {
    if let Some(id) = c.vmid {
        return snapshot
            .iter()
            .find(|v| v.vmid == id as u64)
            .cloned()
            .ok_or_else(|| format!("clone: source VM {id} does not exist"));
    }
    let name = c.name.as_deref().unwrap_or("");
    let all: Vec<&ClusterVm> = snapshot
        .iter()
        .filter(|v| v.name.as_deref() == Some(name))
        .collect();
    // Prefer templates when a name is shared by a template and VMs cloned from it.
    let templates: Vec<&&ClusterVm> = all.iter().filter(|v| v.template).collect();
    match (templates.as_slice(), all.as_slice()) {
        ([one], _) => Ok((**one).clone()),
        ([], [one]) => Ok((*one).clone()),
        ([], []) => Err(format!("clone: no VM or template is named '{name}'")),
        _ => Err(format!(
            "clone: the name '{name}' matches several VMs ({}); give clone.vmid",
            all.iter()
                .map(|v| v.vmid.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

fn owned(tags: &[String], owner: &str) -> bool {
    let owner = owner.to_lowercase();
    tags.iter().any(|t| t.to_lowercase() == owner)
}

/// A clone cannot be tagged in the clone call itself, so it is created with this description line
/// and tagged in the first config update. A clone whose run died in between (a timeout on a long
/// full clone) is still recognised as ours, and the line is removed when it is converged.
pub const CLONE_MARKER: &str = "proxshift-clone-of-owner: ";

fn clone_marker(owner: &str) -> String {
    format!("{CLONE_MARKER}{owner}")
}

/// Owned: the ownership tag, or the clone marker of this owner in the description.
fn owned_config(cfg: &Map<String, Value>, owner: &str) -> bool {
    owned(&config_tags(cfg), owner)
        || config_str(cfg, "description")
            .is_some_and(|d| d.lines().any(|l| l.trim() == clone_marker(owner)))
}

/// The description without clone marker lines, when it carries one.
fn without_marker(description: Option<&str>) -> Option<String> {
    let d = description?;
    if !d.contains(CLONE_MARKER) {
        return None;
    }
    Some(
        d.lines()
            .filter(|l| !l.trim().starts_with(CLONE_MARKER))
            .collect::<Vec<_>>()
            .join("\n")
            .trim()
            .to_string(),
    )
}

fn config_tags(cfg: &Map<String, Value>) -> Vec<String> {
    normalize_tags(config_str(cfg, "tags"))
}

/// The spec as it will be applied: ownership tag added, clone marker gone, the agent ISO in the
/// CD-ROM.
fn effective_spec(
    args: &VmArgs,
    current_tags: Option<&[String]>,
    current_description: Option<&str>,
    iso: Option<&str>,
) -> VmSpec {
    let mut spec = args.spec.clone();
    if spec.description.is_none() {
        spec.description = without_marker(current_description);
    }
    let mut tags: Vec<String> = match (&spec.tags, current_tags) {
        (Some(t), _) => t.clone(),
        // Tags not managed: keep the VM's own and add ours.
        (None, Some(cur)) => cur.to_vec(),
        (None, None) => Vec::new(),
    };
    tags.push(args.owner_tag.clone());
    spec.tags = Some(normalize_tags(&tags));
    if let Some(volid) = iso {
        let slot = spec.cdrom.as_ref().and_then(|c| c.slot.clone());
        spec.cdrom = Some(Cdrom {
            slot,
            iso: Some(volid.to_string()),
        });
    }
    spec
}

pub fn run_one(ctx: &Ctx, args: &VmArgs, target: &Target) -> VmResult {
    let mut res = VmResult {
        name: args.spec.name.clone(),
        state: args.state.clone(),
        ..Default::default()
    };
    let r = match (args.state.as_str(), target) {
        ("absent", Target::Existing(vm)) => absent(ctx, args, vm, &mut res),
        ("absent", _) => {
            res.msg = "the VM does not exist".into();
            Ok(())
        }
        (_, Target::Existing(vm)) => existing(ctx, args, vm, &mut res),
        (
            _,
            Target::New {
                node,
                vmid,
                warnings,
            },
        ) => {
            res.warnings.extend(warnings.iter().cloned());
            create(ctx, args, node, *vmid, &mut res)
        }
        (_, Target::Missing) => Err("internal error: no target for a present VM".into()),
    };
    if let Err(msg) = r {
        res.failed = true;
        res.msg = msg;
    } else if res.msg.is_empty() {
        res.msg = if res.changed {
            if ctx.check_mode {
                "the VM would change".into()
            } else {
                "the VM changed".into()
            }
        } else {
            "the VM is as desired".into()
        };
    }
    res
}

fn absent(ctx: &Ctx, args: &VmArgs, vm: &ClusterVm, res: &mut VmResult) -> Result<(), String> {
    let c = ctx.client;
    let vmid = vm.vmid as u32;
    res.vmid = Some(vmid);
    res.node = Some(vm.node.clone());
    res.name = vm.name.clone().or(res.name.take());
    if vm.template {
        return Err(format!(
            "{} is a template; proxmox_vm does not delete templates",
            label(vm)
        ));
    }
    let mut cfg = c.vm_config(&vm.node, vmid, false).map_err(e2s)?;
    if !owned_config(&cfg, &args.owner_tag) && !args.adopt {
        return Err(format!(
            "{} does not carry the ownership tag '{}': refusing to delete it (set adopt: true to delete it anyway)",
            label(vm),
            args.owner_tag
        ));
    }
    if config_str(&cfg, "protection").as_deref() == Some("1") {
        return Err(format!(
            "{} has protection enabled; set protection: false (state: present) before deleting it",
            label(vm)
        ));
    }
    let status = c.vm_status(&vm.node, vmid).map_err(e2s)?;
    let running = status.get("status").and_then(Value::as_str) == Some("running");
    if running && !args.force {
        return Err(format!(
            "{} is running; set force: true to stop it and delete it",
            label(vm)
        ));
    }
    res.changed = true;
    res.deleted = true;
    res.before = cfg.clone();
    res.before.remove("digest");
    if ctx.check_mode {
        return Ok(());
    }
    if cfg.contains_key("lock") {
        cfg = c
            .wait_unlocked(&vm.node, vmid, ctx.secs(ctx.timeouts.lock))
            .map_err(e2s)?;
    }
    let _ = cfg;
    if running {
        let t = c
            .vm_action(
                &vm.node,
                vmid,
                "stop",
                &Params::new(),
                ctx.secs(ctx.timeouts.stop),
            )
            .map_err(|e| format!("stopping {} before deleting it: {e}", label(vm)))?;
        res.task(t);
        // HA-managed VMs stop after the `hastop` task ends: wait for the real state.
        proxshift_http::wait_for(ctx.secs(ctx.timeouts.stop), c.poll_interval(), || {
            let st = c.vm_status(&vm.node, vmid)?;
            Ok::<_, Error>(
                if st.get("status").and_then(Value::as_str) == Some("stopped") {
                    proxshift_http::Poll::Ready(())
                } else {
                    proxshift_http::Poll::Pending(format!("VM {vmid} to stop"))
                },
            )
        })
        .map_err(|e| format!("waiting for {} to stop: {e}", label(vm)))?;
    }
    let t = c
        .destroy_vm(&vm.node, vmid, true, true, ctx.secs(ctx.timeouts.delete))
        .map_err(|e| format!("deleting {}: {e}", label(vm)))?;
    res.task(t);
    res.msg = format!("deleted {}", label(vm));
    Ok(())
}

fn existing(ctx: &Ctx, args: &VmArgs, vm: &ClusterVm, res: &mut VmResult) -> Result<(), String> {
    let c = ctx.client;
    let vmid = vm.vmid as u32;
    res.vmid = Some(vmid);
    res.node = Some(vm.node.clone());
    if vm.template {
        return Err(format!(
            "{} is a template; proxmox_vm manages VMs only",
            label(vm)
        ));
    }
    let cfg = c.vm_config(&vm.node, vmid, false).map_err(e2s)?;
    if !owned_config(&cfg, &args.owner_tag) && !args.adopt {
        return Err(format!(
            "{} does not carry the ownership tag '{}': refusing to modify it (set adopt: true to take it over)",
            label(vm),
            args.owner_tag
        ));
    }
    let cfg = if cfg.contains_key("lock") && !ctx.check_mode {
        c.wait_unlocked(&vm.node, vmid, ctx.secs(ctx.timeouts.lock))
            .map_err(e2s)?
    } else {
        cfg
    };
    let iso = match &args.agent_iso {
        Some(i) => Some(ensure_iso(ctx, &vm.node, i, res)?),
        None => None,
    };
    let running = vm.status.as_deref() == Some("running");
    converge(ctx, args, &vm.node, vmid, cfg, iso.as_deref(), running, res)?;
    converge_pool(ctx, args, vm, res)
}

/// Move an existing VM into the `pool` asked for (`""`: into none). Pool membership is not part of
/// the VM config, so it has its own API and its own entry in the diff.
fn converge_pool(
    ctx: &Ctx,
    args: &VmArgs,
    vm: &ClusterVm,
    res: &mut VmResult,
) -> Result<(), String> {
    let Some(wanted) = args.pool.as_deref() else {
        return Ok(());
    };
    let wanted = (!wanted.is_empty()).then_some(wanted);
    let current = vm.pool.as_deref();
    if current == wanted {
        return Ok(());
    }
    let vmid = vm.vmid as u32;
    res.changed = true;
    res.changed_keys.push("pool".into());
    res.before.insert("pool".into(), json!(current));
    res.after.insert("pool".into(), json!(wanted));
    if ctx.check_mode {
        return Ok(());
    }
    let c = ctx.client;
    if let Some(old) = current {
        c.set_pool_member(old, vmid, false)
            .map_err(|e| format!("taking VM {vmid} out of pool '{old}': {e}"))?;
    }
    if let Some(new) = wanted {
        c.set_pool_member(new, vmid, true)
            .map_err(|e| match current {
                Some(old) => {
                    format!("VM {vmid} left pool '{old}' but could not join pool '{new}': {e}")
                }
                None => format!("adding VM {vmid} to pool '{new}': {e}"),
            })?;
    }
    Ok(())
}

/// Bring an existing VM's config to the spec and report pending changes.
#[allow(clippy::too_many_arguments)]
fn converge(
    ctx: &Ctx,
    args: &VmArgs,
    node: &str,
    vmid: u32,
    mut cfg: Map<String, Value>,
    iso: Option<&str>,
    running: bool,
    res: &mut VmResult,
) -> Result<(), String> {
    let c = ctx.client;
    // Whether anything was sent: an untouched VM's config is still the one read at the start.
    let mut wrote = res.created;
    let mut attempt = 0;
    loop {
        attempt += 1;
        let spec = effective_spec(
            args,
            Some(&config_tags(&cfg)),
            config_str(&cfg, "description").as_deref(),
            iso,
        );
        let d = diff(&spec, &cfg);
        if !d.problems.is_empty() {
            return Err(format!(
                "VM {vmid} cannot be converged: {}",
                d.problems.join("; ")
            ));
        }
        record_diff(res, &d);
        if d.is_empty() {
            break;
        }
        res.changed = true;
        if ctx.check_mode {
            let hotplug = config_str(&cfg, "hotplug");
            if running
                && d.set
                    .iter()
                    .any(|(k, v)| needs_restart(k, Some(v), hotplug.as_deref()))
            {
                res.reboot_required = true;
            }
            res.config = cfg;
            return Ok(());
        }
        let params = d.config_params();
        if !params.is_empty() {
            let mut p = Params(params);
            if let Some(digest) = config_str(&cfg, "digest") {
                p.push("digest", digest);
            }
            wrote = true;
            match c.update_config(node, vmid, &p, ctx.secs(ctx.timeouts.config)) {
                Ok(t) => res.task(t),
                // Someone else changed the VM between our read and our write: read again, once.
                Err(e) if e.is_digest_mismatch() && attempt < 3 => {
                    cfg = c.vm_config(node, vmid, false).map_err(e2s)?;
                    continue;
                }
                Err(e) => return Err(format!("updating VM {vmid}: {e}")),
            }
        }
        for r in &d.resize {
            wrote = true;
            let t = c
                .resize_disk(
                    node,
                    vmid,
                    &r.disk,
                    &r.size_param(),
                    ctx.secs(ctx.timeouts.resize),
                )
                .map_err(|e| {
                    format!(
                        "growing disk {} of VM {vmid} to {}: {e}",
                        r.disk,
                        r.size_param()
                    )
                })?;
            res.task(t);
        }
        break;
    }
    if !ctx.check_mode || !res.created {
        let pending = c.vm_pending(node, vmid).map_err(e2s)?;
        res.pending_keys = pending
            .iter()
            .filter(|p| p.is_pending())
            .map(|p| p.key.clone())
            .collect();
        if !res.pending_keys.is_empty() {
            res.reboot_required = true;
        }
    }
    if res.reboot_required && args.apply_pending == "reboot" && running {
        res.changed = true;
        if !ctx.check_mode {
            wrote = true;
            let t = c
                .vm_action(
                    node,
                    vmid,
                    "reboot",
                    &Params::new(),
                    ctx.secs(ctx.timeouts.reboot),
                )
                .map_err(|e| format!("rebooting VM {vmid} to apply pending changes: {e}"))?;
            res.task(t);
            let pending = c.vm_pending(node, vmid).map_err(e2s)?;
            res.pending_keys = pending
                .iter()
                .filter(|p| p.is_pending())
                .map(|p| p.key.clone())
                .collect();
            res.reboot_required = !res.pending_keys.is_empty();
        }
    }
    res.config = if ctx.check_mode || !wrote {
        cfg
    } else {
        c.vm_config(node, vmid, false).map_err(e2s)?
    };
    Ok(())
}

fn record_diff(res: &mut VmResult, d: &ConfigDiff) {
    for k in d.changed_keys() {
        if !res.changed_keys.contains(&k) {
            res.changed_keys.push(k);
        }
    }
    res.changed_keys.sort();
    for (k, v) in &d.before {
        res.before.entry(k.clone()).or_insert_with(|| v.clone());
    }
    for (k, v) in &d.after {
        res.after.insert(k.clone(), v.clone());
    }
}

fn create(
    ctx: &Ctx,
    args: &VmArgs,
    node: &str,
    vmid: Option<u32>,
    res: &mut VmResult,
) -> Result<(), String> {
    let c = ctx.client;
    res.node = Some(node.to_string());
    res.vmid = vmid;
    res.created = true;
    res.changed = true;
    precheck_storage(ctx, args, node, res)?;
    let iso = match &args.agent_iso {
        Some(i) => Some(ensure_iso(ctx, node, i, res)?),
        None => None,
    };
    let spec = effective_spec(args, None, None, iso.as_deref());
    if let Some(cl) = &args.clone {
        return clone(ctx, args, cl, node, vmid, &spec, iso.as_deref(), res);
    }
    let params = spec.create_params()?;
    res.changed_keys
        .extend(params.iter().map(|(k, _)| k.clone()));
    res.changed_keys.sort();
    for (k, v) in &params {
        res.after.insert(k.clone(), json!(v));
    }
    if ctx.check_mode {
        // The config as it would be sent (so fixed MACs show in mac_addresses).
        res.config = res.after.clone();
        return Ok(());
    }
    let mut tries = 0;
    let vmid = loop {
        tries += 1;
        let id = match vmid {
            Some(id) if tries == 1 => id,
            _ => next_vmid(ctx, args)?,
        };
        let mut p = Params::new().set("vmid", id);
        for (k, v) in &params {
            p.push(k, v);
        }
        let p = p.opt("pool", args.new_vm_pool());
        match c.create_vm(node, &p, ctx.secs(ctx.timeouts.create)) {
            Ok(t) => {
                res.task(t);
                break id;
            }
            // Lost a race for the id (another run or tool took it meanwhile): take the next one,
            // unless the user fixed the id.
            Err(e) if e.is_already_exists() && args.spec_vmid_is_free() && tries < 5 => continue,
            Err(e) => {
                res.vmid = Some(id);
                let note = after_failure(ctx, node, id, &args.owner_tag, &e);
                return Err(format!("creating VM {id} on node '{node}': {e}{note}"));
            }
        }
    };
    res.vmid = Some(vmid);
    finish_new(ctx, node, vmid, res)
}

impl VmArgs {
    /// Whether the vmid was chosen by the module (so another may be taken after a lost race).
    fn spec_vmid_is_free(&self) -> bool {
        self.vmid.is_none()
    }
}

/// What a failed create/clone call leaves: a refused call (HTTP error, e.g. "already exists" when
/// another run holds the id) left nothing of ours, so nothing is touched; a failed task is cleaned up;
/// a timed-out task keeps running and the next run converges its VM.
fn after_failure(ctx: &Ctx, node: &str, vmid: u32, owner: &str, e: &Error) -> String {
    match e {
        Error::Task(_) => cleanup_failed(ctx, node, vmid, owner),
        Error::Timeout { .. } => format!(
            " (the task goes on in Proxmox; rerun to converge VM {vmid} once it has finished)"
        ),
        _ => String::new(),
    }
}

/// After a failed create/clone task: PVE removes the VM itself, but a VM left behind (timeout, or a
/// failure after the task) that is ours and was just created is removed, so no half-configured VM
/// stays. Returns a note for the error message.
fn cleanup_failed(ctx: &Ctx, node: &str, vmid: u32, owner: &str) -> String {
    let c = ctx.client;
    let cfg = match c.vm_config(node, vmid, false) {
        Ok(cfg) => cfg,
        Err(e) if e.is_not_found() => return String::new(),
        Err(e) => return format!(" (could not check for a leftover VM {vmid}: {e})"),
    };
    let ours = owned_config(&cfg, owner)
        || matches!(
            config_str(&cfg, "lock").as_deref(),
            Some("create") | Some("clone")
        );
    if !ours {
        return String::new();
    }
    if cfg.contains_key("lock") {
        // A task still runs; waiting then removing is the next run's job if this times out.
        if let Err(e) = c.wait_unlocked(node, vmid, Duration::from_secs(ctx.timeouts.lock)) {
            return format!(" (VM {vmid} is still locked; the next run will converge it: {e})");
        }
    }
    match c.destroy_vm(
        node,
        vmid,
        true,
        true,
        Duration::from_secs(ctx.timeouts.delete),
    ) {
        Ok(_) => format!(" (the half-created VM {vmid} was removed)"),
        Err(e) if e.is_not_found() => String::new(),
        Err(e) => format!(
            " (removing the half-created VM {vmid} failed too: {e}; the next run will converge it)"
        ),
    }
}

#[allow(clippy::too_many_arguments)]
fn clone(
    ctx: &Ctx,
    args: &VmArgs,
    cl: &CloneArgs,
    node: &str,
    vmid: Option<u32>,
    spec: &VmSpec,
    iso: Option<&str>,
    res: &mut VmResult,
) -> Result<(), String> {
    let c = ctx.client;
    let src = resolve_source(&ctx.snapshot, cl)?;
    if !cl.full && (cl.storage.is_some() || cl.format.is_some()) {
        return Err(
            "clone: storage and format apply to full clones only (set clone.full: true)".into(),
        );
    }
    res.cloned = true;
    res.changed_keys.insert(0, "clone".into());
    res.after.insert(
        "clone".into(),
        json!(format!(
            "from {} ({})",
            src.name.as_deref().unwrap_or("?"),
            src.vmid
        )),
    );
    if ctx.check_mode {
        // What the clone would then change cannot be known without the template's config in
        // detail; read it and diff against it for an honest preview.
        if let Ok(cfg) = c.vm_config(&src.node, src.vmid as u32, false) {
            let d = diff(spec, &cfg);
            record_diff(res, &d);
        }
        return Ok(());
    }
    let mut tries = 0;
    let vmid = loop {
        tries += 1;
        let id = match vmid {
            Some(id) if tries == 1 => id,
            _ => next_vmid(ctx, args)?,
        };
        let p = Params::new()
            .set("newid", id)
            .opt("name", spec.name.as_deref())
            .flag("full", cl.full)
            .opt("storage", cl.storage.as_deref())
            .opt("format", cl.format.as_deref())
            .opt("pool", args.new_vm_pool())
            .opt("target", (src.node != node).then_some(node))
            .set("description", clone_marker(&args.owner_tag));
        match c.clone_vm(&src.node, src.vmid as u32, &p, ctx.secs(ctx.timeouts.clone)) {
            Ok(t) => {
                res.task(t);
                break id;
            }
            Err(e) if e.is_already_exists() && args.vmid.is_none() && tries < 5 => continue,
            Err(e) => {
                res.vmid = Some(id);
                let note = after_failure(ctx, node, id, &args.owner_tag, &e);
                return Err(format!(
                    "cloning {} to VM {id} on node '{node}': {e}{note}",
                    label(&src)
                ));
            }
        }
    };
    res.vmid = Some(vmid);
    // Clones get random MACs and the template's hardware: converge everything now. If that fails
    // the clone is removed, so a rerun starts clean instead of finding an unowned half-VM.
    let step = c
        .wait_unlocked(node, vmid, ctx.secs(ctx.timeouts.lock))
        .map_err(e2s)
        .and_then(|cfg| converge(ctx, args, node, vmid, cfg, iso, false, res));
    if let Err(e) = step {
        let cleanup = match c.destroy_vm(node, vmid, true, true, ctx.secs(ctx.timeouts.delete)) {
            Ok(_) => " (the new clone was removed; rerun to try again)".to_string(),
            Err(e2) => format!(" (removing the new clone failed too: {e2})"),
        };
        return Err(format!("configuring the clone {vmid}: {e}{cleanup}"));
    }
    res.changed = true;
    if !res.changed_keys.contains(&"clone".to_string()) {
        res.changed_keys.insert(0, "clone".into());
    }
    Ok(())
}

fn finish_new(ctx: &Ctx, node: &str, vmid: u32, res: &mut VmResult) -> Result<(), String> {
    let c = ctx.client;
    res.config = c.vm_config(node, vmid, false).map_err(e2s)?;
    Ok(())
}

/// The next free vmid: from the range (checked with the API, skipping ids this run holds) or
/// `/cluster/nextid`.
pub fn next_vmid(ctx: &Ctx, args: &VmArgs) -> Result<u32, String> {
    let c = ctx.client;
    match &args.vmid_range {
        Some(r) => {
            let (start, end) = (r[0], r[1]);
            let mut reserved = ctx
                .reserved
                .lock()
                .map_err(|_| "internal error: lock poisoned")?;
            let mut taken: BTreeSet<u32> = ctx.snapshot.iter().map(|v| v.vmid as u32).collect();
            taken.extend(reserved.iter().copied());
            for id in pve_types::vmid_candidates(start, end, &taken) {
                if c.vmid_is_free(id).map_err(e2s)? {
                    reserved.insert(id);
                    return Ok(id);
                }
            }
            Err(format!("vmid_range [{start}, {end}] has no free vmid left"))
        }
        None => {
            let mut reserved = ctx
                .reserved
                .lock()
                .map_err(|_| "internal error: lock poisoned")?;
            let mut id = c.next_id().map_err(e2s)?;
            while reserved.contains(&id) {
                id += 1;
            }
            reserved.insert(id);
            Ok(id)
        }
    }
}

/// Storage checks before any allocation: storages exist and hold disks, requested formats are
/// possible (`qcow2` on `lvmthin` is an error here, not a silent fallback), and there is room.
fn precheck_storage(
    ctx: &Ctx,
    args: &VmArgs,
    node: &str,
    res: &mut VmResult,
) -> Result<(), String> {
    let storages = ctx.client.storages(node).map_err(e2s)?;
    let find = |name: &str, what: &str| -> Result<&StorageInfo, String> {
        let st = storages.iter().find(|s| s.storage == name).ok_or_else(|| {
            format!(
                "{what}: storage '{name}' does not exist on node '{node}' (available: {})",
                storages
                    .iter()
                    .map(|s| s.storage.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })?;
        if !st.enabled || !st.active {
            return Err(format!(
                "{what}: storage '{name}' is not active on node '{node}'"
            ));
        }
        if !st.has_content("images") {
            return Err(format!(
                "{what}: storage '{name}' does not hold VM disks (content: {})",
                st.content
            ));
        }
        Ok(st)
    };
    let check_format = |st: &StorageInfo, format: &str, what: &str| -> Result<(), String> {
        let supported: Vec<String> = match &st.formats {
            Some(f) if !f.supported.is_empty() => f.supported.clone(),
            _ => formats_for_storage_type(&st.kind)
                .map(|f| f.iter().map(|s| s.to_string()).collect())
                .unwrap_or_default(),
        };
        if !supported.is_empty() && !supported.iter().any(|s| s == format) {
            return Err(format!(
                "{what}: format '{format}' is not supported on storage '{}' (type {}; supported: {})",
                st.storage,
                st.kind,
                supported.join(", ")
            ));
        }
        Ok(())
    };
    let spec = &args.spec;
    for d in spec.disks.iter().flatten() {
        let st = find(&d.storage, &format!("disk {}", d.slot))?;
        if let Some(f) = &d.format {
            check_format(st, f, &format!("disk {}", d.slot))?;
        }
    }
    if let Some(s) = spec
        .efidisk_value()
        .and_then(|v| v.split(':').next().map(str::to_string))
    {
        find(&s, "efidisk")?;
    }
    if let Some(s) = spec
        .tpm_value()
        .and_then(|v| v.split(':').next().map(str::to_string))
    {
        find(&s, "tpm")?;
    }
    if let Some(cl) = &args.clone {
        if let Some(s) = &cl.storage {
            let st = find(s, "clone.storage")?;
            if let Some(f) = &cl.format {
                check_format(st, f, "clone.format")?;
            }
        }
    }
    // Free space: the disks a create allocates (a clone's copies are at most the spec's sizes).
    let demand = spec.storage_demand();
    for (name, bytes) in demand {
        let Some(st) = storages.iter().find(|s| s.storage == name) else {
            continue;
        };
        if st.total > 0 && bytes > st.avail {
            let msg = format!(
                "storage '{name}' on node '{node}' has {:.1} GiB free but the disks need {:.1} GiB",
                st.avail as f64 / GIB,
                bytes as f64 / GIB
            );
            if args.allow_overcommit {
                res.warnings.push(format!(
                    "{msg} (allowed by allow_overcommit; thin storage may cope)"
                ));
            } else {
                return Err(format!(
                    "{msg}; free space or set allow_overcommit: true for thin storage"
                ));
            }
        }
    }
    Ok(())
}

/// Make sure the agent ISO is on the storage (upload when missing or different), return its volid.
fn ensure_iso(ctx: &Ctx, node: &str, iso: &AgentIso, res: &mut VmResult) -> Result<String, String> {
    let c = ctx.client;
    let src: &Path = &iso.src;
    let meta =
        std::fs::metadata(src).map_err(|e| format!("agent_iso.src {}: {e}", src.display()))?;
    let sha = sha256_file(src).map_err(e2s)?;
    let filename = match &iso.filename {
        Some(f) => f.clone(),
        None => {
            // Content-addressed: a changed ISO gets a new name, so "differs" can never be missed.
            let stem = src
                .file_stem()
                .map(|s| s.to_string_lossy().to_string())
                .unwrap_or_else(|| "agent".into());
            format!("{stem}-{}.iso", &sha[..12])
        }
    };
    if !(filename.ends_with(".iso") || filename.ends_with(".img")) {
        return Err(format!(
            "agent_iso.filename '{filename}' must end with .iso or .img"
        ));
    }
    let volid = format!("{}:iso/{filename}", iso.storage);
    res.iso_volid = Some(volid.clone());
    let storages = c.storages(node).map_err(e2s)?;
    let st = storages
        .iter()
        .find(|s| s.storage == iso.storage)
        .ok_or_else(|| {
            format!(
                "agent_iso.storage '{}' does not exist on node '{node}'",
                iso.storage
            )
        })?;
    if !st.has_content("iso") {
        return Err(format!(
            "agent_iso.storage '{}' (type {}) cannot hold ISO images (content: {}); pick a file-based storage with content 'iso'",
            iso.storage, st.kind, st.content
        ));
    }
    let key_node = if st.shared {
        String::new()
    } else {
        node.to_string()
    };
    let key = (key_node, iso.storage.clone(), filename.clone());
    let mut cache = ctx
        .isos
        .lock()
        .map_err(|_| "internal error: lock poisoned")?;
    if cache.contains_key(&key) {
        return Ok(volid);
    }
    let content = c
        .storage_content(node, &iso.storage, Some("iso"))
        .map_err(e2s)?;
    let present = content.iter().find(|v| v.volid == volid);
    let same = present.is_some_and(|v| v.size == meta.len());
    if !same {
        res.changed = true;
        res.iso_uploaded = true;
        if !res.changed_keys.iter().any(|k| k == "agent_iso") {
            res.changed_keys.push("agent_iso".into());
        }
        if !ctx.check_mode {
            let t = c
                .upload_iso(
                    node,
                    &iso.storage,
                    src,
                    &filename,
                    Some(&sha),
                    ctx.secs(ctx.timeouts.upload),
                )
                .map_err(|e| format!("uploading {} to {volid}: {e}", src.display()))?;
            res.task(t);
        }
    }
    cache.insert(key, volid.clone());
    Ok(volid)
}

/// Memory (bytes) a new VM reserves: its `memory`, a clone's template's, or PVE's default 512 MiB.
pub fn requested_memory(args: &VmArgs, snapshot: &[ClusterVm]) -> u64 {
    if let Some(m) = args.spec.memory {
        return m * MIB;
    }
    if let Some(cl) = &args.clone {
        if let Ok(src) = resolve_source(snapshot, cl) {
            if src.maxmem > 0 {
                return src.maxmem;
            }
        }
    }
    512 * MIB
}

/// Sum of `maxmem` of non-template VMs per node, and this cluster's VM count per node.
pub fn node_usage(snapshot: &[ClusterVm], owner: &str) -> BTreeMap<String, (u64, u32)> {
    let mut m: BTreeMap<String, (u64, u32)> = BTreeMap::new();
    for v in snapshot.iter().filter(|v| !v.template) {
        let e = m.entry(v.node.clone()).or_default();
        e.0 += v.maxmem;
        if owned(&v.tag_list(), owner) {
            e.1 += 1;
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vm(vmid: u64, name: &str, node: &str, template: bool) -> ClusterVm {
        ClusterVm {
            vmid,
            name: Some(name.into()),
            node: node.into(),
            kind: "qemu".into(),
            status: Some("stopped".into()),
            template,
            tags: Some("proxshift;ocp".into()),
            lock: None,
            pool: None,
            maxmem: 8 << 30,
            hastate: None,
        }
    }

    #[test]
    fn identity_by_vmid_and_name() {
        let snap = vec![
            vm(100, "a", "pve1", false),
            vm(101, "b", "pve1", false),
            vm(102, "b", "pve2", false),
            vm(9000, "a", "pve1", true),
        ];
        assert_eq!(
            resolve(&snap, Some(101), Some("zzz"))
                .unwrap()
                .unwrap()
                .vmid,
            101
        );
        assert_eq!(resolve(&snap, None, Some("a")).unwrap().unwrap().vmid, 100);
        assert!(resolve(&snap, None, Some("c")).unwrap().is_none());
        let e = resolve(&snap, None, Some("b")).unwrap_err();
        assert!(e.contains("matches 2 VMs: 101 on pve1, 102 on pve2"), "{e}");
        assert!(resolve(&snap, None, None).is_err());
    }

    #[test]
    fn clone_source_prefers_the_template() {
        let snap = vec![
            vm(100, "rhcos", "pve1", false),
            vm(9000, "rhcos", "pve1", true),
        ];
        let c = CloneArgs {
            vmid: None,
            name: Some("rhcos".into()),
            full: true,
            storage: None,
            format: None,
        };
        assert_eq!(resolve_source(&snap, &c).unwrap().vmid, 9000);
        let c2 = CloneArgs {
            name: Some("nope".into()),
            ..c
        };
        assert!(resolve_source(&snap, &c2)
            .unwrap_err()
            .contains("no VM or template"));
    }

    #[test]
    fn clone_marker_counts_as_ownership_and_is_removed() {
        let cfg: Map<String, Value> = serde_json::from_value(json!({
            "description": "proxshift-clone-of-owner: ocp1", "tags": "rhcos;template"
        }))
        .unwrap();
        assert!(owned_config(&cfg, "ocp1"));
        assert!(!owned_config(&cfg, "ocp2"));
        assert_eq!(
            without_marker(Some("notes\nproxshift-clone-of-owner: ocp1")).as_deref(),
            Some("notes")
        );
        assert_eq!(without_marker(Some("plain")), None);
    }

    #[test]
    fn usage_counts_only_non_templates_and_owned() {
        let mut other = vm(103, "x", "pve2", false);
        other.tags = None;
        let snap = vec![
            vm(100, "a", "pve1", false),
            vm(9000, "t", "pve1", true),
            other,
        ];
        let u = node_usage(&snap, "proxshift");
        assert_eq!(u["pve1"], (8 << 30, 1));
        assert_eq!(u["pve2"], (8 << 30, 0));
    }
}
