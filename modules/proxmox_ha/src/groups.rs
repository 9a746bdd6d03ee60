//! Proxmox VE 8's way to keep VMs apart, which has no resource affinity: one HA group per VM of
//! a set (the control plane, the workers), each preferring a different node, its *home*
//! ([`HOME`]), then the nodes that are no member's home ([`SPARE`]). Every other node stays
//! allowed below those (the group is not `restricted`), so a VM is never left down.
//!
//! What the HA manager then does (`PVE::HA::Manager::select_service_node`, PVE 8): a lost node's
//! VM is recovered onto the highest-priority online node of its group, a spare when one is up,
//! and since the groups fail back (`nofailback` off) it is migrated home once its node returns.
//! A group given to a VM running away from its home moves it there at once. With no spare node
//! (as many VMs as nodes) a lost node's VM runs beside another until its node is back.
//!
//! Pure: no I/O.

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};

/// The priority of a VM's home node in its group.
pub const HOME: i64 = 2;
/// The priority of the nodes that are no member's home.
pub const SPARE: i64 = 1;

/// A VM of a set, as the plan sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub vmid: u32,
    /// The node it runs on.
    pub node: Option<String>,
    /// The preferred node of the group it already has.
    pub home: Option<String>,
}

/// Distinct homes for `members` (at most one per node): the home its group already gives it,
/// while that node exists and no other member has it, so a VM recovered elsewhere keeps its
/// home; else the node it runs on, when free; else the first free node by name.
pub fn homes(members: &[Member], nodes: &BTreeSet<String>) -> BTreeMap<u32, String> {
    let mut out: BTreeMap<u32, String> = BTreeMap::new();
    let passes: [fn(&Member) -> Option<&String>; 2] = [|m| m.home.as_ref(), |m| m.node.as_ref()];
    for pass in passes {
        for m in members {
            if out.contains_key(&m.vmid) {
                continue;
            }
            if let Some(n) = pass(m) {
                if nodes.contains(n) && !out.values().any(|h| h == n) {
                    out.insert(m.vmid, n.clone());
                }
            }
        }
    }
    let taken: BTreeSet<String> = out.values().cloned().collect();
    let mut free = nodes.iter().filter(|n| !taken.contains(*n));
    for m in members {
        if let Entry::Vacant(e) = out.entry(m.vmid) {
            if let Some(n) = free.next() {
                e.insert(n.clone());
            }
        }
    }
    out
}

/// Each member's group: its home at [`HOME`], the set's spare nodes at [`SPARE`].
pub fn group_nodes(
    homes: &BTreeMap<u32, String>,
    nodes: &BTreeSet<String>,
) -> BTreeMap<u32, BTreeMap<String, i64>> {
    let spares: Vec<&String> = nodes
        .iter()
        .filter(|n| !homes.values().any(|h| h == *n))
        .collect();
    homes
        .iter()
        .map(|(vmid, home)| {
            let mut g: BTreeMap<String, i64> =
                spares.iter().map(|n| ((*n).clone(), SPARE)).collect();
            g.insert(home.clone(), HOME);
            (*vmid, g)
        })
        .collect()
}

/// A group's preferred node: the one node with its highest priority (`None` on a tie).
pub fn preferred(nodes: &BTreeMap<String, i64>) -> Option<String> {
    let top = nodes.values().max()?;
    let mut best = nodes.iter().filter(|(_, p)| *p == top);
    let (node, _) = best.next()?;
    best.next().is_none().then(|| node.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes(n: &[&str]) -> BTreeSet<String> {
        n.iter().map(|s| s.to_string()).collect()
    }

    fn member(vmid: u32, node: &str, home: Option<&str>) -> Member {
        Member {
            vmid,
            node: Some(node.into()),
            home: home.map(str::to_string),
        }
    }

    #[test]
    fn homes_stay_where_the_vms_run_and_split_a_shared_node() {
        let all = nodes(&["pve1", "pve2", "pve3", "pve4"]);
        let h = homes(
            &[
                member(201, "pve2", None),
                member(202, "pve2", None),
                member(203, "pve4", None),
            ],
            &all,
        );
        // 202 shares pve2 with 201: it gets the first free node, and HA will move it there.
        assert_eq!(h[&201], "pve2");
        assert_eq!(h[&202], "pve1");
        assert_eq!(h[&203], "pve4");
        let g = group_nodes(&h, &all);
        assert_eq!(
            g[&202],
            [("pve1".to_string(), HOME), ("pve3".to_string(), SPARE)]
                .into_iter()
                .collect()
        );
        assert_eq!(preferred(&g[&202]).as_deref(), Some("pve1"));
    }

    #[test]
    fn a_recovered_vm_keeps_its_home_and_a_lost_home_is_replaced() {
        let all = nodes(&["pve1", "pve2", "pve3"]);
        // 201 was recovered onto pve2, beside 202: its group still says pve1.
        let h = homes(
            &[
                member(201, "pve2", Some("pve1")),
                member(202, "pve2", Some("pve2")),
            ],
            &all,
        );
        assert_eq!((h[&201].as_str(), h[&202].as_str()), ("pve1", "pve2"));
        // pve1 left the Proxmox cluster: 201 needs a new home, the free pve3.
        let h = homes(
            &[
                member(201, "pve2", Some("pve1")),
                member(202, "pve2", Some("pve2")),
            ],
            &nodes(&["pve2", "pve3"]),
        );
        assert_eq!((h[&201].as_str(), h[&202].as_str()), ("pve3", "pve2"));
    }

    #[test]
    fn a_tie_has_no_preferred_node() {
        let g: BTreeMap<String, i64> = [("a".to_string(), 1), ("b".to_string(), 1)]
            .into_iter()
            .collect();
        assert_eq!(preferred(&g), None);
        assert_eq!(preferred(&BTreeMap::new()), None);
    }
}
