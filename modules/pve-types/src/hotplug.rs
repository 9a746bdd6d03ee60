//! Which config changes a running VM takes at once and which wait for its next start, as
//! Proxmox decides it (qemu-server `PVE/QemuServer.pm`: `parse_hotplug_features`,
//! `vmconfig_hotplug_pending`, `vmconfig_update_disk`, `vmconfig_update_net`). Used to predict
//! `reboot_required` in check mode; a real run reads the VM's `[PENDING]` section instead.

use crate::propstring::PropString;
use crate::spec::{disk_bus, NicValue};

/// The `hotplug` features of a VM: unset and `1` are Proxmox's default `network,disk,usb`,
/// `0` is none.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Hotplug {
    pub network: bool,
    pub disk: bool,
    pub cpu: bool,
    pub memory: bool,
    pub usb: bool,
}

impl Hotplug {
    pub fn parse(value: Option<&str>) -> Hotplug {
        let list = match value.map(str::trim) {
            None | Some("1") => "network,disk,usb",
            Some(v) => v,
        };
        let has = |f: &str| list.split(',').any(|x| x.trim() == f);
        Hotplug {
            network: has("network"),
            disk: has("disk"),
            cpu: has("cpu"),
            memory: has("memory"),
            usb: has("usb"),
        }
    }
}

/// Keys written at once whatever the VM is doing (`$fast_plug_option` and the cloud-init keys).
pub fn is_fast_plug(key: &str) -> bool {
    matches!(
        key,
        "name"
            | "description"
            | "tags"
            | "onboot"
            | "protection"
            | "startup"
            | "hookscript"
            | "shares"
            | "vmstatestorage"
            | "migrate_downtime"
            | "migrate_speed"
            | "ciuser"
            | "cipassword"
            | "citype"
            | "ciupgrade"
            | "cicustom"
            | "nameserver"
            | "searchdomain"
            | "sshkeys"
    ) || key.starts_with("ipconfig")
}

/// Drive options Proxmox cannot change on a running VM (`vmconfig_update_disk` skips them).
const COLD_DRIVE_OPTIONS: &[&str] = &[
    "aio", "discard", "iothread", "queues", "product", "cache", "ssd", "vendor", "ro",
];

/// Would changing `key` from `before` to `after` (`None`: unset / deleted) on a running VM wait
/// for a restart? `hotplug` is the VM's `hotplug` value.
pub fn needs_restart(
    key: &str,
    before: Option<&str>,
    after: Option<&str>,
    hotplug: Option<&str>,
) -> bool {
    let hp = Hotplug::parse(hotplug);
    if is_fast_plug(key) {
        return false;
    }
    match key {
        "vcpus" => !hp.cpu,
        "memory" => !hp.memory,
        // Enabling or disabling the balloon device is not hot-pluggable; its target is.
        "balloon" => (before.unwrap_or("1") == "0") != (after.unwrap_or("1") == "0"),
        "cpuunits" | "cpulimit" => false,
        k if k.starts_with("net") && k[3..].parse::<u32>().is_ok() => {
            nic_needs_restart(before, after, hp.network)
        }
        k if disk_bus(k).is_some() => drive_needs_restart(k, before, after, hp.disk),
        // cores, sockets, cpu, machine, bios, efidisk0, tpmstate0, hostpci, serial, vga, …
        _ => true,
    }
}

fn nic_needs_restart(before: Option<&str>, after: Option<&str>, hotplug: bool) -> bool {
    let (Some(b), Some(a)) = (before, after) else {
        return !hotplug;
    };
    let (Ok(b), Ok(a)) = (NicValue::parse(b), NicValue::parse(a)) else {
        return !hotplug;
    };
    let replug = b.model != a.model
        || b.mac != a.mac
        || ["queues", "mtu"]
            .iter()
            .any(|k| b.rest.get(k) != a.rest.get(k));
    replug && !hotplug
}

fn drive_needs_restart(
    slot: &str,
    before: Option<&str>,
    after: Option<&str>,
    hotplug: bool,
) -> bool {
    let parse = |v: Option<&str>| v.and_then(|v| PropString::parse(v, Some("file")).ok());
    let (b, a) = (parse(before), parse(after));
    let cdrom = |p: &Option<PropString>| p.as_ref().and_then(|p| p.get("media")) == Some("cdrom");
    let fixed_bus = slot.starts_with("ide") || slot.starts_with("sata");
    match (&b, &a) {
        // A CD-ROM drive already there changes its medium live.
        (Some(_), Some(_)) if cdrom(&b) && cdrom(&a) => false,
        (Some(b), Some(a)) if b.get("file") == a.get("file") => {
            COLD_DRIVE_OPTIONS.iter().any(|k| b.get(k) != a.get(k))
        }
        (Some(_), Some(_)) => !hotplug,
        // A new drive, or one removed.
        _ => !hotplug || fixed_bus,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_is_the_default_and_cores_never_hot_plugs() {
        assert_eq!(Hotplug::parse(Some("1")), Hotplug::parse(None));
        assert!(!Hotplug::parse(Some("1")).cpu);
        assert!(needs_restart(
            "cores",
            None,
            Some("4"),
            Some("network,disk,cpu")
        ));
        assert!(!needs_restart(
            "vcpus",
            None,
            Some("2"),
            Some("network,disk,cpu")
        ));
        assert!(needs_restart("vcpus", None, Some("2"), Some("1")));
        assert!(needs_restart("memory", Some("2048"), Some("4096"), None));
        assert!(!needs_restart("tags", None, Some("x"), Some("0")));
        assert!(!needs_restart(
            "ipconfig0",
            None,
            Some("ip=dhcp"),
            Some("0")
        ));
        assert!(needs_restart("machine", None, Some("q35"), Some("1")));
        assert!(needs_restart("balloon", Some("0"), Some("1024"), None));
        assert!(!needs_restart("balloon", Some("2048"), Some("1024"), None));
    }

    #[test]
    fn drives_new_volumes_and_cold_options() {
        let old = "local-lvm:vm-1-disk-0,size=4G";
        assert!(needs_restart(
            "scsi0",
            Some(old),
            Some("local-lvm:vm-1-disk-0,iothread=1,size=4G"),
            None
        ));
        assert!(!needs_restart(
            "scsi0",
            Some(old),
            Some("local-lvm:vm-1-disk-0,serial=a,size=4G"),
            None
        ));
        assert!(!needs_restart("scsi1", None, Some("local-lvm:4"), None));
        assert!(needs_restart("sata1", None, Some("local-lvm:4"), None));
        assert!(needs_restart("scsi1", None, Some("local-lvm:4"), Some("0")));
        assert!(!needs_restart(
            "ide2",
            Some("none,media=cdrom"),
            Some("local:iso/a.iso,media=cdrom"),
            None
        ));
    }

    #[test]
    fn nics_tap_changes_are_live() {
        let old = "virtio=BC:24:11:00:00:01,bridge=vmbr0";
        let tag = "virtio=BC:24:11:00:00:01,bridge=vmbr0,tag=5";
        assert!(!needs_restart("net0", Some(old), Some(tag), Some("0")));
        let model = "e1000=BC:24:11:00:00:01,bridge=vmbr0";
        assert!(needs_restart("net0", Some(old), Some(model), Some("0")));
        assert!(!needs_restart("net0", Some(old), Some(model), None));
        assert!(!needs_restart("net1", None, Some(old), None));
    }
}
