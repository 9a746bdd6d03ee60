//! Pure VM-config logic: drive/NIC strings, normalisation, digest (hot-plug rules: `ops::hotplug`).

use std::collections::BTreeMap;

use rand::Rng;
use sha1::{Digest, Sha1};

use crate::propstr::{self, PropString};
use crate::schema;

pub const DRIVE_BASES: &[&str] = &["ide", "sata", "scsi", "virtio"];

/// `ide0`…, `scsi30`, `efidisk0`, `tpmstate0`, `unused3`.
pub fn is_drive_key(k: &str) -> bool {
    if k == "efidisk0" || k == "tpmstate0" {
        return true;
    }
    let base = k.trim_end_matches(|c: char| c.is_ascii_digit());
    base.len() < k.len() && (DRIVE_BASES.contains(&base) || base == "unused")
}

pub fn is_net_key(k: &str) -> bool {
    let base = k.trim_end_matches(|c: char| c.is_ascii_digit());
    base == "net" && base.len() < k.len()
}

/// Parses a drive string with its schema (falls back to a loose parse for odd seeds).
pub fn parse_drive(key: &str, value: &str) -> PropString {
    let fmt_key = if key.starts_with("unused") {
        "unused0"
    } else {
        key
    };
    schema::config_format(fmt_key)
        .and_then(|f| propstr::parse(f, value).ok())
        .unwrap_or_else(|| propstr::parse_loose(value, "file"))
}

pub fn print_drive(ps: &PropString) -> String {
    ps.print(Some("file"))
}

pub fn is_cdrom(ps: &PropString) -> bool {
    ps.get("media") == Some("cdrom") || ps.get("file") == Some("cdrom")
}

/// `local-lvm:vm-101-disk-0` → (`local-lvm`, `vm-101-disk-0`).
pub fn split_volid(volid: &str) -> Option<(&str, &str)> {
    let (s, v) = volid.split_once(':')?;
    (!s.is_empty() && !v.is_empty()).then_some((s, v))
}

/// A new-volume request `STORAGE:SIZE_GiB` (size may be fractional; 0 with import-from).
pub fn alloc_request(file: &str) -> Option<(&str, f64)> {
    let (s, size) = split_volid(file)?;
    if size.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        size.parse().ok().map(|n| (s, n))
    } else {
        None
    }
}

/// A cloud-init drive request `STORAGE:cloudinit` (qemu-server `create_disks`: a volname of
/// `cloudinit`): the storage to allocate `vm-<vmid>-cloudinit` on.
pub fn cloudinit_request(file: &str) -> Option<&str> {
    split_volid(file).and_then(|(s, name)| (name == "cloudinit").then_some(s))
}

/// qemu-server `drive_is_cloudinit` (`PVE/QemuServer/Drive.pm`): a file ending in
/// `[:/]cloudinit` or `[:/]vm-<N>-cloudinit`, optionally with a format suffix. Such a CD-ROM is
/// the VM's own volume (freed with the VM, unlike an ISO).
pub fn is_cloudinit_volume(file: &str) -> bool {
    let base = ["raw", "qcow2", "vmdk"]
        .iter()
        .find_map(|f| file.strip_suffix(&format!(".{f}")))
        .unwrap_or(file);
    let Some(rest) = base.strip_suffix("cloudinit") else {
        return false;
    };
    if rest.ends_with([':', '/']) {
        return true;
    }
    let Some(vm) = rest.strip_suffix('-') else {
        return false;
    };
    let digits = vm.trim_end_matches(|c: char| c.is_ascii_digit());
    digits.len() < vm.len()
        && digits.ends_with("vm-")
        && digits[..digits.len() - 3].ends_with([':', '/'])
}

pub fn parse_net(value: &str) -> PropString {
    schema::config_format("net0")
        .and_then(|f| propstr::parse(f, value).ok())
        .unwrap_or_else(|| propstr::parse_loose(value, "model"))
}

/// qemu-server writes NICs as `<model>=<MAC>,bridge=…,…`.
pub fn print_net(ps: &PropString) -> String {
    let mut rest = ps.clone();
    let model = rest.remove("model").unwrap_or_else(|| "virtio".into());
    let head = match rest.remove("macaddr") {
        Some(mac) => format!("{model}={mac}"),
        None => model,
    };
    let tail = rest.print(None);
    if tail.is_empty() {
        head
    } else {
        format!("{head},{tail}")
    }
}

