//! Which nodes a clone may be created on, decided before anything is cloned.
//!
//! Proxmox clones on the source's node; a `target` node is allowed only when every volume of the
//! source (a CD-ROM's ISO included) is on shared storage and, with `clone.storage`, that storage
//! is shared too (qemu-server `PVE/API2/Qemu.pm`, `clone_vm`: "can't clone VM to node … (VM uses
//! local storage)", "can't clone to non-shared storage …"). So a clone of a template on local
//! storage stays on the template's node, and a node asked for that cannot be reached is refused
//! with the reason, instead of a clone task failing half-way through a run.

use pve_client::ClusterVm;
use pve_types::local_volumes;

use crate::converge::Ctx;
use crate::error::VmError;
use crate::identity::{label, resolve_source};
use crate::options::CloneArgs;

/// Where clones of one source (with one `clone.storage`) may go.
#[derive(Debug, Clone)]
pub(crate) struct CloneNodes {
    /// The source's node: always eligible.
    pub source_node: String,
    source: String,
    /// Why no other node is eligible; empty when every node is.
    reasons: Vec<String>,
}

impl CloneNodes {
    /// Read the source's config and the storages' `shared` flags (storage definitions are
    /// cluster-wide, so the source node's list says it for every node).
    pub(crate) fn read(ctx: &Ctx, cl: &CloneArgs) -> Result<CloneNodes, VmError> {
        let src = resolve_source(&ctx.snapshot, cl)?;
        let c = ctx.client;
        let doing = |what: &str| format!("clone: reading the {what} of {}", label(&src));
        let cfg = c
            .vm_config(&src.node, src.vmid as u32, false)
            .map_err(|e| VmError::step(doing("config"), e))?;
        let storages = c
            .storages(&src.node)
            .map_err(|e| VmError::step(doing("node's storages"), e))?;
        let shared = |sid: &str| storages.iter().any(|s| s.storage == sid && s.shared);
        Ok(Self::decide(&src, &cfg, shared, cl.storage.as_deref()))
    }

    /// The pure decision over what [`CloneNodes::read`] gathered.
    pub(crate) fn decide(
        src: &ClusterVm,
        cfg: &serde_json::Map<String, serde_json::Value>,
        shared: impl Fn(&str) -> bool,
        target_storage: Option<&str>,
    ) -> CloneNodes {
        let mut reasons: Vec<String> = local_volumes(cfg, &shared)
            .into_iter()
            .map(|(key, volid)| format!("its {key} ({volid}) is not on shared storage"))
            .collect();
        if let Some(s) = target_storage {
            if !shared(s) {
                reasons.push(format!("clone.storage '{s}' is not shared"));
            }
        }
        CloneNodes {
            source_node: src.node.clone(),
            source: label(src),
            reasons,
        }
    }

    fn why(&self) -> String {
        format!(
            "a clone of {} can only be created on another node when all its volumes and the \
             target storage are shared, and {}",
            self.source,
            self.reasons.join("; ")
        )
    }

    /// The node asked for (`node`) can take the clone, or why not.
    pub(crate) fn check(&self, node: &str) -> Result<(), VmError> {
        if node == self.source_node || self.reasons.is_empty() {
            return Ok(());
        }
        Err(VmError::Refused(format!(
            "node '{node}' cannot take this clone: {}; set node to '{}' (or leave it unset), or \
             move the source's volumes to shared storage",
            self.why(),
            self.source_node
        )))
    }

    /// The nodes placement may choose from, given `allowed_nodes` (empty: all). `Ok(None)`: no
    /// restriction.
    pub(crate) fn restrict(&self, allowed: &[String]) -> Result<Option<Vec<String>>, VmError> {
        if self.reasons.is_empty() {
            return Ok(None);
        }
        if !allowed.is_empty() && !allowed.contains(&self.source_node) {
            return Err(VmError::Refused(format!(
                "none of allowed_nodes ({}) can take this clone: {}; add node '{}' to \
                 allowed_nodes, or move the source's volumes to shared storage",
                allowed.join(", "),
                self.why(),
                self.source_node
            )));
        }
        Ok(Some(vec![self.source_node.clone()]))
    }

    /// A placement failure on the source's node, with why no other node was tried.
    pub(crate) fn explain(&self, e: impl std::fmt::Display) -> VmError {
        VmError::Refused(format!(
            "{e} (only node '{}' was considered: {})",
            self.source_node,
            self.why()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn template(node: &str) -> ClusterVm {
        serde_json::from_value(
            json!({"vmid": 9000, "name": "tmpl", "node": node, "type": "qemu",
                                      "template": 1}),
        )
        .unwrap()
    }

    #[test]
    fn local_volumes_keep_the_clone_home_and_say_why() {
        let cfg = json!({"scsi0": "nfs:9000/base-9000-disk-0.raw,size=32G",
                         "ide2": "local:iso/agent.iso,media=cdrom"});
        let shared = |s: &str| s == "nfs";
        let cn = CloneNodes::decide(&template("pve1"), cfg.as_object().unwrap(), shared, None);
        assert!(cn.check("pve1").is_ok());
        let e = cn.check("pve2").unwrap_err().to_string();
        assert!(e.starts_with("node 'pve2' cannot take this clone"), "{e}");
        assert!(
            e.contains("its ide2 (local:iso/agent.iso) is not on shared storage"),
            "{e}"
        );
        assert!(e.contains("set node to 'pve1'"), "{e}");
        assert_eq!(cn.restrict(&[]).unwrap(), Some(vec!["pve1".to_string()]));
        let e = cn.restrict(&["pve2".into(), "pve3".into()]).unwrap_err();
        assert!(
            e.to_string().contains("none of allowed_nodes (pve2, pve3)"),
            "{e}"
        );
    }

    #[test]
    fn shared_volumes_go_anywhere_unless_the_target_storage_is_local() {
        let cfg = json!({"scsi0": "nfs:9000/base-9000-disk-0.raw,size=32G",
                         "ide2": "none,media=cdrom"});
        let shared = |s: &str| s == "nfs";
        let cfg = cfg.as_object().unwrap();
        let cn = CloneNodes::decide(&template("pve1"), cfg, shared, None);
        assert!(cn.check("pve3").is_ok());
        assert_eq!(cn.restrict(&["pve2".into()]).unwrap(), None);
        let cn = CloneNodes::decide(&template("pve1"), cfg, shared, Some("local-lvm"));
        let e = cn.check("pve3").unwrap_err().to_string();
        assert!(e.contains("clone.storage 'local-lvm' is not shared"), "{e}");
    }
}
