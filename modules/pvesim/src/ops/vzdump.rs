//! Backups and their restore: `POST /nodes/{node}/vzdump` (pve-manager `PVE/API2/VZDump.pm`,
//! `vzdump`, over `PVE/VZDump.pm`) and `POST /nodes/{node}/qemu` with `archive` (qemu-server
//! `PVE/API2/Qemu.pm`, `create_vm`'s restore branch over `PVE::QemuServer::restore_vma_archive`).
//!
//! - Backup (`vzdump` worker, one task for every VMID; its id the VMID when there is one, as
//!   `vzdump`'s `$taskid`): the target storage must hold `backup` content; a VM is locked `backup`
//!   while it is saved (`PVE::VZDump::QemuServer` `prepare`: `check_lock`, then `set_lock`; pvesim locks
//!   every VM of the job from the task's start to its end, where PVE locks each in its turn), so a VM
//!   locked otherwise fails its part ("VM is locked (…)") and the task ends in error ("job errors")
//!   after the others. `mode=stop` shuts a running VM down and starts it again afterwards;
//!   `snapshot` and `suspend` leave it running. The file is `vzdump-qemu-<vmid>-<YYYY_MM_DD-HH_MM_SS>.vma`
//!   plus `.zst`, `.gz` or `.lzo` by `compress` (`PVE::VZDump::compressor_info`; pvesim's clock is UTC
//!   where PVE writes local time), in the storage's `backup/` folder; `notes-template` is expanded
//!   with `{{cluster}}`, `{{guestname}}`, `{{node}}` and `{{vmid}}` (`PVE::VZDump::generate_notes`) and
//!   listed as the volume's `notes`. With `remove` (default on) and `prune-backups` `keep-last=N`,
//!   the VM's older backups on that storage beyond the N newest are removed
//!   (`PVE::Storage::prune_backups`); other `keep-*` settings are not simulated.
//! - Restore (`qmrestore`): the archive must be a backup volume; a VMID in use is refused unless
//!   `force` ("unable to restore VM … - VM … already exists"), and even then a running or locked VM
//!   is refused; with `force` the old VM's disks are freed and its snapshots dropped. The VM is
//!   locked `create` meanwhile; each disk of the saved config is allocated anew on `storage` (or on
//!   its old storage) with its old size; `start` starts it afterwards.
//!
//! Backup contents are not modelled: a backup keeps the VM's config (what a restore needs) and a
//! size (the sum of its disks).

use std::collections::BTreeMap;

use crate::auth::Principal;
use crate::error::{locked, ErrorReply, ReplyResult};
use crate::model::{parse_size, Volume};
use crate::sim::{Sim, Spawn};
use crate::tasks::{base_duration, Action, TaskResult};
use crate::vmconfig::{
    is_cdrom, is_cloudinit_volume, is_drive_key, parse_drive, print_drive, split_volid,
};

use super::{placeholder_vm, vm_path};

/// What a backup saved, keyed by volid in [`Sim::backups`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backup {
    pub vmid: u32,
    /// The VM config as saved (no lock, no snapshots, no pending changes).
    pub config: BTreeMap<String, String>,
    pub notes: Option<String>,
}

/// A `POST /nodes/{node}/vzdump` as the handler parsed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackupJob {
    pub node: String,
    pub vmids: Vec<u32>,
    pub storage: String,
    pub mode: String,
    pub compress: String,
    pub notes_template: Option<String>,
    pub remove: bool,
    /// `keep-last` of `prune-backups`, when given.
    pub keep_last: Option<usize>,
}

/// A restore as `create_vm` gets it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restore {
    pub archive: String,
    pub storage: Option<String>,
    pub force: bool,
}

/// `keep-last=N` out of a `prune-backups` property string.
pub fn keep_last(prune: &str) -> Option<usize> {
    prune
        .split(',')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| k.trim() == "keep-last")
        .and_then(|(_, v)| v.trim().parse().ok())
}

