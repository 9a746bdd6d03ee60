//! What a config change does to a running VM: qemu-server's `vmconfig_hotplug_pending`
//! (`PVE/QemuServer.pm`), run by `$update_vm_api` (`PVE/API2/Qemu.pm`) when the VM is running.
//! Each pending key is either applied live, skipped (it stays in `[PENDING]` until the next
//! start), or fails ("hotplug problem - …"): a failure stays pending too, and the API call
//! then dies with the collected errors (`raise_param_exc($errors)`), failing the task.
//!
//! Unchanged between PVE 8 and PVE 9 (qemu-server 8.x and 9.x).

use std::collections::BTreeMap;

use crate::propstr::PropString;
use crate::vmconfig::{is_cdrom, is_drive_key, is_net_key, parse_drive, parse_net};

/// The hot-pluggable device classes: `parse_hotplug_features` (`PVE/QemuServer.pm`). `0` is
/// none, `1` is the `$confdesc` default `network,disk,usb`, an unset `hotplug` counts as `1`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Features {
    pub network: bool,
    pub disk: bool,
    pub cpu: bool,
    pub memory: bool,
    pub usb: bool,
    pub cloudinit: bool,
}

impl Features {
    pub fn parse(hotplug: Option<&str>) -> Features {
        let data = match hotplug.map(str::trim) {
            None | Some("1") => "network,disk,usb",
            Some(v) => v,
        };
        let mut f = Features::default();
        if data == "0" {
            return f;
        }
        for feature in data.split([',', ';', ' ']).filter(|s| !s.is_empty()) {
            match feature {
                "network" => f.network = true,
                "disk" => f.disk = true,
                "cpu" => f.cpu = true,
                "memory" => f.memory = true,
                "usb" => f.usb = true,
                "cloudinit" => f.cloudinit = true,
                _ => {}
            }
        }
        f
    }
}

/// What hot-plugging one key does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plug {
    /// Applied to the running VM (the key leaves `[PENDING]`).
    Apply,
    /// Not hot-pluggable (`die "skip\n"`): stays pending until the VM is started again.
    Skip,
    /// The hot-plug failed: stays pending, and the task fails with this text.
    Fail(String),
}

/// `$fast_plug_option` (`PVE/QemuServer.pm`) plus every cloud-init key (`$confdesc_cloudinit`):
/// written at once, whatever the VM is doing.
pub fn is_fast_plug(key: &str) -> bool {
    const FAST: &[&str] = &[
        "description",
        "hookscript",
        "lock",
        "migrate_downtime",
        "migrate_speed",
        "name",
        "onboot",
        "protection",
        "shares",
        "startup",
        "tags",
        "vmstatestorage",
        "cicustom",
        "cipassword",
        "citype",
        "ciupgrade",
        "ciuser",
        "nameserver",
        "searchdomain",
        "sshkeys",
    ];
    FAST.contains(&key) || key.starts_with("ipconfig")
}

