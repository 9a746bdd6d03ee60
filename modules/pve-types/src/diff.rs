//! Compare a [`VmSpec`] with a VM's current config, both normalised the way Proxmox normalises, and
//! say exactly what to send: the keys to set, the `delete` list, the resizes, and what cannot be done.
//! (What a running VM takes at once is [`crate::hotplug`].)

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use crate::extra::root_only_change;
use crate::propstring::{bool01, format_size, normalize_tags, parse_bool, PropString};
use crate::spec::{Cdrom, CloudinitDrive, CurrentDrive, Disk, Nic, NicValue, VmSpec};

/// A disk to grow (PVE cannot shrink).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resize {
    pub disk: String,
    pub from: u64,
    pub to: u64,
}

impl Resize {
    /// The absolute `size` parameter of `PUT …/resize` (`120G`).
    pub fn size_param(&self) -> String {
        format_size(self.to)
    }
}

/// What converging a VM takes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConfigDiff {
    /// Keys and values for `POST …/config`, in spec order.
    pub set: Vec<(String, String)>,
    /// Keys for the `delete` parameter.
    pub delete: Vec<String>,
    pub resize: Vec<Resize>,
    /// Before/after of every changed key (`null` = unset), for `diff` and results.
    pub before: Map<String, Value>,
    pub after: Map<String, Value>,
    /// Differences the module must not or cannot fix (shrinking, moving disks, EFI type …).
    pub problems: Vec<String>,
    /// Deleted drives are destroyed, not kept as `unusedN` (`force=1`; see
    /// [`purge_unlisted_disks`]).
    pub force: bool,
}

impl ConfigDiff {
    pub fn is_empty(&self) -> bool {
        self.set.is_empty() && self.delete.is_empty() && self.resize.is_empty()
    }

    /// The changes only a root@pam session may make ([`root_only_change`]), against the current
    /// config `cfg`.
    pub fn root_only(&self, cfg: &Map<String, Value>) -> Vec<String> {
        let set = self.set.iter().map(|(k, v)| (k, Some(v.as_str())));
        let deleted = self.delete.iter().map(|k| (k, None));
        set.chain(deleted)
            .filter_map(|(k, new)| root_only_change(k, new, config_str(cfg, k).as_deref()))
            .collect()
    }

    /// Sorted, unique changed keys.
    pub fn changed_keys(&self) -> Vec<String> {
        let mut k: BTreeSet<String> = self.set.iter().map(|(k, _)| k.clone()).collect();
        k.extend(self.delete.iter().cloned());
        k.extend(self.resize.iter().map(|r| r.disk.clone()));
        k.into_iter().collect()
    }

    /// The `POST …/config` parameters (`delete=a,b` last); empty when only resizes remain.
    pub fn config_params(&self) -> Vec<(String, String)> {
        let mut p = self.set.clone();
        if !self.delete.is_empty() {
            p.push(("delete".into(), self.delete.join(",")));
            if self.force {
                p.push(("force".into(), "1".into()));
            }
        }
        p
    }

    fn record(&mut self, key: &str, before: Option<&str>, after: Option<&str>) {
        let v = |x: Option<&str>| x.map_or(Value::Null, |s| Value::String(s.to_string()));
        self.before.insert(key.to_string(), v(before));
        self.after.insert(key.to_string(), v(after));
    }
}

/// A config value as text (PVE mixes JSON numbers and strings).
pub fn config_str(cfg: &Map<String, Value>, key: &str) -> Option<String> {
    match cfg.get(key)? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(bool01(*b).to_string()),
        Value::Null => None,
        other => Some(other.to_string()),
    }
}

