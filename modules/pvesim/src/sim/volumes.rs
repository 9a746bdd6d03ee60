//! Volume allocation on the simulated storages.

use crate::model::{format_size, Volume};
use crate::propstr::PropString;
use crate::vmconfig::{
    alloc_request, is_cdrom, is_cloudinit_volume, parse_drive, print_drive, split_volid,
    storage_formats,
};

use super::Sim;
use crate::tasks::TaskError;

/// The KiB a new-disk request `STORAGE:GiB` allocates: qemu-server `PVE/API2/Qemu.pm`,
/// `create_disks`, converts with `PVE::Tools::convert_size($size, 'gb' => 'kb')` (pve-common
/// `src/PVE/Tools.pm`: `$value *= 2**$shift_amount; $value++ if ($value - int($value)) > 0.0;
/// return int($value)`), i.e. rounds *up* to whole KiB, and later writes
/// `$disk->{size} = convert_size($size, 'kb' => 'b')`. So `local-lvm:0.098` is
/// `size=102761K`, not 0.098 GiB truncated to bytes. The same in PVE 8 and PVE 9 (unchanged
/// since pve-common 2017).
pub fn alloc_kib(gib: f64) -> u64 {
    let kib = gib * (1u64 << 20) as f64;
    if kib - kib.trunc() > 0.0 {
        kib.trunc() as u64 + 1
    } else {
        kib as u64
    }
}

impl Sim {
    // -- storage allocation ----------------------------------------------------

    /// Allocates a new volume for `key` from `STORAGE:SIZE`; returns the stored drive string.
    pub fn allocate(
        &mut self,
        node: &str,
        vmid: u32,
        key: &str,
        mut drive: PropString,
        fallback_format: bool,
    ) -> Result<String, TaskError> {
        let file = drive.get("file").unwrap_or_default().to_string();
        let Some((sid, gib)) = alloc_request(&file) else {
            return Ok(print_drive(&drive));
        };
        let sid = sid.to_string();
        let st = self
            .storage(node, &sid)
            .ok_or_else(|| format!("storage '{sid}' does not exist"))?;
        if !st.content.contains("images") {
            return Err(format!("storage '{sid}' does not support content-type 'images'").into());
        }
        let (default_fmt, supported) = storage_formats(&st.kind);
        let fmt = match drive.remove("format") {
            Some(f) if supported.contains(&f.as_str()) => f,
            Some(f) if !fallback_format => {
                return Err(if st.kind == "lvmthin" {
                    format!("unsupported format '{f}' at /usr/share/perl5/PVE/Storage/LvmThinPlugin.pm line 102.")
                } else {
                    format!("unsupported format '{f}'")
                }
                .into())
            }
            _ => default_fmt.to_string(),
        };
        // qemu-server `$import_from_volid`: the new disk is a copy of the source, its size the
        // source's; a source that is not there fails the worker.
        let import_size = match drive.remove("import-from") {
            Some(src) => Some(
                split_volid(&src)
                    .and_then(|(s, n)| self.storage(node, s)?.volumes.get(n))
                    .map(|v| v.size)
                    .ok_or_else(|| {
                        format!("cannot import from '{src}' - could not get size of {src}")
                    })?,
            ),
            None => None,
        };
        let size = match key {
            "efidisk0" => {
                if drive.get("efitype") == Some("4m") {
                    4 << 20
                } else {
                    128 << 10
                }
            }
            "tpmstate0" => 4 << 20,
            _ => import_size.unwrap_or_else(|| alloc_kib(gib) << 10),
        };
        let file_based = st.is_file_based();
        let kind = st.kind.clone();
        let avail = st.avail();
        let n = (0..)
            .find(|i| {
                let base = format!("vm-{vmid}-disk-{i}");
                !st.volumes.keys().any(|k| {
                    k.contains(&base) && (k.ends_with(&base) || k.contains(&format!("{base}.")))
                })
            })
            .unwrap_or(0);
        let name = if file_based {
            format!("{vmid}/vm-{vmid}-disk-{n}.{fmt}")
        } else {
            format!("vm-{vmid}-disk-{n}")
        };
        if size > avail {
            let need = size >> 30;
            return Err(match kind.as_str() {
                "lvmthin" | "lvm" => format!(
                    "lvcreate 'pve/vm-{vmid}-disk-{n}' error:   Volume group \"pve\" has insufficient free space ({} extents): {} required.",
                    avail >> 22,
                    size >> 22
                ),
                "zfspool" => format!("zfs error: cannot create 'rpool/data/vm-{vmid}-disk-{n}': out of space"),
                _ => format!(
                    "unable to create image: qemu-img: {name}: Could not resize file: No space left on device (requested {need}G)"
                ),
            }
            .into());
        }
        let now = self.unix_now();
        let st = self.storage_mut(node, &sid).unwrap();
        st.volumes.insert(
            name.clone(),
            Volume {
                name: name.clone(),
                size,
                format: fmt,
                content: "images".into(),
                vmid: Some(vmid),
                ctime: now,
                parent: None,
            },
        );
        drive.set("file", format!("{sid}:{name}"));
        drive.set("size", format_size(size));
        Ok(print_drive(&drive))
    }

