//! A VM that does not exist yet: create it from the spec, or clone it from a template and converge
//! the clone. Both claim a vmid the same way ([`VmRun::with_free_vmid`]) and both clean up what a
//! failed task left behind ([`after_failure`]).

use std::collections::BTreeSet;
use std::time::Duration;

use pve_client::{ClusterVm, Error, Params, TaskOutcome};
use pve_types::{config_str, diff, ConfigDiff, VmSpec};
use serde_json::{json, Map};

use crate::converge::{Ctx, VmRun};
use crate::error::{VmError, POISONED};
use crate::identity::{clone_marker, label, owned_config, resolve_source};
use crate::options::{CloneArgs, VmArgs};
use crate::update::{effective_spec, record_diff};

/// How many vmids a create or clone tries when Proxmox answers "already exists". Each refusal
/// means another run or tool took the id between our check and our call, which is rare; several in
/// a row mean something else fills the range (or `/cluster/nextid` is stuck), and trying more ids
/// would only hide that, so give up after a few.
const VMID_ATTEMPTS: u32 = 5;

impl VmRun<'_, '_> {
    pub(crate) fn create(&mut self, node: &str, vmid: Option<u32>) -> Result<(), VmError> {
        let (c, ctx, args) = (self.client, self.ctx, self.args);
        self.res.node = Some(node.to_string());
        self.res.vmid = vmid;
        self.res.created = true;
        self.res.changed = true;
        self.refuse_root_only()?;
        self.precheck_storage(node)?;
        let iso = match &args.agent_iso {
            Some(i) => Some(self.ensure_iso(node, i)?),
            None => None,
        };
        let spec = effective_spec(args, None, None, iso.as_deref());
        if let Some(cl) = &args.clone {
            return self.clone(cl, node, vmid, &spec, iso.as_deref());
        }
        let params = spec.create_params()?;
        self.res
            .changed_keys
            .extend(params.iter().map(|(k, _)| k.clone()));
        self.res.changed_keys.sort();
        for (k, v) in &params {
            self.res.after.insert(k.clone(), json!(v));
        }
        if ctx.check_mode {
            // The config as it would be sent (so fixed MACs show in mac_addresses).
            self.res.config = self.res.after.clone();
            return Ok(());
        }
        let (vmid, outcome) = self.with_free_vmid(vmid, ctx.secs(ctx.timeouts.create), |id| {
            let mut p = Params::new().set("vmid", id);
            for (k, v) in &params {
                p.push(k, v);
            }
            let p = p.opt("pool", args.new_vm_pool());
            c.create_vm(node, &p, ctx.secs(ctx.timeouts.create))
        })?;
        self.settle(node, vmid, outcome, || {
            format!("creating VM {vmid} on node '{node}'")
        })?;
        let cfg = c.vm_config(node, vmid, false)?;
        let imported = spec.disks.iter().flatten().any(|d| d.import_from.is_some());
        if imported {
            // An imported disk has the image's size: grow it to the spec's.
            return self.converge(node, vmid, cfg, iso.as_deref(), false);
        }
        self.res.config = cfg;
        Ok(())
    }

    /// Before anything is made: the settings Proxmox takes only from a root@pam session, when this
    /// run is not one — what a create would send, or what a clone would change on its source's
    /// config (a template that already has the device passes it on without a write).
    fn refuse_root_only(&self) -> Result<(), VmError> {
        let (c, ctx, args) = (self.client, self.ctx, self.args);
        if ctx.root_session {
            return Ok(());
        }
        let spec = effective_spec(args, None, None, None);
        let root_only = match &args.clone {
            None => {
                let d = ConfigDiff {
                    set: spec.create_params()?,
                    ..ConfigDiff::default()
                };
                d.root_only(&Map::new())
            }
            Some(cl) => {
                let src = resolve_source(&ctx.snapshot, cl)?;
                let cfg = c.vm_config(&src.node, src.vmid as u32, false)?;
                diff(&spec, &cfg).root_only(&cfg)
            }
        };
        if root_only.is_empty() {
            Ok(())
        } else {
            Err(VmError::root_only(&args.who(), &root_only))
        }
    }

