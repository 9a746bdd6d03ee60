//! The reads: one `GET /cluster/resources?type=vm`, then per selected VM its config and, when the
//! agent is enabled and the VM runs, `agent/network-get-interfaces` — spread over a few threads, since
//! an inventory of hundreds of VMs is otherwise hundreds of round trips in a row. A container
//! (the inventory's) gets its `lxc/{vmid}/config` and, while it runs, `lxc/{vmid}/interfaces`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use pve_client::power::is_agent_unavailable;
use pve_client::{Client, Error};

use crate::record::{agent_enabled, snapshot_names, Selection, VmRecord};

/// Requests in flight at once: enough to hide latency, few enough not to load the API proxy
/// (pveproxy serves each connection with one of its few worker processes).
pub const PARALLEL: usize = 8;

/// What to read besides the cluster listing.
#[derive(Debug, Clone, Copy)]
pub struct Want {
    pub config: bool,
    /// Guest-agent interfaces of running VMs with the agent enabled (needs the config), and the
    /// interfaces of running containers.
    pub agent: bool,
    /// Running VMs' `qmpstatus` (one `status/current` each).
    pub qmp: bool,
    /// Each guest's snapshot names (one `…/snapshot` each), as community.proxmox's `want_facts`.
    pub snapshots: bool,
}

/// The outcome of a listing: records sorted by VMID and notes for the user.
#[derive(Debug, Default)]
pub struct Listing {
    pub records: Vec<VmRecord>,
    pub warnings: Vec<String>,
}

/// One worker's answer for the VM at an index of the listing.
type Slot = (usize, Result<Option<VmRecord>, Error>);

pub fn list(client: &Client, sel: &Selection, want: Want) -> Result<Listing, Error> {
    let mut vms: Vec<_> = client
        .cluster_guests()?
        .into_iter()
        .filter(|v| sel.matches(v))
        .collect();
    vms.sort_by_key(|v| v.vmid);
    if !want.config && !want.agent && !want.qmp && !want.snapshots {
        let records = vms
            .into_iter()
            .map(|vm| VmRecord {
                vm,
                config: None,
                interfaces: None,
                qmpstatus: None,
                lxc_interfaces: None,
                snapshots: None,
            })
            .collect();
        return Ok(Listing {
            records,
            warnings: vec![],
        });
    }
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Slot>> = Mutex::new(Vec::new());
    let warnings = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..PARALLEL.min(vms.len()) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(vm) = vms.get(i) else { break };
                let r = details(client, vm.clone(), want, &warnings);
                results.lock().expect("no worker panics").push((i, r));
            });
        }
    });
    let mut results = results.into_inner().expect("no worker panics");
    results.sort_by_key(|(i, _)| *i);
    let mut records = Vec::with_capacity(results.len());
    for (_, r) in results {
        if let Some(rec) = r? {
            records.push(rec);
        }
    }
    Ok(Listing {
        records,
        warnings: warnings.into_inner().expect("no worker panics"),
    })
}

/// Config and agent interfaces of one VM; `None` when it vanished since the listing.
fn details(
    client: &Client,
    vm: pve_client::ClusterVm,
    want: Want,
    warnings: &Mutex<Vec<String>>,
) -> Result<Option<VmRecord>, Error> {
    let vmid = u32::try_from(vm.vmid)
        .map_err(|_| Error::invalid(format!("VMID {} out of range", vm.vmid)))?;
    if vm.kind == "lxc" {
        return container_details(client, vm, vmid, want, warnings);
    }
    let config = match client.vm_config(&vm.node, vmid, false) {
        Ok(c) => c,
        // Removed (or migrated away) between the listing and this read: not an error for a listing.
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(e),
    };
    let running = vm.status.as_deref() == Some("running");
    let interfaces = if want.agent && running && agent_enabled(&config) {
        match client.agent_interfaces(&vm.node, vmid) {
            Ok(i) => Some(i),
            Err(e) if is_agent_unavailable(&e) => None,
            Err(e) => {
                if let Ok(mut w) = warnings.lock() {
                    w.push(format!("VM {vmid}: guest agent interfaces not read: {e}"));
                }
                None
            }
        }
    } else {
        None
    };
    let qmpstatus = if want.qmp && running {
        match client.power_status(&vm.node, vmid) {
            Ok(p) => p.qmpstatus,
            Err(e) if e.is_not_found() => return Ok(None),
            Err(e) => return Err(e),
        }
    } else {
        None
    };
    let Some(snapshots) = snapshots(client, &vm, vmid, want)? else {
        return Ok(None);
    };
    Ok(Some(VmRecord {
        vm,
        config: want.config.then_some(config),
        interfaces,
        qmpstatus,
        lxc_interfaces: None,
        snapshots,
    }))
}

/// A container's config (when asked for) and, while it runs, its interfaces; `None` when it
/// vanished since the listing. An interfaces read that fails is a warning (community.proxmox
/// ignores the 501 of nodes without the call).
fn container_details(
    client: &Client,
    vm: pve_client::ClusterVm,
    vmid: u32,
    want: Want,
    warnings: &Mutex<Vec<String>>,
) -> Result<Option<VmRecord>, Error> {
    let config = if want.config {
        match client.ct_config(&vm.node, vmid) {
            Ok(c) => Some(c),
            Err(e) if e.is_not_found() => return Ok(None),
            Err(e) => return Err(e),
        }
    } else {
        None
    };
    let running = vm.status.as_deref() == Some("running");
    let lxc_interfaces = if want.agent && running {
        match client.ct_interfaces(&vm.node, vmid) {
            Ok(i) => Some(i),
            Err(e) if e.is_not_found() => return Ok(None),
            Err(e) => {
                if e.status() != Some(501) {
                    if let Ok(mut w) = warnings.lock() {
                        w.push(format!("CT {vmid}: interfaces not read: {e}"));
                    }
                }
                None
            }
        }
    } else {
        None
    };
    let Some(snapshots) = snapshots(client, &vm, vmid, want)? else {
        return Ok(None);
    };
    Ok(Some(VmRecord {
        vm,
        config,
        interfaces: None,
        qmpstatus: None,
        lxc_interfaces,
        snapshots,
    }))
}

/// A guest's snapshot names when asked for: `Some(None)` when not asked for, `None` when the guest
/// vanished since the listing.
fn snapshots(
    client: &Client,
    vm: &pve_client::ClusterVm,
    vmid: u32,
    want: Want,
) -> Result<Option<Option<Vec<String>>>, Error> {
    if !want.snapshots {
        return Ok(Some(None));
    }
    match client.guest_snapshots(&vm.node, &vm.kind, vmid) {
        Ok(list) => Ok(Some(Some(snapshot_names(&list)))),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}
