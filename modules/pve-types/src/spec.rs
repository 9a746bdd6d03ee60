//! The typed VM spec, its validation, the create parameters it yields, and the parsers for the
//! current config's disks and NICs.
//!
//! Scalars left `None` are not managed. A listed disk or NIC is a complete definition: options it
//! does not set go back to Proxmox's defaults, except identity the module must keep (a NIC's MAC when
//! none is given, a disk's volume).

use std::collections::BTreeMap;

use crate::error::SpecError;
use serde::Deserialize;

use crate::propstring::{
    bool01, format_size, normalize_mac, parse_size, valid_tag, valid_vm_name, PropString,
};

pub const GIB: u64 = 1 << 30;
const KIB: u64 = 1 << 10;

/// One data disk.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
pub struct Disk {
    /// `scsi0`…`scsi30`, `virtio0`…`virtio15`, `sata0`…`sata5`, `ide0`…`ide3`.
    pub slot: String,
    pub storage: String,
    /// `120G`, `512M`, `1T`; a bare number is GiB.
    pub size: String,
    /// `raw`, `qcow2`, `vmdk`: only used when the disk is allocated.
    #[serde(default)]
    pub format: Option<String>,
    #[serde(default)]
    pub ssd: Option<bool>,
    #[serde(default)]
    pub iothread: Option<bool>,
    #[serde(default)]
    pub discard: Option<bool>,
    #[serde(default)]
    pub cache: Option<String>,
    #[serde(default)]
    pub wwn: Option<String>,
    #[serde(default)]
    pub serial: Option<String>,
    #[serde(default)]
    pub backup: Option<bool>,
    /// A volume to copy into the new disk (`local:import/rhcos.qcow2`, another VM's disk):
    /// PVE's `import-from`. Only used when the disk is allocated; `size` is then the size to
    /// grow the copy to (at least the image's).
    #[serde(default)]
    pub import_from: Option<String>,
}

