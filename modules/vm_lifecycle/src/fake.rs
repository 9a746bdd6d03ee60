//! A scripted Proxmox for unit tests: power states per VM, failures to inject, HA lag, a guest agent
//! that comes up late, and a log of every request sent.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use crate::engine::{Backend, BackendError};
use crate::model::{Inventory, Observed, Op};

/// A scripted Proxmox: power states per VM, failures to inject, and a log of what was sent.
#[derive(Default)]
pub struct Fake {
    pub inventory: Vec<Inventory>,
    pub vms: Mutex<HashMap<u32, Observed>>,
    pub sent: Mutex<Vec<(u32, String)>>,
    pub unreachable_nodes: Vec<String>,
    pub fail_task: HashMap<u32, String>,
    /// Fail only this endpoint of this VM.
    pub fail_endpoint: HashMap<(u32, &'static str), String>,
    /// HA VMs reach their state only after this many extra status reads.
    pub ha_lag: Mutex<HashMap<u32, (usize, Observed)>>,
    /// Guest agent answers after this many calls, with these addresses.
    pub agent_after: Mutex<HashMap<u32, (usize, Vec<String>)>>,
    /// Every power and agent request as it began and ended, in the order the fake saw them: what
    /// overlapped and what came after what, without looking at a clock.
    pub calls: Mutex<Vec<Call>>,
    /// How long a power request takes, so parallel requests overlap in the call log.
    pub op_delay: Duration,
    /// The node each power request was sent to.
    pub nodes_used: Mutex<Vec<String>>,
}

/// One entry of the fake's call log: a request to a VM (`vmid`, endpoint) began or ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    Begin(u32, &'static str),
    End(u32, &'static str),
}

/// One VM of the cluster listing.
pub fn inventory(vmid: u32, name: &str, node: &str, tags: &[&str]) -> Inventory {
    Inventory {
        vmid,
        name: name.into(),
        node: node.into(),
        tags: tags.iter().map(|t| t.to_string()).collect(),
        template: false,
        status: String::new(),
        container: false,
    }
}

pub fn running(agent: bool) -> Observed {
    Observed {
        status: "running".into(),
        qmpstatus: Some("running".into()),
        uptime: 100,
        agent,
        ..Default::default()
    }
}
pub fn stopped(agent: bool) -> Observed {
    Observed {
        status: "stopped".into(),
        qmpstatus: Some("stopped".into()),
        agent,
        ..Default::default()
    }
}
pub fn paused() -> Observed {
    Observed {
        status: "running".into(),
        qmpstatus: Some("paused".into()),
        ..Default::default()
    }
}

impl Fake {
    pub fn with(vms: &[(u32, Observed)]) -> Self {
        Fake {
            vms: Mutex::new(vms.iter().cloned().collect()),
            ..Default::default()
        }
    }
    pub fn sent(&self) -> Vec<(u32, String)> {
        self.sent.lock().unwrap().clone()
    }
    pub fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }
    /// The most requests that were in flight at once, by the call log.
    pub fn max_in_flight(&self) -> usize {
        let (mut now, mut max) = (0usize, 0usize);
        for c in self.calls() {
            match c {
                Call::Begin(..) => {
                    now += 1;
                    max = max.max(now);
                }
                Call::End(..) => now -= 1,
            }
        }
        max
    }
    fn log(&self, c: Call) {
        self.calls.lock().unwrap().push(c);
    }
    fn check_node(&self, node: &str) -> Result<(), BackendError> {
        if self.unreachable_nodes.iter().any(|n| n == node) {
            return Err(BackendError::Unreachable(
                "595 Errors during connection establishment, proxy handshake: No route to host"
                    .into(),
            ));
        }
        Ok(())
    }
}

impl Backend for Fake {
    fn inventory(&self) -> Result<Vec<Inventory>, BackendError> {
        Ok(self.inventory.clone())
    }
    fn status(&self, node: &str, vmid: u32) -> Result<Observed, BackendError> {
        self.check_node(node)?;
        let mut lag = self.ha_lag.lock().unwrap();
        if let Some((n, target)) = lag.get_mut(&vmid) {
            if *n == 0 {
                let t = target.clone();
                lag.remove(&vmid);
                self.vms.lock().unwrap().insert(vmid, t);
            } else {
                *n -= 1;
            }
        }
        Ok(self.vms.lock().unwrap()[&vmid].clone())
    }
    fn power(&self, node: &str, vmid: u32, op: &Op, _t: Duration) -> Result<(), BackendError> {
        self.check_node(node)?;
        self.log(Call::Begin(vmid, op.endpoint()));
        std::thread::sleep(self.op_delay);
        self.log(Call::End(vmid, op.endpoint()));
        self.sent.lock().unwrap().push((vmid, op.endpoint().into()));
        self.nodes_used.lock().unwrap().push(node.to_string());
        if let Some(e) = self
            .fail_task
            .get(&vmid)
            .or_else(|| self.fail_endpoint.get(&(vmid, op.endpoint())))
        {
            // Sorted by the real backend's classification, as a failed task from Proxmox would be.
            return Err(crate::pve::classify(pve_client::Error::Task(
                pve_client::TaskError {
                    upid: format!("UPID:{node}:fake:{vmid}"),
                    node: node.to_string(),
                    kind: format!("qm{}", op.endpoint()),
                    exitstatus: e.clone(),
                    log_tail: vec!["starting".into(), format!("TASK ERROR: {e}")],
                },
            )));
        }
        let mut vms = self.vms.lock().unwrap();
        let cur = vms[&vmid].clone();
        let next = match op {
            Op::Start | Op::Resume | Op::Reboot { .. } | Op::Reset => running(cur.agent),
            Op::Shutdown { .. } | Op::Stop => stopped(cur.agent),
            Op::Suspend => paused(),
        };
        let next = Observed {
            ha_managed: cur.ha_managed,
            ..next
        };
        if cur.ha_managed {
            // The HA manager acts later: the status stays as it is for a few reads.
            self.ha_lag.lock().unwrap().insert(vmid, (3, next));
        } else {
            vms.insert(vmid, next);
        }
        Ok(())
    }
    fn wait_unlocked(&self, _n: &str, vmid: u32, _t: Duration) -> Result<(), BackendError> {
        self.sent
            .lock()
            .unwrap()
            .push((vmid, "wait_unlocked".into()));
        Ok(())
    }
    fn guest_ips(&self, _n: &str, vmid: u32) -> Result<Vec<String>, BackendError> {
        self.log(Call::Begin(vmid, "guest_ips"));
        self.log(Call::End(vmid, "guest_ips"));
        let mut a = self.agent_after.lock().unwrap();
        match a.get_mut(&vmid) {
            Some((0, ips)) => Ok(ips.clone()),
            Some((n, _)) => {
                *n -= 1;
                Err(BackendError::Agent(
                    "QEMU guest agent is not running".into(),
                ))
            }
            None => Err(BackendError::Agent(
                "QEMU guest agent is not running".into(),
            )),
        }
    }
}