/// The comparable form of a scalar key's value; `None` (unset) maps to Proxmox's default.
pub fn canonical(key: &str, value: Option<&str>) -> String {
    if let Some(c) = crate::extra::canonical(key, value) {
        return c;
    }
    let v = value.map(str::trim);
    match key {
        "cores" | "sockets" => v.unwrap_or("1").to_string(),
        "memory" => match v {
            None => "512".into(),
            Some(s) => PropString::parse(s, Some("current"))
                .ok()
                .and_then(|p| p.get("current").map(str::to_string))
                .unwrap_or_else(|| s.to_string()),
        },
        "cpu" => {
            let p = PropString::parse(v.unwrap_or("kvm64"), Some("cputype")).unwrap_or_default();
            p.sorted()
                .into_iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(",")
        }
        "bios" => v.unwrap_or("seabios").to_string(),
        "scsihw" => v.unwrap_or("lsi").to_string(),
        "ostype" => v.unwrap_or("other").to_string(),
        "machine" => match v {
            None | Some("pc") | Some("i440fx") => String::new(),
            Some(s) => s.to_string(),
        },
        "onboot" | "protection" => bool01(v.and_then(parse_bool).unwrap_or(false)).to_string(),
        "agent" => {
            let p = PropString::parse(v.unwrap_or("0"), Some("enabled")).unwrap_or_default();
            bool01(p.get("enabled").and_then(parse_bool).unwrap_or(false)).to_string()
        }
        "tags" => normalize_tags(v).join(";"),
        "description" => value.map(|s| s.trim_end().to_string()).unwrap_or_default(),
        "boot" => match v {
            None => String::new(),
            Some(s) => PropString::parse(s, Some("legacy"))
                .ok()
                .and_then(|p| p.get("order").map(str::to_string))
                .unwrap_or_else(|| s.to_string()),
        },
        _ => v.unwrap_or("").to_string(),
    }
}

/// Compute what converging `current` (the pending-applied config) to `spec` takes.
pub fn diff(spec: &VmSpec, current: &Map<String, Value>) -> ConfigDiff {
    let mut d = ConfigDiff::default();
    for (key, want) in spec.scalar_values() {
        let have = config_str(current, &key);
        diff_scalar(&mut d, &key, want, have);
    }
    if let Some(want) = spec.efidisk_value() {
        special_drive(
            &mut d,
            current,
            "efidisk0",
            &want,
            &[("efitype", "2m"), ("pre-enrolled-keys", "0")],
        );
    }
    if let Some(want) = spec.tpm_value() {
        special_drive(&mut d, current, "tpmstate0", &want, &[("version", "v1.2")]);
    }
    for disk in spec.disks.iter().flatten() {
        diff_disk(&mut d, current, disk);
    }
    if let Some(c) = &spec.cdrom {
        diff_cdrom(&mut d, current, c);
    }
    if let Some(ci) = &spec.cloudinit_drive {
        diff_cloudinit(&mut d, current, ci);
    }
    if let Some(nics) = &spec.nics {
        diff_nics(&mut d, current, nics);
    }
    d
}

/// `purge_unlisted_disks`: delete (and destroy, `force=1`) every disk of the VM the spec's
/// `disks` do not list — drives in a disk slot that are not CD-ROMs, not the spec's CD-ROM
/// slot, and the `unusedN` volumes left by earlier changes. The caller decides whether the VM
/// is the project's to purge. Nothing happens when the spec does not list `disks`.
pub fn purge_unlisted_disks(spec: &VmSpec, current: &Map<String, Value>, d: &mut ConfigDiff) {
    let Some(disks) = &spec.disks else { return };
    let listed: BTreeSet<&str> = disks
        .iter()
        .map(|x| x.slot.as_str())
        .chain(spec.cdrom.as_ref().map(Cdrom::slot))
        .chain(spec.cloudinit_drive.as_ref().map(CloudinitDrive::slot))
        .collect();
    let mut keys: Vec<&String> = current
        .keys()
        .filter(|k| {
            let unused = k
                .strip_prefix("unused")
                .is_some_and(|n| n.parse::<u32>().is_ok());
            let disk = crate::spec::disk_bus(k).is_some()
                && !listed.contains(k.as_str())
                && config_str(current, k)
                    .and_then(|v| CurrentDrive::parse(k, &v).ok())
                    .is_some_and(|dr| !dr.cdrom);
            unused || disk
        })
        .collect();
    keys.sort();
    for k in keys {
        d.record(k, config_str(current, k).as_deref(), None);
        d.delete.push(k.clone());
        d.force = true;
    }
}