    /// Call `call` with the planned vmid, or the next free one; when Proxmox says the id is taken
    /// (another run or tool won a race for it) and the user did not fix the id, take the next one,
    /// up to [`VMID_ATTEMPTS`] ids. A gateway error (the call may have made the VM behind the
    /// proxy) is not a reason to send the call again blindly: [`VmRun::made_by_this_call`] first
    /// looks for the VM (waiting up to `wait` for its task), and a VM that is ours is the call's
    /// result. Returns the id last tried and what the call answered.
    fn with_free_vmid(
        &self,
        planned: Option<u32>,
        wait: Duration,
        mut call: impl FnMut(u32) -> Result<Option<TaskOutcome>, Error>,
    ) -> Result<(u32, Result<Option<TaskOutcome>, Error>), VmError> {
        let mut tries = 0;
        // The id whose last call may have taken effect: sent again, never replaced unchecked.
        let mut unsure: Option<u32> = None;
        loop {
            tries += 1;
            let id = match (unsure, planned) {
                (Some(id), _) => id,
                (None, Some(id)) if tries == 1 => id,
                _ => next_vmid(self.ctx, self.args)?,
            };
            let answer = call(id);
            let ambiguous = match &answer {
                // After a gateway error the VM may be ours though the resend says "exists".
                Err(e) => e.is_gateway_error() || (unsure == Some(id) && e.is_already_exists()),
                Ok(_) => false,
            };
            if ambiguous && tries < VMID_ATTEMPTS {
                match self.made_by_this_call(id, wait)? {
                    Made::Ours => return Ok((id, Ok(None))),
                    Made::Nothing => {
                        unsure = Some(id);
                        continue;
                    }
                    Made::Foreign => unsure = None,
                }
            }
            match answer {
                Err(e)
                    if (e.is_already_exists() || ambiguous)
                        && self.args.vmid.is_none()
                        && tries < VMID_ATTEMPTS =>
                {
                    continue
                }
                answer => return Ok((id, answer)),
            }
        }
    }

    /// After a create or clone call to `vmid` ended in a gateway error: did it make the VM?
    /// Proxmox puts the new VM's locked config in place before its task runs (qemu-server
    /// `create_vm`: `create_and_lock_config`; `clone_vm`: the temporary file its worker writes
    /// first), and it carries the name and ownership marks this call sent once the task ends;
    /// so wait for the lock to go, then compare. No VM: the call never got through.
    fn made_by_this_call(&self, vmid: u32, wait: Duration) -> Result<Made, VmError> {
        let c = self.client;
        let doing = || format!("looking for VM {vmid} after a gateway error");
        let find = || -> Result<Option<ClusterVm>, VmError> {
            let vms = c.cluster_vms().map_err(|e| VmError::step(doing(), e))?;
            Ok(vms.into_iter().find(|v| v.vmid == vmid as u64))
        };
        let Some(vm) = find()? else {
            return Ok(Made::Nothing);
        };
        let cfg = match c.wait_unlocked(&vm.node, vmid, wait) {
            Ok(cfg) => cfg,
            // Its task failed (Proxmox removed the VM), or a clone moved it to its target node.
            Err(e) if e.is_not_found() => match find()? {
                Some(vm) => c
                    .vm_config(&vm.node, vmid, false)
                    .map_err(|e| VmError::step(doing(), e))?,
                None => return Ok(Made::Nothing),
            },
            Err(e) => return Err(VmError::step(doing(), e)),
        };
        let named = match &self.args.spec.name {
            Some(n) => config_str(&cfg, "name").as_deref() == Some(n.as_str()),
            None => true,
        };
        Ok(if named && owned_config(&cfg, &self.args.owner_tag) {
            Made::Ours
        } else {
            Made::Foreign
        })
    }

    /// Record what a create or clone call answered: its task, or the error with what the failure
    /// left behind (see [`after_failure`]).
    fn settle(
        &mut self,
        node: &str,
        vmid: u32,
        outcome: Result<Option<TaskOutcome>, Error>,
        doing: impl FnOnce() -> String,
    ) -> Result<(), VmError> {
        self.res.vmid = Some(vmid);
        match outcome {
            Ok(t) => {
                self.res.task(t);
                Ok(())
            }
            Err(e) => {
                let note = after_failure(self.ctx, node, vmid, &self.args.owner_tag, &e);
                Err(VmError::Step {
                    doing: doing(),
                    source: Box::new(e),
                    note,
                })
            }
        }
    }