/// One network card.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
pub struct Nic {
    /// `net0`…`net31`.
    pub slot: String,
    #[serde(default)]
    pub model: Option<String>,
    pub bridge: String,
    /// Fixed MAC; when not given, Proxmox generates one and the module keeps it.
    #[serde(default)]
    pub mac: Option<String>,
    #[serde(default)]
    pub vlan: Option<u16>,
    #[serde(default)]
    pub mtu: Option<u16>,
    #[serde(default)]
    pub firewall: Option<bool>,
    #[serde(default)]
    pub queues: Option<u16>,
    #[serde(default)]
    pub link_down: Option<bool>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
pub struct EfiDisk {
    /// Where to create it; defaults to the first disk's storage.
    #[serde(default)]
    pub storage: Option<String>,
    #[serde(default)]
    pub efitype: Option<String>,
    #[serde(default)]
    pub pre_enrolled_keys: Option<bool>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
pub struct Tpm {
    #[serde(default)]
    pub storage: Option<String>,
    #[serde(default)]
    pub version: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
pub struct Cdrom {
    #[serde(default)]
    pub slot: Option<String>,
    /// An ISO volume (`local:iso/agent.x86_64.iso`) or `none` for an empty drive.
    #[serde(default)]
    pub iso: Option<String>,
}

/// The cloud-init drive Proxmox generates from the cloud-init options (`<storage>:cloudinit`).
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
pub struct CloudinitDrive {
    pub storage: String,
    /// A drive slot; `ide0` unless given (`ide2` is the CD-ROM's).
    #[serde(default)]
    pub slot: Option<String>,
}

impl CloudinitDrive {
    pub fn slot(&self) -> &str {
        self.slot.as_deref().unwrap_or("ide0")
    }
    /// What creates it: `local-lvm:cloudinit`.
    pub fn request(&self) -> String {
        format!("{}:cloudinit", self.storage)
    }
}

impl Cdrom {
    pub fn slot(&self) -> &str {
        self.slot.as_deref().unwrap_or("ide2")
    }
    pub fn iso(&self) -> &str {
        self.iso.as_deref().unwrap_or("none")
    }
}

/// The desired VM. `None` = not managed.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
pub struct VmSpec {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub cpu: Option<String>,
    #[serde(default)]
    pub cores: Option<u32>,
    #[serde(default)]
    pub sockets: Option<u32>,
    /// MiB.
    #[serde(default)]
    pub memory: Option<u64>,
    /// MiB; 0 disables the balloon device.
    #[serde(default)]
    pub balloon: Option<u64>,
    #[serde(default)]
    pub bios: Option<String>,
    #[serde(default)]
    pub efidisk: Option<EfiDisk>,
    #[serde(default)]
    pub machine: Option<String>,
    #[serde(default)]
    pub tpm: Option<Tpm>,
    #[serde(default)]
    pub scsihw: Option<String>,
    #[serde(default)]
    pub disks: Option<Vec<Disk>>,
    #[serde(default)]
    pub nics: Option<Vec<Nic>>,
    #[serde(default)]
    pub cdrom: Option<Cdrom>,
    /// Boot order, e.g. `[scsi0, ide2]`.
    #[serde(default)]
    pub boot: Option<Vec<String>>,
    #[serde(default)]
    pub onboot: Option<bool>,
    #[serde(default)]
    pub ostype: Option<String>,
    #[serde(default)]
    pub agent: Option<bool>,
    #[serde(default)]
    pub tags: Option<Vec<String>>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub protection: Option<bool>,
    /// Hot-plugged vCPUs (at most cores × sockets).
    #[serde(default)]
    pub vcpus: Option<u32>,
    #[serde(default)]
    pub numa: Option<bool>,
    /// `network,disk,usb` (also `1`), `0`, or a list of network, disk, cpu, memory, usb, cloudinit.
    #[serde(default)]
    pub hotplug: Option<String>,
    /// PVE's `vga` property string (`serial0`, `std,memory=32`).
    #[serde(default)]
    pub vga: Option<String>,
    /// `serial0`…`serial3` → `socket` or a `/dev/` path; `""` removes one.
    #[serde(default)]
    pub serial: Option<BTreeMap<String, String>>,
    /// PVE's `rng0` property string (`source=/dev/urandom,max_bytes=1024,period=1000`).
    #[serde(default)]
    pub rng0: Option<String>,
    /// PVE's `startup` property string (`order=1,up=30,down=60`).
    #[serde(default)]
    pub startup: Option<String>,
    /// `hostpci0`…`hostpci15` → PVE's property string (`0000:01:00.0,pcie=1`); `""` removes one.
    #[serde(default)]
    pub hostpci: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub cloudinit_drive: Option<CloudinitDrive>,
    #[serde(default)]
    pub ciuser: Option<String>,
    /// OpenSSH public keys, one a line (sent URL-encoded, as PVE wants them).
    #[serde(default)]
    pub sshkeys: Option<String>,
    /// `ipconfig0`…`ipconfig31` → `ip=10.0.0.5/24,gw=10.0.0.1` (or `ip=dhcp`); `""` removes one.
    #[serde(default)]
    pub ipconfig: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub nameserver: Option<String>,
    #[serde(default)]
    pub searchdomain: Option<String>,
    /// PVE's `cicustom` (`user=local:snippets/user.yaml,network=…`).
    #[serde(default)]
    pub cicustom: Option<String>,
    /// Any other VM config key PVE knows, as PVE spells its value (`tablet: 0`,
    /// `usb0: host=1-1`); `""` (or null) removes it. Keys an option manages are refused.
    #[serde(default)]
    pub extra_config: Option<BTreeMap<String, serde_json::Value>>,
}

/// The bus of a disk slot and its index range.
pub fn disk_bus(slot: &str) -> Option<(&'static str, u32)> {
    for (bus, max) in [("scsi", 30), ("virtio", 15), ("sata", 5), ("ide", 3)] {
        if let Some(n) = slot.strip_prefix(bus) {
            let idx: u32 = n.parse().ok()?;
            if n.starts_with('0') && n.len() > 1 {
                return None;
            }
            return (idx <= max).then_some((bus, idx));
        }
    }
    None
}

/// Is `key` a disk-like config key (a drive slot, `efidisk0`, `tpmstate0`)?
pub fn is_drive_key(key: &str) -> bool {
    disk_bus(key).is_some() || key == "efidisk0" || key == "tpmstate0"
}

fn nic_index(slot: &str) -> Option<u32> {
    let n = slot.strip_prefix("net")?;
    let i: u32 = n.parse().ok()?;
    (i <= 31 && !(n.starts_with('0') && n.len() > 1)).then_some(i)
}

pub const NIC_MODELS: &[&str] = &[
    "e1000",
    "e1000-82540em",
    "e1000-82544gc",
    "e1000-82545em",
    "e1000e",
    "i82551",
    "i82557b",
    "i82559er",
    "ne2k_isa",
    "ne2k_pci",
    "pcnet",
    "rtl8139",
    "virtio",
    "vmxnet3",
];

impl Disk {
    /// The size as PVE records it: rounded *up* to whole KiB. qemu-server's `create_disks`
    /// allocates `PVE::Tools::convert_size($size, 'gb' => 'kb')`, which rounds up, and stores
    /// that as `size=`; comparing the raw request (`10.1G` is not a whole number of KiB)
    /// would see the new disk as bigger than asked ("cannot shrink") or smaller (a resize on
    /// every run).
    pub fn size_bytes(&self) -> Result<u64, SpecError> {
        let bytes = parse_size(&self.size, 'G').map_err(|source| SpecError::DiskSize {
            slot: self.slot.clone(),
            source,
        })?;
        Ok(bytes.div_ceil(KIB) * KIB)
    }

