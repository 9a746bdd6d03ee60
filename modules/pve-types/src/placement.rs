//! Where a new VM goes and which id it gets — pure decisions over facts the client gathered.
//!
//! Placement follows CAPMOX's scheduler: reservable memory per node = total × `memory_adjustment`/100
//! minus the `maxmem` of every non-template VM on it (running or not); a request larger than every
//! node's reservable memory is an error; otherwise the node with the fewest of this cluster's VMs
//! that has room wins (round-robin spread), ties broken by more reservable memory, then node name,
//! so the answer is deterministic.

use std::collections::BTreeSet;

/// What placement knows about one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeLoad {
    pub node: String,
    pub online: bool,
    /// Bytes.
    pub total_memory: u64,
    /// Sum of `maxmem` (bytes) of the non-template VMs on the node.
    pub committed_memory: u64,
    /// VMs of this cluster (same ownership tag) already on the node.
    pub cluster_vms: u32,
}

impl NodeLoad {
    /// Reservable bytes; `None` = unlimited (`memory_adjustment` 0 turns accounting off).
    pub fn reservable(&self, memory_adjustment: u32) -> Option<u64> {
        if memory_adjustment == 0 {
            return None;
        }
        let cap = (self.total_memory as u128 * memory_adjustment as u128 / 100) as u64;
        Some(cap.saturating_sub(self.committed_memory))
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlacementError {
    NoCandidates {
        allowed: Vec<String>,
        offline: Vec<String>,
        unknown: Vec<String>,
    },
    InsufficientMemory {
        requested: u64,
        /// (node, reservable bytes), best first.
        available: Vec<(String, u64)>,
    },
}

fn gib(b: u64) -> String {
    format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64)
}

impl std::fmt::Display for PlacementError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PlacementError::NoCandidates {
                allowed,
                offline,
                unknown,
            } => {
                write!(
                    f,
                    "no online node to place the VM on among allowed_nodes [{}]",
                    allowed.join(", ")
                )?;
                if !offline.is_empty() {
                    write!(f, "; offline: {}", offline.join(", "))?;
                }
                if !unknown.is_empty() {
                    write!(f, "; not in the cluster: {}", unknown.join(", "))?;
                }
                Ok(())
            }
            PlacementError::InsufficientMemory {
                requested,
                available,
            } => {
                let each: Vec<String> = available
                    .iter()
                    .map(|(n, b)| format!("{n}: {} left", gib(*b)))
                    .collect();
                write!(
                    f,
                    "cannot reserve {} of memory on any allowed node ({}); raise memory_adjustment to overcommit",
                    gib(*requested),
                    each.join(", ")
                )
            }
        }
    }
}

impl std::error::Error for PlacementError {}

/// Choose a node among `allowed` (all online nodes when empty) for a VM of `memory` bytes.
pub fn place(
    nodes: &[NodeLoad],
    allowed: &[String],
    memory: u64,
    memory_adjustment: u32,
) -> Result<String, PlacementError> {
    let unknown: Vec<String> = allowed
        .iter()
        .filter(|a| !nodes.iter().any(|n| &n.node == *a))
        .cloned()
        .collect();
    let in_scope: Vec<&NodeLoad> = nodes
        .iter()
        .filter(|n| allowed.is_empty() || allowed.contains(&n.node))
        .collect();
    let offline: Vec<String> = in_scope
        .iter()
        .filter(|n| !n.online)
        .map(|n| n.node.clone())
        .collect();
    let mut candidates: Vec<&NodeLoad> = in_scope.into_iter().filter(|n| n.online).collect();
    if candidates.is_empty() {
        return Err(PlacementError::NoCandidates {
            allowed: allowed.to_vec(),
            offline,
            unknown,
        });
    }
    let room = |n: &NodeLoad| n.reservable(memory_adjustment).unwrap_or(u64::MAX);
    candidates.sort_by(|a, b| {
        a.cluster_vms
            .cmp(&b.cluster_vms)
            .then(room(b).cmp(&room(a)))
            .then(a.node.cmp(&b.node))
    });
    if let Some(n) = candidates.iter().find(|n| room(n) >= memory) {
        return Ok(n.node.clone());
    }
    let mut available: Vec<(String, u64)> = candidates
        .iter()
        .map(|n| (n.node.clone(), room(n)))
        .collect();
    available.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    Err(PlacementError::InsufficientMemory {
        requested: memory,
        available,
    })
}

