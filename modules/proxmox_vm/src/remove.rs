//! `state: absent`: delete a VM this project owns — never a template, a protected VM or (without
//! `force`) a running one.

use pve_client::{ClusterVm, Error, Params};
use pve_types::config_str;
use serde_json::Value;

use crate::converge::{Intent, VmRun};
use crate::error::VmError;
use crate::identity::label;

impl VmRun<'_, '_> {
    pub(crate) fn remove(&mut self, vm: &ClusterVm) -> Result<(), VmError> {
        let (c, ctx, args) = (self.client, self.ctx, self.args);
        let vmid = vm.vmid as u32;
        self.res.name = vm.name.clone().or(self.res.name.take());
        let cfg = self.owned_config_of(vm, Intent::Delete)?;
        if config_str(&cfg, "protection").as_deref() == Some("1") {
            return Err(VmError::Refused(format!(
                "{} has protection enabled; set protection: false (state: present) before deleting it",
                label(vm)
            )));
        }
        let status = c.vm_status(&vm.node, vmid)?;
        let running = status.get("status").and_then(Value::as_str) == Some("running");
        if running && !args.force {
            return Err(VmError::Refused(format!(
                "{} is running; set force: true to stop it and delete it",
                label(vm)
            )));
        }
        self.res.changed = true;
        self.res.deleted = true;
        self.res.before = cfg.clone();
        self.res.before.remove("digest");
        if ctx.check_mode {
            return Ok(());
        }
        // A hibernated VM's `suspended` lock never clears by itself, and Proxmox destroys such
        // a VM anyway (qemu-server `destroy_vm`).
        let lock = config_str(&cfg, "lock");
        if lock.is_some() && lock.as_deref() != Some("suspended") {
            c.wait_unlocked(&vm.node, vmid, ctx.secs(ctx.timeouts.lock))?;
        }
        if running {
            self.stop_for_removal(vm)?;
        }
        let t = c
            .destroy_vm(&vm.node, vmid, true, true, ctx.secs(ctx.timeouts.delete))
            .map_err(|e| VmError::step(format!("deleting {}", label(vm)), e))?;
        self.res.task(t);
        self.res.msg = format!("deleted {}", label(vm));
        Ok(())
    }

    /// Stop a VM (`force: true`) and wait until it really is stopped.
    fn stop_for_removal(&mut self, vm: &ClusterVm) -> Result<(), VmError> {
        let (c, ctx) = (self.client, self.ctx);
        let vmid = vm.vmid as u32;
        let t = c
            .vm_action(
                &vm.node,
                vmid,
                "stop",
                &Params::new(),
                ctx.secs(ctx.timeouts.stop),
            )
            .map_err(|e| VmError::step(format!("stopping {} before deleting it", label(vm)), e))?;
        self.res.task(t);
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
        .map_err(|source| VmError::StopWait {
            vm: label(vm),
            source: Box::new(source),
        })?;
        Ok(())
    }
}
