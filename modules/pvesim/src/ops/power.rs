//! `POST /nodes/{node}/qemu/{vmid}/status/{action}` — qemu-server's `vm_start`, `vm_stop`,
//! `vm_shutdown`, `vm_reboot`, `vm_reset`, `vm_suspend`, `vm_resume` (and the HA manager's
//! request when the VM is HA-managed): state and lock checks, then the worker's effect.

use std::time::Duration;

use crate::auth::Principal;
use crate::error::{locked, ErrorReply, ReplyResult};
use crate::model::{memory_mib, RunState, Vm};
use crate::sim::{Sim, Spawn};
use crate::tasks::{base_duration, Action, TaskResult};

use super::skiplock_allowed;

/// A power request as parsed by the handler.
pub struct PowerAction {
    pub node: String,
    pub vmid: u32,
    /// `start`, `stop`, `shutdown`, `reboot`, `reset`, `suspend` or `resume`.
    pub action: String,
    pub skiplock: bool,
    /// `forceStop` (shutdown).
    pub force_stop: bool,
    /// `timeout` (shutdown), seconds.
    pub timeout: Option<u64>,
    /// `todisk` (suspend).
    pub todisk: bool,
}

const PAUSED: &str = "VM is paused - cannot shutdown";
const POWERDOWN_TIMEOUT: &str = "VM quit/powerdown failed - got timeout";

/// Checks the request and starts the worker; returns its UPID.
pub fn start(sim: &mut Sim, who: &Principal, req: PowerAction) -> ReplyResult<String> {
    let skip = skiplock_allowed(who, req.skiplock)?;
    let vm = sim.vm(&req.node, req.vmid)?.clone();
    let (kind, action, secs) = match req.action.as_str() {
        "start" => start_task(&vm),
        "stop" => {
            if !skip && vm.lock().is_some() {
                Sim::check_lock(&vm, false)?;
            }
            stop_task(&vm)
        }
        "shutdown" => shutdown_task(&vm, &req, skip)?,
        "reboot" | "reset" | "suspend" | "resume" => running_vm_task(&vm, &req, skip)?,
        other => {
            return Err(ErrorReply::not_implemented(format!(
                "Method 'POST /nodes/{}/qemu/{}/status/{other}' not implemented",
                req.node, req.vmid
            )))
        }
    };
    Ok(sim.spawn(
        who,
        Spawn {
            node: req.node,
            kind: kind.to_string(),
            id: req.vmid.to_string(),
            action,
            base_secs: secs,
            flock: Some(req.vmid),
            fail: None,
        },
    ))
}

