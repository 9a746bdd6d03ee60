//! Storage checks before a VM is created: every storage the spec names exists on the node, is
//! active and holds disks, asked-for formats are possible there, and there is room.

use pve_client::StorageInfo;
use pve_types::placement::formats_for_storage_type;

use crate::converge::VmRun;
use crate::error::VmError;

const GIB: f64 = (1u64 << 30) as f64;

impl VmRun<'_, '_> {
    /// Storage checks before any allocation: storages exist and hold disks, requested formats are
    /// possible (`qcow2` on `lvmthin` is an error here, not a silent fallback), and there is room.
    pub(crate) fn precheck_storage(&mut self, node: &str) -> Result<(), VmError> {
        let args = self.args;
        let storages = self.client.storages(node)?;
        let find = |name: &str, what: &str| -> Result<&StorageInfo, VmError> {
            let st = storages.iter().find(|s| s.storage == name).ok_or_else(|| {
                VmError::Refused(format!(
                    "{what}: storage '{name}' does not exist on node '{node}' (available: {})",
                    storages
                        .iter()
                        .map(|s| s.storage.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })?;
            if !st.enabled || !st.active {
                return Err(VmError::Refused(format!(
                    "{what}: storage '{name}' is not active on node '{node}'"
                )));
            }
            if !st.has_content("images") {
                return Err(VmError::Refused(format!(
                    "{what}: storage '{name}' does not hold VM disks (content: {})",
                    st.content
                )));
            }
            Ok(st)
        };
        let check_format = |st: &StorageInfo, format: &str, what: &str| -> Result<(), VmError> {
            let supported: Vec<String> = match st.format_info() {
                Some(f) if !f.supported.is_empty() => f.supported.clone(),
                _ => formats_for_storage_type(&st.kind)
                    .map(|f| f.iter().map(|s| s.to_string()).collect())
                    .unwrap_or_default(),
            };
            if !supported.is_empty() && !supported.iter().any(|s| s == format) {
                return Err(VmError::Refused(format!(
                    "{what}: format '{format}' is not supported on storage '{}' (type {}; supported: {})",
                    st.storage,
                    st.kind,
                    supported.join(", ")
                )));
            }
            Ok(())
        };
        let spec = &args.spec;
        for d in spec.disks.iter().flatten() {
            let st = find(&d.storage, &format!("disk {}", d.slot))?;
            if let Some(f) = &d.format {
                check_format(st, f, &format!("disk {}", d.slot))?;
            }
        }
        if let Some(s) = spec
            .efidisk_value()
            .and_then(|v| v.split(':').next().map(str::to_string))
        {
            find(&s, "efidisk")?;
        }
        if let Some(s) = spec
            .tpm_value()
            .and_then(|v| v.split(':').next().map(str::to_string))
        {
            find(&s, "tpm")?;
        }
        if let Some(cl) = &args.clone {
            if let Some(s) = &cl.storage {
                let st = find(s, "clone.storage")?;
                if let Some(f) = &cl.format {
                    check_format(st, f, "clone.format")?;
                }
            }
        }
        // Free space: the disks a create allocates (a clone's copies are at most the spec's sizes).
        let demand = spec.storage_demand();
        for (name, bytes) in demand {
            let Some(st) = storages.iter().find(|s| s.storage == name) else {
                continue;
            };
            if st.total > 0 && bytes > st.avail {
                let msg = format!(
                    "storage '{name}' on node '{node}' has {:.1} GiB free but the disks need {:.1} GiB",
                    st.avail as f64 / GIB,
                    bytes as f64 / GIB
                );
                if args.allow_overcommit {
                    self.res.warnings.push(format!(
                        "{msg} (allowed by allow_overcommit; thin storage may cope)"
                    ));
                } else {
                    return Err(VmError::Refused(format!(
                        "{msg}; free space or set allow_overcommit: true for thin storage"
                    )));
                }
            }
        }
        Ok(())
    }
}
