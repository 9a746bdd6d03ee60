//! `POST /nodes/{node}/qemu/{vmid}/template` — qemu-server's `template`: a stopped, unlocked
//! VM becomes a template in the `qmtemplate` worker.

use crate::auth::Principal;
use crate::error::{ErrorReply, ReplyResult};
use crate::sim::{Sim, Spawn};
use crate::tasks::{base_duration, Action, TaskResult};

const RUNNING: &str = "you can't convert a VM to template if VM is running";
const ALREADY: &str = "you can't convert a template to a template";

/// Checks the request and starts the `qmtemplate` worker; returns its UPID.
pub fn start(sim: &mut Sim, who: &Principal, node: String, vmid: u32) -> ReplyResult<String> {
    let vm = sim.vm(&node, vmid)?.clone();
    Sim::check_lock(&vm, false)?;
    if vm.is_template() {
        return Err(ErrorReply::die(ALREADY));
    }
    if vm.running() {
        return Err(ErrorReply::die(RUNNING));
    }
    Ok(sim.spawn(
        who,
        Spawn {
            node,
            kind: "qmtemplate".to_string(),
            id: vmid.to_string(),
            action: Action::Template { vmid },
            base_secs: base_duration("qmtemplate"),
            flock: Some(vmid),
            fail: None,
        },
    ))
}

/// The `qmtemplate` worker (the VM may have changed since the request).
pub fn finish(sim: &mut Sim, vmid: u32) -> TaskResult {
    let vm = sim.vms.get_mut(&vmid).ok_or("VM vanished")?;
    if vm.running() {
        return Err(RUNNING.into());
    }
    if vm.is_template() {
        return Err(ALREADY.into());
    }
    vm.conf.insert("template".into(), "1".into());
    Ok(0)
}
