//! One module per API operation, each holding what qemu-server checks before it answers
//! (`start`/`apply`: validation, then a worker task or a direct change) and what the worker
//! does when it finishes (`finish`: the effect). Handlers only route and parse parameters.
//!
//! Where PVE 8 and PVE 9 differ, the operation matches on `sim.version.generation()` in its
//! own module, so each difference lives next to the behaviour it changes.

pub mod clone;
pub mod config;
pub mod create;
pub mod create_ct;
pub mod destroy;
pub mod hibernate;
pub mod hotplug;
pub mod power;
pub mod resize;
pub mod snapshot;
pub mod storage;
pub mod template;
pub mod upload;
pub mod volume;
pub mod vzdump;

use std::collections::BTreeMap;

use crate::auth::Principal;
use crate::config_perm::{self, Change, Need};
use crate::error::{ErrorReply, ReplyResult};
use crate::model::{memory_mib, RunState, Vm};
use crate::sim::{PveVersion, Sim};
use crate::vmconfig::{
    alloc_request, cloudinit_request, is_cdrom, is_drive_key, is_net_key, normalize_tags,
    parse_drive, split_volid,
};

/// The ACL path of a VM.
pub fn vm_path(vmid: u32) -> String {
    format!("/vms/{vmid}")
}

/// `skiplock` is root's privilege: qemu-server `raise_param_exc({ skiplock => "Only root may use
/// this option." }) if $skiplock && $authuser ne 'root@pam'` (a 400; root's tokens are refused too).
pub fn skiplock_allowed(who: &Principal, requested: bool) -> ReplyResult<bool> {
    if requested && !who.is_root_session() {
        return Err(ErrorReply::param(
            "skiplock",
            "Only root may use this option.",
        ));
    }
    Ok(requested)
}

/// What changing config `key` needs ([`config_perm::needs`]), checked against the caller's ACLs;
/// upstream's refusal (a 500, or a 400 naming the key) when only root may.
pub fn require_config_key(
    sim: &Sim,
    who: &Principal,
    vmid: u32,
    key: &str,
    (new, old): (Option<&str>, Option<&str>),
    change: Change,
) -> ReplyResult<()> {
    for need in config_perm::needs(key, new, old, change, who.is_root_session()) {
        match need {
            Need::Vm { privs, any } => sim.access.require(who, &vm_path(vmid), privs, any)?,
            Need::Path { path, privilege } => {
                sim.access.require(who, &path, &[privilege], false)?
            }
            Need::Root(m) | Need::Invalid(m) => return Err(ErrorReply::die(m)),
            Need::RootParam(m) => return Err(ErrorReply::param(key, m)),
        }
    }
    Ok(())
}

/// A `digest` given with the request must match the VM's current config.
///
/// qemu-server `PVE/API2/Qemu.pm`, `$update_vm_api` (config PUT/POST) and `resize_vm`:
/// `die "checksum mismatch (file change by other user?)\n" if $digest && $digest ne
/// $conf->{digest}`. Up to qemu-server 8.2.4 the text read "checksum missmatch"; commit
/// be8c868f ("fix typos in user-visible strings") fixed it in 8.2.5 (2024-10-24), and
/// pve-manager 8.2.8 (the same day) is the first release that shipped with it. (Other
/// operations use `PVE::Tools::assert_if_modified`: "detected modified configuration - file
/// changed by other user? Try again.", unchanged in both releases.)
pub fn check_digest(sim: &Sim, vm: &Vm, digest: Option<&str>) -> ReplyResult<()> {
    if let Some(d) = digest {
        if d != sim.digest(vm) {
            return Err(ErrorReply::die(digest_mismatch_text(sim.version)));
        }
    }
    Ok(())
}

/// The `die` text of a failed digest check in `$update_vm_api`/`resize_vm` (see [`check_digest`]).
pub fn digest_mismatch_text(version: PveVersion) -> &'static str {
    if version.at_least(8, 2, 8) {
        "checksum mismatch (file change by other user?)"
    } else {
        "checksum missmatch (file change by other user?)"
    }
}

/// Shared normalisation and synchronous checks for create and config updates.
/// `creating`: volume existence is then checked by the create task (a task error), as
/// qemu-server does.
pub fn normalise(
    sim: &Sim,
    who: &Principal,
    node: &str,
    vmid: u32,
    keys: &mut BTreeMap<String, String>,
    creating: bool,
) -> ReplyResult<()> {
    let mut errors = BTreeMap::new();
    for (k, v) in keys.iter_mut() {
        if is_net_key(k) {
            *v = sim.normalize_net(v);
        } else if k == "tags" {
            *v = normalize_tags(v);
        } else if is_drive_key(k) {
            if let Some(e) = check_drive(sim, who, node, vmid, k, v, creating)? {
                errors.insert(k.clone(), e);
            }
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ErrorReply::params(errors))
    }
}