    /// The managed options as PVE writes them (defaults left out).
    fn managed_options(&self) -> Vec<(&'static str, Option<String>)> {
        vec![
            ("ssd", self.ssd.filter(|b| *b).map(|_| "1".to_string())),
            (
                "iothread",
                self.iothread.filter(|b| *b).map(|_| "1".to_string()),
            ),
            (
                "discard",
                self.discard.filter(|b| *b).map(|_| "on".to_string()),
            ),
            (
                "cache",
                self.cache.clone().filter(|c| c != "none" && !c.is_empty()),
            ),
            ("wwn", self.wwn.clone().filter(|s| !s.is_empty())),
            ("serial", self.serial.clone().filter(|s| !s.is_empty())),
            (
                "backup",
                self.backup.filter(|b| !*b).map(|_| "0".to_string()),
            ),
        ]
    }

    /// `storage:GiB,format=..,opts` for allocating this disk. The GiB number is exact (a whole
    /// number of KiB is a finite binary fraction of a GiB), so PVE allocates exactly
    /// [`Disk::size_bytes`]: `100M` is sent as `0.09765625`, not a rounded `0.098` that PVE
    /// would turn into `102761K`.
    pub fn allocation_string(&self) -> Result<String, SpecError> {
        let size = exact_gib(self.size_bytes()? / KIB);
        let mut p = PropString::new();
        match &self.import_from {
            // PVE takes `import-from` only with a size of 0; the copy has the image's size
            // and is grown to `size` afterwards.
            Some(src) => {
                p.set("file", format!("{}:0", self.storage));
                p.set("import-from", src.clone());
            }
            None => p.set("file", format!("{}:{size}", self.storage)),
        }
        if let Some(f) = &self.format {
            p.set("format", f.clone());
        }
        for (k, v) in self.managed_options() {
            if let Some(v) = v {
                p.set(k, v);
            }
        }
        Ok(p.render(Some("file")))
    }

    /// The current drive string with the managed options replaced by this spec's (others kept).
    pub fn apply_to(&self, current: &PropString) -> PropString {
        let mut p = current.clone();
        p.remove("size");
        for (k, v) in self.managed_options() {
            match v {
                Some(v) => p.set(k, v),
                None => {
                    p.remove(k);
                }
            }
        }
        p
    }
}

/// A drive as found in the config.
#[derive(Debug, Clone, PartialEq)]
pub struct CurrentDrive {
    pub slot: String,
    pub props: PropString,
    pub volid: String,
    /// Storage id of the volume (`local-lvm`), `None` for `none` / absolute paths.
    pub storage: Option<String>,
    pub size: Option<u64>,
    pub cdrom: bool,
}

impl CurrentDrive {
    pub fn parse(slot: &str, value: &str) -> Result<Self, SpecError> {
        let props = PropString::parse(value, Some("file")).map_err(|source| SpecError::Drive {
            slot: slot.to_string(),
            value: value.to_string(),
            source,
        })?;
        let volid = props
            .get("file")
            .or_else(|| props.get("volume"))
            .unwrap_or("")
            .to_string();
        let storage = volid
            .split_once(':')
            .map(|(s, _)| s.to_string())
            .filter(|_| !volid.starts_with('/'));
        let size = match props.get("size") {
            Some(s) => Some(parse_size(s, 'B').map_err(|source| SpecError::DriveSize {
                slot: slot.to_string(),
                source,
            })?),
            None => None,
        };
        Ok(CurrentDrive {
            slot: slot.to_string(),
            cdrom: props.get("media") == Some("cdrom"),
            props,
            volid,
            storage,
            size,
        })
    }

    /// Options compared with a spec: everything but the volume and `size`, sorted, with defaults
    /// dropped so `ssd=0` equals no `ssd`.
    pub fn comparable(props: &PropString) -> Vec<(String, String)> {
        props
            .sorted()
            .into_iter()
            .filter(|(k, v)| {
                !matches!(k.as_str(), "file" | "volume" | "size" | "format")
                    && !matches!(
                        (k.as_str(), v.as_str()),
                        ("ssd", "0")
                            | ("iothread", "0")
                            | ("discard", "ignore")
                            | ("cache", "none")
                            | ("backup", "1")
                            | ("replicate", "1")
                    )
            })
            .collect()
    }
}

/// A NIC as found in the config, or built from a spec.
#[derive(Debug, Clone, PartialEq)]
pub struct NicValue {
    pub model: String,
    pub mac: Option<String>,
    /// Everything else (`bridge`, `tag`, …).
    pub rest: PropString,
}

impl NicValue {
    pub fn parse(value: &str) -> Result<Self, SpecError> {
        let mut p = PropString::parse(value, Some("model"))?;
        let mut model = p.remove("model");
        let mut mac = p.remove("macaddr");
        for m in NIC_MODELS {
            if let Some(v) = p.remove(m) {
                model = Some(m.to_string());
                mac = Some(v);
            }
        }
        let model = model.ok_or_else(|| SpecError::NoNicModel(value.to_string()))?;
        let mac = match mac {
            Some(m) => Some(normalize_mac(&m)?),
            None => None,
        };
        Ok(NicValue {
            model,
            mac,
            rest: p,
        })
    }