/// Record a placement so the next VM of the same batch sees it.
pub fn commit(nodes: &mut [NodeLoad], node: &str, memory: u64) {
    if let Some(n) = nodes.iter_mut().find(|n| n.node == node) {
        n.committed_memory = n.committed_memory.saturating_add(memory);
        n.cluster_vms += 1;
    }
}

/// Candidate VM ids in `[start, end]`, lowest first, skipping ids known to be taken. The caller
/// confirms each with the API and creates with it; a create that loses a race ("already exists")
/// moves on to the next candidate, so two runs never end up sharing an id.
pub fn vmid_candidates(
    start: u32,
    end: u32,
    taken: &BTreeSet<u32>,
) -> impl Iterator<Item = u32> + '_ {
    (start.max(100)..=end).filter(move |id| !taken.contains(id))
}

/// Check a `vmid_range` (`[start, end]`, within PVE's 100–999999999).
pub fn validate_range(start: u32, end: u32) -> Result<(), crate::error::RangeError> {
    if start < 100 || end > 999_999_999 || start > end {
        return Err(crate::error::RangeError { start, end });
    }
    Ok(())
}

/// The volumes of a VM's config that keep a clone on the VM's own node: every drive (CD-ROM
/// media included, `unused*` not) whose storage is not shared, as `(key, volid)`. qemu-server's
/// `clone_vm` refuses a `target` node unless this is empty (`$check_storage_access_clone`:
/// "can't clone VM to node … (VM uses local storage)"). `shared(storage)` says whether a
/// storage is shared; an unknown storage counts as local.
pub fn local_volumes(
    config: &serde_json::Map<String, serde_json::Value>,
    shared: impl Fn(&str) -> bool,
) -> Vec<(String, String)> {
    config
        .iter()
        .filter(|(k, _)| crate::spec::is_drive_key(k))
        .filter_map(|(k, v)| {
            let d = crate::spec::CurrentDrive::parse(k, v.as_str()?).ok()?;
            // `none`, `cdrom` (the host's drive) and absolute paths name no storage.
            let sid = d.storage?;
            (!shared(&sid)).then(|| (k.clone(), d.volid))
        })
        .collect()
}