/// One drive of a create or update: a new volume needs its storage and the right to allocate
/// on it; an existing one must exist (and belong to this VM). `Ok(Some(_))` is a parameter error.
fn check_drive(
    sim: &Sim,
    who: &Principal,
    node: &str,
    vmid: u32,
    key: &str,
    value: &str,
    creating: bool,
) -> ReplyResult<Option<String>> {
    let d = parse_drive(key, value);
    let file = d.get("file").unwrap_or_default().to_string();
    if let Some(src) = d.get("import-from") {
        if let Some(e) = check_import_from(sim, node, &file, src) {
            return Ok(Some(e));
        }
    }
    let request = alloc_request(&file)
        .map(|(sid, _)| sid)
        .or_else(|| cloudinit_request(&file));
    if let Some(sid) = request {
        if sim.storage(node, sid).is_none() {
            return Err(ErrorReply::die(format!("storage '{sid}' does not exist")));
        }
        sim.access.require(
            who,
            &format!("/storage/{sid}"),
            &["Datastore.AllocateSpace"],
            false,
        )?;
    } else if creating {
        // Checked by the qmcreate task.
    } else if is_cdrom(&d) {
        if file != "none" && file != "cdrom" && !sim.volume_exists(node, &file) {
            return Err(ErrorReply::die(format!("volume {file} does not exist")));
        }
    } else if let Some((sid, name)) = split_volid(&file) {
        // Attaching an existing volume: it must exist and belong to this VM.
        let owned = sim
            .storage(node, sid)
            .and_then(|s| s.volumes.get(name))
            .map(|v| v.vmid == Some(vmid) || v.vmid.is_none());
        if owned != Some(true) {
            return Ok(Some(format!("volume {file} does not exist")));
        }
    }
    Ok(None)
}

/// `import-from` (qemu-server `PVE/API2/Qemu.pm`, `$check_drive_param` and
/// `$check_storage_access`): only with the `<storage>:0` form, and from a volume of type
/// `images` or `import`. A missing source is found by the worker (`$import_from_volid`: "could
/// not get size of …", see `Sim::allocate`). The same in PVE 8 and PVE 9.
fn check_import_from(sim: &Sim, node: &str, file: &str, src: &str) -> Option<String> {
    if alloc_request(file).map(|(_, size)| size) != Some(0.0) {
        return Some(
            "'import-from' requires special syntax - use <storage ID>:0,import-from=<source>"
                .into(),
        );
    }
    let (sid, name) = split_volid(src)?;
    let vtype = sim
        .storage(node, sid)
        .and_then(|s| s.volumes.get(name))
        .map(|v| v.content.clone())
        .unwrap_or_else(|| {
            // Not there (yet): the type is what the name says, as `parse_volname` reads it.
            match name.split('/').next() {
                Some("iso") => "iso".into(),
                Some("import") => "import".into(),
                _ => "images".into(),
            }
        });
    (vtype != "images" && vtype != "import")
        .then(|| format!("{src} has wrong type '{vtype}' - needs to be 'images' or 'import'"))
}

pub fn check_balloon(conf: &BTreeMap<String, String>) -> ReplyResult<()> {
    if let Some(b) = conf.get("balloon").and_then(|b| b.parse::<u64>().ok()) {
        if b > memory_mib(conf.get("memory").map(String::as_str)) {
            return Err(ErrorReply::die(
                "balloon value too large (must be smaller than assigned memory)",
            ));
        }
    }
    Ok(())
}

/// The `pool` of a create or clone, which must exist.
pub fn existing_pool(sim: &Sim, pool: Option<String>) -> ReplyResult<Option<String>> {
    match pool {
        Some(p) if !sim.pools.contains_key(&p) => {
            Err(ErrorReply::die(format!("pool '{p}' does not exist")))
        }
        other => Ok(other),
    }
}

/// The placeholder a create or clone puts in place at once (config `lock: <lock>`), so the
/// vmid is taken while the worker runs; `staged` is what the worker will write.
pub fn placeholder_vm(
    vmid: u32,
    node: String,
    lock: &str,
    staged: BTreeMap<String, String>,
    agent_delay: Option<f64>,
) -> Vm {
    let mut conf = BTreeMap::new();
    conf.insert("lock".to_string(), lock.to_string());
    Vm {
        vmid,
        node,
        conf,
        pending: BTreeMap::new(),
        pending_delete: BTreeMap::new(),
        staged,
        state: RunState::Stopped,
        started_at: None,
        agent_ready_at: None,
        agent_delay,
        agent_ips: BTreeMap::new(),
        ignore_shutdown: false,
        ha: false,
        flock_until: None,
        snapshots: BTreeMap::new(),
        pid: 0,
    }
}
