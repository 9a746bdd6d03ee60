//! The options a `community.proxmox.proxmox_kvm` user expects beyond the OpenShift node spec:
//! cloud-init (`ciuser`, `sshkeys`, `ipconfigN`, `nameserver`, `searchdomain`, `cicustom`),
//! `vcpus`, `numa`, `hotplug`, `vga`, `serialN`, `rng0`, `startup`, `hostpciN` and the
//! `extra_config` escape hatch. Each maps to one PVE config key; values are checked with the
//! rules of PVE's API schema (`POST /nodes/{node}/qemu/{vmid}/config`) so bad input fails
//! naming the option before anything is sent, and compared in PVE's normal form.

use std::collections::BTreeMap;
use std::net::IpAddr;

use crate::propstring::{parse_bool, PropString};

/// `vga` `type` values (schema `vga.format.type.enum`).
pub const VGA_TYPES: &[&str] = &[
    "cirrus",
    "qxl",
    "qxl2",
    "qxl3",
    "qxl4",
    "none",
    "serial0",
    "serial1",
    "serial2",
    "serial3",
    "std",
    "virtio",
    "virtio-gl",
    "vmware",
];

/// `rng0` `source` values (`pve-qm-rng`).
pub const RNG_SOURCES: &[&str] = &["/dev/urandom", "/dev/random", "/dev/hwrng"];

/// `hotplug` features (`pve-hotplug-features`).
pub const HOTPLUG_FEATURES: &[&str] = &["network", "disk", "cpu", "memory", "usb", "cloudinit"];

/// `cicustom` keys (`pve-qm-cicustom`).
pub const CICUSTOM_KEYS: &[&str] = &["meta", "network", "user", "vendor"];

/// `ipconfigN` keys (`pve-qm-ipconfig`).
pub const IPCONFIG_KEYS: &[&str] = &["gw", "gw6", "ip", "ip6"];

/// `hostpciN` keys (`pve-qm-hostpci`).
pub const HOSTPCI_KEYS: &[&str] = &[
    "host",
    "device-id",
    "driver",
    "legacy-igd",
    "mapping",
    "mdev",
    "pcie",
    "rombar",
    "romfile",
    "sub-device-id",
    "sub-vendor-id",
    "vendor-id",
    "x-vga",
];

/// VM config keys PVE's config API takes (indexed ones as their base, `net` for `net[n]`).
pub const CONFIG_KEYS: &[&str] = &[
    "acpi",
    "affinity",
    "agent",
    "allow-ksm",
    "amd-sev",
    "arch",
    "args",
    "audio",
    "autostart",
    "balloon",
    "bios",
    "boot",
    "bootdisk",
    "cicustom",
    "cipassword",
    "citype",
    "ciupgrade",
    "ciuser",
    "cores",
    "cpu",
    "cpulimit",
    "cpuunits",
    "description",
    "efidisk",
    "freeze",
    "hookscript",
    "hostpci",
    "hotplug",
    "hugepages",
    "ide",
    "intel-tdx",
    "ipconfig",
    "ivshmem",
    "keephugepages",
    "keyboard",
    "kvm",
    "localtime",
    "lock",
    "machine",
    "memory",
    "migrate_downtime",
    "migrate_speed",
    "name",
    "nameserver",
    "net",
    "numa",
    "onboot",
    "ostype",
    "parallel",
    "protection",
    "reboot",
    "rng",
    "sata",
    "scsi",
    "scsihw",
    "searchdomain",
    "serial",
    "shares",
    "smbios",
    "smp",
    "sockets",
    "spice_enhancements",
    "sshkeys",
    "startdate",
    "startup",
    "tablet",
    "tags",
    "tdf",
    "template",
    "tpmstate",
    "unused",
    "usb",
    "vcpus",
    "vga",
    "virtio",
    "virtiofs",
    "vmgenid",
    "vmstatestorage",
    "watchdog",
];