    fn clone(
        &mut self,
        cl: &CloneArgs,
        node: &str,
        vmid: Option<u32>,
        spec: &VmSpec,
        iso: Option<&str>,
    ) -> Result<(), VmError> {
        let (c, ctx, args) = (self.client, self.ctx, self.args);
        let src = resolve_source(&ctx.snapshot, cl)?;
        if !cl.full && (cl.storage.is_some() || cl.format.is_some()) {
            return Err(VmError::refused(
                "clone: storage and format apply to full clones only (set clone.full: true)",
            ));
        }
        self.res.cloned = true;
        self.res.changed_keys.insert(0, "clone".into());
        self.res.after.insert(
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
                record_diff(&mut self.res, &d);
            }
            return Ok(());
        }
        let (vmid, outcome) = self.with_free_vmid(vmid, ctx.secs(ctx.timeouts.clone), |id| {
            let p = Params::new()
                .set("newid", id)
                .opt("name", spec.name.as_deref())
                .flag("full", cl.full)
                .opt("storage", cl.storage.as_deref())
                .opt("format", cl.format.as_deref())
                .opt("pool", args.new_vm_pool())
                .opt("target", (src.node != node).then_some(node))
                .set("description", clone_marker(&args.owner_tag));
            c.clone_vm(&src.node, src.vmid as u32, &p, ctx.secs(ctx.timeouts.clone))
        })?;
        self.settle(node, vmid, outcome, || {
            format!("cloning {} to VM {vmid} on node '{node}'", label(&src))
        })?;
        self.configure_clone(node, vmid, iso)?;
        self.res.changed = true;
        if !self.res.changed_keys.contains(&"clone".to_string()) {
            self.res.changed_keys.insert(0, "clone".into());
        }
        Ok(())
    }

    /// Clones get random MACs and the template's hardware: converge everything now. If that fails
    /// the clone is removed, so a rerun starts clean instead of finding an unowned half-VM.
    fn configure_clone(&mut self, node: &str, vmid: u32, iso: Option<&str>) -> Result<(), VmError> {
        let (c, ctx) = (self.client, self.ctx);
        let step = c
            .wait_unlocked(node, vmid, ctx.secs(ctx.timeouts.lock))
            .map_err(VmError::from)
            .and_then(|cfg| self.converge(node, vmid, cfg, iso, false));
        let Err(e) = step else {
            return Ok(());
        };
        let cleanup = match c.destroy_vm(node, vmid, true, true, ctx.secs(ctx.timeouts.delete)) {
            Ok(_) => " (the new clone was removed; rerun to try again)".to_string(),
            Err(e2) => format!(" (removing the new clone failed too: {e2})"),
        };
        Err(VmError::CloneConfig {
            vmid,
            source: Box::new(e),
            cleanup,
        })
    }
}

/// What a create or clone call that got a gateway error left behind (see
/// [`VmRun::made_by_this_call`]).
enum Made {
    /// No VM with the id: the call never reached Proxmox (or its task failed).
    Nothing,
    /// The VM the call was to make: its name and ownership marks.
    Ours,
    /// Another VM took the id.
    Foreign,
}

/// The next free vmid: from the range (checked with the API, skipping ids this run holds) or
/// `/cluster/nextid`.
pub fn next_vmid(ctx: &Ctx, args: &VmArgs) -> Result<u32, VmError> {
    let c = ctx.client;
    let mut reserved = ctx.reserved.lock().map_err(|_| POISONED)?;
    match args.vmid_range {
        Some(r) => {
            // Containers' VMIDs are taken too (one VMID space).
            let mut taken: BTreeSet<u32> = ctx
                .snapshot
                .iter()
                .chain(&ctx.containers)
                .map(|v| v.vmid as u32)
                .collect();
            taken.extend(reserved.iter().copied());
            for id in pve_types::vmid_candidates(r.start, r.end, &taken) {
                if c.vmid_is_free(id)? {
                    reserved.insert(id);
                    return Ok(id);
                }
            }
            Err(VmError::Refused(format!(
                "vmid_range [{}, {}] has no free vmid left",
                r.start, r.end
            )))
        }
        None => {
            let mut id = c.next_id()?;
            while reserved.contains(&id) {
                id += 1;
            }
            reserved.insert(id);
            Ok(id)
        }
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
    let cfg = if cfg.contains_key("lock") {
        // A task still runs; waiting then removing is the next run's job if this times out.
        match c.wait_unlocked(node, vmid, ctx.secs(ctx.timeouts.lock)) {
            Ok(cfg) => cfg,
            Err(e) => {
                return format!(" (VM {vmid} is still locked; the next run will converge it: {e})")
            }
        }
    } else {
        cfg
    };
    // A locked VM at this id need not be ours: Proxmox removed ours when its task failed, and another
    // run may be creating its own VM at the freed id. Only a VM carrying our ownership tag is destroyed.
    if !owned_config(&cfg, owner) {
        return format!(
            " (VM {vmid} now at that id does not carry the ownership tag '{owner}': another run's, left alone)"
        );
    }
    match c.destroy_vm(node, vmid, true, true, ctx.secs(ctx.timeouts.delete)) {
        Ok(_) => format!(" (the half-created VM {vmid} was removed)"),
        Err(e) if e.is_not_found() => String::new(),
        Err(e) => format!(
            " (removing the half-created VM {vmid} failed too: {e}; the next run will converge it)"
        ),
    }
}