pub fn random_mac(prefix: &str) -> String {
    let mut rng = rand::rng();
    let b: [u8; 3] = rng.random();
    format!("{prefix}:{:02X}:{:02X}:{:02X}", b[0], b[1], b[2])
}

pub fn uuid_v4() -> String {
    let mut b: [u8; 16] = rand::rng().random();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// Tags lowercased, sorted, de-duplicated, `;`-joined.
pub fn normalize_tags(tags: &str) -> String {
    let mut v: Vec<String> = tags
        .split([';', ',', ' '])
        .filter(|t| !t.is_empty())
        .map(|t| t.to_lowercase())
        .collect();
    v.sort();
    v.dedup();
    v.join(";")
}

/// qemu-server's default boot order: first disk, CD-ROMs, first NIC.
pub fn default_boot(conf: &BTreeMap<String, String>) -> String {
    let mut disks = Vec::new();
    let mut cdroms = Vec::new();
    for base in DRIVE_BASES {
        for i in 0..=30 {
            let k = format!("{base}{i}");
            if let Some(v) = conf.get(&k) {
                if is_cdrom(&parse_drive(&k, v)) {
                    cdroms.push(k);
                } else {
                    disks.push(k);
                }
            }
        }
    }
    let mut order: Vec<String> = disks.into_iter().take(1).collect();
    order.extend(cdroms);
    if let Some(net) = (0..32)
        .map(|i| format!("net{i}"))
        .find(|k| conf.contains_key(k))
    {
        order.push(net);
    }
    format!("order={}", order.join(";"))
}

/// Devices named in `boot: order=…` that are not in the config.
pub fn missing_boot_device(conf: &BTreeMap<String, String>) -> Option<String> {
    let boot = conf.get("boot")?;
    let ps = propstr::parse_loose(boot, "legacy");
    let order = ps.get("order")?;
    order
        .split(';')
        .filter(|d| !d.is_empty())
        .find(|d| !conf.contains_key(*d))
        .map(str::to_string)
}

/// The config file text (description as `#` comments, keys sorted, `[PENDING]` section);
/// its SHA1 is the `digest`.
pub fn render(
    conf: &BTreeMap<String, String>,
    pending: &BTreeMap<String, String>,
    pending_delete: &BTreeMap<String, bool>,
) -> String {
    let mut out = String::new();
    let section = |out: &mut String, c: &BTreeMap<String, String>| {
        if let Some(d) = c.get("description") {
            for line in d.lines() {
                out.push_str(&format!("#{line}\n"));
            }
        }
        for (k, v) in c {
            if k != "description" {
                out.push_str(&format!("{k}: {v}\n"));
            }
        }
    };
    section(&mut out, conf);
    if !pending.is_empty() || !pending_delete.is_empty() {
        out.push_str("\n[PENDING]\n");
        section(&mut out, pending);
        if !pending_delete.is_empty() {
            let d: Vec<String> = pending_delete
                .iter()
                .map(|(k, force)| if *force { format!("!{k}") } else { k.clone() })
                .collect();
            out.push_str(&format!("delete: {}\n", d.join(",")));
        }
    }
    out
}

pub fn sha1_hex(text: &str) -> String {
    Sha1::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A size pvesim cannot read (`64G`, `+10G`, bytes).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("invalid size '{0}'")]
pub struct SizeError(pub String);

/// Resize target: `+10G` (relative) or `130G` (absolute), in bytes.
pub fn resize_target(spec: &str, current: u64) -> Result<u64, SizeError> {
    let (rel, rest) = match spec.strip_prefix('+') {
        Some(r) => (true, r),
        None => (false, spec),
    };
    // A bare number means bytes in the resize API.
    let n = crate::model::parse_size(rest).ok_or_else(|| SizeError(spec.to_string()))?;
    Ok(if rel { current + n } else { n })
}

/// (default format, supported formats) per storage type (pve-storage plugindata).
/// `lvm` is raw only: `LVMPlugin.pm` `alloc_image` dies "unsupported format" for anything else
/// on PVE 8, and PVE 9's `get_formats` allows qcow2 only with `snapshot-as-volume-chain`,
/// which pvesim does not model.
pub fn storage_formats(kind: &str) -> (&'static str, &'static [&'static str]) {
    match kind {
        "dir" | "nfs" | "cifs" | "glusterfs" => ("raw", &["raw", "qcow2", "vmdk"]),
        "btrfs" => ("raw", &["raw", "subvol"]),
        "zfspool" => ("raw", &["raw", "subvol"]),
        _ => ("raw", &["raw"]),
    }
}

/// Content types a storage type accepts (used as the default `content`).
pub fn storage_default_content(kind: &str) -> &'static [&'static str] {
    match kind {
        "dir" | "nfs" | "cifs" => &[
            "images", "iso", "vztmpl", "backup", "snippets", "import", "rootdir",
        ],
        "cephfs" => &["iso", "vztmpl", "backup", "snippets", "import"],
        "pbs" => &["backup"],
        _ => &["images", "rootdir"],
    }
}

/// The parent directory of `GET config`/`status` values that are typed as numbers.
pub fn json_value(key: &str, value: &str) -> serde_json::Value {
    const NUMERIC: &[&str] = &[
        "cores",
        "sockets",
        "vcpus",
        "balloon",
        "onboot",
        "template",
        "protection",
        "numa",
        "acpi",
        "kvm",
        "tablet",
        "shares",
        "cpuunits",
        "localtime",
        "freeze",
        "autostart",
        "reboot",
        "migrate_downtime",
        "cpulimit",
    ];
    if NUMERIC.contains(&key) {
        if let Ok(n) = value.parse::<i64>() {
            return n.into();
        }
        if let Ok(f) = value.parse::<f64>() {
            return serde_json::json!(f);
        }
    }
    value.into()
}

#[cfg(test)]
mod tests {
    use super::{
        alloc_request, default_boot, is_drive_key, missing_boot_device, normalize_tags,
        parse_drive, parse_net, print_net, random_mac, resize_target, schema, BTreeMap,
    };

    #[test]
    fn tags_are_normalised() {
        assert_eq!(normalize_tags("ocp;Zeta;alpha;OCP"), "alpha;ocp;zeta");
        assert_eq!(normalize_tags(""), "");
    }

    #[test]
    fn default_boot_order() {
        let mut c = BTreeMap::new();
        c.insert("scsi0".into(), "local-lvm:vm-1-disk-0,size=1G".into());
        c.insert("scsi1".into(), "local-lvm:vm-1-disk-1,size=1G".into());
        c.insert("ide2".into(), "local:iso/a.iso,media=cdrom".into());
        c.insert(
            "net0".into(),
            "virtio=BC:24:11:00:00:01,bridge=vmbr0".into(),
        );
        assert_eq!(default_boot(&c), "order=scsi0;ide2;net0");
        c.insert("boot".into(), "order=scsi0;sata1".into());
        assert_eq!(missing_boot_device(&c).as_deref(), Some("sata1"));
    }

    #[test]
    fn net_printing_and_mac() {
        let ps = parse_net("model=virtio,bridge=vmbr0,macaddr=BC:24:11:AA:BB:CC,tag=5");
        assert_eq!(
            print_net(&ps),
            "virtio=BC:24:11:AA:BB:CC,bridge=vmbr0,tag=5"
        );
        let mac = random_mac("BC:24:11");
        assert!(mac.starts_with("BC:24:11:") && mac.len() == 17);
        assert!(schema::check_format("mac-addr", &mac).is_ok());
    }

    #[test]
    fn resize_and_sizes() {
        assert_eq!(resize_target("+10G", 32 << 30).unwrap(), 42 << 30);
        assert_eq!(resize_target("130G", 32 << 30).unwrap(), 130 << 30);
        assert!(resize_target("x", 0).is_err());
        assert_eq!(crate::model::format_size(4 << 20), "4M");
        assert_eq!(crate::model::format_size(120 << 30), "120G");
    }

    #[test]
    fn cloudinit_volumes() {
        assert!(super::is_cloudinit_volume("local-lvm:vm-100-cloudinit"));
        assert!(super::is_cloudinit_volume(
            "local:100/vm-100-cloudinit.qcow2"
        ));
        assert!(super::is_cloudinit_volume("local-lvm:cloudinit"));
        assert!(!super::is_cloudinit_volume("local:iso/cloudinit-seed.iso"));
        assert!(!super::is_cloudinit_volume("local-lvm:vm-100-disk-0"));
    }

    #[test]
    fn drive_keys() {
        assert!(is_drive_key("scsi0") && is_drive_key("efidisk0") && is_drive_key("unused2"));
        assert!(!is_drive_key("net0") && !is_drive_key("scsihw"));
        let d = parse_drive("scsi0", "local-lvm:32,iothread=1,format=raw");
        assert_eq!(
            alloc_request(d.get("file").unwrap()),
            Some(("local-lvm", 32.0))
        );
        assert!(alloc_request("local-lvm:vm-100-disk-0").is_none());
    }
}