/// Keys `extra_config` must not set: a module option manages each (named), or the module
/// itself does (drives, NICs, `lock`, `template`).
pub fn managed_by_option(key: &str) -> Option<&'static str> {
    // Single keys by their own name (`numa`, not the topology's `numa0`), families by base.
    let scalar = matches!(
        key,
        "name"
            | "cpu"
            | "cores"
            | "sockets"
            | "memory"
            | "balloon"
            | "bios"
            | "machine"
            | "scsihw"
            | "boot"
            | "onboot"
            | "ostype"
            | "agent"
            | "tags"
            | "description"
            | "protection"
            | "vcpus"
            | "numa"
            | "hotplug"
            | "vga"
            | "rng0"
            | "startup"
            | "ciuser"
            | "sshkeys"
            | "nameserver"
            | "searchdomain"
            | "cicustom"
    );
    if scalar {
        return Some(base_option(key.trim_end_matches('0')));
    }
    let base = key.trim_end_matches(|c: char| c.is_ascii_digit());
    Some(match base {
        "ide" | "sata" | "scsi" | "virtio" | "unused" => "disks / cdrom",
        "efidisk" => "efidisk",
        "tpmstate" => "tpm",
        "net" => "nics",
        "ipconfig" => "ipconfig",
        "hostpci" => "hostpci",
        "serial" => "serial",
        "lock" | "template" | "digest" => "(the module's own)",
        _ => return None,
    })
}

fn base_option(base: &str) -> &'static str {
    CONFIG_KEYS
        .iter()
        .find(|k| **k == base)
        .map(|k| if *k == "rng" { "rng0" } else { k })
        .unwrap_or("?")
}

/// Is `key` a config key PVE knows (`vga`, `serial2`, `usb0`, `numa1`, …)?
pub fn is_config_key(key: &str) -> bool {
    let base = key.trim_end_matches(|c: char| c.is_ascii_digit());
    let indexed = base.len() < key.len();
    CONFIG_KEYS.contains(&base)
        && (indexed
            || !matches!(
                base,
                "hostpci"
                    | "ide"
                    | "ipconfig"
                    | "net"
                    | "parallel"
                    | "sata"
                    | "scsi"
                    | "serial"
                    | "unused"
                    | "usb"
                    | "virtio"
                    | "virtiofs"
                    | "efidisk"
                    | "tpmstate"
                    | "audio"
                    | "rng"
            ))
        || key == "numa"
}

/// The default key of a property-string valued option, `None` when it has none.
fn default_key(key: &str) -> Option<Option<&'static str>> {
    let base = key.trim_end_matches(|c: char| c.is_ascii_digit());
    Some(match base {
        "vga" => Some("type"),
        "rng" => Some("source"),
        "startup" => Some("order"),
        "hostpci" => Some("host"),
        "ipconfig" | "cicustom" => None,
        _ => return None,
    })
}

/// The comparable form of one of these keys' values, `None` when the key is not one of them.
pub fn canonical(key: &str, value: Option<&str>) -> Option<String> {
    let v = value.map(str::trim).filter(|v| !v.is_empty());
    if let Some(dk) = default_key(key) {
        return Some(match v {
            None => String::new(),
            Some(s) => match PropString::parse(s, dk) {
                Ok(p) => p
                    .sorted()
                    .into_iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(","),
                Err(_) => s.to_string(),
            },
        });
    }
    match key {
        "numa" => Some(if v.and_then(parse_bool).unwrap_or(false) {
            "1".into()
        } else {
            "0".into()
        }),
        "hotplug" => Some(match v {
            None | Some("1") => "disk,network,usb".into(),
            Some("0") => "0".into(),
            Some(s) => {
                let mut f: Vec<&str> = s.split(',').map(str::trim).collect();
                f.sort_unstable();
                f.dedup();
                f.join(",")
            }
        }),
        "sshkeys" => Some(ssh_key_lines(&url_decode(v.unwrap_or(""))).join("\n")),
        _ => None,
    }
}

