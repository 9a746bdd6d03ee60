//! The reads and writes of a task over `pve-client`: the VMs as they are, then each VM's steps in
//! order, each waited for as a Proxmox task ([`pve_client::Client::run_task`]).

use pve_client::Client;
use vm_lifecycle::backend::{Backend, BackendError};
use vm_lifecycle::model::Inventory;

use crate::options::{Settings, State};
use crate::plan::{description_with_marker, Snapshot, Step, Target, VmPlan};

/// What can go wrong talking to Proxmox, with the client's error kept.
#[derive(Debug, thiserror::Error)]
pub enum SnapError {
    #[error("cannot list the cluster's VMs: {0}")]
    Listing(#[source] Box<BackendError>),
    #[error("cannot read {vm}: {source}")]
    Read {
        vm: String,
        #[source]
        source: Box<pve_client::Error>,
    },
    #[error("{what} on {vm} failed: {source}")]
    Step {
        vm: String,
        what: String,
        #[source]
        source: Box<pve_client::Error>,
    },
}

/// Every guest of the cluster as `vm_lifecycle` lists them (the same selection rules).
pub fn inventory(client: &Client) -> Result<Vec<Inventory>, SnapError> {
    Backend::inventory(client).map_err(|e| SnapError::Listing(Box::new(e)))
}

/// A VM's snapshots, oldest first (qemu-server's `snapshot_list` lists them in no order).
pub fn snapshots(client: &Client, vm: &Inventory) -> Result<Vec<Snapshot>, SnapError> {
    let mut list = client
        .guest_snapshots(&vm.node, "qemu", vm.vmid)
        .map(|l| Snapshot::from_listing(&l))
        .map_err(|source| SnapError::Read {
            vm: vm.label(),
            source: Box::new(source),
        })?;
    list.sort_by(|a, b| (a.snaptime, &a.name).cmp(&(b.snaptime, &b.name)));
    Ok(list)
}

/// A VM with its power state, lock and snapshots; for `present`, when it lacks the snapshot,
/// whether its disks can take one.
pub fn target(client: &Client, vm: &Inventory, s: &Settings) -> Result<Target, SnapError> {
    let read = |source| SnapError::Read {
        vm: vm.label(),
        source: Box::new(source),
    };
    let status = client.power_status(&vm.node, vm.vmid).map_err(read)?;
    let snapshots = snapshots(client, vm)?;
    let creates = s.state == State::Present && !snapshots.iter().any(|x| x.name == s.snapname);
    let can_snapshot = match creates {
        true => Some(
            client
                .vm_has_feature(&vm.node, vm.vmid, "snapshot")
                .map_err(read)?,
        ),
        false => None,
    };
    Ok(Target {
        vm: vm.clone(),
        running: status.status == "running",
        lock: status.lock.filter(|l| !l.is_empty()),
        snapshots,
        can_snapshot,
    })
}

/// What was done to one VM.
#[derive(Debug, Default)]
pub struct Done {
    pub created: bool,
    pub deleted: Vec<String>,
    pub rolled_back: bool,
    pub error: Option<SnapError>,
}

impl Done {
    pub fn changed(&self) -> bool {
        self.created || self.rolled_back || !self.deleted.is_empty()
    }
}

/// Carry out one VM's steps in order; the first failure ends them.
pub fn apply(client: &Client, p: &VmPlan, s: &Settings) -> Done {
    let mut done = Done::default();
    let (node, vmid) = (p.vm.node.as_str(), p.vm.vmid);
    for step in &p.steps {
        let (what, r) = match step {
            Step::Create => {
                let text = description_with_marker(s.description.as_deref());
                let r = client.create_snapshot(
                    node,
                    vmid,
                    &s.snapname,
                    Some(&text),
                    s.vmstate,
                    s.timeout,
                );
                done.created = r.is_ok();
                (format!("snapshot '{}'", s.snapname), r)
            }
            Step::Delete(name) => {
                let r = client.delete_snapshot(node, vmid, name, s.force, s.timeout);
                if r.is_ok() {
                    done.deleted.push(name.clone());
                }
                (format!("removing snapshot '{name}'"), r)
            }
            Step::Rollback => {
                let r = client.rollback_snapshot(node, vmid, &s.snapname, false, s.timeout);
                done.rolled_back = r.is_ok();
                (format!("rollback to '{}'", s.snapname), r)
            }
        };
        if let Err(source) = r {
            done.error = Some(SnapError::Step {
                vm: p.vm.label(),
                what,
                source: Box::new(source),
            });
            break;
        }
    }
    done
}