fn num(conf: &BTreeMap<String, String>, key: &str, default: u64) -> u64 {
    conf.get(key)
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Setting `key` to `value` on a running VM whose applied config is `conf`
/// (`vmconfig_hotplug_pending`, its add/change loop).
pub fn plug(conf: &BTreeMap<String, String>, key: &str, value: &str, f: Features) -> Plug {
    if is_fast_plug(key) {
        return Plug::Apply;
    }
    match key {
        // `hotplug` itself: not while cpu or memory hot-plug is (or becomes) on.
        "hotplug" => {
            let old = conf.get("hotplug").map(String::as_str).unwrap_or("");
            let touches = |w: &str| value.contains(w) || old.contains(w);
            skip_unless(!(touches("memory") || touches("cpu")))
        }
        "tablet" => skip_unless(f.usb),
        // `qemu_cpu_hotplug`: vcpus up to the *applied* sockets × cores.
        "vcpus" if f.cpu => {
            let max = num(conf, "sockets", 1) * num(conf, "cores", 1);
            match value.parse::<u64>() {
                Ok(v) if v > max => Plug::Fail("you can't add more vcpus than maxcpus".into()),
                _ => Plug::Apply,
            }
        }
        // Enabling or disabling the balloon device is not hot-pluggable.
        "balloon" => {
            let was = conf.get("balloon").is_none_or(|b| b != "0");
            skip_unless(was == (value != "0"))
        }
        // `qemu_memory_hotplug`: never below the static 1024 MiB.
        "memory" if f.memory => {
            let mib = crate::model::memory_mib(Some(value));
            if mib < 1024 {
                Plug::Fail("memory can't be lower than 1024 MB".into())
            } else {
                Plug::Apply
            }
        }
        "cpuunits" | "cpulimit" => Plug::Apply,
        "agent" => plug_agent(conf.get("agent").map(String::as_str), value),
        k if k.starts_with("usb") => skip_unless(f.usb && usb_hotplug_os(conf)),
        k if is_net_key(k) => plug_net(conf.get(k).map(String::as_str), value, f.network),
        k if is_drive_key(k) && !k.starts_with("unused") => plug_drive(conf, k, value, f.disk),
        _ => Plug::Skip,
    }
}

/// Deleting `key` on a running VM (`vmconfig_hotplug_pending`, its pending-delete loop).
pub fn unplug(conf: &BTreeMap<String, String>, key: &str, f: Features) -> Plug {
    if is_fast_plug(key) || key.starts_with("unused") {
        return Plug::Apply;
    }
    match key {
        "hotplug" => {
            let old = conf.get("hotplug").map(String::as_str).unwrap_or("");
            skip_unless(!(old.contains("cpu") || old.contains("memory")))
        }
        "tablet" => skip_unless(f.usb),
        "vcpus" => skip_unless(f.cpu),
        "balloon" => skip_unless(conf.get("balloon").is_none_or(|b| b != "0")),
        "memory" => skip_unless(f.memory),
        "cpuunits" | "cpulimit" => Plug::Apply,
        k if k.starts_with("usb") => skip_unless(f.usb && usb_hotplug_os(conf)),
        k if is_net_key(k) => skip_unless(f.network),
        k if is_drive_key(k) => skip_unless(f.disk && !fixed_bus(k)),
        _ => Plug::Skip,
    }
}

fn skip_unless(ok: bool) -> Plug {
    if ok {
        Plug::Apply
    } else {
        Plug::Skip
    }
}

/// `ide`, `sata`, `efidisk` and `tpmstate` drives are never hot-(un)plugged.
fn fixed_bus(key: &str) -> bool {
    ["efidisk", "ide", "sata", "tpmstate"]
        .iter()
        .any(|b| key.starts_with(b))
}

/// USB hot-plug needs a Linux or Windows > 7 guest (and machine ≥ 7.1, which pvesim's always is).
fn usb_hotplug_os(conf: &BTreeMap<String, String>) -> bool {
    matches!(
        conf.get("ostype").map(String::as_str),
        Some("l26" | "win8" | "win10" | "win11")
    )
}

/// `vmconfig_update_agent`: only `fstrim_cloned_disks` changes live.
fn plug_agent(old: Option<&str>, new: &str) -> Plug {
    let Some(old) = old else { return Plug::Skip };
    let parse = |v: &str| {
        let p = crate::propstr::parse_loose(v, "enabled");
        p.items
            .iter()
            .filter(|(k, _)| k.as_str() != "fstrim_cloned_disks")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect::<BTreeMap<_, _>>()
    };
    skip_unless(parse(old) == parse(new))
}

/// `vmconfig_update_net`: model, MAC, queues or MTU changes replug the NIC (network hot-plug
/// needed); bridge, tag, trunks, firewall, rate and link state change on the tap device.
fn plug_net(old: Option<&str>, new: &str, hotplug: bool) -> Plug {
    let Some(old) = old else {
        return skip_unless(hotplug);
    };
    let (o, n) = (parse_net(old), parse_net(new));
    let replug = ["model", "macaddr", "queues", "mtu"]
        .iter()
        .any(|k| o.get(k) != n.get(k))
        || o.get("bridge").is_none()
        || n.get("bridge").is_none();
    skip_unless(!replug || hotplug)
}

/// `vmconfig_update_disk`: a CD-ROM changes its medium; a disk's other volume needs disk
/// hot-plug; a change of `aio`, `discard`, `iothread`, `queues`, `product`, `cache`, `ssd`,
/// `vendor` or `ro` on the same volume is not hot-pluggable (throttling and the rest are);
/// a new drive needs disk hot-plug and a bus other than ide/sata.
fn plug_drive(conf: &BTreeMap<String, String>, key: &str, value: &str, hotplug: bool) -> Plug {
    if key == "efidisk0" || key == "tpmstate0" {
        return Plug::Skip;
    }
    let new = parse_drive(key, value);
    if let Some(old) = conf.get(key).map(|v| parse_drive(key, v)) {
        let media = |d: &PropString| d.get("media").unwrap_or("disk").to_string();
        if media(&new) != media(&old) {
            return Plug::Fail("unable to change media type".into());
        }
        if is_cdrom(&old) {
            return Plug::Apply;
        }
        if new.get("file") != old.get("file") {
            return skip_unless(hotplug);
        }
        const COLD: &[&str] = &[
            "aio", "discard", "iothread", "queues", "product", "cache", "ssd", "vendor", "ro",
        ];
        return skip_unless(COLD.iter().all(|k| new.get(k) == old.get(k)));
    }
    skip_unless(hotplug && !fixed_bus(key))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conf(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn one_means_the_default_features() {
        let one = Features::parse(Some("1"));
        assert_eq!(one, Features::parse(None));
        assert!(one.network && one.disk && one.usb);
        assert!(!one.cpu && !one.memory && !one.cloudinit);
        assert_eq!(Features::parse(Some("0")), Features::default());
        assert!(Features::parse(Some("disk,cpu")).cpu);
    }

    #[test]
    fn cores_never_vcpus_with_cpu() {
        let c = conf(&[("cores", "2")]);
        let all = Features::parse(Some("network,disk,cpu,memory,usb"));
        assert_eq!(plug(&c, "cores", "4", all), Plug::Skip);
        assert_eq!(plug(&c, "vcpus", "2", all), Plug::Apply);
        assert_eq!(
            plug(&c, "vcpus", "2", Features::parse(Some("1"))),
            Plug::Skip
        );
        assert!(matches!(plug(&c, "vcpus", "4", all), Plug::Fail(_)));
    }

    #[test]
    fn drive_options_stay_pending_new_disks_plug() {
        let c = conf(&[("scsi0", "local-lvm:vm-1-disk-0,size=4G")]);
        let f = Features::parse(None);
        let iothread = "local-lvm:vm-1-disk-0,iothread=1,size=4G";
        assert_eq!(plug(&c, "scsi0", iothread, f), Plug::Skip);
        let serial = "local-lvm:vm-1-disk-0,serial=x,size=4G";
        assert_eq!(plug(&c, "scsi0", serial, f), Plug::Apply);
        assert_eq!(
            plug(&c, "scsi1", "local-lvm:vm-1-disk-1,size=1G", f),
            Plug::Apply
        );
        assert_eq!(
            plug(&c, "sata1", "local-lvm:vm-1-disk-1,size=1G", f),
            Plug::Skip
        );
        assert_eq!(unplug(&c, "scsi0", f), Plug::Apply);
        assert_eq!(unplug(&c, "scsi0", Features::parse(Some("0"))), Plug::Skip);
    }

    #[test]
    fn nic_tap_changes_are_live_without_network_hotplug() {
        let c = conf(&[("net0", "virtio=BC:24:11:00:00:01,bridge=vmbr0")]);
        let none = Features::parse(Some("0"));
        let tag = "virtio=BC:24:11:00:00:01,bridge=vmbr0,tag=5";
        assert_eq!(plug(&c, "net0", tag, none), Plug::Apply);
        let model = "e1000=BC:24:11:00:00:01,bridge=vmbr0";
        assert_eq!(plug(&c, "net0", model, none), Plug::Skip);
        assert_eq!(plug(&c, "net0", model, Features::parse(None)), Plug::Apply);
    }
}