    /// `virtio=BC:24:11:…,bridge=vmbr0,…` (the form PVE writes).
    pub fn render(&self) -> String {
        let mut parts = vec![match &self.mac {
            Some(m) => format!("{}={m}", self.model),
            None => self.model.clone(),
        }];
        for (k, v) in self.rest.iter() {
            parts.push(format!("{k}={v}"));
        }
        parts.join(",")
    }

    fn comparable(&self) -> (String, Option<String>, Vec<(String, String)>) {
        let rest = self
            .rest
            .sorted()
            .into_iter()
            .filter(|(k, v)| {
                !matches!(
                    (k.as_str(), v.as_str()),
                    ("firewall", "0") | ("link_down", "0")
                )
            })
            .collect();
        (self.model.clone(), self.mac.clone(), rest)
    }

    pub fn same_as(&self, other: &NicValue) -> bool {
        self.comparable() == other.comparable()
    }
}

impl Nic {
    fn model(&self) -> &str {
        self.model.as_deref().unwrap_or("virtio")
    }

    /// The value this NIC should have, given the current one (whose MAC is kept when none is fixed,
    /// and whose unmanaged options such as `rate` are kept).
    pub fn desired(&self, current: Option<&NicValue>) -> Result<NicValue, SpecError> {
        let mac = match &self.mac {
            Some(m) => Some(normalize_mac(m).map_err(|source| SpecError::NicMac {
                slot: self.slot.clone(),
                source,
            })?),
            None => current.and_then(|c| c.mac.clone()),
        };
        let mut rest = current.map(|c| c.rest.clone()).unwrap_or_default();
        let managed: [(&str, Option<String>); 6] = [
            ("bridge", Some(self.bridge.clone())),
            ("firewall", self.firewall.filter(|b| *b).map(|_| "1".into())),
            (
                "link_down",
                self.link_down.filter(|b| *b).map(|_| "1".into()),
            ),
            ("mtu", self.mtu.map(|v| v.to_string())),
            ("queues", self.queues.map(|v| v.to_string())),
            ("tag", self.vlan.map(|v| v.to_string())),
        ];
        for (k, v) in managed {
            match v {
                Some(v) => rest.set(k, v),
                None => {
                    rest.remove(k);
                }
            }
        }
        // A stable order for values we build from scratch.
        let mut sorted = PropString::new();
        for (k, v) in rest.sorted() {
            sorted.set(&k, v);
        }
        Ok(NicValue {
            model: self.model().to_string(),
            mac,
            rest: sorted,
        })
    }
}

impl VmSpec {
    /// Every problem with the spec itself, each naming the option.
    pub fn validate(&self) -> Vec<String> {
        let mut errs = Vec::new();
        if let Some(n) = &self.name {
            if !valid_vm_name(n) {
                errs.push(format!(
                    "name '{n}' is not a valid Proxmox VM name (letters, digits, '-' and '.', no '_')"
                ));
            }
        }
        if let (Some(m), Some(b)) = (self.memory, self.balloon) {
            if b > m {
                errs.push(format!(
                    "balloon ({b} MiB) must not exceed memory ({m} MiB)"
                ));
            }
        }
        if let Some(m) = self.memory {
            if m < 16 {
                errs.push(format!("memory {m} MiB is below Proxmox's minimum of 16"));
            }
        }
        let mut slots = std::collections::BTreeSet::new();
        for d in self.disks.iter().flatten() {
            match disk_bus(&d.slot) {
                None => errs.push(format!(
                    "disks: slot '{}' is not a disk slot (scsi0-30, virtio0-15, sata0-5, ide0-3)",
                    d.slot
                )),
                Some((bus, _)) => {
                    if d.ssd == Some(true) && bus == "virtio" {
                        errs.push(format!(
                            "disks: {}: ssd is not available on virtio disks (use scsi)",
                            d.slot
                        ));
                    }
                    if d.iothread == Some(true) && !matches!(bus, "scsi" | "virtio") {
                        errs.push(format!(
                            "disks: {}: iothread needs a scsi or virtio disk",
                            d.slot
                        ));
                    }
                }
            }
            if !slots.insert(d.slot.clone()) {
                errs.push(format!("disks: slot '{}' is used twice", d.slot));
            }
            if d.storage.trim().is_empty() {
                errs.push(format!("disks: {}: storage is empty", d.slot));
            }
            match d.size_bytes() {
                Ok(0) => errs.push(format!("disks: {}: size must be more than 0", d.slot)),
                Ok(_) => {}
                Err(e) => errs.push(format!("disks: {e}")),
            }
        }
        if let Some(c) = &self.cdrom {
            if disk_bus(c.slot()).is_none() {
                errs.push(format!("cdrom: slot '{}' is not a drive slot", c.slot()));
            } else if !slots.insert(c.slot().to_string()) {
                errs.push(format!("cdrom: slot '{}' is also used by a disk", c.slot()));
            }
        }
        if let Some(ci) = &self.cloudinit_drive {
            if disk_bus(ci.slot()).is_none() {
                errs.push(format!(
                    "cloudinit_drive: slot '{}' is not a drive slot",
                    ci.slot()
                ));
            } else if !slots.insert(ci.slot().to_string()) {
                errs.push(format!(
                    "cloudinit_drive: slot '{}' is also used by a disk or the cdrom",
                    ci.slot()
                ));
            }
            if ci.storage.trim().is_empty() {
                errs.push("cloudinit_drive: storage is empty".into());
            }
        }
        let mut nic_slots = std::collections::BTreeSet::new();
        for n in self.nics.iter().flatten() {
            if nic_index(&n.slot).is_none() {
                errs.push(format!(
                    "nics: slot '{}' is not a NIC slot (net0-net31)",
                    n.slot
                ));
            }
            if !nic_slots.insert(n.slot.clone()) {
                errs.push(format!("nics: slot '{}' is used twice", n.slot));
            }
            if !NIC_MODELS.contains(&n.model()) {
                errs.push(format!("nics: {}: unknown model '{}'", n.slot, n.model()));
            }
            if let Some(m) = &n.mac {
                if let Err(e) = normalize_mac(m) {
                    errs.push(format!("nics: {}: mac {e}", n.slot));
                }
            }
            if let Some(v) = n.vlan {
                if !(1..=4094).contains(&v) {
                    errs.push(format!("nics: {}: vlan {v} is outside 1-4094", n.slot));
                }
            }
            if n.bridge.trim().is_empty() {
                errs.push(format!("nics: {}: bridge is empty", n.slot));
            }
        }
        for t in self.tags.iter().flatten() {
            if !valid_tag(t) {
                errs.push(format!("tags: '{t}' is not a valid Proxmox tag"));
            }
        }
        if let Some(order) = &self.boot {
            for dev in order {
                let plausible = disk_bus(dev).is_some()
                    || nic_index(dev).is_some()
                    || dev.starts_with("hostpci")
                    || dev.starts_with("usb");
                if !plausible {
                    errs.push(format!(
                        "boot: '{dev}' is not a boot device (a disk, cdrom or NIC slot)"
                    ));
                }
            }
        }
        if self.bios.as_deref() == Some("ovmf") && self.efidisk_storage().is_none() {
            errs.push("bios ovmf needs an EFI disk: set efidisk.storage (or list a disk)".into());
        }
        if let Some(e) = &self.efidisk {
            if let Some(t) = &e.efitype {
                if t != "2m" && t != "4m" {
                    errs.push(format!("efidisk.efitype '{t}' must be 2m or 4m"));
                }
            }
        }
        if let Some(t) = &self.tpm {
            if t.storage.is_none() && self.first_storage().is_none() {
                errs.push("tpm needs a storage: set tpm.storage (or list a disk)".into());
            }
        }
        self.validate_extra(&mut errs);
        errs
    }

