//! A QEMU VM's snapshots: create, delete and roll back, each a worker task waited for like every
//! other write ([`Client::run_task`]). The listing is [`Client::guest_snapshots`].
//!
//! Paths and parameters are qemu-server's `PVE/API2/Qemu.pm`: `snapshot` (`POST …/snapshot`,
//! `snapname`, `description`, `vmstate`; worker `qmsnapshot`), `delsnapshot` (`DELETE
//! …/snapshot/{snapname}`, `force`; worker `qmdelsnapshot`) and `rollback` (`POST
//! …/snapshot/{snapname}/rollback`, `start`; worker `qmrollback`).

use std::time::Duration;

use crate::client::{Client, Params};
use crate::error::Error;
use crate::task::TaskOutcome;

fn snapshot_path(node: &str, vmid: u32) -> String {
    format!("/nodes/{node}/qemu/{vmid}/snapshot")
}

impl Client {
    /// Take a snapshot and wait for `qmsnapshot`. Not sent again after a gateway error
    /// ([`Client::post_once`]): a second request for the same name would fail the worker with
    /// "snapshot name … already used" although the first one may have worked; the caller lists the
    /// snapshots to find out.
    pub fn create_snapshot(
        &self,
        node: &str,
        vmid: u32,
        snapname: &str,
        description: Option<&str>,
        vmstate: bool,
        timeout: Duration,
    ) -> Result<Option<TaskOutcome>, Error> {
        let mut p = Params::new()
            .set("snapname", snapname)
            .opt("description", description);
        if vmstate {
            p = p.flag("vmstate", true);
        }
        self.run_task(timeout, || self.post_once(&snapshot_path(node, vmid), &p))
    }

    /// Delete a snapshot and wait for `qmdelsnapshot`; `force` removes it from the config even when
    /// a disk snapshot cannot be removed (qemu-server's `delsnapshot` `force`).
    pub fn delete_snapshot(
        &self,
        node: &str,
        vmid: u32,
        snapname: &str,
        force: bool,
        timeout: Duration,
    ) -> Result<Option<TaskOutcome>, Error> {
        let q = if force {
            Params::new().flag("force", true)
        } else {
            Params::new()
        };
        let path = format!("{}/{snapname}", snapshot_path(node, vmid));
        self.run_task(timeout, || self.delete(&path, &q))
    }

    /// Roll a VM back to a snapshot and wait for `qmrollback`. PVE stops a running VM first (a hard
    /// stop) and starts it again only when the snapshot holds its RAM or `start` is set.
    pub fn rollback_snapshot(
        &self,
        node: &str,
        vmid: u32,
        snapname: &str,
        start: bool,
        timeout: Duration,
    ) -> Result<Option<TaskOutcome>, Error> {
        let p = if start {
            Params::new().flag("start", true)
        } else {
            Params::new()
        };
        let path = format!("{}/{snapname}/rollback", snapshot_path(node, vmid));
        self.run_task(timeout, || self.post(&path, &p))
    }
}
