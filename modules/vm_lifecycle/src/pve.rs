//! The engine's [`Backend`] over the shared Proxmox client: only translation of types and errors.

use std::time::Duration;

use pve_client::power::is_agent_unavailable;
use pve_client::{Client, Error};

use crate::engine::{Backend, BackendError};
use crate::model::{Inventory, Observed, Op};

/// Sort a client error into what the engine acts on.
pub fn classify(e: Error) -> BackendError {
    match e {
        Error::NodeUnreachable { .. } => BackendError::Unreachable(e.to_string()),
        Error::Task(t) if t.is_already_running() => BackendError::AlreadyRunning {
            exitstatus: t.exitstatus,
            log_tail: t.log_tail,
        },
        Error::Task(t) => BackendError::Task {
            exitstatus: t.exitstatus,
            log_tail: t.log_tail,
        },
        Error::Timeout { ref log_tail, .. } if !log_tail.is_empty() => BackendError::Task {
            exitstatus: e.to_string(),
            log_tail: log_tail.clone(),
        },
        e if is_agent_unavailable(&e) => BackendError::Agent(e.server_text().to_string()),
        e => BackendError::Pve(Box::new(e)),
    }
}

impl Backend for Client {
    fn inventory(&self) -> Result<Vec<Inventory>, BackendError> {
        let guests = self.cluster_guests().map_err(classify)?;
        Ok(guests
            .into_iter()
            .filter(|v| v.kind == "qemu" || v.kind == "lxc")
            .filter_map(|v| {
                Some(Inventory {
                    container: v.kind == "lxc",
                    vmid: u32::try_from(v.vmid).ok()?,
                    tags: v.tag_list(),
                    name: v.name.unwrap_or_default(),
                    node: v.node,
                    template: v.template,
                    status: v.status.unwrap_or_default(),
                })
            })
            .collect())
    }

    fn status(&self, node: &str, vmid: u32) -> Result<Observed, BackendError> {
        let s = self.power_status(node, vmid).map_err(classify)?;
        let mut ha_state = s.ha.state;
        if s.ha.managed && ha_state.is_none() {
            // Older nodes report only `managed`; the HA resource has the requested state.
            ha_state = self.ha_resource(vmid).ok().flatten().and_then(|r| r.state);
        }
        Ok(Observed {
            status: s.status,
            qmpstatus: s.qmpstatus,
            lock: s.lock.filter(|l| !l.is_empty()),
            uptime: s.uptime,
            ha_managed: s.ha.managed,
            ha_state,
            agent: s.agent,
        })
    }

    fn power(&self, node: &str, vmid: u32, op: &Op, timeout: Duration) -> Result<(), BackendError> {
        Client::power(self, node, vmid, op, timeout)
            .map(|_| ())
            .map_err(classify)
    }

    fn wait_unlocked(&self, node: &str, vmid: u32, timeout: Duration) -> Result<(), BackendError> {
        Client::wait_unlocked(self, node, vmid, timeout)
            .map(|_| ())
            .map_err(classify)
    }

    fn guest_ips(&self, node: &str, vmid: u32) -> Result<Vec<String>, BackendError> {
        let ifs = self.agent_interfaces(node, vmid).map_err(classify)?;
        Ok(ifs
            .into_iter()
            .flat_map(|i| i.addresses.into_iter().map(|a| a.ip))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pve_client::{ErrorResponse as Api, TaskError};

    fn api(status: u16, m: &str) -> Error {
        Error::Api(Api {
            method: "GET".into(),
            path: "/x".into(),
            status,
            message: m.into(),
            errors: Default::default(),
        })
    }

    #[test]
    fn errors_are_sorted() {
        let e = classify(Error::NodeUnreachable {
            node: "pve2".into(),
            status: 595,
            detail: "No route to host".into(),
        });
        assert!(
            matches!(e, BackendError::Unreachable(ref m) if m.contains("pve2") && m.contains("595")),
            "{e:?}"
        );
        let e = classify(Error::Task(TaskError {
            upid: "u".into(),
            node: "pve1".into(),
            kind: "qmstart".into(),
            exitstatus: "start failed: out of memory".into(),
            log_tail: vec!["a".into()],
        }));
        assert!(
            matches!(e, BackendError::Task { ref exitstatus, ref log_tail }
                if exitstatus == "start failed: out of memory" && log_tail == &["a"]),
            "{e:?}"
        );
        assert!(matches!(
            classify(api(500, "QEMU guest agent is not running")),
            BackendError::Agent(_)
        ));
        assert!(matches!(
            classify(api(403, "Permission check failed")),
            BackendError::Pve(ref e) if e.status() == Some(403)
        ));
    }
}
