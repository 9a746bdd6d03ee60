//! Who may set which VM config key — qemu-server `PVE/API2/Qemu.pm`: `$check_vm_modify_config_perm`
//! and its option tables (`$cpuoptions`, `$memoryoptions`, `$hwtypeoptions`, `$generaloptions`,
//! `$vmpoweroptions`, `$diskoptions`, `$cloudinitoptions`), plus the value-dependent device checks
//! (`check_hostpci_perm`, `check_usb_perm`, `check_rng_perm`, `$check_vm_create_serial_perm` and the
//! serial branches of `$update_vm_api`). Pure: the caller holds the ACLs.
//!
//! "root" there is `$authuser eq 'root@pam'`: a root@pam *session*; an API token's authuser is
//! `root@pam!name` (pve-access-control `verify_token` returns the token id), so tokens, even root's,
//! are not root for these checks.

use crate::propstr::parse_loose;
use crate::vmconfig::{is_cdrom, is_drive_key, parse_drive};

/// What changing one key needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Need {
    /// Privileges on the VM (`/vms/<vmid>`): all of them, or any one when `any`.
    Vm {
        privs: &'static [&'static str],
        any: bool,
    },
    /// A privilege on another ACL path (`startup` needs `Sys.Modify` on `/`; mapped devices
    /// `Mapping.Use` on their mapping).
    Path {
        path: String,
        privilege: &'static str,
    },
    /// Only a root@pam session may: upstream dies with this text (HTTP 500).
    Root(String),
    /// A parameter error upstream raises for everyone but root (HTTP 400 naming the key).
    RootParam(String),
    /// The value names neither a host device nor a mapping (HTTP 500).
    Invalid(String),
}

/// How the key is being changed: the death texts say `set`, `modify` or `delete`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Creating the VM (`create_vm`): `$check_vm_create_*_perm`.
    Create,
    /// Setting a key on an existing VM (`$update_vm_api`); `old` is its current value.
    Set,
    Delete,
}

const CPU: &[&str] = &[
    "cores",
    "cpu",
    "runningcpu",
    "cpulimit",
    "cpuunits",
    "numa",
    "smp",
    "sockets",
    "vcpus",
];
const MEMORY: &[&str] = &["memory", "balloon", "shares", "allow-ksm"];
const HWTYPE: &[&str] = &[
    "acpi",
    "hotplug",
    "kvm",
    "machine",
    "runningmachine",
    "scsihw",
    "smbios1",
    "tablet",
    "vga",
    "watchdog",
    "audio0",
    "rng0",
];
const GENERAL: &[&str] = &[
    "agent",
    "autostart",
    "bios",
    "description",
    "keyboard",
    "localtime",
    "migrate_downtime",
    "migrate_speed",
    "name",
    "onboot",
    "ostype",
    "protection",
    "reboot",
    "startdate",
    "startup",
    "tdf",
    "template",
];
const DISK: &[&str] = &["boot", "bootdisk", "vmstatestorage"];
const CLOUDINIT: &[&str] = &[
    "cicustom",
    "cipassword",
    "citype",
    "ciuser",
    "ciupgrade",
    "nameserver",
    "searchdomain",
    "sshkeys",
];

fn numbered(key: &str, base: &str) -> bool {
    key.strip_prefix(base)
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

fn vm(privs: &'static [&'static str]) -> Need {
    Need::Vm { privs, any: false }
}

/// What a non-root caller needs to change `key` from `old` to `new` (`None`: deleted or unset).
/// Empty for a root@pam session (every check starts `return 1 if $authuser eq 'root@pam'`).
pub fn needs(
    key: &str,
    new: Option<&str>,
    old: Option<&str>,
    change: Change,
    root: bool,
) -> Vec<Need> {
    if root {
        return vec![];
    }
    if is_drive_key(key) || key == "cdrom" {
        // `$check_drive_perms`: a CD-ROM needs VM.Config.CDROM, any other drive VM.Config.Disk.
        let cd = new
            .or(old)
            .is_some_and(|v| key == "cdrom" || is_cdrom(&parse_drive(key, v)));
        return vec![vm(if cd {
            &["VM.Config.CDROM"]
        } else {
            &["VM.Config.Disk"]
        })];
    }
    if numbered(key, "serial") {
        return serial(key, new, old, change);
    }
    if numbered(key, "usb") {
        return [old.filter(|_| change == Change::Set), new]
            .into_iter()
            .flatten()
            .flat_map(|v| usb(key, v))
            .collect();
    }
    if numbered(key, "hostpci") {
        return [old.filter(|_| change == Change::Set), new]
            .into_iter()
            .flatten()
            .flat_map(|v| hostpci(key, v))
            .collect();
    }
    if key == "rng0" {
        let mut n = vec![vm(&["VM.Config.HWType"])];
        if new
            .or(old)
            .is_some_and(|v| parse_loose(v, "source").get("source") == Some("/dev/hwrng"))
        {
            n.push(Need::Path {
                path: "/mapping/hwrng".into(),
                privilege: "Mapping.Use",
            });
        }
        return n;
    }
    modify_config(key)
}

