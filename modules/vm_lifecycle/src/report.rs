//! What the engine reports per VM and in total, and the plain-words helpers behind its messages.

use std::net::IpAddr;

use serde::Serialize;
use serde_json::{json, Value};

use crate::backend::BackendError;
use crate::model::{Inventory, Observed, Power};

/// HA state as reported per VM.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, Default)]
pub struct Ha {
    pub managed: bool,
    pub state: Option<String>,
}

/// One VM's line in the result.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct VmReport {
    pub vmid: u32,
    pub name: String,
    pub node: String,
    /// 1-based step of the `order` plan this VM was handled in.
    pub step: usize,
    pub before: String,
    pub after: String,
    pub changed: bool,
    pub failed: bool,
    pub unreachable: bool,
    pub msg: String,
    /// Power operations sent (or, in check mode, that would be sent), in order.
    pub actions: Vec<String>,
    /// Routable guest addresses from the agent (empty when the agent is off or silent).
    pub ips: Vec<String>,
    pub status: Option<String>,
    pub qmpstatus: Option<String>,
    pub lock: Option<String>,
    pub uptime: Option<u64>,
    /// `None` when the VM could not be read.
    pub ha: Option<Ha>,
    pub owned: bool,
    pub tags: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub task_log: Vec<String>,
}

impl VmReport {
    pub(crate) fn new(vm: &Inventory, step: usize, owned: bool) -> Self {
        VmReport {
            vmid: vm.vmid,
            name: vm.name.clone(),
            node: vm.node.clone(),
            step,
            before: Power::Unknown.to_string(),
            after: Power::Unknown.to_string(),
            changed: false,
            failed: false,
            unreachable: false,
            msg: String::new(),
            actions: Vec::new(),
            ips: Vec::new(),
            status: None,
            qmpstatus: None,
            lock: None,
            uptime: None,
            ha: None,
            owned,
            tags: vm.tags.clone(),
            task_log: Vec::new(),
        }
    }

    pub(crate) fn observe(&mut self, o: &Observed) {
        self.status = Some(o.status.clone());
        self.qmpstatus = o.qmpstatus.clone();
        self.lock = o.lock.clone();
        self.uptime = Some(o.uptime);
        self.ha = Some(Ha {
            managed: o.ha_managed,
            state: o.ha_state.clone(),
        });
        self.after = o.power().to_string();
    }

    pub(crate) fn label(&self) -> String {
        crate::model::label(&self.name, self.vmid)
    }

    pub(crate) fn fail(mut self, doing: &str, e: BackendError) -> Self {
        self.failed = true;
        let who = format!("{} on node {}", self.label(), self.node);
        self.msg = match e {
            BackendError::Unreachable(detail) => {
                self.unreachable = true;
                format!(
                    "{who}: node {} is unreachable while {doing} ({detail})",
                    self.node
                )
            }
            BackendError::Task {
                exitstatus,
                log_tail,
            }
            | BackendError::AlreadyRunning {
                exitstatus,
                log_tail,
            } => {
                let why = explain_task_error(&exitstatus, &log_tail);
                let tail = if log_tail.is_empty() {
                    String::new()
                } else {
                    format!("; task log tail: {}", log_tail.join(" | "))
                };
                self.task_log = log_tail;
                format!("{who}: {doing} failed: {why}{tail}")
            }
            BackendError::Agent(m) | BackendError::Other(m) => {
                format!("{who}: {doing} failed: {m}")
            }
            BackendError::Pve(e) => format!("{who}: {doing} failed: {e}"),
        };
        self
    }
}

/// A task error in plain words; memory shortage at start is the one users most need spelt out. The
/// exit status often says only `start failed: QEMU exited with code 1`; kvm's reason is in the log.
pub fn explain_task_error(exitstatus: &str, log_tail: &[String]) -> String {
    const MEMORY: [&str; 4] = [
        "cannot allocate memory",
        "out of memory",
        "not enough memory",
        "enomem",
    ];
    let memory = std::iter::once(exitstatus)
        .chain(log_tail.iter().map(String::as_str))
        .map(str::to_ascii_lowercase)
        .any(|l| MEMORY.iter().any(|p| l.contains(p)));
    if memory {
        format!(
            "the node does not have enough free memory to start the VM ({}); stop other VMs on \
             the node, lower the VM's memory or move it to a node with more free memory",
            exitstatus.trim()
        )
    } else {
        exitstatus.trim().to_string()
    }
}

/// Keep the addresses that reach the guest from outside: no loopback, no link-local.
pub fn routable(ips: &[String]) -> Vec<String> {
    let mut out: Vec<String> = ips
        .iter()
        .filter(|s| match s.parse::<IpAddr>() {
            Ok(IpAddr::V4(a)) => !a.is_loopback() && !a.is_link_local() && !a.is_unspecified(),
            Ok(IpAddr::V6(a)) => {
                !a.is_loopback() && !a.is_unspecified() && (a.segments()[0] & 0xffc0) != 0xfe80
            }
            Err(_) => false,
        })
        .cloned()
        .collect();
    out.dedup();
    out
}

/// Totals over all VMs.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, Default)]
pub struct Totals {
    pub vms: usize,
    pub changed: usize,
    pub unchanged: usize,
    pub failed: usize,
    pub unreachable: usize,
    pub running: usize,
    pub paused: usize,
    pub stopped: usize,
}

pub fn totals(reports: &[VmReport]) -> Totals {
    let mut t = Totals {
        vms: reports.len(),
        ..Default::default()
    };
    for r in reports {
        if r.failed {
            t.failed += 1;
        } else if r.changed {
            t.changed += 1;
        } else {
            t.unchanged += 1;
        }
        if r.unreachable {
            t.unreachable += 1;
        }
        match r.after.as_str() {
            "running" => t.running += 1,
            "paused" => t.paused += 1,
            "stopped" => t.stopped += 1,
            _ => {}
        }
    }
    t
}

/// The diff a user sees with `--diff`: each VM's power state before and after.
pub fn power_diff(reports: &[VmReport]) -> (Value, Value) {
    let mut before = serde_json::Map::new();
    let mut after = serde_json::Map::new();
    for r in reports {
        before.insert(r.label(), json!(r.before));
        after.insert(r.label(), json!(r.after));
    }
    (Value::Object(before), Value::Object(after))
}