/// Task type, action and duration of a worker.
type Task = (&'static str, Action, f64);

fn start_task(vm: &Vm) -> Task {
    let vmid = vm.vmid;
    if vm.ha {
        let start = true;
        (
            "hastart",
            Action::Ha { vmid, start },
            base_duration("hastart"),
        )
    } else {
        ("qmstart", Action::Start { vmid }, base_duration("qmstart"))
    }
}

fn stop_task(vm: &Vm) -> Task {
    let vmid = vm.vmid;
    if vm.ha {
        let start = false;
        (
            "hastop",
            Action::Ha { vmid, start },
            base_duration("hastop"),
        )
    } else {
        ("qmstop", Action::Stop { vmid }, base_duration("qmstop"))
    }
}

fn shutdown_task(vm: &Vm, req: &PowerAction, skip: bool) -> ReplyResult<Task> {
    let (vmid, force) = (vm.vmid, req.force_stop);
    if vm.state == RunState::Paused && !force {
        return Err(ErrorReply::die(PAUSED));
    }
    Sim::check_lock(vm, skip)?;
    // A guest that ignores ACPI keeps the task running until the timeout.
    let secs = if vm.ignore_shutdown && vm.running() {
        req.timeout.unwrap_or(60) as f64
    } else {
        base_duration("qmshutdown")
    };
    if vm.ha {
        Ok(stop_task(vm))
    } else {
        Ok(("qmshutdown", Action::Shutdown { vmid, force }, secs))
    }
}

/// reboot, reset, suspend, resume: only on a running VM.
fn running_vm_task(vm: &Vm, req: &PowerAction, skip: bool) -> ReplyResult<Task> {
    let vmid = vm.vmid;
    let action = req.action.as_str();
    if !vm.running() {
        return Err(ErrorReply::die(format!("VM {vmid} not running")));
    }
    if action == "reboot" && vm.state == RunState::Paused {
        return Err(ErrorReply::die(PAUSED));
    }
    if action != "resume" {
        Sim::check_lock(vm, skip)?;
    }
    Ok(match action {
        "reboot" => (
            "qmreboot",
            Action::Reboot { vmid },
            base_duration("qmreboot"),
        ),
        "reset" => ("qmreset", Action::Reset { vmid }, base_duration("qmreset")),
        "suspend" => {
            let todisk = req.todisk;
            let kind = if todisk { "qmsuspend" } else { "qmpause" };
            (kind, Action::Pause { vmid, todisk }, base_duration(kind))
        }
        _ => (
            "qmresume",
            Action::Resume { vmid },
            base_duration("qmresume"),
        ),
    })
}

// -- effects ------------------------------------------------------------------

fn agent_delay_of(sim: &Sim, vmid: u32) -> Duration {
    let base = sim
        .vms
        .get(&vmid)
        .and_then(|v| v.agent_delay)
        .unwrap_or(sim.opts.agent_delay);
    sim.scaled(base)
}

pub fn power_off(sim: &mut Sim, vmid: u32) {
    if let Some(vm) = sim.vms.get_mut(&vmid) {
        vm.state = RunState::Stopped;
        vm.started_at = None;
        vm.agent_ready_at = None;
        vm.pid = 0;
    }
}

/// Starts a VM: lock, template and node memory checks, pending changes applied, the guest
/// agent up after its delay.
pub fn start_vm(sim: &mut Sim, vmid: u32, log: &mut Vec<String>) -> TaskResult {
    let vm = sim.vms.get(&vmid).ok_or("VM vanished")?;
    if vm.running() {
        return Err(format!("VM {vmid} already running").into());
    }
    match vm.lock() {
        Some("suspended") | None => {}
        Some(l) => return Err(locked(l).into()),
    }
    if vm.is_template() {
        return Err("you can't start a vm if it's a template".into());
    }
    let node = vm.node.clone();
    let want = vm.effective_conf();
    let want_mib = memory_mib(want.get("memory").map(String::as_str));
    if sim.opts.check_memory_on_start {
        let used: u64 = sim
            .vms
            .values()
            .filter(|v| v.node == node && v.running())
            .map(|v| v.memory_mib() << 20)
            .sum();
        let maxmem = sim.nodes.get(&node).map(|n| n.maxmem).unwrap_or(0);
        if used + (want_mib << 20) > maxmem {
            log.push("kvm: cannot set up guest memory 'pc.ram': Cannot allocate memory".into());
            return Err("start failed: QEMU exited with code 1".into());
        }
    }
    // Starting applies everything; no hot-plug is involved, so no key can fail.
    super::config::apply_pending(sim, vmid, true, log)?;
    let delay = agent_delay_of(sim, vmid);
    let pid = sim.alloc_pid();
    let now = sim.effect_now();
    let vm = sim.vms.get_mut(&vmid).ok_or("VM vanished")?;
    let resumed = vm.lock() == Some("suspended") || vm.conf.contains_key("vmstate");
    if resumed {
        log.push("Resuming suspended VM".into());
        log.push("Resumed VM, removing state".into());
    }
    vm.state = RunState::Running;
    vm.started_at = Some(now);
    vm.agent_ready_at = Some(now + delay);
    vm.pid = pid;
    if resumed {
        super::hibernate::remove_state(sim, vmid);
    }
    Ok(0)
}

pub fn finish_shutdown(sim: &mut Sim, vmid: u32, force: bool, log: &mut Vec<String>) -> TaskResult {
    let vm = sim.vms.get(&vmid).ok_or("VM vanished")?;
    if !vm.running() {
        return Ok(0);
    }
    if vm.ignore_shutdown {
        if !force {
            return Err(POWERDOWN_TIMEOUT.into());
        }
        log.push("VM still running - terminating now with SIGTERM".into());
    }
    power_off(sim, vmid);
    Ok(0)
}

pub fn finish_reboot(sim: &mut Sim, vmid: u32, log: &mut Vec<String>) -> TaskResult {
    let vm = sim.vms.get(&vmid).ok_or("VM vanished")?;
    if vm.ignore_shutdown {
        return Err(POWERDOWN_TIMEOUT.into());
    }
    power_off(sim, vmid);
    start_vm(sim, vmid, log)
}

/// A reset restarts the guest: its agent is gone until it has booted again.
pub fn finish_reset(sim: &mut Sim, vmid: u32) -> TaskResult {
    let delay = agent_delay_of(sim, vmid);
    let now = sim.effect_now();
    let vm = sim.vms.get_mut(&vmid).ok_or("VM vanished")?;
    vm.agent_ready_at = Some(now + delay);
    Ok(0)
}

/// `todisk`: hibernate (see `ops::hibernate`); otherwise pause in memory.
pub fn finish_pause(sim: &mut Sim, vmid: u32, todisk: bool) -> TaskResult {
    if todisk {
        super::hibernate::suspend_to_disk(sim, vmid)?;
    } else {
        let vm = sim.vms.get_mut(&vmid).ok_or("VM vanished")?;
        vm.state = RunState::Paused;
    }
    Ok(0)
}

pub fn finish_resume(sim: &mut Sim, vmid: u32) -> TaskResult {
    let vm = sim.vms.get_mut(&vmid).ok_or("VM vanished")?;
    if vm.state == RunState::Paused {
        vm.state = RunState::Running;
    }
    Ok(0)
}

/// An HA request: the HA manager starts or stops the VM (a start that fails is retried by
/// the manager, not reported by the task).
pub fn finish_ha(sim: &mut Sim, vmid: u32, start: bool, log: &mut Vec<String>) -> TaskResult {
    log.push(format!(
        "Requesting HA {} for VM {vmid}",
        if start { "start" } else { "stop" }
    ));
    // qemu-server's `vm_start`/`vm_stop` on an HA resource run `ha-manager set --state`:
    // the requested state changes with the VM.
    if let Some(r) = sim.ha.resources.get_mut(&vmid) {
        r.state = if start {
            crate::ha::Requested::Started
        } else {
            crate::ha::Requested::Stopped
        };
        r.service = if start {
            crate::ha::ServiceState::Started
        } else {
            crate::ha::ServiceState::Stopped
        };
    }
    if start {
        let mut l = Vec::new();
        if sim.vms.get(&vmid).map(|v| !v.running()).unwrap_or(false) {
            let _ = start_vm(sim, vmid, &mut l);
        }
    } else {
        power_off(sim, vmid);
    }
    Ok(0)
}