/// `$check_vm_modify_config_perm` for the keys without a value-dependent check.
fn modify_config(key: &str) -> Vec<Need> {
    let is = |table: &[&str]| table.contains(&key);
    if numbered(key, "unused") {
        return vec![vm(&["VM.Config.Disk"])];
    }
    if key == "tags" {
        // Checked apart (`assert_tag_permissions`): changing tags needs VM.Config.Options.
        return vec![vm(&["VM.Config.Options"])];
    }
    if is(CPU) || numbered(key, "numa") {
        vec![vm(&["VM.Config.CPU"])]
    } else if is(MEMORY) {
        vec![vm(&["VM.Config.Memory"])]
    } else if is(HWTYPE) {
        vec![vm(&["VM.Config.HWType"])]
    } else if is(GENERAL) {
        let mut n = vec![vm(&["VM.Config.Options"])];
        if key == "startup" {
            // "special case for startup since it changes host behaviour"
            n.push(Need::Path {
                path: "/".into(),
                privilege: "Sys.Modify",
            });
        }
        n
    } else if key == "freeze" {
        vec![vm(&["VM.PowerMgmt"])]
    } else if is(DISK) {
        vec![vm(&["VM.Config.Disk"])]
    } else if numbered(key, "net") || key == "running-nets-host-mtu" {
        vec![vm(&["VM.Config.Network"])]
    } else if is(CLOUDINIT) || numbered(key, "ipconfig") {
        vec![Need::Vm {
            privs: &["VM.Config.Cloudinit", "VM.Config.Network"],
            any: true,
        }]
    } else if key == "vmstate" {
        vec![vm(&["VM.Config.Disk", "VM.PowerMgmt"])]
    } else {
        // "catches args, lock, etc."
        vec![Need::Root(format!("only root can set '{key}' config"))]
    }
}

/// Serial ports: a `socket` needs VM.Config.HWType; a real device is root's.
fn serial(key: &str, new: Option<&str>, old: Option<&str>, change: Change) -> Vec<Need> {
    let socket = |v: Option<&str>| v.is_none_or(|v| v == "socket");
    let (ok, verb) = match change {
        Change::Create => (socket(new), "set"),
        Change::Set => (socket(old) && socket(new), "modify"),
        Change::Delete => (socket(old), "delete"),
    };
    if ok {
        vec![vm(&["VM.Config.HWType"])]
    } else {
        vec![Need::Root(format!(
            "only root can {verb} '{key}' config for real devices"
        ))]
    }
}

/// `check_usb_perm`: spice and mapped devices for users with the privileges, host devices for root.
fn usb(key: &str, value: &str) -> Vec<Need> {
    let dev = parse_loose(value, "host");
    let mut n = vec![vm(&["VM.Config.HWType"])];
    if let Some(host) = dev.get("host") {
        if !host.eq_ignore_ascii_case("spice") {
            n.push(Need::Root(format!(
                "only root can set '{key}' config for real devices"
            )));
        }
    } else if let Some(m) = dev.get("mapping") {
        n.push(Need::Path {
            path: format!("/mapping/usb/{m}"),
            privilege: "Mapping.Use",
        });
    } else {
        n.push(Need::Invalid(
            "either 'host' or 'mapping' must be set.".into(),
        ));
    }
    n
}