/// Disk formats a storage type can hold (pve-storage `plugindata`), used when the API does not
/// report them. `None` for unknown types.
pub fn formats_for_storage_type(kind: &str) -> Option<&'static [&'static str]> {
    Some(match kind {
        "dir" | "nfs" | "cifs" | "glusterfs" => &["raw", "qcow2", "vmdk"],
        // PVE 8 sends no formats for LVM and allows raw only there (LVMPlugin `alloc_image`);
        // PVE 9 allows qcow2 only with `snapshot-as-volume-chain` and then says so itself.
        "lvmthin" | "lvm" | "zfspool" | "zfs" | "rbd" | "btrfs" | "iscsidirect" | "iscsi" => {
            &["raw"]
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_volumes_include_iso_media_not_unused_or_empty_drives() {
        let cfg = serde_json::json!({
            "scsi0": "nfs-shared:9000/base-9000-disk-0.raw,size=32G",
            "efidisk0": "local-lvm:base-9000-disk-1,efitype=4m,size=4M",
            "ide2": "local:iso/agent.x86_64.iso,media=cdrom",
            "ide0": "none,media=cdrom",
            "ide1": "cdrom,media=cdrom",
            "unused0": "local-lvm:vm-9000-disk-9",
            "name": "tmpl",
        });
        let shared = |s: &str| s == "nfs-shared";
        assert_eq!(
            local_volumes(cfg.as_object().unwrap(), shared),
            vec![
                (
                    "efidisk0".to_string(),
                    "local-lvm:base-9000-disk-1".to_string()
                ),
                ("ide2".to_string(), "local:iso/agent.x86_64.iso".to_string()),
            ]
        );
        assert!(local_volumes(cfg.as_object().unwrap(), |_| true).is_empty());
    }

    const G: u64 = 1 << 30;

    fn nodes() -> Vec<NodeLoad> {
        vec![
            NodeLoad {
                node: "pve1".into(),
                online: true,
                total_memory: 64 * G,
                committed_memory: 48 * G,
                cluster_vms: 0,
            },
            NodeLoad {
                node: "pve2".into(),
                online: true,
                total_memory: 64 * G,
                committed_memory: 16 * G,
                cluster_vms: 1,
            },
            NodeLoad {
                node: "pve3".into(),
                online: false,
                total_memory: 128 * G,
                committed_memory: 0,
                cluster_vms: 0,
            },
        ]
    }

    fn all() -> Vec<String> {
        vec!["pve1".into(), "pve2".into(), "pve3".into()]
    }

    #[test]
    fn spreads_first_then_by_memory() {
        // pve1 has no cluster VM yet and 16 GiB left: it wins for a 16 GiB VM.
        assert_eq!(place(&nodes(), &all(), 16 * G, 100).unwrap(), "pve1");
        // 20 GiB does not fit pve1; pve2 has 48 GiB.
        assert_eq!(place(&nodes(), &all(), 20 * G, 100).unwrap(), "pve2");
    }

    #[test]
    fn batch_placement_is_deterministic_round_robin() {
        let mut n = nodes();
        n[1].cluster_vms = 0;
        n[0].committed_memory = 0;
        let mut got = Vec::new();
        for _ in 0..4 {
            let node = place(&n, &all(), 16 * G, 100).unwrap();
            commit(&mut n, &node, 16 * G);
            got.push(node);
        }
        assert_eq!(got, vec!["pve1", "pve2", "pve1", "pve2"]);
        assert_eq!(n[0].committed_memory, 32 * G);
    }

    #[test]
    fn memory_adjustment_semantics() {
        let n = nodes();
        // 95 % of 64 GiB = 60.8 GiB - 16 GiB committed = 44.8 GiB on pve2.
        assert!(place(&n, &all(), 45 * G, 95).is_err());
        assert_eq!(place(&n, &all(), 44 * G, 95).unwrap(), "pve2");
        // 300 % overcommits: pve1 has 192 - 48 = 144 GiB.
        assert_eq!(place(&n, &all(), 100 * G, 300).unwrap(), "pve1");
        // 0 disables accounting.
        assert_eq!(place(&n, &all(), 1000 * G, 0).unwrap(), "pve1");
    }

    #[test]
    fn errors_explain_themselves() {
        let e = place(&nodes(), &all(), 60 * G, 100)
            .unwrap_err()
            .to_string();
        assert!(e.contains("cannot reserve 60.0 GiB"), "{e}");
        assert!(
            e.contains("pve2: 48.0 GiB left, pve1: 16.0 GiB left"),
            "{e}"
        );
        let e = place(&nodes(), &["pve3".into(), "pve9".into()], G, 100)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("offline: pve3") && e.contains("not in the cluster: pve9"),
            "{e}"
        );
    }

    #[test]
    fn vmids() {
        let taken: BTreeSet<u32> = [1000, 1001, 1003].into_iter().collect();
        let c: Vec<u32> = vmid_candidates(1000, 1005, &taken).collect();
        assert_eq!(c, vec![1002, 1004, 1005]);
        assert!(vmid_candidates(1000, 1001, &taken).next().is_none());
        assert!(validate_range(99, 200).is_err());
        assert!(validate_range(300, 200).is_err());
        assert!(validate_range(100, 100).is_ok());
        assert_eq!(formats_for_storage_type("lvmthin"), Some(&["raw"][..]));
        assert!(formats_for_storage_type("dir").unwrap().contains(&"qcow2"));
    }
}