fn ssh_key_lines(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

/// `sshkeys` as PVE takes it: URL-encoded (qemu-server `$update_vm_api` runs
/// `URI::Escape::uri_unescape` on it before validating; the config keeps the encoded text).
/// Everything but `A-Za-z0-9-._~` is escaped, as `uri_escape` does.
pub fn url_encode(text: &str) -> String {
    let mut out = String::new();
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

pub fn url_decode(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The value to send for `key` given the option's text (`sshkeys` gets encoded).
pub fn send_value(key: &str, value: &str) -> String {
    if key == "sshkeys" {
        url_encode(&ssh_key_lines(value).join("\n"))
    } else {
        value.to_string()
    }
}

fn check_props(
    option: &str,
    value: &str,
    dk: Option<&str>,
    allowed: &[&str],
) -> Result<PropString, String> {
    let p = PropString::parse(value, dk).map_err(|e| format!("{option}: '{value}': {e}"))?;
    for (k, _) in p.iter() {
        if !allowed.contains(&k) {
            return Err(format!(
                "{option}: unknown property '{k}' (known: {})",
                allowed.join(", ")
            ));
        }
    }
    Ok(p)
}

fn check_int(option: &str, p: &PropString, key: &str, range: (u64, u64)) -> Result<(), String> {
    match p.get(key) {
        None => Ok(()),
        Some(v) => match v.parse::<u64>() {
            Ok(n) if n >= range.0 && n <= range.1 => Ok(()),
            _ => Err(format!(
                "{option}: {key} '{v}' must be a whole number from {} to {}",
                range.0, range.1
            )),
        },
    }
}

fn is_cidr(v: &str, v6: bool) -> bool {
    let Some((ip, len)) = v.split_once('/') else {
        return false;
    };
    let Ok(addr) = ip.parse::<IpAddr>() else {
        return false;
    };
    let max = if v6 { 128 } else { 32 };
    addr.is_ipv6() == v6 && len.parse::<u32>().is_ok_and(|l| l <= max)
}

fn is_ip(v: &str, v6: bool) -> bool {
    v.parse::<IpAddr>().is_ok_and(|a| a.is_ipv6() == v6)
}

/// One option's value checked against PVE's rules; the error names the option.
pub fn validate(option: &str, value: &str) -> Result<(), String> {
    let base = option.trim_end_matches(|c: char| c.is_ascii_digit());
    match base {
        "hotplug" => {
            if value == "0" || value == "1" {
                return Ok(());
            }
            for f in value.split(',').map(str::trim) {
                if !HOTPLUG_FEATURES.contains(&f) {
                    return Err(format!(
                        "hotplug: unknown feature '{f}' (use 0, 1 or a list of {})",
                        HOTPLUG_FEATURES.join(", ")
                    ));
                }
            }
            Ok(())
        }
        "vga" => {
            let p = check_props(
                option,
                value,
                Some("type"),
                &["type", "memory", "clipboard"],
            )?;
            if let Some(t) = p.get("type") {
                if !VGA_TYPES.contains(&t) {
                    return Err(format!(
                        "vga: unknown type '{t}' ({})",
                        VGA_TYPES.join(", ")
                    ));
                }
            }
            if p.get("clipboard").is_some_and(|c| c != "vnc") {
                return Err("vga: clipboard can only be 'vnc'".into());
            }
            check_int(option, &p, "memory", (4, 512))
        }
        "rng" => {
            let p = check_props(
                option,
                value,
                Some("source"),
                &["source", "max_bytes", "period"],
            )?;
            match p.get("source") {
                Some(s) if RNG_SOURCES.contains(&s) => {}
                other => {
                    return Err(format!(
                        "rng0: source '{}' must be one of {}",
                        other.unwrap_or(""),
                        RNG_SOURCES.join(", ")
                    ))
                }
            }
            check_int(option, &p, "max_bytes", (0, u64::MAX))?;
            check_int(option, &p, "period", (0, u64::MAX))
        }
        "startup" => {
            let p = check_props(option, value, Some("order"), &["order", "up", "down"])?;
            for k in ["order", "up", "down"] {
                check_int(option, &p, k, (0, u64::MAX))?;
            }
            Ok(())
        }
        "serial" => {
            if value == "socket" || (value.starts_with("/dev/") && value.len() > 5) {
                Ok(())
            } else {
                Err(format!(
                    "{option}: '{value}' must be 'socket' or a /dev/ path"
                ))
            }
        }
        "hostpci" => {
            let p = check_props(option, value, Some("host"), HOSTPCI_KEYS)?;
            if p.get("host").is_none() && p.get("mapping").is_none() {
                return Err(format!("{option}: needs host or mapping"));
            }
            Ok(())
        }
        "ipconfig" => {
            let p = check_props(option, value, None, IPCONFIG_KEYS)?;
            for (k, v) in p.iter() {
                let ok = match k {
                    "ip" => v == "dhcp" || is_cidr(v, false),
                    "ip6" => v == "dhcp" || v == "auto" || is_cidr(v, true),
                    "gw" => is_ip(v, false),
                    _ => is_ip(v, true),
                };
                if !ok {
                    return Err(format!("{option}: {k} '{v}' is not valid"));
                }
            }
            Ok(())
        }
        "cicustom" => {
            let p = check_props(option, value, None, CICUSTOM_KEYS)?;
            for (k, v) in p.iter() {
                if !v.contains(':') {
                    return Err(format!(
                        "cicustom: {k} '{v}' is not a volume (storage:snippets/file.yaml)"
                    ));
                }
            }
            Ok(())
        }
        "nameserver" => {
            for a in value.split([' ', ',', ';']).filter(|a| !a.is_empty()) {
                if a.parse::<IpAddr>().is_err() {
                    return Err(format!("nameserver: '{a}' is not an IP address"));
                }
            }
            Ok(())
        }
        "sshkeys" => {
            for l in ssh_key_lines(value) {
                let mut parts = l.split_whitespace();
                let (t, k) = (parts.next().unwrap_or(""), parts.next());
                let known =
                    t.starts_with("ssh-") || t.starts_with("ecdsa-") || t.starts_with("sk-");
                if !known || k.is_none() {
                    return Err(format!(
                        "sshkeys: '{}' is not an OpenSSH public key",
                        l.chars().take(40).collect::<String>()
                    ));
                }
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// `extra_config` entries: a key PVE knows and no module option manages.
pub fn validate_extra(extra: &BTreeMap<String, String>) -> Vec<String> {
    let mut errs = Vec::new();
    for (k, v) in extra {
        if let Some(opt) = managed_by_option(k) {
            errs.push(format!(
                "extra_config: '{k}' is managed by the option {opt}; set it there"
            ));
        } else if !is_config_key(k) {
            errs.push(format!(
                "extra_config: '{k}' is not a Proxmox VM config key"
            ));
        } else if let Err(e) = validate(k, v) {
            errs.push(format!("extra_config: {e}"));
        }
    }
    errs
}

/// Keys qemu-server lets only a root@pam session set (`$check_vm_modify_config_perm`'s catch-all:
/// in none of its option tables). Not exhaustive: the ones `extra_config` users reach for.
const ROOT_ONLY_KEYS: &[&str] = &["args", "affinity", "arch", "hookscript", "vmgenid"];

/// Why changing `key` from `old` to `new` (`None`: unset) needs a root@pam session — qemu-server
/// (`PVE/API2/Qemu.pm`) refuses it to everyone else, API tokens included, root's own too (a token's
/// authuser is `root@pam!name`): raw host PCI devices (`check_hostpci_perm`), host USB devices
/// (`check_usb_perm`), serial ports other than `socket`, and keys outside its option tables.
/// `None` when a user with the VM privileges may.
pub fn root_only_change(key: &str, new: Option<&str>, old: Option<&str>) -> Option<String> {
    let base = key.trim_end_matches(|c: char| c.is_ascii_digit());
    let numbered = base.len() < key.len();
    let values = || [new, old].into_iter().flatten();
    let prop = |v: &str, dk: &str| PropString::parse(v, Some(dk)).ok();
    let raw = match base {
        "hostpci" if numbered => {
            values().any(|v| prop(v, "host").is_some_and(|p| p.get("host").is_some()))
        }
        "usb" if numbered => values().any(|v| {
            prop(v, "host").is_some_and(|p| {
                p.get("host")
                    .is_some_and(|h| !h.eq_ignore_ascii_case("spice"))
            })
        }),
        "serial" if numbered => values().any(|v| v != "socket"),
        "parallel" if numbered => true,
        _ => ROOT_ONLY_KEYS.contains(&key),
    };
    raw.then(|| match base {
        "hostpci" => format!("{key}: a raw host PCI device (not a mapping=)"),
        "usb" => format!("{key}: a host USB device (not spice or a mapping=)"),
        "serial" => format!("{key}: a real serial device (not socket)"),
        _ => format!("{key}: a key Proxmox reserves to root@pam"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_only_changes_as_qemu_server_decides_them() {
        let r = |k, n, o| root_only_change(k, n, o).is_some();
        assert!(r("hostpci0", Some("0000:01:00.0,pcie=1"), None));
        assert!(!r("hostpci0", Some("mapping=gpu,pcie=1"), None));
        // Replacing or removing a raw device is root's too: the old value counts.
        assert!(r("hostpci0", Some("mapping=gpu"), Some("0000:01:00.0")));
        assert!(r("hostpci0", None, Some("0000:01:00.0")));
        assert!(r("usb0", Some("host=1-2"), None));
        assert!(!r("usb0", Some("spice"), None));
        assert!(r("serial0", Some("/dev/ttyS0"), None));
        assert!(!r("serial0", Some("socket"), Some("socket")));
        assert!(r("args", Some("-no-reboot"), None));
        assert!(!r("vga", Some("serial0"), None));
    }

    #[test]
    fn sshkeys_are_url_encoded_and_compared_decoded() {
        let keys = "ssh-ed25519 AAAAC3Nz a@b\nssh-rsa AAAAB3 c d\n";
        let sent = send_value("sshkeys", keys);
        assert_eq!(
            sent,
            "ssh-ed25519%20AAAAC3Nz%20a%40b%0Assh-rsa%20AAAAB3%20c%20d"
        );
        assert_eq!(url_decode(&sent), keys.trim_end());
        assert_eq!(
            canonical("sshkeys", Some(&sent)),
            canonical("sshkeys", Some(keys))
        );
        assert!(validate("sshkeys", keys).is_ok());
        assert!(validate("sshkeys", "hello")
            .unwrap_err()
            .starts_with("sshkeys:"));
    }

    #[test]
    fn property_strings_compare_in_any_order() {
        assert_eq!(
            canonical("vga", Some("memory=32,type=serial0")),
            canonical("vga", Some("serial0,memory=32"))
        );
        assert_eq!(
            canonical("ipconfig0", Some("gw=10.0.0.1,ip=10.0.0.5/24")),
            canonical("ipconfig0", Some("ip=10.0.0.5/24,gw=10.0.0.1"))
        );
        assert_eq!(canonical("hotplug", Some("1")), canonical("hotplug", None));
        assert_eq!(canonical("numa", None), Some("0".into()));
        assert_eq!(canonical("cores", None), None);
    }

    #[test]
    fn bad_values_name_the_option() {
        for (opt, value, want) in [
            ("vga", "vga9", "vga: unknown type 'vga9'"),
            ("vga", "std,memory=1024", "vga: memory '1024'"),
            ("rng0", "/dev/zero", "rng0: source '/dev/zero'"),
            ("startup", "order=first", "startup: order 'first'"),
            ("serial0", "tty", "serial0: 'tty'"),
            ("hostpci0", "pcie=1", "hostpci0: needs host or mapping"),
            ("ipconfig0", "ip=10.0.0.5", "ipconfig0: ip '10.0.0.5'"),
            (
                "ipconfig1",
                "ip6=dhcp,gw=fe80::1",
                "ipconfig1: gw 'fe80::1'",
            ),
            ("cicustom", "user=user.yaml", "cicustom: user 'user.yaml'"),
            ("nameserver", "10.0.0.1 dns", "nameserver: 'dns'"),
            ("hotplug", "disk,gpu", "hotplug: unknown feature 'gpu'"),
        ] {
            let e = validate(opt, value).unwrap_err();
            assert!(e.starts_with(want), "{opt}={value}: {e}");
        }
        for (opt, value) in [
            ("vga", "serial0"),
            ("rng0", "source=/dev/urandom,max_bytes=1024,period=1000"),
            ("startup", "order=2,up=30"),
            ("hostpci0", "0000:01:00.0,pcie=1,x-vga=1"),
            ("ipconfig0", "ip=10.0.0.5/24,gw=10.0.0.1,ip6=auto"),
            (
                "cicustom",
                "user=local:snippets/u.yaml,network=local:snippets/n.yaml",
            ),
            ("nameserver", "10.0.0.1 2001:db8::1"),
            ("hotplug", "network,disk,cpu"),
        ] {
            assert!(validate(opt, value).is_ok(), "{opt}={value}");
        }
    }

    #[test]
    fn extra_config_takes_unmanaged_known_keys_only() {
        let m = |k: &str, v: &str| BTreeMap::from([(k.to_string(), v.to_string())]);
        assert!(validate_extra(&m("tablet", "0")).is_empty());
        assert!(validate_extra(&m("usb0", "host=1-1")).is_empty());
        assert!(validate_extra(&m("numa0", "cpus=0-1,memory=1024")).is_empty());
        assert!(validate_extra(&m("rng0", "/dev/urandom"))[0].contains("option rng0"));
        assert_eq!(
            validate_extra(&m("cores", "2")),
            ["extra_config: 'cores' is managed by the option cores; set it there"]
        );
        assert!(validate_extra(&m("scsi3", "local-lvm:1"))[0].contains("disks / cdrom"));
        assert_eq!(
            validate_extra(&m("tabletz", "1")),
            ["extra_config: 'tabletz' is not a Proxmox VM config key"]
        );
        assert!(validate_extra(&m("vga", "x"))[0].contains("option vga"));
    }

    /// The lists above against PVE's API schema (the subset pvesim validates with, which
    /// names its origin): a key or enum value PVE adds or drops shows here.
    #[test]
    fn lists_match_the_pve_schema() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../pvesim/schema/pve-api-subset.json"
        );
        let schema: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let props = schema
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["path"] == "/nodes/{node}/qemu/{vmid}/config")
            .map(|e| &e["methods"]["POST"]["parameters"]["properties"])
            .unwrap();
        let strs = |v: &serde_json::Value| -> Vec<String> {
            v.as_array()
                .unwrap()
                .iter()
                .map(|s| s.as_str().unwrap().to_string())
                .collect()
        };
        assert_eq!(strs(&props["vga"]["format"]["type"]["enum"]), VGA_TYPES);
        let typetext = |k: &str| props[k]["typetext"].as_str().unwrap().to_string();
        for s in RNG_SOURCES {
            assert!(typetext("rng0").contains(s), "{s}");
        }
        for k in CICUSTOM_KEYS {
            assert!(typetext("cicustom").contains(&format!("{k}=")), "{k}");
        }
        for k in IPCONFIG_KEYS {
            assert!(typetext("ipconfig[n]").contains(&format!("{k}=")), "{k}");
        }
        for k in HOSTPCI_KEYS {
            assert!(typetext("hostpci[n]").contains(&format!("{k}=")), "{k}");
        }
        let mut api_keys: Vec<String> = props
            .as_object()
            .unwrap()
            .keys()
            .map(|k| {
                k.trim_end_matches("[n]")
                    .trim_end_matches(char::is_numeric)
                    .to_string()
            })
            .filter(|k| {
                !matches!(
                    k.as_str(),
                    "background_delay"
                        | "cdrom"
                        | "delete"
                        | "digest"
                        | "force"
                        | "import-working-storage"
                        | "node"
                        | "revert"
                        | "skiplock"
                        | "vmid"
                )
            })
            .collect();
        api_keys.sort();
        api_keys.dedup();
        let mut ours: Vec<String> = CONFIG_KEYS.iter().map(|k| k.to_string()).collect();
        ours.sort();
        assert_eq!(ours, api_keys);
        assert!(props["sshkeys"]["format"] == "urlencoded");
    }
}
