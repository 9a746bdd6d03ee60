//! The agent ISO: upload it to the storage when it is missing or differs (content-addressed names
//! by default), once per run even when parallel VMs share it.

use std::path::Path;

use pve_client::sha256_file;

use crate::converge::VmRun;
use crate::error::{VmError, POISONED};
use crate::options::AgentIso;

impl VmRun<'_, '_> {
    /// Make sure the agent ISO is on the storage (upload when missing or different), return its volid.
    pub(crate) fn ensure_iso(&mut self, node: &str, iso: &AgentIso) -> Result<String, VmError> {
        let (c, ctx) = (self.client, self.ctx);
        let res = &mut self.res;
        let src: &Path = iso.src.as_deref().ok_or(VmError::Internal(
            "agent_iso.src missing with state present",
        ))?;
        let meta = std::fs::metadata(src).map_err(|source| VmError::IsoSource {
            path: src.to_path_buf(),
            source,
        })?;
        let sha = match &iso.sha256 {
            Some(given) => checked_sha256(given)?,
            None => sha256_file(src)?,
        };
        let filename = match &iso.filename {
            Some(f) => f.clone(),
            None => {
                // Content-addressed: a changed ISO gets a new name, so "differs" can never be missed.
                let stem = src
                    .file_stem()
                    .map(|s| s.to_string_lossy().to_string())
                    .unwrap_or_else(|| "agent".into());
                format!("{stem}-{}.iso", &sha[..12])
            }
        };
        if !(filename.ends_with(".iso") || filename.ends_with(".img")) {
            return Err(VmError::Refused(format!(
                "agent_iso.filename '{filename}' must end with .iso or .img"
            )));
        }
        let volid = format!("{}:iso/{filename}", iso.storage);
        res.iso_volid = Some(volid.clone());
        let storages = c.storages(node)?;
        let st = storages
            .iter()
            .find(|s| s.storage == iso.storage)
            .ok_or_else(|| {
                VmError::Refused(format!(
                    "agent_iso.storage '{}' does not exist on node '{node}'",
                    iso.storage
                ))
            })?;
        if !st.has_content("iso") {
            return Err(VmError::Refused(format!(
                "agent_iso.storage '{}' (type {}) cannot hold ISO images (content: {}); pick a file-based storage with content 'iso'",
                iso.storage, st.kind, st.content
            )));
        }
        let key_node = if st.shared {
            String::new()
        } else {
            node.to_string()
        };
        let key = (key_node, iso.storage.clone(), filename.clone());
        let mut cache = ctx.isos.lock().map_err(|_| POISONED)?;
        if cache.contains_key(&key) {
            return Ok(volid);
        }
        let content = c.storage_content(node, &iso.storage, Some("iso"))?;
        let present = content.iter().find(|v| v.volid == volid);
        let same = present.is_some_and(|v| v.size == meta.len());
        if !same {
            res.changed = true;
            res.iso_uploaded = true;
            if !res.changed_keys.iter().any(|k| k == "agent_iso") {
                res.changed_keys.push("agent_iso".into());
            }
            if !ctx.check_mode {
                let t = c
                    .upload_iso(
                        node,
                        &iso.storage,
                        src,
                        &filename,
                        Some(&sha),
                        ctx.secs(ctx.timeouts.upload),
                    )
                    .map_err(|e| {
                        VmError::step(format!("uploading {} to {volid}", src.display()), e)
                    })?;
                res.task(t);
            }
        }
        cache.insert(key, volid.clone());
        Ok(volid)
    }
}

/// A SHA-256 the caller gave: 64 hex digits, in PVE's lower case. A wrong one cannot slip through:
/// PVE's upload task verifies the file against it.
fn checked_sha256(given: &str) -> Result<String, VmError> {
    let sha = given.trim().to_ascii_lowercase();
    if sha.len() == 64 && sha.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(sha)
    } else {
        Err(VmError::Refused(format!(
            "agent_iso.sha256 '{given}' is not a SHA-256 (64 hexadecimal digits)"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::checked_sha256;

    #[test]
    fn a_given_sha256_must_be_one() {
        let upper = "BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD";
        assert_eq!(checked_sha256(upper).unwrap(), upper.to_ascii_lowercase());
        let e = checked_sha256("abc123").unwrap_err().to_string();
        assert!(e.contains("agent_iso.sha256") && e.contains("64"), "{e}");
    }
}