/// `check_hostpci_perm`: mapped devices for users with the privileges, raw host devices for root.
fn hostpci(key: &str, value: &str) -> Vec<Need> {
    let dev = parse_loose(value, "host");
    let mut n = Vec::new();
    if dev.get("host").is_some() {
        n.push(Need::Root(format!(
            "only root can set '{key}' config for non-mapped devices"
        )));
    } else if let Some(m) = dev.get("mapping") {
        n.push(Need::Path {
            path: format!("/mapping/pci/{m}"),
            privilege: "Mapping.Use",
        });
        n.push(vm(&["VM.Config.HWType"]));
    } else {
        n.push(Need::Invalid(
            "either 'host' or 'mapping' must be set.".into(),
        ));
    }
    if dev.get("romfile").is_some() {
        n.push(Need::RootParam(
            "only root@pam can set 'romfile' option".into(),
        ));
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    fn needs_set(key: &str, new: &str) -> Vec<Need> {
        needs(key, Some(new), None, Change::Set, false)
    }

    #[test]
    fn option_tables_as_upstream() {
        assert_eq!(needs_set("bios", "ovmf"), vec![vm(&["VM.Config.Options"])]);
        assert_eq!(needs_set("hotplug", "1"), vec![vm(&["VM.Config.HWType"])]);
        assert_eq!(
            needs_set("boot", "order=scsi0"),
            vec![vm(&["VM.Config.Disk"])]
        );
        assert_eq!(needs_set("numa0", "cpus=0-1"), vec![vm(&["VM.Config.CPU"])]);
        assert_eq!(
            needs_set("ipconfig0", "ip=dhcp"),
            vec![Need::Vm {
                privs: &["VM.Config.Cloudinit", "VM.Config.Network"],
                any: true
            }]
        );
        assert_eq!(
            needs_set("startup", "order=1")[1],
            Need::Path {
                path: "/".into(),
                privilege: "Sys.Modify"
            }
        );
        assert_eq!(
            needs_set("args", "-no-reboot"),
            vec![Need::Root("only root can set 'args' config".into())]
        );
        assert!(needs("args", Some("-x"), None, Change::Set, true).is_empty());
    }

    #[test]
    fn devices_depend_on_their_value() {
        assert!(
            needs_set("hostpci0", "0000:01:00.0,pcie=1").contains(&Need::Root(
                "only root can set 'hostpci0' config for non-mapped devices".into()
            ))
        );
        assert_eq!(
            needs_set("hostpci1", "mapping=gpu,pcie=1"),
            vec![
                Need::Path {
                    path: "/mapping/pci/gpu".into(),
                    privilege: "Mapping.Use"
                },
                vm(&["VM.Config.HWType"])
            ]
        );
        assert_eq!(needs_set("usb0", "spice"), vec![vm(&["VM.Config.HWType"])]);
        assert!(matches!(needs_set("usb0", "host=1-2")[1], Need::Root(_)));
        assert!(matches!(needs_set("usb0", "usb3=1")[1], Need::Invalid(_)));
        // Replacing a raw device by a mapped one is root's too: the old value is checked.
        assert!(needs(
            "hostpci0",
            Some("mapping=gpu"),
            Some("0000:01:00.0"),
            Change::Set,
            false
        )
        .iter()
        .any(|n| matches!(n, Need::Root(_))));
        assert_eq!(
            needs("serial0", Some("/dev/ttyS0"), None, Change::Create, false),
            vec![Need::Root(
                "only root can set 'serial0' config for real devices".into()
            )]
        );
        assert_eq!(
            needs("serial0", None, Some("/dev/ttyS0"), Change::Delete, false),
            vec![Need::Root(
                "only root can delete 'serial0' config for real devices".into()
            )]
        );
        assert_eq!(
            needs("serial0", Some("socket"), None, Change::Set, false),
            vec![vm(&["VM.Config.HWType"])]
        );
        assert!(matches!(
            needs_set("hostpci0", "mapping=gpu,romfile=x.rom").last(),
            Some(Need::RootParam(_))
        ));
    }

    #[test]
    fn drives_by_media() {
        assert_eq!(
            needs_set("ide2", "local:iso/a.iso,media=cdrom"),
            vec![vm(&["VM.Config.CDROM"])]
        );
        assert_eq!(
            needs_set("scsi0", "local-lvm:8"),
            vec![vm(&["VM.Config.Disk"])]
        );
    }
}
