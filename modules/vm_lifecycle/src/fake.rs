//! A scripted Proxmox for unit tests: power states per VM, failures to inject, HA lag, a guest agent
//! that comes up late, and a log of every request sent.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use crate::engine::{ApiError, Backend};
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
    pub active: AtomicUsize,
    pub max_active: AtomicUsize,
    pub op_delay: Duration,
    /// The node each power request was sent to.
    pub nodes_used: Mutex<Vec<String>>,
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
    fn check_node(&self, node: &str) -> Result<(), ApiError> {
        if self.unreachable_nodes.iter().any(|n| n == node) {
            return Err(ApiError::Unreachable(
                "595 Errors during connection establishment, proxy handshake: No route to host"
                    .into(),
            ));
        }
        Ok(())
    }
}

impl Backend for Fake {
    fn inventory(&self) -> Result<Vec<Inventory>, ApiError> {
        Ok(self.inventory.clone())
    }
    fn status(&self, node: &str, vmid: u32) -> Result<Observed, ApiError> {
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
    fn power(&self, node: &str, vmid: u32, op: &Op, _t: Duration) -> Result<(), ApiError> {
        self.check_node(node)?;
        let now = self.active.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_active.fetch_max(now, Ordering::SeqCst);
        std::thread::sleep(self.op_delay);
        self.active.fetch_sub(1, Ordering::SeqCst);
        self.sent.lock().unwrap().push((vmid, op.endpoint().into()));
        self.nodes_used.lock().unwrap().push(node.to_string());
        if let Some(e) = self
            .fail_task
            .get(&vmid)
            .or_else(|| self.fail_endpoint.get(&(vmid, op.endpoint())))
        {
            return Err(ApiError::Task {
                exitstatus: e.clone(),
                log_tail: vec!["starting".into(), format!("TASK ERROR: {e}")],
            });
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
    fn wait_unlocked(&self, _n: &str, vmid: u32, _t: Duration) -> Result<(), ApiError> {
        self.sent
            .lock()
            .unwrap()
            .push((vmid, "wait_unlocked".into()));
        Ok(())
    }
    fn guest_ips(&self, _n: &str, vmid: u32) -> Result<Vec<String>, ApiError> {
        let mut a = self.agent_after.lock().unwrap();
        match a.get_mut(&vmid) {
            Some((0, ips)) => Ok(ips.clone()),
            Some((n, _)) => {
                *n -= 1;
                Err(ApiError::Agent("QEMU guest agent is not running".into()))
            }
            None => Err(ApiError::Agent("QEMU guest agent is not running".into())),
        }
    }
}