    fn first_storage(&self) -> Option<String> {
        self.disks.as_ref()?.first().map(|d| d.storage.clone())
    }

    pub fn efidisk_storage(&self) -> Option<String> {
        self.efidisk
            .as_ref()
            .and_then(|e| e.storage.clone())
            .or_else(|| self.first_storage())
    }

    /// `efidisk0` for creation (`storage:1,efitype=4m,pre-enrolled-keys=0`); size is ignored by PVE.
    pub fn efidisk_value(&self) -> Option<String> {
        if self.bios.as_deref() != Some("ovmf") && self.efidisk.is_none() {
            return None;
        }
        let e = self.efidisk.clone().unwrap_or_default();
        Some(format!(
            "{}:1,efitype={},pre-enrolled-keys={}",
            self.efidisk_storage()?,
            e.efitype.as_deref().unwrap_or("4m"),
            bool01(e.pre_enrolled_keys.unwrap_or(false))
        ))
    }

    pub fn tpm_value(&self) -> Option<String> {
        let t = self.tpm.as_ref()?;
        Some(format!(
            "{}:1,version={}",
            t.storage.clone().or_else(|| self.first_storage())?,
            t.version.as_deref().unwrap_or("v2.0")
        ))
    }

    pub fn tags_value(&self) -> Option<String> {
        self.tags
            .as_ref()
            .map(|t| crate::propstring::normalize_tags(t).join(";"))
    }

    pub fn boot_value(&self) -> Option<String> {
        self.boot.as_ref().map(|b| format!("order={}", b.join(";")))
    }