/// One scalar key (`memory`, `tags`, `agent` …): set it, delete it (empty text), or leave it.
fn diff_scalar(d: &mut ConfigDiff, key: &str, want: String, have: Option<String>) {
    if canonical(key, Some(&want)) == canonical(key, have.as_deref()) {
        return;
    }
    // An empty value removes the key (`description`, `tags`, an `extra_config` entry, …).
    if want.trim().is_empty() {
        if have.is_some() {
            d.delete.push(key.to_string());
            d.record(key, have.as_deref(), None);
        }
        return;
    }
    let send = if key == "agent" {
        // Keep agent sub-options (fstrim_cloned_disks, type) the spec does not manage.
        let mut p =
            PropString::parse(have.as_deref().unwrap_or(""), Some("enabled")).unwrap_or_default();
        p.set("enabled", want);
        p.render(Some("enabled"))
    } else {
        want
    };
    d.record(key, have.as_deref(), Some(&send));
    d.set.push((key.to_string(), send));
}

/// One spec disk: allocate it when its slot is empty, else update options and grow it in place;
/// a CD-ROM in the slot, another storage or a shrink is a problem.
fn diff_disk(d: &mut ConfigDiff, current: &Map<String, Value>, disk: &Disk) {
    let slot = disk.slot.as_str();
    let want_bytes = match disk.size_bytes() {
        Ok(b) => b,
        Err(e) => return d.problems.push(e.to_string()),
    };
    let Some(raw) = config_str(current, slot) else {
        match disk.allocation_string() {
            Ok(a) => {
                d.record(slot, None, Some(&a));
                d.set.push((slot.to_string(), a));
            }
            Err(e) => d.problems.push(e.to_string()),
        }
        return;
    };
    let drive = match CurrentDrive::parse(slot, &raw) {
        Ok(x) => x,
        Err(e) => return d.problems.push(e.to_string()),
    };
    if drive.cdrom {
        return d.problems.push(format!(
            "disk {slot}: the VM has a CD-ROM drive in {slot}; pick another slot or remove the drive"
        ));
    }
    if drive.storage.as_deref() != Some(disk.storage.as_str()) {
        return d.problems.push(format!(
            "disk {slot} is on storage '{}', the spec says '{}': the module does not move disks (move it in Proxmox or fix the spec)",
            drive.storage.as_deref().unwrap_or("?"),
            disk.storage
        ));
    }
    let new_props = disk.apply_to(&drive.props);
    let options_differ =
        CurrentDrive::comparable(&new_props) != CurrentDrive::comparable(&drive.props);
    let mut shown = new_props.clone();
    let size_changes = diff_disk_size(d, slot, drive.size, want_bytes, &mut shown);
    if options_differ {
        d.set
            .push((slot.to_string(), new_props.render(Some("file"))));
    }
    if options_differ || size_changes {
        d.record(slot, Some(&raw), Some(&shown.render(Some("file"))));
    }
}

/// Grow (a resize) or refuse to shrink a disk of `have` bytes to `want_bytes`, and put the size
/// the disk will have in `shown`. True when a resize was added.
fn diff_disk_size(
    d: &mut ConfigDiff,
    slot: &str,
    have: Option<u64>,
    want_bytes: u64,
    shown: &mut PropString,
) -> bool {
    match have {
        Some(have) if want_bytes > have => {
            d.resize.push(Resize {
                disk: slot.to_string(),
                from: have,
                to: want_bytes,
            });
            shown.set("size", format_size(want_bytes));
            true
        }
        Some(have) if want_bytes < have => {
            d.problems.push(format!(
                "disk {slot} is {} and cannot shrink to {} (Proxmox does not shrink disks)",
                format_size(have),
                format_size(want_bytes)
            ));
            shown.set("size", format_size(have));
            false
        }
        Some(have) => {
            shown.set("size", format_size(have));
            false
        }
        None => false,
    }
}