    /// Frees the volume a drive string references (not CD-ROM media).
    /// A cloud-init drive for `STORAGE:cloudinit` (qemu-server `PVE/API2/Qemu.pm`,
    /// `create_disks`): `vm-<vmid>-cloudinit` (`.qcow2` on a file storage, raw elsewhere) of
    /// `CLOUDINIT_DISK_SIZE` (4 MiB), attached as a CD-ROM. The same in PVE 8 and PVE 9.
    pub fn allocate_cloudinit(
        &mut self,
        node: &str,
        vmid: u32,
        sid: &str,
    ) -> Result<String, TaskError> {
        let st = self
            .storage(node, sid)
            .ok_or_else(|| format!("storage '{sid}' does not exist"))?;
        if !st.content.contains("images") {
            return Err(format!("storage '{sid}' does not support content-type 'images'").into());
        }
        let (name, format) = if st.is_file_based() {
            (format!("{vmid}/vm-{vmid}-cloudinit.qcow2"), "qcow2")
        } else {
            (format!("vm-{vmid}-cloudinit"), "raw")
        };
        if st.volumes.contains_key(&name) {
            return Err(format!("volume '{sid}:{name}' already exists").into());
        }
        let now = self.unix_now();
        let st = self.storage_mut(node, sid).ok_or("storage vanished")?;
        st.volumes.insert(
            name.clone(),
            Volume {
                name: name.clone(),
                size: 4 << 20,
                format: format.into(),
                content: "images".into(),
                vmid: Some(vmid),
                ctime: now,
                parent: None,
            },
        );
        Ok(format!("{sid}:{name},media=cdrom"))
    }

    pub fn free_volume(&mut self, node: &str, value: &str, key: &str) {
        let d = parse_drive(key, value);
        // An ISO stays; a cloud-init drive is the VM's own (`drive_is_cdrom($drive, 1)`).
        if is_cdrom(&d) && !d.get("file").is_some_and(is_cloudinit_volume) {
            return;
        }
        if let Some((sid, name)) = d.get("file").and_then(split_volid) {
            let (sid, name) = (sid.to_string(), name.to_string());
            if let Some(st) = self.storage_mut(node, &sid) {
                st.volumes.remove(&name);
            }
        }
    }

    /// Checks that an existing volume (ISO, disk) exists.
    pub fn volume_exists(&self, node: &str, volid: &str) -> bool {
        match split_volid(volid) {
            Some((sid, name)) => self
                .storage(node, sid)
                .map(|s| s.volumes.contains_key(name))
                .unwrap_or(false),
            None => volid == "none" || volid == "cdrom" || volid.starts_with('/'),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::alloc_kib;

    #[test]
    fn allocation_rounds_up_to_whole_kib() {
        assert_eq!(alloc_kib(0.098), 102_761);
        assert_eq!(alloc_kib(10.1), 10_590_618);
        assert_eq!(alloc_kib(0.09765625), 102_400);
        assert_eq!(alloc_kib(32.0), 32 << 20);
    }
}