    /// Scalar keys and the value to send for each managed one.
    pub fn scalar_values(&self) -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = Vec::new();
        let mut push = |k: &str, val: Option<String>| {
            if let Some(val) = val {
                v.push((k.to_string(), val));
            }
        };
        push("name", self.name.clone());
        push("cpu", self.cpu.clone());
        push("cores", self.cores.map(|x| x.to_string()));
        push("sockets", self.sockets.map(|x| x.to_string()));
        push("memory", self.memory.map(|x| x.to_string()));
        push("balloon", self.balloon.map(|x| x.to_string()));
        push("bios", self.bios.clone());
        push("machine", self.machine.clone());
        push("scsihw", self.scsihw.clone());
        push("boot", self.boot_value());
        push("onboot", self.onboot.map(|b| bool01(b).to_string()));
        push("ostype", self.ostype.clone());
        push("agent", self.agent.map(|b| bool01(b).to_string()));
        push("tags", self.tags_value());
        push("description", self.description.clone());
        push("protection", self.protection.map(|b| bool01(b).to_string()));
        push("vcpus", self.vcpus.map(|x| x.to_string()));
        push("numa", self.numa.map(|b| bool01(b).to_string()));
        push("hotplug", self.hotplug.clone());
        push("vga", self.vga.clone());
        push("rng0", self.rng0.clone());
        push("startup", self.startup.clone());
        push("ciuser", self.ciuser.clone());
        push(
            "sshkeys",
            self.sshkeys
                .as_deref()
                .map(|k| crate::extra::send_value("sshkeys", k)),
        );
        push("nameserver", self.nameserver.clone());
        push("searchdomain", self.searchdomain.clone());
        push("cicustom", self.cicustom.clone());
        for map in [&self.serial, &self.hostpci, &self.ipconfig] {
            for (k, val) in map.iter().flatten() {
                push(k, Some(val.clone()));
            }
        }
        for (k, val) in self.extra_config.iter().flatten() {
            push(k, Some(extra_value(val)));
        }
        v
    }

    /// Every problem with the proxmox_kvm-style options, each naming the option.
    fn validate_extra(&self, errs: &mut Vec<String>) {
        let single = [
            ("hotplug", &self.hotplug),
            ("vga", &self.vga),
            ("rng0", &self.rng0),
            ("startup", &self.startup),
            ("nameserver", &self.nameserver),
            ("cicustom", &self.cicustom),
            ("sshkeys", &self.sshkeys),
        ];
        for (k, v) in single {
            if let Some(Err(e)) = v.as_deref().map(|v| crate::extra::validate(k, v)) {
                errs.push(e);
            }
        }
        let indexed = [
            ("serial", &self.serial, 3),
            ("hostpci", &self.hostpci, 15),
            ("ipconfig", &self.ipconfig, 31),
        ];
        for (base, map, max) in indexed {
            for (k, v) in map.iter().flatten() {
                // `serial0`…: digits without a leading zero, within the range.
                let index = k
                    .strip_prefix(base)
                    .filter(|n| !(n.starts_with('0') && n.len() > 1))
                    .and_then(|n| n.parse::<u32>().ok());
                if index.is_none_or(|i| i > max) {
                    errs.push(format!("{base}: '{k}' is not a key ({base}0-{base}{max})"));
                } else if !v.is_empty() {
                    if let Err(e) = crate::extra::validate(k, v) {
                        errs.push(e);
                    }
                }
            }
        }
        if let Some(n) = self.vcpus {
            let max = self.cores.unwrap_or(1) * self.sockets.unwrap_or(1);
            if n == 0 || (self.cores.is_some() && n > max) {
                errs.push(format!(
                    "vcpus {n} must be from 1 to cores × sockets ({max})"
                ));
            }
        }
        if let Some(extra) = &self.extra_config {
            let text: BTreeMap<String, String> = extra
                .iter()
                .map(|(k, v)| (k.clone(), extra_value(v)))
                .filter(|(_, v)| !v.is_empty())
                .collect();
            let mut keys_only = text.clone();
            for k in extra.keys() {
                keys_only.entry(k.clone()).or_default();
            }
            errs.extend(crate::extra::validate_extra(&keys_only));
        }
        for d in self.disks.iter().flatten() {
            if let Some(src) = &d.import_from {
                if !src.contains(':') || src.starts_with('/') {
                    errs.push(format!(
                        "disks: {}: import_from '{src}' is not a Proxmox volume (storage:import/image.qcow2)",
                        d.slot
                    ));
                }
            }
        }
    }