/// The CD-ROM drive: added when its slot is empty, media swapped when another ISO is in it; a
/// disk in the slot is a problem.
fn diff_cdrom(d: &mut ConfigDiff, current: &Map<String, Value>, c: &Cdrom) {
    let slot = c.slot();
    let want = format!("{},media=cdrom", c.iso());
    match config_str(current, slot) {
        None => {
            d.record(slot, None, Some(&want));
            d.set.push((slot.to_string(), want));
        }
        Some(raw) => match CurrentDrive::parse(slot, &raw) {
            Ok(dr) if !dr.cdrom => d.problems.push(format!(
                "cdrom: {slot} holds a disk ({}), not a CD-ROM drive; use another cdrom.slot",
                dr.volid
            )),
            Ok(dr) if dr.volid != c.iso() => {
                d.record(slot, Some(&raw), Some(&want));
                d.set.push((slot.to_string(), want));
            }
            Ok(_) => {}
            Err(e) => d.problems.push(e.to_string()),
        },
    }
}

/// The cloud-init drive: created when its slot is empty. Proxmox names the volume
/// `vm-<vmid>-cloudinit` (qemu-server `create_disks`); another drive in the slot, or the
/// drive on another storage, is a problem (the module does not move it).
fn diff_cloudinit(d: &mut ConfigDiff, current: &Map<String, Value>, ci: &CloudinitDrive) {
    let slot = ci.slot();
    let Some(raw) = config_str(current, slot) else {
        let want = ci.request();
        d.record(slot, None, Some(&want));
        d.set.push((slot.to_string(), want));
        return;
    };
    match CurrentDrive::parse(slot, &raw) {
        Ok(dr) if !is_cloudinit_volid(&dr.volid) => d.problems.push(format!(
            "cloudinit_drive: {slot} holds {}, not a cloud-init drive; use another cloudinit_drive.slot",
            dr.volid
        )),
        Ok(dr) if dr.storage.as_deref() != Some(ci.storage.as_str()) => d.problems.push(format!(
            "cloudinit_drive is on storage '{}', the spec says '{}': the module does not move it",
            dr.storage.as_deref().unwrap_or("?"),
            ci.storage
        )),
        Ok(_) => {}
        Err(e) => d.problems.push(e.to_string()),
    }
}