/// The API's checks, then the `vzdump` worker's UPID.
pub fn start(sim: &mut Sim, who: &Principal, job: BackupJob) -> ReplyResult<String> {
    if job.vmids.is_empty() {
        return Err(ErrorReply::param(
            "vmid",
            "property is missing and it is not optional",
        ));
    }
    let st = sim
        .storage(&job.node, &job.storage)
        .ok_or_else(|| ErrorReply::die(format!("storage '{}' does not exist", job.storage)))?;
    if !st.content.contains("backup") {
        return Err(ErrorReply::die(format!(
            "storage '{}' does not support backups",
            job.storage
        )));
    }
    sim.access.require(
        who,
        &format!("/storage/{}", job.storage),
        &["Datastore.AllocateSpace"],
        false,
    )?;
    for vmid in &job.vmids {
        sim.access
            .require(who, &vm_path(*vmid), &["VM.Backup"], false)?;
        sim.vm(&job.node, *vmid)?;
    }
    for vmid in &job.vmids {
        if let Some(v) = sim.vms.get_mut(vmid).filter(|v| v.lock().is_none()) {
            v.conf.insert("lock".into(), "backup".into());
        }
    }
    let id = match job.vmids.as_slice() {
        [one] => one.to_string(),
        _ => String::new(),
    };
    let secs = base_duration("vzdump") * job.vmids.len() as f64;
    Ok(sim.spawn(
        who,
        Spawn {
            node: job.node.clone(),
            kind: "vzdump".into(),
            id,
            action: Action::Backup(job),
            base_secs: secs,
            flock: None,
            fail: None,
        },
    ))
}

/// The worker: each VM in turn; a failed VM is logged and fails the task at the end.
pub fn finish(sim: &mut Sim, job: &BackupJob, log: &mut Vec<String>) -> TaskResult {
    let mut failed = Vec::new();
    for vmid in &job.vmids {
        log.push(format!("INFO: Starting Backup of VM {vmid} (qemu)"));
        match backup_one(sim, job, *vmid, log) {
            Ok(volid) => log.push(format!("INFO: archive file '{volid}' created")),
            Err(e) => {
                log.push(format!("ERROR: Backup of VM {vmid} failed - {e}"));
                failed.push(*vmid);
            }
        }
        if let Some(v) = sim.vms.get_mut(vmid) {
            if v.lock() == Some("backup") {
                v.conf.remove("lock");
            }
        }
    }
    if failed.is_empty() {
        Ok(0)
    } else {
        Err("job errors".into())
    }
}

