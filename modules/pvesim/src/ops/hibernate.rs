//! Hibernation (`qm suspend --todisk`, `POST …/status/suspend` with `todisk=1`): the RAM state
//! goes to a volume, QEMU quits and the config keeps `lock: suspended` until a start resumes the
//! VM from that state — or the state is thrown away with `delete=vmstate`.
//!
//! qemu-server `PVE/QemuServer/RunState.pm`, `vm_suspend` (with `$includestate`): lock
//! `suspending`; `PVE/QemuConfig.pm`, `__snapshot_save_vmstate` allocates the state volume
//! `vm-<vmid>-state-suspend-<YYYY-MM-DD>` (`.raw` on file storages; raw, 2 × memory + 500 MiB)
//! on `find_vmstate_storage`'s storage and records `vmstate`, `runningmachine` and
//! `runningcpu`; once saved, QEMU quits and the lock becomes `suspended`. `PVE/QemuServer.pm`,
//! `vm_start`: a `suspended` lock is no obstacle (`check_lock … if !($skiplock ||
//! $has_suspended_lock)`), the VM resumes from `vmstate`, then ("Resumed VM, removing state")
//! the volume is freed and `lock`, `vmstate`, `runningmachine`, `runningcpu` deleted. Any other
//! config change is refused by `check_lock` ("VM is locked (suspended)"), except deleting
//! `vmstate` (`PVE/API2/Qemu.pm`, `$update_vm_api`: "'suspended' lock should probably be a
//! state or "weak" lock?!" — the lock and the running-* keys go with it). The same in PVE 8
//! and PVE 9, apart from the QEMU machine version recorded.

use crate::model::memory_mib;
use crate::sim::{Generation, Sim};
use crate::tasks::TaskResult;
use crate::vmconfig::{is_cdrom, is_drive_key, parse_drive, split_volid};

/// The keys hibernation adds and a resume (or a discarded state) removes.
pub const STATE_KEYS: [&str; 4] = ["lock", "vmstate", "runningmachine", "runningcpu"];

/// `vm_suspend` with the state saved: the VM is stopped, its config locked `suspended`.
pub fn suspend_to_disk(sim: &mut Sim, vmid: u32) -> TaskResult {
    let vm = sim.vms.get(&vmid).ok_or("VM vanished")?.clone();
    let node = vm.node.clone();
    let sid = vmstate_storage(sim, &vm.node, &vm.conf);
    let st = sim
        .storage(&node, &sid)
        .ok_or_else(|| format!("storage '{sid}' does not exist"))?;
    let date = civil_date(sim.unix_now());
    let base = format!("vm-{vmid}-state-suspend-{date}");
    let name = if st.is_file_based() {
        format!("{vmid}/{base}.raw")
    } else {
        base
    };
    let size = (memory_mib(vm.conf.get("memory").map(String::as_str)) * 2 + 500) << 20;
    let ctime = sim.unix_now();
    if let Some(st) = sim.storage_mut(&node, &sid) {
        st.volumes.insert(
            name.clone(),
            crate::model::Volume {
                name: name.clone(),
                size,
                format: "raw".into(),
                content: "images".into(),
                vmid: Some(vmid),
                ctime,
                parent: None,
            },
        );
    }
    let machine = running_machine(sim, vm.conf.get("machine").map(String::as_str));
    let cpu = match vm.conf.get("cpu").map(String::as_str) {
        Some(c) if c.starts_with("host") => "host,+kvm_pv_eoi,+kvm_pv_unhalt".to_string(),
        _ => "kvm64,enforce,+kvm_pv_eoi,+kvm_pv_unhalt,+lahf_lm,+sep".to_string(),
    };
    super::power::power_off(sim, vmid);
    let vm = sim.vms.get_mut(&vmid).ok_or("VM vanished")?;
    vm.conf.insert("vmstate".into(), format!("{sid}:{name}"));
    vm.conf.insert("runningmachine".into(), machine);
    vm.conf.insert("runningcpu".into(), cpu);
    vm.conf.insert("lock".into(), "suspended".into());
    Ok(0)
}

/// After a start from a saved state (or when the state is discarded): free the state volume
/// and drop the keys hibernation added.
pub fn remove_state(sim: &mut Sim, vmid: u32) {
    let Some(vm) = sim.vms.get_mut(&vmid) else {
        return;
    };
    let node = vm.node.clone();
    let state = vm.conf.get("vmstate").cloned();
    for k in STATE_KEYS {
        vm.conf.remove(k);
    }
    if let Some((sid, name)) = state.as_deref().and_then(split_volid) {
        if let Some(st) = sim.storage_mut(&node, sid) {
            st.volumes.remove(name);
        }
    }
}

/// `PVE/QemuConfig.pm`, `find_vmstate_storage`: `vmstatestorage`, else a shared storage the VM
/// has a disk on, else a local one (file-based storages preferred in each), else `local`.
fn vmstate_storage(
    sim: &Sim,
    node: &str,
    conf: &std::collections::BTreeMap<String, String>,
) -> String {
    if let Some(s) = conf.get("vmstatestorage") {
        return s.clone();
    }
    let (mut shared, mut local): (Option<String>, Option<String>) = (None, None);
    for (k, v) in conf.iter().filter(|(k, _)| is_drive_key(k)) {
        let d = parse_drive(k, v);
        if is_cdrom(&d) {
            continue;
        }
        let Some((sid, _)) = d.get("file").and_then(split_volid) else {
            continue;
        };
        let Some(st) = sim.storage(node, sid) else {
            continue;
        };
        let slot = if st.shared { &mut shared } else { &mut local };
        if slot.is_none() || st.is_file_based() {
            *slot = Some(sid.to_string());
        }
    }
    shared.or(local).unwrap_or_else(|| "local".into())
}

/// The machine type QEMU ran with: the release's QEMU version (PVE 8.4: 9.2, PVE 9.0: 10.0,
/// PVE 9.1 on: 10.1).
fn running_machine(sim: &Sim, machine: Option<&str>) -> String {
    let qemu = match sim.version.generation() {
        Generation::Pve8 => "9.2",
        Generation::Pve9 if sim.version.at_least(9, 1, 0) => "10.1",
        Generation::Pve9 => "10.0",
    };
    let kind = match machine {
        Some(m) if m.contains("q35") => "q35",
        _ => "i440fx",
    };
    format!("pc-{kind}-{qemu}+pve0")
}

/// `YYYY-MM-DD` (UTC) of a Unix time (Howard Hinnant's `civil_from_days`).
fn civil_date(unix: u64) -> String {
    let z = (unix / 86_400) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

#[cfg(test)]
mod tests {
    use super::civil_date;

    #[test]
    fn dates_of_unix_times() {
        assert_eq!(civil_date(0), "1970-01-01");
        assert_eq!(civil_date(1_709_251_200), "2024-03-01");
        assert_eq!(civil_date(1_798_761_599), "2026-12-31");
    }
}
