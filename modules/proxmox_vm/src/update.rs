//! Bring a VM that exists to the spec: config (with the digest, re-read once on a race), disk
//! growth, pool membership, pending changes and the optional reboot that applies them.

use pve_client::{ClusterVm, Params};
use pve_types::{config_str, diff, needs_restart, normalize_tags, Cdrom, ConfigDiff, VmSpec};
use serde_json::{json, Map, Value};

use crate::converge::{Intent, VmResult, VmRun};
use crate::error::VmError;
use crate::identity::{config_tags, owned_config, without_marker};
use crate::options::VmArgs;

/// How often a config update is sent when someone else keeps changing the VM between our read
/// and our write (a digest mismatch): the first try and two re-reads. More would only hide a
/// writer that never stops (an HA or backup job fighting us); then the error says so.
const CONFIG_UPDATE_ATTEMPTS: u32 = 3;

/// The spec as it will be applied: ownership tag added, clone marker gone, the agent ISO in the
/// CD-ROM.
pub(crate) fn effective_spec(
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

/// Add a diff's keys and before/after values to the result (earlier `before` values win).
pub(crate) fn record_diff(res: &mut VmResult, d: &ConfigDiff) {
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

/// A hibernated VM (`qm suspend --todisk`: `lock: suspended`, its memory in `vmstate`) takes no
/// config change: qemu-server's `$update_vm_api` runs `check_lock` ("VM is locked (suspended)")
/// and only lets `delete=vmstate` through, which would throw the saved memory away. That is
/// not this module's call to make, so say how to go on instead.
fn refuse_if_hibernated(
    vmid: u32,
    cfg: &Map<String, Value>,
    d: &ConfigDiff,
) -> Result<(), VmError> {
    if config_str(cfg, "lock").as_deref() != Some("suspended") {
        return Ok(());
    }
    let state = config_str(cfg, "vmstate").unwrap_or_else(|| "its state volume".into());
    Err(VmError::Refused(format!(
        "VM {vmid} is hibernated (lock 'suspended', its memory saved in {state}): Proxmox refuses          config changes until it is resumed; start it (vm_lifecycle state: started) and rerun to          change {}",
        d.changed_keys().join(", ")
    )))
}

impl VmRun<'_, '_> {
    pub(crate) fn update_existing(&mut self, vm: &ClusterVm) -> Result<(), VmError> {
        let (c, ctx, args) = (self.client, self.ctx, self.args);
        let vmid = vm.vmid as u32;
        let cfg = self.owned_config_of(vm, Intent::Modify)?;
        let cfg = if cfg.contains_key("lock") && !ctx.check_mode {
            // A clone still copying disks (Proxmox writes its name after the first one) takes
            // as long as a clone may.
            match config_str(&cfg, "lock").as_deref() {
                // Hibernated: the lock stays until the VM is started; see `converge`.
                Some("suspended") => cfg,
                Some("clone") => c.wait_unlocked(&vm.node, vmid, ctx.secs(ctx.timeouts.clone))?,
                _ => c.wait_unlocked(&vm.node, vmid, ctx.secs(ctx.timeouts.lock))?,
            }
        } else {
            cfg
        };
        let iso = match &args.agent_iso {
            Some(i) => Some(self.ensure_iso(&vm.node, i)?),
            None => None,
        };
        let running = vm.status.as_deref() == Some("running");
        self.converge(&vm.node, vmid, cfg, iso.as_deref(), running)?;
        self.converge_pool(vm)
    }

    /// Move an existing VM into the `pool` asked for (`""`: into none). Pool membership is not part
    /// of the VM config, so it has its own API and its own entry in the diff.
    fn converge_pool(&mut self, vm: &ClusterVm) -> Result<(), VmError> {
        let Some(wanted) = self.args.pool.as_deref() else {
            return Ok(());
        };
        let wanted = (!wanted.is_empty()).then_some(wanted);
        let current = vm.pool.as_deref();
        if current == wanted {
            return Ok(());
        }
        let vmid = vm.vmid as u32;
        let res = &mut self.res;
        res.changed = true;
        res.changed_keys.push("pool".into());
        res.before.insert("pool".into(), json!(current));
        res.after.insert("pool".into(), json!(wanted));
        if self.ctx.check_mode {
            return Ok(());
        }
        let c = self.client;
        if let Some(old) = current {
            c.set_pool_member(old, vmid, false)
                .map_err(|e| VmError::step(format!("taking VM {vmid} out of pool '{old}'"), e))?;
        }
        if let Some(new) = wanted {
            c.set_pool_member(new, vmid, true).map_err(|e| {
                let doing = match current {
                    Some(old) => {
                        format!("VM {vmid} left pool '{old}' but could not join pool '{new}'")
                    }
                    None => format!("adding VM {vmid} to pool '{new}'"),
                };
                VmError::step(doing, e)
            })?;
        }
        Ok(())
    }

    /// Bring a VM's config to the spec and report pending changes.
    pub(crate) fn converge(
        &mut self,
        node: &str,
        vmid: u32,
        mut cfg: Map<String, Value>,
        iso: Option<&str>,
        running: bool,
    ) -> Result<(), VmError> {
        let (c, ctx, args) = (self.client, self.ctx, self.args);
        // Whether anything was sent: an untouched VM's config is still the one read at the start.
        let mut wrote = self.res.created;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let spec = effective_spec(
                args,
                Some(&config_tags(&cfg)),
                config_str(&cfg, "description").as_deref(),
                iso,
            );
            let mut d = diff(&spec, &cfg);
            if args.purge_unlisted_disks {
                self.purge(vmid, &spec, &cfg, &mut d)?;
            }
            if !d.problems.is_empty() {
                return Err(VmError::Refused(format!(
                    "VM {vmid} cannot be converged: {}",
                    d.problems.join("; ")
                )));
            }
            if !ctx.root_session {
                let root_only = d.root_only(&cfg);
                if !root_only.is_empty() {
                    return Err(VmError::root_only(&format!("VM {vmid}"), &root_only));
                }
            }
            record_diff(&mut self.res, &d);
            if d.is_empty() {
                break;
            }
            refuse_if_hibernated(vmid, &cfg, &d)?;
            self.res.changed = true;
            if ctx.check_mode {
                let hotplug = config_str(&cfg, "hotplug");
                let hp = hotplug.as_deref();
                let restart = d
                    .set
                    .iter()
                    .any(|(k, v)| needs_restart(k, config_str(&cfg, k).as_deref(), Some(v), hp))
                    || d.delete
                        .iter()
                        .any(|k| needs_restart(k, config_str(&cfg, k).as_deref(), None, hp));
                if running && restart {
                    self.res.reboot_required = true;
                }
                self.res.config = cfg;
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
                    Ok(t) => self.res.task(t),
                    // Someone else changed the VM between our read and our write: read again.
                    Err(e) if e.is_digest_mismatch() && attempt < CONFIG_UPDATE_ATTEMPTS => {
                        cfg = c.vm_config(node, vmid, false)?;
                        continue;
                    }
                    // qemu-server stages the whole change into [PENDING] before it hot-plugs
                    // it; a failed hot-plug fails the task and leaves the values pending
                    // (`vmconfig_hotplug_pending`). The change is then recorded: say so and
                    // let the pending report below name what waits for a restart.
                    Err(e) if running && e.is_task_failure() => {
                        cfg = c.vm_config(node, vmid, false)?;
                        if !self.recorded_despite(&e, vmid, &cfg, iso) {
                            return Err(VmError::step(format!("updating VM {vmid}"), e));
                        }
                    }
                    Err(e) => return Err(VmError::step(format!("updating VM {vmid}"), e)),
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
                        let doing =
                            format!("growing disk {} of VM {vmid} to {}", r.disk, r.size_param());
                        VmError::step(doing, e)
                    })?;
                self.res.task(t);
            }
            break;
        }
        wrote |= self.pending(node, vmid, running)?;
        self.res.config = if ctx.check_mode || !wrote {
            cfg
        } else {
            c.vm_config(node, vmid, false)?
        };
        Ok(())
    }

    /// `purge_unlisted_disks`: the disks the spec does not list go, but only from a VM that
    /// was this project's before the run (its ownership tag or clone marker), never from one
    /// being adopted now.
    fn purge(
        &self,
        vmid: u32,
        spec: &VmSpec,
        cfg: &Map<String, Value>,
        d: &mut ConfigDiff,
    ) -> Result<(), VmError> {
        let before = d.delete.len();
        pve_types::purge_unlisted_disks(spec, cfg, d);
        if d.delete.len() > before && !owned_config(cfg, &self.args.owner_tag) {
            return Err(VmError::Refused(format!(
                "purge_unlisted_disks: VM {vmid} does not carry the ownership tag '{}' yet, so its \
                 disks {} are not this project's to destroy; adopt it in a run without \
                 purge_unlisted_disks first",
                self.args.owner_tag,
                d.delete[before..].join(", ")
            )));
        }
        Ok(())
    }

    /// After a failed config task on a running VM: is the change in the VM's config after all
    /// (the pending-applied view now matches the spec)? Then it only failed to hot-plug, which
    /// a warning names; the values wait in [PENDING] for the next start.
    fn recorded_despite(
        &mut self,
        e: &pve_client::Error,
        vmid: u32,
        cfg: &Map<String, Value>,
        iso: Option<&str>,
    ) -> bool {
        let spec = effective_spec(
            self.args,
            Some(&config_tags(cfg)),
            config_str(cfg, "description").as_deref(),
            iso,
        );
        if !diff(&spec, cfg).config_params().is_empty() {
            return false;
        }
        self.res.warnings.push(format!(
            "VM {vmid}: the change is saved but could not be hot-plugged into the running VM \
             ({}); it stays pending until the VM restarts (apply_pending: reboot)",
            e.server_text().trim()
        ));
        true
    }

    /// Report the VM's pending changes and, with `apply_pending: reboot`, reboot a running VM to
    /// apply them. Returns whether the VM was rebooted (its config may then differ).
    fn pending(&mut self, node: &str, vmid: u32, running: bool) -> Result<bool, VmError> {
        let (c, ctx) = (self.client, self.ctx);
        if !ctx.check_mode || !self.res.created {
            self.read_pending(node, vmid)?;
            if !self.res.pending_keys.is_empty() {
                self.res.reboot_required = true;
            }
        }
        if !(self.res.reboot_required && self.args.apply_pending == "reboot" && running) {
            return Ok(false);
        }
        self.res.changed = true;
        if ctx.check_mode {
            return Ok(false);
        }
        let t = c
            .vm_action(
                node,
                vmid,
                "reboot",
                &Params::new(),
                ctx.secs(ctx.timeouts.reboot),
            )
            .map_err(|e| {
                VmError::step(format!("rebooting VM {vmid} to apply pending changes"), e)
            })?;
        self.res.task(t);
        self.read_pending(node, vmid)?;
        self.res.reboot_required = !self.res.pending_keys.is_empty();
        Ok(true)
    }

    fn read_pending(&mut self, node: &str, vmid: u32) -> Result<(), VmError> {
        let pending = self.client.vm_pending(node, vmid)?;
        self.res.pending_keys = pending
            .iter()
            .filter(|p| p.is_pending())
            .map(|p| p.key.clone())
            .collect();
        Ok(())
    }
}