fn backup_one(
    sim: &mut Sim,
    job: &BackupJob,
    vmid: u32,
    log: &mut Vec<String>,
) -> Result<String, String> {
    let vm = sim.vms.get(&vmid).ok_or("VM vanished")?.clone();
    match vm.lock() {
        Some("backup") | None => {}
        Some(l) => return Err(locked(l)),
    }
    let was_running = vm.running();
    if job.mode == "stop" && was_running {
        log.push(format!("INFO: stopping virtual guest {vmid}"));
        super::power::power_off(sim, vmid);
    }
    let now = sim.unix_now();
    let ext = match job.compress.as_str() {
        "zstd" => ".zst",
        "gzip" => ".gz",
        "1" | "lzo" => ".lzo",
        _ => "",
    };
    let name = format!("backup/vzdump-qemu-{vmid}-{}.vma{ext}", timestamp(now));
    let config: BTreeMap<String, String> = vm
        .conf
        .iter()
        .filter(|(k, _)| !matches!(k.as_str(), "lock" | "parent"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let size = disk_bytes(&config);
    let notes = job.notes_template.as_ref().map(|t| {
        t.replace("{{cluster}}", &sim.cluster.name)
            .replace(
                "{{guestname}}",
                config.get("name").map(String::as_str).unwrap_or(""),
            )
            .replace("{{node}}", &job.node)
            .replace("{{vmid}}", &vmid.to_string())
    });
    let st = sim
        .storage_mut(&job.node, &job.storage)
        .ok_or("storage vanished")?;
    st.volumes.insert(
        name.clone(),
        Volume {
            name: name.clone(),
            size,
            format: format!("vma{ext}"),
            content: "backup".into(),
            vmid: Some(vmid),
            ctime: now,
            parent: None,
        },
    );
    let volid = format!("{}:{name}", job.storage);
    sim.backups.insert(
        volid.clone(),
        Backup {
            vmid,
            config,
            notes,
        },
    );
    if job.mode == "stop" && was_running {
        // vzdump starts it with `skiplock`: the `backup` lock goes only after the job.
        log.push(format!("INFO: restarting virtual guest {vmid}"));
        let lock = sim.vms.get_mut(&vmid).and_then(|v| v.conf.remove("lock"));
        let started = super::power::start_vm(sim, vmid, log).map_err(|e| e.0);
        if let (Some(l), Some(v)) = (lock, sim.vms.get_mut(&vmid)) {
            v.conf.insert("lock".into(), l);
        }
        started?;
    }
    if job.remove {
        if let Some(n) = job.keep_last {
            prune(sim, job, vmid, n, log);
        }
    }
    Ok(volid)
}

/// `prune_backups` with `keep-last`: the VM's backups on the storage beyond the `n` newest go.
fn prune(sim: &mut Sim, job: &BackupJob, vmid: u32, n: usize, log: &mut Vec<String>) {
    let Some(st) = sim.storage_mut(&job.node, &job.storage) else {
        return;
    };
    let mut mine: Vec<(u64, String)> = st
        .volumes
        .values()
        .filter(|v| v.content == "backup" && v.vmid == Some(vmid))
        .map(|v| (v.ctime, v.name.clone()))
        .collect();
    mine.sort();
    mine.reverse();
    for (_, name) in mine.into_iter().skip(n) {
        st.volumes.remove(&name);
        log.push(format!("INFO: removing backup '{}:{name}'", job.storage));
    }
}

/// The bytes of a config's disks (CD-ROMs aside).
fn disk_bytes(config: &BTreeMap<String, String>) -> u64 {
    config
        .iter()
        .filter(|(k, _)| is_drive_key(k) && !k.starts_with("unused"))
        .map(|(k, v)| parse_drive(k, v))
        .filter(|d| !is_cdrom(d))
        .filter_map(|d| d.get("size").and_then(parse_size))
        .sum()
}

/// `YYYY_MM_DD-HH_MM_SS` of a Unix time (UTC), as `PVE::VZDump` names archives.
pub fn timestamp(unix: u64) -> String {
    let (days, secs) = (unix / 86_400, unix % 86_400);
    // Howard Hinnant's days-to-civil.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}_{m:02}_{d:02}-{:02}_{:02}_{:02}",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

/// `create_vm` with `archive`: the checks, a `create`-locked VM, then the `qmrestore` worker.
pub fn restore_start(
    sim: &mut Sim,
    who: &Principal,
    node: String,
    vmid: u32,
    req: Restore,
    start: bool,
) -> ReplyResult<String> {
    let emsg = format!("unable to restore VM {vmid} -");
    let backup = sim
        .backups
        .get(&req.archive)
        .filter(|_| sim.volume_exists(&node, &req.archive))
        .cloned()
        .ok_or_else(|| {
            ErrorReply::die(format!("{emsg} volume '{}' does not exist", req.archive))
        })?;
    if let Some(sid) = &req.storage {
        if sim.storage(&node, sid).is_none() {
            return Err(ErrorReply::die(format!("storage '{sid}' does not exist")));
        }
    }
    match sim.vms.get(&vmid) {
        Some(_) if !req.force => {
            let taken = sim.check_vmid_unused(vmid).err().unwrap_or_default();
            return Err(ErrorReply::die(format!("{emsg} {taken}")));
        }
        Some(vm) if vm.node != node => {
            return Err(ErrorReply::die(format!(
                "{emsg} VM {vmid} is on node '{}'",
                vm.node
            )))
        }
        Some(vm) if vm.running() => return Err(ErrorReply::die(format!("{emsg} vm is running"))),
        Some(vm) => Sim::check_lock(vm, false)?,
        None => {
            if let Err(taken) = sim.check_vmid_unused(vmid) {
                return Err(ErrorReply::die(format!("{emsg} {taken}")));
            }
        }
    }
    let staged = restore_spec(&backup.config, req.storage.as_deref());
    match sim.vms.get_mut(&vmid) {
        Some(vm) => {
            vm.conf.insert("lock".into(), "create".into());
            vm.staged = staged;
        }
        None => {
            sim.vms.insert(
                vmid,
                placeholder_vm(vmid, node.clone(), "create", staged, None),
            );
        }
    }
    Ok(sim.spawn(
        who,
        Spawn {
            node,
            kind: "qmrestore".into(),
            id: vmid.to_string(),
            action: Action::Restore { vmid, start },
            base_secs: base_duration("qmrestore"),
            flock: Some(vmid),
            fail: None,
        },
    ))
}

/// The saved config as a create request: each disk `STORAGE:GiB` of its old size (on `storage`
/// when given), a cloud-init drive made anew, CD-ROMs as they were.
fn restore_spec(
    config: &BTreeMap<String, String>,
    storage: Option<&str>,
) -> BTreeMap<String, String> {
    let mut spec = BTreeMap::new();
    for (k, v) in config {
        if !is_drive_key(k) || k.starts_with("unused") {
            if !k.starts_with("unused") {
                spec.insert(k.clone(), v.clone());
            }
            continue;
        }
        let mut d = parse_drive(k, v);
        let file = d.get("file").unwrap_or_default().to_string();
        let Some((old_sid, _)) = split_volid(&file) else {
            spec.insert(k.clone(), v.clone());
            continue;
        };
        let sid = storage.unwrap_or(old_sid).to_string();
        if is_cloudinit_volume(&file) {
            d.set("file", format!("{sid}:cloudinit"));
            d.remove("size");
        } else if is_cdrom(&d) {
            spec.insert(k.clone(), v.clone());
            continue;
        } else {
            let bytes = d.get("size").and_then(parse_size).unwrap_or(0);
            d.set(
                "file",
                format!("{sid}:{}", bytes as f64 / f64::from(1u32 << 30)),
            );
            d.remove("size");
        }
        spec.insert(k.clone(), print_drive(&d));
    }
    spec
}

/// The `qmrestore` worker: the old VM's disks freed (a forced restore), then `create_vm`'s worker
/// over the saved config.
pub fn restore_finish(sim: &mut Sim, vmid: u32, start: bool, log: &mut Vec<String>) -> TaskResult {
    let vm = sim.vms.get(&vmid).ok_or("VM vanished")?.clone();
    let node = vm.node.clone();
    for (k, v) in vm.conf.iter().filter(|(k, _)| is_drive_key(k)) {
        sim.free_volume(&node, v, k);
    }
    if let Some(vm) = sim.vms.get_mut(&vmid) {
        vm.snapshots.clear();
        vm.pending.clear();
        vm.pending_delete.clear();
        vm.conf.retain(|k, _| k == "lock");
    }
    log.push(format!("restore vma archive for VM {vmid}"));
    super::create::finish(sim, vmid, start, log)
        .map_err(|e| format!("unable to restore VM {vmid} - {}", e.0).into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn archive_names_carry_the_utc_time() {
        assert_eq!(timestamp(0), "1970_01_01-00_00_00");
        assert_eq!(timestamp(1_796_642_705), "2026_12_07-11_25_05");
        assert_eq!(timestamp(951_782_400), "2000_02_29-00_00_00");
    }

    #[test]
    fn keep_last_is_read_from_prune_backups() {
        assert_eq!(keep_last("keep-all=0,keep-last=3"), Some(3));
        assert_eq!(keep_last("keep-daily=7"), None);
    }

    #[test]
    fn a_restore_allocates_every_disk_anew_with_its_size() {
        let mut c = BTreeMap::new();
        c.insert("name".into(), "m1".into());
        c.insert(
            "scsi0".into(),
            "local-lvm:vm-101-disk-0,iothread=1,size=8G".into(),
        );
        c.insert("ide2".into(), "local:iso/x.iso,media=cdrom".into());
        c.insert("unused0".into(), "local-lvm:vm-101-disk-9".into());
        let spec = restore_spec(&c, Some("nfs-shared"));
        assert_eq!(spec["scsi0"], "nfs-shared:8,iothread=1");
        assert_eq!(spec["ide2"], "local:iso/x.iso,media=cdrom");
        assert!(!spec.contains_key("unused0"));
        assert_eq!(spec["name"], "m1");
    }
}