/// `vm-<N>-cloudinit` (with a format suffix on file storages), Proxmox's cloud-init volume.
fn is_cloudinit_volid(volid: &str) -> bool {
    let name = volid.rsplit(['/', ':']).next().unwrap_or("");
    let name = name.split('.').next().unwrap_or("");
    name.strip_prefix("vm-")
        .and_then(|r| r.strip_suffix("-cloudinit"))
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// The spec's NICs (keeping each current MAC), then deleting the VM's `netN` the spec lacks.
fn diff_nics(d: &mut ConfigDiff, current: &Map<String, Value>, nics: &[Nic]) {
    for n in nics {
        diff_nic(d, current, n);
    }
    let wanted: BTreeSet<&str> = nics.iter().map(|n| n.slot.as_str()).collect();
    let mut extra: Vec<&String> = current
        .keys()
        .filter(|k| {
            k.strip_prefix("net")
                .is_some_and(|n| n.parse::<u32>().is_ok())
        })
        .filter(|k| !wanted.contains(k.as_str()))
        .collect();
    extra.sort();
    for k in extra {
        d.record(k, config_str(current, k).as_deref(), None);
        d.delete.push(k.clone());
    }
}

/// One spec NIC: set when missing or different from the current one.
fn diff_nic(d: &mut ConfigDiff, current: &Map<String, Value>, n: &Nic) {
    let raw = config_str(current, &n.slot);
    let current_nic = match raw.as_deref().map(NicValue::parse) {
        Some(Ok(v)) => Some(v),
        Some(Err(e)) => {
            return d
                .problems
                .push(format!("{}: cannot parse the current NIC: {e}", n.slot));
        }
        None => None,
    };
    match n.desired(current_nic.as_ref()) {
        Ok(want) => {
            if current_nic.as_ref().is_some_and(|c| c.same_as(&want)) {
                return;
            }
            let v = want.render();
            d.record(&n.slot, raw.as_deref(), Some(&v));
            d.set.push((n.slot.clone(), v));
        }
        Err(e) => d.problems.push(e.to_string()),
    }
}

/// `efidisk0` / `tpmstate0`: created when missing; their type/version cannot change in place.
fn special_drive(
    d: &mut ConfigDiff,
    current: &Map<String, Value>,
    key: &str,
    want: &str,
    compared: &[(&str, &str)],
) {
    let Some(raw) = config_str(current, key) else {
        d.record(key, None, Some(want));
        d.set.push((key.to_string(), want.to_string()));
        return;
    };
    let (Ok(have), Ok(wanted)) = (
        PropString::parse(&raw, Some("file")),
        PropString::parse(want, Some("file")),
    ) else {
        d.problems.push(format!("{key}: cannot parse '{raw}'"));
        return;
    };
    for (sub, default) in compared {
        let h = have.get(sub).unwrap_or(default);
        let w = wanted.get(sub).unwrap_or(default);
        if h != w {
            d.problems.push(format!(
                "{key} has {sub}={h} but the spec asks for {w}; Proxmox cannot change this in place (remove {key} while the VM is stopped to recreate it)"
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{Cdrom, Disk, EfiDisk, Nic, GIB};
    use serde_json::json;

    fn spec() -> VmSpec {
        VmSpec {
            name: Some("master-0".into()),
            cpu: Some("host".into()),
            cores: Some(4),
            memory: Some(16384),
            bios: Some("ovmf".into()),
            efidisk: Some(EfiDisk {
                storage: Some("local-lvm".into()),
                efitype: Some("4m".into()),
                pre_enrolled_keys: None,
            }),
            machine: Some("q35".into()),
            scsihw: Some("virtio-scsi-single".into()),
            disks: Some(vec![Disk {
                slot: "scsi0".into(),
                storage: "local-lvm".into(),
                size: "120G".into(),
                ssd: Some(true),
                iothread: Some(true),
                discard: Some(true),
                ..Default::default()
            }]),
            nics: Some(vec![Nic {
                slot: "net0".into(),
                bridge: "vmbr0".into(),
                mac: Some("bc:24:11:00:00:01".into()),
                vlan: Some(10),
                ..Default::default()
            }]),
            cdrom: Some(Cdrom {
                slot: None,
                iso: Some("local:iso/agent.iso".into()),
            }),
            boot: Some(vec!["scsi0".into(), "ide2".into()]),
            onboot: Some(true),
            agent: Some(true),
            tags: Some(vec!["proxshift".into(), "OCP".into()]),
            description: Some("control plane".into()),
            ..Default::default()
        }
    }

    /// What PVE returns after creating `spec()`: its own spelling, types and generated keys.
    fn as_created() -> Map<String, Value> {
        json!({
            "name": "master-0", "cpu": "host", "cores": 4, "memory": "16384", "bios": "ovmf",
            "efidisk0": "local-lvm:vm-101-disk-0,efitype=4m,pre-enrolled-keys=0,size=4M",
            "machine": "q35", "scsihw": "virtio-scsi-single",
            "scsi0": "local-lvm:vm-101-disk-1,discard=on,iothread=1,size=120G,ssd=1",
            "net0": "virtio=BC:24:11:00:00:01,bridge=vmbr0,tag=10",
            "ide2": "local:iso/agent.iso,media=cdrom", "boot": "order=scsi0;ide2",
            "onboot": 1, "agent": "1", "tags": "ocp;proxshift", "description": "control plane\n",
            "meta": "creation-qemu=9.2.0,ctime=1700000000", "smbios1": "uuid=1-2-3", "vmgenid": "x",
            "digest": "0123456789abcdef0123456789abcdef01234567"
        })
        .as_object()
        .unwrap()
        .clone()
    }

    #[test]
    fn freshly_created_vm_has_no_diff() {
        let d = diff(&spec(), &as_created());
        assert!(d.is_empty(), "{d:#?}");
        assert!(d.problems.is_empty(), "{:?}", d.problems);
    }

    #[test]
    fn one_memory_change_is_exactly_one_key() {
        let mut s = spec();
        s.memory = Some(32768);
        let d = diff(&s, &as_created());
        assert_eq!(d.set, vec![("memory".to_string(), "32768".to_string())]);
        assert_eq!(d.changed_keys(), vec!["memory"]);
        assert_eq!(d.before["memory"], json!("16384"));
        assert_eq!(d.after["memory"], json!("32768"));
        // PVE 8.1+ may spell memory as a property string.
        let mut cur = as_created();
        cur.insert("memory".into(), json!("current=32768"));
        assert!(diff(&s, &cur).is_empty());
    }

    #[test]
    fn disk_grow_is_a_resize_and_shrink_is_refused() {
        let mut s = spec();
        s.disks.as_mut().unwrap()[0].size = "150G".into();
        let d = diff(&s, &as_created());
        assert!(d.set.is_empty(), "{:?}", d.set);
        assert_eq!(
            d.resize,
            vec![Resize {
                disk: "scsi0".into(),
                from: 120 * GIB,
                to: 150 * GIB
            }]
        );
        assert_eq!(d.resize[0].size_param(), "150G");
        assert_eq!(d.changed_keys(), vec!["scsi0"]);
        s.disks.as_mut().unwrap()[0].size = "100G".into();
        let d = diff(&s, &as_created());
        assert!(d.is_empty());
        assert!(d.problems[0].contains("cannot shrink"), "{:?}", d.problems);
    }

    #[test]
    fn fractional_sizes_compare_as_pve_stored_them() {
        let mut s = spec();
        let mut cur = as_created();
        // What PVE recorded for `local-lvm:10.1000003814697265625` (10.1G rounded up to KiB).
        cur.insert(
            "scsi0".into(),
            json!("local-lvm:vm-101-disk-1,discard=on,iothread=1,size=10590618K,ssd=1"),
        );
        s.disks.as_mut().unwrap()[0].size = "10.1G".into();
        let d = diff(&s, &cur);
        assert!(d.is_empty() && d.problems.is_empty(), "{d:?}");
        // A grow to a fractional size is sent in KiB, which PVE stores as is.
        s.disks.as_mut().unwrap()[0].size = "10.2G".into();
        let d = diff(&s, &cur);
        assert_eq!(d.resize[0].size_param(), "10695476K");
    }

    #[test]
    fn disk_option_change_keeps_volume_and_unmanaged_options() {
        let mut cur = as_created();
        cur.insert(
            "scsi0".into(),
            json!("local-lvm:vm-101-disk-1,discard=on,iothread=1,size=120G,ssd=1,aio=native"),
        );
        let mut s = spec();
        s.disks.as_mut().unwrap()[0].ssd = Some(false);
        s.disks.as_mut().unwrap()[0].serial = Some("root".into());
        let d = diff(&s, &cur);
        assert_eq!(
            d.set,
            vec![(
                "scsi0".to_string(),
                "local-lvm:vm-101-disk-1,discard=on,iothread=1,aio=native,serial=root".to_string()
            )]
        );
    }

    #[test]
    fn new_disk_is_allocated_and_moved_disk_is_a_problem() {
        let mut s = spec();
        s.disks.as_mut().unwrap().push(Disk {
            slot: "scsi1".into(),
            storage: "local-lvm".into(),
            size: "50".into(),
            ..Default::default()
        });
        let d = diff(&s, &as_created());
        assert_eq!(
            d.set,
            vec![("scsi1".to_string(), "local-lvm:50".to_string())]
        );
        let mut s = spec();
        s.disks.as_mut().unwrap()[0].storage = "ceph".into();
        let d = diff(&s, &as_created());
        assert!(d.problems[0].contains("on storage 'local-lvm', the spec says 'ceph'"));
    }

    #[test]
    fn nic_changes_keep_the_mac_and_extra_nics_are_deleted() {
        let mut cur = as_created();
        cur.insert(
            "net0".into(),
            json!("virtio=BC:24:11:00:00:01,bridge=vmbr0,tag=10"),
        );
        cur.insert("net1".into(), json!("e1000=BC:24:11:00:00:09,bridge=vmbr9"));
        let mut s = spec();
        s.nics.as_mut().unwrap()[0].mac = None;
        s.nics.as_mut().unwrap()[0].vlan = Some(20);
        let d = diff(&s, &cur);
        assert_eq!(
            d.set,
            vec![(
                "net0".to_string(),
                "virtio=BC:24:11:00:00:01,bridge=vmbr0,tag=20".to_string()
            )]
        );
        assert_eq!(d.delete, vec!["net1"]);
        assert_eq!(
            d.config_params().last().unwrap(),
            &("delete".to_string(), "net1".to_string())
        );
        // A fixed MAC differing from a cloned NIC's random one is re-applied.
        let mut cloned = as_created();
        cloned.insert(
            "net0".into(),
            json!("virtio=BC:24:11:DE:AD:01,bridge=vmbr0,tag=10"),
        );
        let d = diff(&spec(), &cloned);
        assert_eq!(d.changed_keys(), vec!["net0"]);
        assert_eq!(d.set[0].1, "virtio=BC:24:11:00:00:01,bridge=vmbr0,tag=10");
    }

    #[test]
    fn normalisation_of_tags_bools_description_and_defaults() {
        let mut cur = as_created();
        cur.insert("tags".into(), json!("proxshift;ocp"));
        cur.insert("onboot".into(), json!("1"));
        cur.insert("agent".into(), json!("enabled=1,fstrim_cloned_disks=1"));
        cur.insert("description".into(), json!("control plane"));
        assert!(diff(&spec(), &cur).is_empty());
        let mut s = spec();
        s.agent = Some(false);
        s.description = Some(String::new());
        s.tags = Some(vec![]);
        s.sockets = Some(1);
        s.protection = Some(false);
        let d = diff(&s, &cur);
        assert_eq!(
            d.set,
            vec![("agent".to_string(), "0,fstrim_cloned_disks=1".to_string())]
        );
        assert_eq!(d.delete, vec!["tags", "description"]);
        assert_eq!(d.after["tags"], Value::Null);
    }

    #[test]
    fn efi_type_cannot_change_in_place_but_missing_efidisk_is_added() {
        let mut cur = as_created();
        cur.insert(
            "efidisk0".into(),
            json!("local-lvm:vm-101-disk-0,size=128K"),
        );
        let d = diff(&spec(), &cur);
        assert!(
            d.problems[0].contains("efidisk0 has efitype=2m but the spec asks for 4m"),
            "{:?}",
            d.problems
        );
        cur.remove("efidisk0");
        let d = diff(&spec(), &cur);
        assert_eq!(
            d.set,
            vec![(
                "efidisk0".to_string(),
                "local-lvm:1,efitype=4m,pre-enrolled-keys=0".to_string()
            )]
        );
    }

    #[test]
    fn cdrom_swap_and_wrong_slot() {
        let mut s = spec();
        s.cdrom = Some(Cdrom {
            slot: None,
            iso: Some("none".into()),
        });
        let d = diff(&s, &as_created());
        assert_eq!(
            d.set,
            vec![("ide2".to_string(), "none,media=cdrom".to_string())]
        );
        s.cdrom = Some(Cdrom {
            slot: Some("scsi0".into()),
            iso: None,
        });
        assert!(diff(&s, &as_created()).problems[0].contains("holds a disk"));
    }

    #[test]
    fn proxmox_kvm_options_diff_like_the_rest() {
        let keys = "ssh-ed25519 AAAAC3Nz admin@example";
        let s = VmSpec {
            vcpus: Some(2),
            numa: Some(true),
            hotplug: Some("1".into()),
            vga: Some("serial0".into()),
            sshkeys: Some(format!("{keys}\n")),
            ipconfig: Some(
                [(
                    "ipconfig0".to_string(),
                    "ip=10.0.0.5/24,gw=10.0.0.1".to_string(),
                )]
                .into(),
            ),
            extra_config: Some([("tablet".to_string(), json!(false))].into()),
            ..Default::default()
        };
        let d = diff(&s, &as_created());
        let set: Vec<&str> = d.set.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            set,
            ["vcpus", "numa", "vga", "sshkeys", "ipconfig0", "tablet"],
            "hotplug 1 is the default: no change"
        );
        assert_eq!(d.set[3].1, "ssh-ed25519%20AAAAC3Nz%20admin%40example");
        assert_eq!(d.set[5].1, "0");
        // What PVE stores afterwards (its own order and types) is no change.
        let mut cur = as_created();
        for (k, v) in [
            ("vcpus", json!(2)),
            ("numa", json!(1)),
            ("vga", json!("type=serial0")),
            ("sshkeys", json!("ssh-ed25519%20AAAAC3Nz%20admin%40example")),
            ("ipconfig0", json!("gw=10.0.0.1,ip=10.0.0.5/24")),
            ("tablet", json!(0)),
            ("hotplug", json!("network,disk,usb")),
        ] {
            cur.insert(k.into(), v);
        }
        assert!(diff(&s, &cur).is_empty(), "{:?}", diff(&s, &cur));
        // An empty extra value removes the key.
        let mut s2 = s.clone();
        s2.extra_config = Some([("tablet".to_string(), json!(""))].into());
        assert_eq!(diff(&s2, &cur).delete, vec!["tablet"]);
    }

    #[test]
    fn purge_deletes_unlisted_disks_and_unused_volumes_only() {
        let mut cur = as_created();
        cur.insert("scsi1".into(), json!("local-lvm:vm-101-disk-2,size=10G"));
        cur.insert("unused0".into(), json!("local-lvm:vm-101-disk-3"));
        cur.insert("sata0".into(), json!("local:iso/x.iso,media=cdrom"));
        let mut d = diff(&spec(), &cur);
        purge_unlisted_disks(&spec(), &cur, &mut d);
        assert_eq!(d.delete, vec!["scsi1", "unused0"]);
        assert!(d.force);
        assert_eq!(
            d.config_params()[d.config_params().len() - 1],
            ("force".to_string(), "1".to_string())
        );
        let mut none = VmSpec::default();
        let mut d = diff(&none, &cur);
        purge_unlisted_disks(&none, &cur, &mut d);
        assert!(d.delete.is_empty(), "disks not managed: nothing purged");
        none.disks = Some(vec![]);
        let mut d = ConfigDiff::default();
        purge_unlisted_disks(&none, &cur, &mut d);
        assert_eq!(d.delete, vec!["scsi0", "scsi1", "unused0"]);
    }

    #[test]
    fn cloudinit_drive_is_created_once() {
        let s = VmSpec {
            cloudinit_drive: Some(CloudinitDrive {
                storage: "local-lvm".into(),
                slot: None,
            }),
            ..Default::default()
        };
        let d = diff(&s, &as_created());
        assert_eq!(
            d.set,
            vec![("ide0".to_string(), "local-lvm:cloudinit".to_string())]
        );
        let mut cur = as_created();
        cur.insert(
            "ide0".into(),
            json!("local-lvm:vm-101-cloudinit,media=cdrom"),
        );
        assert!(diff(&s, &cur).is_empty());
        cur.insert(
            "ide0".into(),
            json!("local:101/vm-101-cloudinit.qcow2,media=cdrom"),
        );
        assert!(diff(&s, &cur).problems[0].contains("on storage 'local'"));
        cur.insert("ide0".into(), json!("local:iso/x.iso,media=cdrom"));
        assert!(diff(&s, &cur).problems[0].contains("not a cloud-init drive"));
    }

    #[test]
    fn import_from_allocates_from_the_image() {
        let disk = Disk {
            slot: "scsi0".into(),
            storage: "local-lvm".into(),
            size: "120G".into(),
            import_from: Some("local:import/rhcos.qcow2".into()),
            ..Default::default()
        };
        assert_eq!(
            disk.allocation_string().unwrap(),
            "local-lvm:0,import-from=local:import/rhcos.qcow2"
        );
    }

    #[test]
    fn unmanaged_keys_are_left_alone() {
        let s = VmSpec {
            memory: Some(16384),
            ..Default::default()
        };
        let d = diff(&s, &as_created());
        assert!(d.is_empty(), "{d:?}");
        // Defaults of unset keys count as their value.
        let mut cur = as_created();
        cur.remove("cores");
        let s = VmSpec {
            cores: Some(1),
            bios: Some("seabios".into()),
            ..Default::default()
        };
        let mut cur2 = cur.clone();
        cur2.remove("bios");
        assert!(diff(&s, &cur2).is_empty());
    }
}
