//! Choosing a node for an HA service, as `PVE::HA::Manager::select_service_node` does for a
//! recovery: the online nodes its node affinity (a `node-affinity` rule, or on PVE 8 its
//! group) allows, the highest priority class among them, kept together with its positive and
//! apart from its negative resource-affinity partners, then the least loaded (the `basic`
//! scheduler counts services per node), ties by node name.

use std::collections::{BTreeMap, BTreeSet};

/// Where a service may run: node → priority, and whether other nodes are excluded
/// (`strict` for a rule, `restricted` for a group). `None`: any node, all priority 0.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeAffinity {
    pub nodes: BTreeMap<String, i64>,
    pub strict: bool,
}

impl NodeAffinity {
    /// `node`'s priority class: its listed priority; an unlisted node is below every listed one
    /// (`get_node_priority_groups` gives it -1 in an unrestricted group) or, when `strict`, not
    /// allowed (`None`).
    pub fn priority(&self, node: &str) -> Option<i64> {
        match self.nodes.get(node) {
            Some(p) => Some(*p),
            None if self.strict => None,
            None => Some(i64::MIN),
        }
    }
}

/// What placement needs to know about one service.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    pub online: &'a BTreeSet<String>,
    pub affinity: Option<&'a NodeAffinity>,
    /// Nodes where services it must be kept apart from are (negative resource affinity).
    pub separate: &'a BTreeSet<String>,
    /// Nodes where services it must be kept with are (positive resource affinity).
    pub together: &'a BTreeSet<String>,
    /// HA services per node, for the `basic` scheduler.
    pub load: &'a BTreeMap<String, usize>,
}

/// The node to recover onto, or `None` when no online node satisfies the rules (the service
/// then stays in `recovery`, as `next_state_recovery` leaves it).
pub fn select_node(req: &Request) -> Option<String> {
    // `get_node_priority_groups`: nodes outside a non-strict affinity form a class below every
    // listed one; a strict one allows its nodes only.
    let prio = |n: &str| req.affinity.map_or(Some(0), |a| a.priority(n));
    let allowed: Vec<(&String, i64)> = req
        .online
        .iter()
        .filter_map(|n| prio(n).map(|p| (n, p)))
        .collect();
    let top = allowed.iter().map(|(_, p)| *p).max()?;
    let mut candidates: BTreeSet<&String> = allowed
        .iter()
        .filter(|(_, p)| *p == top)
        .map(|(n, _)| *n)
        .collect();
    // `apply_positive_resource_affinity` / `apply_negative_resource_affinity`.
    let together: BTreeSet<&String> = candidates
        .iter()
        .copied()
        .filter(|n| req.together.contains(*n))
        .collect();
    if !together.is_empty() {
        candidates = together;
    }
    candidates.retain(|n| !req.separate.contains(*n));
    candidates
        .into_iter()
        .min_by_key(|n| (req.load.get(*n).copied().unwrap_or(0), (*n).clone()))
        .cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(v: &[&str]) -> BTreeSet<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn negative_affinity_excludes_partner_nodes() {
        let online = set(&["pve1", "pve2", "pve3"]);
        let separate = set(&["pve2"]);
        let load = BTreeMap::from([("pve1".to_string(), 2)]);
        let none = BTreeSet::new();
        let req = Request {
            online: &online,
            affinity: None,
            separate: &separate,
            together: &none,
            load: &load,
        };
        assert_eq!(select_node(&req).as_deref(), Some("pve3"));
        let separate = set(&["pve1", "pve2", "pve3"]);
        let req = Request {
            separate: &separate,
            ..req
        };
        assert_eq!(select_node(&req), None);
    }

    #[test]
    fn node_affinity_priorities_and_strictness() {
        let online = set(&["pve1", "pve2", "pve3"]);
        let none = BTreeSet::new();
        let load = BTreeMap::new();
        let a = NodeAffinity {
            nodes: BTreeMap::from([("pve2".into(), 1), ("pve3".into(), 2), ("pve9".into(), 5)]),
            strict: true,
        };
        let req = Request {
            online: &online,
            affinity: Some(&a),
            separate: &none,
            together: &none,
            load: &load,
        };
        assert_eq!(select_node(&req).as_deref(), Some("pve3"));
        let only = set(&["pve1"]);
        let strict = Request {
            online: &only,
            ..req.clone()
        };
        assert_eq!(select_node(&strict), None);
        let loose = NodeAffinity {
            strict: false,
            ..a.clone()
        };
        let req = Request {
            online: &only,
            affinity: Some(&loose),
            ..req
        };
        assert_eq!(select_node(&req).as_deref(), Some("pve1"));
    }

    #[test]
    fn positive_affinity_follows_partners() {
        let online = set(&["pve1", "pve2"]);
        let together = set(&["pve2"]);
        let none = BTreeSet::new();
        let load = BTreeMap::from([("pve2".to_string(), 5)]);
        let req = Request {
            online: &online,
            affinity: None,
            separate: &none,
            together: &together,
            load: &load,
        };
        assert_eq!(select_node(&req).as_deref(), Some("pve2"));
    }
}