    /// Parameters for `POST /nodes/{node}/qemu` (without `vmid` and `pool`).
    pub fn create_params(&self) -> Result<Vec<(String, String)>, SpecError> {
        let mut out: Vec<(String, String)> = Vec::new();
        for (k, v) in self.scalar_values() {
            // An empty value (description, tags, an extra key to remove) is simply not set on
            // a new VM.
            if v.is_empty() {
                continue;
            }
            out.push((k, v));
        }
        if let Some(e) = self.efidisk_value() {
            out.push(("efidisk0".into(), e));
        }
        if let Some(t) = self.tpm_value() {
            out.push(("tpmstate0".into(), t));
        }
        for d in self.disks.iter().flatten() {
            out.push((d.slot.clone(), d.allocation_string()?));
        }
        if let Some(c) = &self.cdrom {
            out.push((c.slot().to_string(), format!("{},media=cdrom", c.iso())));
        }
        if let Some(ci) = &self.cloudinit_drive {
            out.push((ci.slot().to_string(), ci.request()));
        }
        for n in self.nics.iter().flatten() {
            out.push((n.slot.clone(), n.desired(None)?.render()));
        }
        Ok(out)
    }

    /// Total disk bytes per storage this spec allocates (for free-space checks).
    pub fn storage_demand(&self) -> Vec<(String, u64)> {
        let mut m: std::collections::BTreeMap<String, u64> = Default::default();
        for d in self.disks.iter().flatten() {
            *m.entry(d.storage.clone()).or_default() += d.size_bytes().unwrap_or(0);
        }
        m.into_iter().collect()
    }
}

/// An `extra_config` value as PVE spells it: booleans `1`/`0`, numbers as written, null `""`.
pub fn extra_value(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Bool(b) => bool01(*b).to_string(),
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// `kib` KiB as an exact decimal number of GiB (`102400` → `0.09765625`): KiB / 2^20 has at
/// most 20 decimals, each 1/2^20 being 5^20 / 10^20.
pub fn exact_gib(kib: u64) -> String {
    const FIVE_POW_20: u128 = 95_367_431_640_625;
    let whole = kib >> 20;
    let frac = u128::from(kib & ((1 << 20) - 1)) * FIVE_POW_20;
    if frac == 0 {
        return whole.to_string();
    }
    let digits = format!("{frac:020}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

/// `size=` for display: `120G`.
pub fn display_size(bytes: u64) -> String {
    format_size(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn node_spec() -> VmSpec {
        VmSpec {
            name: Some("master-0".into()),
            cpu: Some("host".into()),
            cores: Some(4),
            sockets: Some(1),
            memory: Some(16384),
            balloon: Some(0),
            bios: Some("ovmf".into()),
            efidisk: Some(EfiDisk {
                storage: Some("local-lvm".into()),
                efitype: Some("4m".into()),
                pre_enrolled_keys: Some(false),
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
                serial: Some("rootdisk".into()),
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
                iso: Some("local:iso/agent.x86_64.iso".into()),
            }),
            boot: Some(vec!["scsi0".into(), "ide2".into()]),
            onboot: Some(true),
            ostype: Some("l26".into()),
            agent: Some(true),
            tags: Some(vec!["OCP".into(), "proxshift".into(), "ocp".into()]),
            description: Some("control plane".into()),
            protection: None,
            tpm: None,
            ..Default::default()
        }
    }

    #[test]
    fn create_params_for_an_openshift_node() {
        let p = node_spec().create_params().unwrap();
        let get = |k: &str| p.iter().find(|(x, _)| x == k).map(|(_, v)| v.as_str());
        assert_eq!(
            get("efidisk0"),
            Some("local-lvm:1,efitype=4m,pre-enrolled-keys=0")
        );
        assert_eq!(
            get("scsi0"),
            Some("local-lvm:120,ssd=1,iothread=1,discard=on,serial=rootdisk")
        );
        assert_eq!(
            get("net0"),
            Some("virtio=BC:24:11:00:00:01,bridge=vmbr0,tag=10")
        );
        assert_eq!(get("ide2"), Some("local:iso/agent.x86_64.iso,media=cdrom"));
        assert_eq!(get("boot"), Some("order=scsi0;ide2"));
        assert_eq!(get("tags"), Some("ocp;proxshift"));
        assert_eq!(get("onboot"), Some("1"));
        assert_eq!(get("agent"), Some("1"));
        assert_eq!(get("balloon"), Some("0"));
        assert_eq!(get("protection"), None);
        assert!(
            node_spec().validate().is_empty(),
            "{:?}",
            node_spec().validate()
        );
    }

    #[test]
    fn fractional_and_formatted_allocations() {
        let d = Disk {
            slot: "virtio1".into(),
            storage: "nfs".into(),
            size: "1536M".into(),
            format: Some("qcow2".into()),
            backup: Some(false),
            cache: Some("none".into()),
            ..Default::default()
        };
        assert_eq!(
            d.allocation_string().unwrap(),
            "nfs:1.5,format=qcow2,backup=0"
        );
    }

    #[test]
    fn sizes_are_what_pve_records_and_allocations_exact() {
        let disk = |size: &str| Disk {
            slot: "scsi0".into(),
            storage: "local-lvm".into(),
            size: size.into(),
            ..Default::default()
        };
        // 100M is whole KiB; sent exactly (PVE would make `0.098` into 102761K).
        assert_eq!(disk("100M").size_bytes().unwrap(), 100 << 20);
        assert_eq!(
            disk("100M").allocation_string().unwrap(),
            "local-lvm:0.09765625"
        );
        // 10.1G is not whole KiB: PVE's convert_size rounds up to 10590618K.
        assert_eq!(disk("10.1G").size_bytes().unwrap(), 10_590_618 << 10);
        assert_eq!(
            disk("10.1G").allocation_string().unwrap(),
            "local-lvm:10.1000003814697265625"
        );
        assert_eq!(disk("1500").size_bytes().unwrap(), 1500 * GIB);
        assert_eq!(
            disk("1K").allocation_string().unwrap(),
            "local-lvm:0.00000095367431640625"
        );
        assert_eq!(exact_gib(120 << 20), "120");
        // Perl (and Rust) read the exact decimal back to the same KiB count.
        for kib in [1u64, 102_400, 10_590_618, (3 << 30) + 7] {
            let gib: f64 = exact_gib(kib).parse().unwrap();
            assert_eq!(gib * (1u64 << 20) as f64, kib as f64, "{kib}");
        }
    }

    #[test]
    fn validation_names_each_problem() {
        let mut s = node_spec();
        s.name = Some("master_0".into());
        s.balloon = Some(32768);
        s.disks.as_mut().unwrap().push(Disk {
            slot: "virtio16".into(),
            storage: "x".into(),
            size: "10Q".into(),
            ..Default::default()
        });
        s.disks.as_mut().unwrap().push(Disk {
            slot: "virtio0".into(),
            storage: "x".into(),
            size: "10".into(),
            ssd: Some(true),
            ..Default::default()
        });
        s.nics.as_mut().unwrap().push(Nic {
            slot: "net0".into(),
            bridge: "vmbr1".into(),
            mac: Some("01:00:5e:00:00:01".into()),
            vlan: Some(5000),
            ..Default::default()
        });
        s.tags = Some(vec!["bad tag".into()]);
        s.boot = Some(vec!["floppy".into()]);
        let errs = s.validate().join("\n");
        for want in [
            "name 'master_0'",
            "balloon (32768 MiB) must not exceed memory",
            "slot 'virtio16' is not a disk slot",
            "unknown size unit",
            "virtio0: ssd is not available",
            "slot 'net0' is used twice",
            "multicast",
            "vlan 5000",
            "tags: 'bad tag'",
            "boot: 'floppy'",
        ] {
            assert!(errs.contains(want), "missing {want:?} in:\n{errs}");
        }
        let mut s = node_spec();
        s.efidisk = None;
        s.disks = None;
        assert!(s
            .validate()
            .join(" ")
            .contains("bios ovmf needs an EFI disk"));
    }

    #[test]
    fn current_drives_and_nics_parse() {
        let d =
            CurrentDrive::parse("scsi0", "local-lvm:vm-101-disk-1,iothread=1,size=120G").unwrap();
        assert_eq!(d.storage.as_deref(), Some("local-lvm"));
        assert_eq!(d.size, Some(120 * GIB));
        assert!(!d.cdrom);
        let c = CurrentDrive::parse("ide2", "none,media=cdrom").unwrap();
        assert!(c.cdrom && c.storage.is_none());
        let n = NicValue::parse("virtio=bc:24:11:aa:bb:cc,bridge=vmbr0,firewall=1").unwrap();
        assert_eq!(n.model, "virtio");
        assert_eq!(n.mac.as_deref(), Some("BC:24:11:AA:BB:CC"));
        assert_eq!(
            n.render(),
            "virtio=BC:24:11:AA:BB:CC,bridge=vmbr0,firewall=1"
        );
        let long = NicValue::parse("model=e1000,macaddr=BC:24:11:AA:BB:CC,bridge=vmbr0,firewall=0")
            .unwrap();
        assert_eq!(long.model, "e1000");
        assert!(long.same_as(&NicValue::parse("e1000=BC:24:11:AA:BB:CC,bridge=vmbr0").unwrap()));
        assert!(NicValue::parse("bridge=vmbr0").is_err());
    }

    #[test]
    fn nic_keeps_generated_mac_and_unmanaged_options() {
        let cur = NicValue::parse("virtio=BC:24:11:AA:BB:CC,bridge=vmbr0,rate=10,tag=5").unwrap();
        let want = Nic {
            slot: "net0".into(),
            bridge: "vmbr1".into(),
            ..Default::default()
        };
        let d = want.desired(Some(&cur)).unwrap();
        assert_eq!(d.render(), "virtio=BC:24:11:AA:BB:CC,bridge=vmbr1,rate=10");
    }
}
